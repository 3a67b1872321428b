-- Daily occupancy is rewritten by every booking of a night, as room_nights is (see
-- 20261129000007_room_nights_storage.sql), but its pages were filled to the brim: when a
-- page had no room for the new version, the update went to another page and added an
-- entry to the primary key, a random page of it (measured: 13% of the updates of a
-- spread booking run, and a fifth of the run's write-ahead log was this table and its
-- index). Leave room on each page so that updates stay on their page (HOT updates).
--
-- This applies to pages written from now on; a database whose table is already full
-- can rewrite it at a quiet time (VACUUM FULL occupancy_daily).
ALTER TABLE occupancy_daily SET (fillfactor = 70);
