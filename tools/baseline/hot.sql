-- pgbench script, "hot": the flash sale. Every client books the same three nights
-- (2030-01-10 to 2030-01-13) of hotel 1, room type 1, so every transaction waits for the
-- row locks of the one before it. Same statements as spread.sql.
begin;
insert into idempotency values (gen_random_uuid()::text, 'h', 'done');
update room_inventory set total_reserved = total_reserved + 1
 where hotel_id = 1 and room_type_id = 1
   and night >= '2030-01-10' and night < '2030-01-13'
   and total_reserved < total_inventory;
insert into reservations (hotel_id, room_type_id, start_date, end_date, status, idempotency_key)
values (1, 1, '2030-01-10', '2030-01-13', 'held', gen_random_uuid()::text);
commit;
