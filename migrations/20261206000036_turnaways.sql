-- Turnaways: holds refused because a night was sold out, a restriction closed it, or the
-- room type could not take that many guests. An analytics log beside the event log: it
-- holds no personal data (the stay, the rooms, the room type, the channel, the reason)
-- and nothing reads it to decide anything. Written in batches off the request path, so
-- a crash may lose the last moment's rows.
CREATE TABLE turnaways (
    turnaway_id  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hotel_id     bigint      NOT NULL,
    room_type_id bigint      NOT NULL,
    start_date   date        NOT NULL,
    end_date     date        NOT NULL CHECK (end_date > start_date),
    rooms        integer     NOT NULL CHECK (rooms > 0),
    reason       text        NOT NULL CHECK (reason IN ('sold_out', 'restricted', 'occupancy')),
    channel      text        NOT NULL,
    refused_at   timestamptz NOT NULL
);
-- A hotel's turnaways over a range of nights: by their first night.
CREATE INDEX turnaways_by_hotel_start ON turnaways (hotel_id, start_date);
