-- A night on sale is rewritten by every booking of it; in a flash sale, thousands of
-- times a minute. Two storage settings keep such a row cheap to find and update:
--
-- * fillfactor 70: leave room on each page, so an update can put the new version on
--   the same page (a HOT update: no new index entry), and the chain of dead versions
--   stays on one page where pruning removes it;
-- * vacuum by a fixed number of updates, not by a fraction of the table: with hundreds
--   of thousands of nights, the default (20% of the table) would leave a hot night's
--   dead versions and index entries piling up for a whole sale. Vacuuming a mostly
--   all-visible table skips its untouched pages, so frequent runs stay small.
ALTER TABLE room_nights SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_analyze_scale_factor = 0.02
);
