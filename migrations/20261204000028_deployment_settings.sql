-- Settings every server of one database must share, recorded by the first to start and
-- checked by every later one. `hotel_shards`: the map of hotels to shards that bounds
-- group commit's transactions (`HOTEL_SHARDS`, written canonically; empty for one
-- shard): servers batching by different maps could put two shards' hotels in one
-- transaction, so a server with another map refuses to start.
CREATE TABLE deployment_settings (
    name   text PRIMARY KEY,
    value  text NOT NULL,
    set_at timestamptz NOT NULL DEFAULT now()
);
