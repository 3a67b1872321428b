-- pgbench script, "spread": a 3-night booking of a random room type of a random hotel,
-- starting on one of the first 51 nights. One transaction: the idempotency record, the
-- availability check and the decrement as one ranged conditional UPDATE, the
-- reservation row.
\set h random(1, 1000)
\set t random(1, 5)
\set d random(0, 50)
begin;
insert into idempotency values (gen_random_uuid()::text, 'h', 'done');
update room_inventory set total_reserved = total_reserved + 1
 where hotel_id = :h and room_type_id = :t
   and night >= '2030-01-01'::date + :d and night < '2030-01-01'::date + :d + 3
   and total_reserved < total_inventory;
insert into reservations (hotel_id, room_type_id, start_date, end_date, status, idempotency_key)
values (:h, :t, '2030-01-01'::date + :d, '2030-01-01'::date + :d + 3, 'held', gen_random_uuid()::text);
commit;
