#!/usr/bin/env bash
# What a hold costs in storage: a scratch database, a server, a catalog, spread holds
# for a while through the real write path, every projection caught up, then the bytes
# of every table (heap, TOAST, indexes) per hold, and the WAL written per hold (see
# docs/scaling.md, "Storage per hold").
#
#   scripts/storage.sh                  # 200 hotels x 5 room types x 60 nights, 20 s
#   SECONDS_PER_RUN=60 scripts/storage.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
DB_NAME=${DB_NAME:-loadgen_storage}
HOTELS=${HOTELS:-200}
ROOM_TYPES=${ROOM_TYPES:-5}
NIGHTS=${NIGHTS:-60}
ROOMS=${ROOMS:-100000}
CLIENTS=${CLIENTS:-32}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
START_DATE=${START_DATE:-$(date -u -d '+30 days' +%F)}
SKIP_BUILD=${SKIP_BUILD:-0}
ADMIN_TOKEN=storage-admin-$RANDOM$RANDOM
CHANNEL_TOKEN=storage-channel-$RANDOM$RANDOM
run_dir=${RUN_DIR:-$repo/target/storage/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$run_dir"
bin=$repo/target/release

psql_admin() { psql "$PG_URL/postgres" -qAtX -c "$1"; }
psql_db() { psql "$PG_URL/$DB_NAME" -qAtX -c "$1"; }

if [[ $SKIP_BUILD != 1 ]]; then
  cargo build --release -p reservations -p loadgen
fi
psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)"

# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
start_measured_server "$bin/reservations" "$PG_URL/$DB_NAME" "$run_dir/server.log" "$ADMIN_TOKEN" "$CHANNEL_TOKEN"

catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS" --start-date "$START_DATE")
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" --rooms "$ROOMS"

# The first read models of a catalog this size take a while: wait up to 10 minutes.
QUIESCE_SECONDS=600

quiesce
"$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --json "$run_dir/before.json" >/dev/null
psql_db "CHECKPOINT" >/dev/null
lsn=$(psql_db "SELECT pg_current_wal_lsn()")
"$bin/loadgen" run spread --url "$url" --token "$CHANNEL_TOKEN" --clients "$CLIENTS" \
  --seconds "$SECONDS_PER_RUN" --warmup 0 "${catalog[@]}" \
  --database-url "$PG_URL/$DB_NAME" --label storage --out "$run_dir/spread.jsonl"
quiesce
"$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --wal-since "$lsn" \
  --since "$run_dir/before.json" --json "$run_dir/after.json"
echo "results: $run_dir"
