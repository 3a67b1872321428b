-- The reference design the event-sourced write path is compared with: one row per
-- hotel, room type and night holding two counters, the no-overbooking rule enforced by
-- a CHECK on that row. Recreated from scratch on every run.
set client_min_messages = warning;

drop table if exists room_inventory, reservations, idempotency;

create table room_inventory (
  hotel_id        bigint,
  room_type_id    bigint,
  night           date,
  total_inventory int not null,
  total_reserved  int not null default 0,
  primary key (hotel_id, room_type_id, night),
  check (total_reserved >= 0 and total_reserved <= total_inventory)
);

create table reservations (
  reservation_id  uuid primary key default gen_random_uuid(),
  hotel_id        bigint,
  room_type_id    bigint,
  start_date      date,
  end_date        date,
  status          text not null,
  idempotency_key text unique
);

create table idempotency (
  key          text primary key,
  request_hash text,
  state        text
);

-- The catalog of the HTTP benchmarks: 1,000 hotels x 5 room types x 60 nights
-- (2030-01-01 to 2030-03-01), each night with 100,000 rooms, so no booking is refused.
insert into room_inventory
select hotel, room_type, night::date, 100000, 0
  from generate_series(1, 1000) as hotel,
       generate_series(1, 5) as room_type,
       generate_series('2030-01-01'::date, '2030-03-01'::date, '1 day') as night;
