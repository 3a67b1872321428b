#!/usr/bin/env bash
# What the staff console's calendar costs the server (docs/benchmarks.md, "The staff
# console's calendar"): the release server on a scratch database, a catalog with some
# holds on it, then, alternated, a month's calendar of a random hotel (what each open
# console polls every 2 s; `loadgen run calendar`, admin token) and the 3-night
# availability a booking front-end reads (`loadgen run reads`), from the Redis model;
# then both again on a server started without a usable REDIS_URL, so both read
# PostgreSQL (the write side's rows).
#
#   scripts/console.sh             # 1000 hotels x 5 room types x 60 nights, 10 s runs
#   SMALL=1 scripts/console.sh     # a smoke test
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"

SMALL=${SMALL:-0}
if [[ $SMALL == 1 ]]; then
  : "${HOTELS:=5}" "${ROOM_TYPES:=2}" "${NIGHTS:=40}" "${SECONDS_PER_RUN:=2}" "${CLIENTS:=4}"
fi
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
DB_NAME=${DB_NAME:-console_bench}
HOTELS=${HOTELS:-1000}
ROOM_TYPES=${ROOM_TYPES:-5}
NIGHTS=${NIGHTS:-60}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-32}
SKIP_BUILD=${SKIP_BUILD:-0}
ADMIN_TOKEN=console-admin
CHANNEL_TOKEN=console-channel

target_dir=${CARGO_TARGET_DIR:-$repo/target}
[[ $target_dir == /* ]] || target_dir=$repo/$target_dir
bin=$target_dir/release
out_dir=$target_dir/console-bench/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out_dir"

log() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }
psql_admin() { psql -q "$PG_URL/postgres" -v ON_ERROR_STOP=1 -c "$1" >/dev/null; }

if [[ $SKIP_BUILD != 1 ]]; then
  log "release build"
  (cd "$repo" && cargo build --release -p reservations -p loadgen)
fi

server_pid=""
stop_server() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  server_pid=""
  true
}
trap stop_server EXIT

# start_server LABEL REDIS_URL: the server on the scratch database; sets $url.
start_server() {
  local label=$1 redis=$2
  env DATABASE_URL="$PG_URL/$DB_NAME" REDIS_URL="$redis" LISTEN_ADDR=127.0.0.1:0 \
    API_TOKENS="$ADMIN_TOKEN:admin:bench-admin,$CHANNEL_TOKEN:channel:loadgen" \
    HOLD_LIMIT_PER_GUEST=0 INVENTORY_HORIZON_DAYS=0 LOG_JSON=true RUST_LOG=warn,reservations=info \
    "$bin/reservations" serve >"$out_dir/server-$label.log" 2>&1 &
  server_pid=$!
  url=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' "$out_dir/server-$label.log" | head -n 1)
    if [[ -n $port ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
      url=http://127.0.0.1:$port
      return 0
    fi
    sleep 0.1
  done
  echo "the server did not start; see $out_dir/server-$label.log"
  exit 1
}

# run SCENARIO TOKEN LABEL
run() {
  local scenario=$1 token=$2 label=$3
  "$bin/loadgen" run "$scenario" --url "$url" --token "$token" --clients "$CLIENTS" \
    --seconds "$SECONDS_PER_RUN" --warmup 1 "${catalog[@]}" --label "$label" \
    --out "$out_dir/runs.jsonl" >"$out_dir/$label.txt" 2>&1 || true
  grep -E '^  (read|calendar) ' "$out_dir/$label.txt" | sed "s/^ */  [$label] /"
  grep -E 'sources|source' "$out_dir/$label.txt" | sed "s/^ */  [$label] /" || true
}

log "scratch database $DB_NAME"
psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)"
start_server cache "$REDIS_URL"

log "catalog: $HOTELS hotels x $ROOM_TYPES room types x $NIGHTS nights, then 5 s of spread holds"
catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS"
  --start-date "$(date -u -d '+30 days' +%F)")
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" \
  --rooms 100000 >/dev/null
"$bin/loadgen" run spread --url "$url" --token "$CHANNEL_TOKEN" --clients "$CLIENTS" \
  --seconds 5 "${catalog[@]}" >"$out_dir/spread.txt" 2>&1 || true
grep -E '^  hold' "$out_dir/spread.txt" | sed 's/^ */  [spread] /'
quiesce

log "from the Redis model: calendar (31 nights) and availability (3 nights), alternated"
for round in 1 2; do
  run calendar "$ADMIN_TOKEN" "calendar-cache-$round"
  run reads "$CHANNEL_TOKEN" "reads-cache-$round"
done
stop_server

log "from PostgreSQL (a server without the Redis model)"
start_server database "none://"
for round in 1 2; do
  run calendar "$ADMIN_TOKEN" "calendar-database-$round"
  run reads "$CHANNEL_TOKEN" "reads-database-$round"
done
stop_server

log "runs as JSON lines: $out_dir/runs.jsonl"
