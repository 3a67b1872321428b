-- Compacting the allocations of nights long past (docs/scaling.md, "Housekeeping").
--
-- A night's allocations say who holds or has bought its rooms; the unit of work reads
-- them to release or move a reservation's rooms, and the counters in room_nights are
-- their sums. Once every stay that could include a night has ended (a stay is at most
-- the booking limit's nights long), no command will touch that night again: its
-- confirmed allocations are dead weight, three rows and their index entries per booking
-- for ever. The retention worker deletes them; the night's counters stay, and so do
-- the facts, in the event log, from which `audit verify` replays them.
--
-- One row: `compacted_before` is the date before which every confirmed allocation has
-- been deleted (NULL: none yet). A pass that moves it on deletes room type by room type
-- (through the allocations' primary key, which starts with the room type) and keeps
-- its place here, so a pass cut short resumes where it stopped, and any one server
-- runs it at a time (the row is locked, others skip it). While a pass is under way,
-- `target_before` is the date it compacts up to: `audit verify` compares no
-- allocations of nights before it, whichever room types the pass has reached.
CREATE TABLE allocation_compaction (
    singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    compacted_before   date,
    target_before      date,
    after_hotel_id     bigint NOT NULL DEFAULT 0,
    after_room_type_id bigint NOT NULL DEFAULT 0
);
INSERT INTO allocation_compaction DEFAULT VALUES;
