#!/usr/bin/env bash
# What a booking costs as the history grows (docs/scaling.md, "The chain at scale"):
# builds the release binaries, starts the server on a scratch database, loads a chain
# (5,000 hotels x 5 room types x 365 nights by default) through the inventory API, then
# grows a history through the real write path (holds from 32 clients at GROW_HOTEL_WINDOW
# hotels at a time, a window moving over the chain; holds lapse after their 15 minutes
# as they would) and, at each point of POINTS (events written
# since the catalog), measures: spread holds (goodput, p50/p99, the invariant), hotel
# availability reads, city searches, the projections' largest lag during the spread
# run, `audit verify`, availability "as known at" the moment before (hotel 1, 30
# nights, every room type, AS_KNOWN_AT_READS reads: p50, max, and answers not 200), a projection
# rebuild (at REBUILD_POINTS), the database's and the
# WAL's bytes per hold, Redis memory and the server's RSS. Every point is a JSON line
# (scale.jsonl); `scalechart` draws them and prints the table.
#
#   scripts/scale.sh                                    # the full run (under an hour)
#   SMALL=1 scripts/scale.sh                            # a few minutes: a smoke test
#   POINTS="0 1000000" REBUILD_POINTS=0 scripts/scale.sh
#
# Every knob is an environment variable; see the defaults below.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SMALL=${SMALL:-0}
if [[ $SMALL == 1 ]]; then
  : "${HOTELS:=100}" "${NIGHTS:=120}" "${POINTS:=0 50000 150000}" "${REBUILD_POINTS:=0 150000}"
  : "${SECONDS_PER_RUN:=3}" "${SEARCH_HOTELS:=10}"
fi
# PG_OWN=1 (the default): the run gets a PostgreSQL of its own (initdb in a scratch
# directory, on PG_OWN_PORT, stopped and removed at the end) configured as a chain's
# database would be (PG_OWN_SETTINGS); PG_OWN=0: the server at PG_URL, as it is. A
# stock configuration (128 MB of shared buffers, 1 GB between checkpoints) sizes the
# database for a laptop: on the chain's 9.2M room-nights a hold touches pages no
# buffer keeps, and each is written whole to the WAL after every checkpoint
# (docs/scaling.md, `stock-postgres`).
PG_OWN=${PG_OWN:-1}
PG_OWN_PORT=${PG_OWN_PORT:-55432}
PG_OWN_SETTINGS=${PG_OWN_SETTINGS:-shared_buffers=8GB effective_cache_size=16GB work_mem=64MB maintenance_work_mem=1GB max_wal_size=16GB min_wal_size=2GB checkpoint_timeout=30min checkpoint_completion_target=0.9 wal_compression=lz4 random_page_cost=1.1 max_connections=200}
if [[ $PG_OWN == 1 ]]; then
  PG_URL=postgres://postgres@127.0.0.1:$PG_OWN_PORT
fi
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
DB_NAME=${DB_NAME:-loadgen_scale}
HOTELS=${HOTELS:-5000}
ROOM_TYPES=${ROOM_TYPES:-5}
NIGHTS=${NIGHTS:-365}
ROOMS=${ROOMS:-1000}
START_DATE=${START_DATE:-$(date -u -d '+1 day' +%F)}
# Events written by the growth (beyond the catalog's) at which to measure.
POINTS=${POINTS:-0 1000000 3000000 10000000}
# The points at which a projection is rebuilt from position zero (the whole log: the
# longest step of a point).
REBUILD_POINTS=${REBUILD_POINTS:-0 10000000}
REBUILD_PROJECTION=${REBUILD_PROJECTION:-availability}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-32}
GROW_CLIENTS=${GROW_CLIENTS:-32}
# The growth holds at this many hotels at a time, a window moving on as many hotels a
# second (loadgen --hotel-window; 0: every hotel at once). Chosen when group commit
# batched one hotel's holds (a few hotels at a time then grew the history 2-3 times
# faster, with the same events); it batches a shard's now, and the window stays so that
# a run compares with the recorded ones (docs/scaling.md).
GROW_HOTEL_WINDOW=${GROW_HOTEL_WINDOW:-8}
# The city search runs on a catalog of its own (rate plans in one city), as in bench.sh.
SEARCH_HOTELS=${SEARCH_HOTELS:-50}
SEARCH_ROOM_TYPES=${SEARCH_ROOM_TYPES:-3}
SEARCH_FIRST_HOTEL=${SEARCH_FIRST_HOTEL:-2000001}
SEARCH_CITY=${SEARCH_CITY:-Scaleville}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_DB=${KEEP_DB:-0}

cd "$repo"
target_dir=${CARGO_TARGET_DIR:-$repo/target}
[[ $target_dir == /* ]] || target_dir=$repo/$target_dir
bin=$target_dir/release
run_dir=${RUN_DIR:-$target_dir/scale/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$run_dir"
scale_jsonl=$run_dir/scale.jsonl
if [[ $SMALL == 1 ]]; then
  CHARTS=${CHARTS:-$run_dir}          # a smoke run does not replace the docs' charts
else
  CHARTS=${CHARTS:-$repo/docs/scaling}
fi
mkdir -p "$CHARTS"

ADMIN_TOKEN=scale-admin-$RANDOM$RANDOM
CHANNEL_TOKEN=scale-channel-$RANDOM$RANDOM
server_pid=""
sampler_pid=""
url=""
started=$(date +%s)

log() { printf '\n== %s (%s, %d s in)\n' "$*" "$(date -u +%T)" "$(($(date +%s) - started))"; }
psql_admin() { PGOPTIONS='-c client_min_messages=warning' psql -qAtX "$PG_URL/postgres" -v ON_ERROR_STOP=1 -c "$1"; }
psql_db() { psql -qAtX "$PG_URL/$DB_NAME" -v ON_ERROR_STOP=1 -c "$1"; }

clear_redis() {
  redis-cli -u "$REDIS_URL" --scan --pattern "rsv:$DB_NAME:*" 2>/dev/null \
    | xargs -r -d '\n' -n 500 redis-cli -u "$REDIS_URL" del >/dev/null 2>&1 || true
}

# Redis memory of the server's read model: the sum of MEMORY USAGE over its keys.
redis_bytes() {
  redis-cli -u "$REDIS_URL" --scan --pattern "rsv:$DB_NAME:*" 2>/dev/null \
    | awk '{ gsub(/"/, "\\\""); printf "MEMORY USAGE \"%s\" SAMPLES 0\n", $0 }' \
    | redis-cli -u "$REDIS_URL" 2>/dev/null | awk '{ s += $1 } END { printf "%d", s }'
}

pg_dir=""
pg_bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
as_postgres() {
  if [[ $(id -un) == postgres ]]; then "$@"; else runuser -u postgres -- "$@"; fi
}

# start_own_postgres: initdb (as the postgres user: initdb refuses root) and start.
start_own_postgres() {
  [[ -n $pg_bin ]] || { echo "PG_OWN=1 needs PostgreSQL's server binaries (initdb)"; exit 1; }
  pg_dir=$(mktemp -d /tmp/scale-pg.XXXXXX)
  chown postgres "$pg_dir" 2>/dev/null || true
  as_postgres "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --auth=trust -E UTF8 >"$run_dir/initdb.log"
  local options="-p $PG_OWN_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$pg_dir"
  for setting in $PG_OWN_SETTINGS; do options+=" -c $setting"; done
  as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -o "$options" -l "$pg_dir/postgres.log" -w start >/dev/null
  echo "PostgreSQL of the run at 127.0.0.1:$PG_OWN_PORT ($pg_dir): $PG_OWN_SETTINGS"
}

stop_own_postgres() {
  [[ -n $pg_dir ]] || return 0
  cp "$pg_dir/postgres.log" "$run_dir/postgres.log" 2>/dev/null || true
  as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop >/dev/null 2>&1 || true
  [[ $KEEP_DB == 1 ]] || rm -rf "$pg_dir"
  pg_dir=""
}

cleanup() {
  [[ -n $sampler_pid ]] && kill "$sampler_pid" 2>/dev/null
  if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [[ $KEEP_DB != 1 ]]; then
    [[ -n $pg_dir ]] || psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)" 2>/dev/null || true
    clear_redis
  fi
  # With KEEP_DB=1 the run's own PostgreSQL keeps running, for a person to look at.
  [[ $KEEP_DB == 1 ]] || stop_own_postgres
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $SKIP_BUILD != 1 ]]; then
  log "building release binaries"
  cargo build --release -p reservations -p loadgen
fi
if [[ $PG_OWN == 1 ]]; then
  start_own_postgres
else
  psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)"
fi
clear_redis

log "starting the server"
server_log=$run_dir/server.log
env DATABASE_URL="$PG_URL/$DB_NAME" REDIS_URL="$REDIS_URL" LISTEN_ADDR=127.0.0.1:0 \
  API_TOKENS="$ADMIN_TOKEN:admin:scale-admin,$CHANNEL_TOKEN:channel:loadgen" \
  RUN_PROJECTIONS=true HOLD_LIMIT_PER_GUEST=0 INVENTORY_HORIZON_DAYS=0 LOG_JSON=true \
  RUST_LOG="${RUST_LOG:-info,sqlx=warn}" "$bin/reservations" serve >"$server_log" 2>&1 &
server_pid=$!
for _ in $(seq 1 1200); do
  port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' "$server_log" | head -n 1)
  if [[ -n $port ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
    url=http://127.0.0.1:$port
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || { echo "the server exited; see $server_log"; exit 1; }
  sleep 0.1
done
[[ -n $url ]] || { echo "the server did not start; see $server_log"; exit 1; }
echo "server at $url (log: $server_log)"

# The server's RSS every second, for the whole run: "unix seconds, kB".
rss_log=$run_dir/rss.log
(
  while kill -0 "$server_pid" 2>/dev/null; do
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || true)
    [[ -n $kb ]] && echo "$(date +%s) $kb"
    sleep 1
  done
) >"$rss_log" &
sampler_pid=$!
rss_max_since() { awk -v t="$1" '$1 >= t && $2 > m { m = $2 } END { printf "%d", m }' "$rss_log"; }

catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS" --start-date "$START_DATE")
search_catalog=(--hotels "$SEARCH_HOTELS" --room-types "$SEARCH_ROOM_TYPES" --nights "$NIGHTS"
  --start-date "$START_DATE" --first-hotel "$SEARCH_FIRST_HOTEL")

# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
QUIESCE_SECONDS=1800

log "the chain: $HOTELS hotels x $ROOM_TYPES room types x $NIGHTS nights"
t0=$(date +%s)
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" --rooms "$ROOMS" \
  --concurrency 16 --wait-seconds 0
t1=$(date +%s)
log "the city search's catalog ($SEARCH_CITY)"
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${search_catalog[@]}" \
  --rooms "$ROOMS" --plans search --city "$SEARCH_CITY" --wait-seconds 0
t2=$(date +%s)
log "waiting for the projections"
quiesce
t3=$(date +%s)
catalog_events=$(psql_db "SELECT count(*) FROM events")
room_nights=$(psql_db "SELECT count(*) FROM room_nights")
echo "catalog: $room_nights room-nights, $catalog_events events; written in $((t2 - t0)) s" \
  "(chain $((t1 - t0)) s), projections caught up $((t3 - t2)) s later"
jq -nc --argjson events "$catalog_events" --argjson nights "$room_nights" \
  --argjson write_s "$((t2 - t0))" --argjson project_s "$((t3 - t2))" \
  --argjson hotels "$HOTELS" --argjson room_types "$ROOM_TYPES" --argjson n "$NIGHTS" \
  --arg postgres "$(if [[ $PG_OWN == 1 ]]; then echo "own: $PG_OWN_SETTINGS"; else echo "as configured"; fi)" \
  '{kind:"catalog", hotels:$hotels, room_types:$room_types, nights:$n, room_nights:$nights,
    events:$events, write_seconds:$write_s, projections_seconds:$project_s, postgres:$postgres}' \
  >>"$scale_jsonl"

# What an operator does after a bulk load, before taking traffic: vacuum and analyse
# the tables every hold writes (else autovacuum's first pass over 9.2M nights runs
# inside point 0: `stock-postgres`), and read a hold's working set into the buffers. That set
# (the nights, the occupancy rows, their keys and the event log's key: about 5 GB on
# the chain) is larger than 4 GB of buffers; past them, every hold waited on random
# reads that the WAL's own churn kept evicting from the page cache (`working-set`).
log "vacuum and prewarm"
t_vacuum=$(date +%s)
psql_db "VACUUM (ANALYZE) room_nights, room_night_allocations, occupancy_daily, reservations, reservations_view" >/dev/null
prewarm() {
  if psql_db "CREATE EXTENSION IF NOT EXISTS pg_prewarm" >/dev/null 2>&1; then
    for relation in room_nights room_nights_pkey occupancy_daily occupancy_daily_pkey events_pkey; do
      psql_db "SELECT pg_prewarm('$relation')" >/dev/null
    done
  else
    echo "pg_prewarm unavailable: the buffers fill as the holds read"
  fi
}
prewarm
echo "vacuumed and prewarmed in $(($(date +%s) - t_vacuum)) s"

grown() { echo $(($(psql_db "SELECT coalesce(max(global_position), 0) FROM events") - catalog_events)); }

# grow TARGET: spread holds until the log holds TARGET events beyond the catalog's.
grow() {
  local target=$1 have chunk
  while true; do
    have=$(grown)
    [[ $have -lt $target ]] || break
    # About 10,000 events a second; chunks of at most two minutes.
    chunk=$(( (target - have) / 10000 + 1 ))
    [[ $chunk -le 120 ]] || chunk=120
    echo "grown $have of $target events; $chunk s more"
    "$bin/loadgen" run spread --url "$url" --token "$CHANNEL_TOKEN" --clients "$GROW_CLIENTS" \
      --seconds "$chunk" "${catalog[@]}" --hotel-window "$GROW_HOTEL_WINDOW" --label grow \
      --out "$run_dir/grow.jsonl" >/dev/null
  done
}

# Projection lag (the sum over projections, in events) every half second while a run
# goes on; prints the largest.
lag_sampler() {
  while true; do
    curl -fsS "$url/metrics" 2>/dev/null \
      | awk '/^projection_lag_events\{/ { s += $NF } END { print s + 0 }'
    sleep 0.5
  done
}

# measure_run SCENARIO LABEL [ARGS...]: one measured run, its JSON line in runs.jsonl.
measure_run() {
  local scenario=$1 label=$2
  shift 2
  quiesce >&2
  "$bin/loadgen" run "$scenario" --url "$url" --token "$CHANNEL_TOKEN" --clients "$CLIENTS" \
    --seconds "$SECONDS_PER_RUN" --warmup "$WARMUP" --label "$label" \
    --out "$run_dir/runs.jsonl" "$@" >&2 || echo "$scenario at $label: the run failed (see above)" >&2
  tail -n 1 "$run_dir/runs.jsonl"
}

base_storage=$run_dir/storage-base.json
base_lsn=""
for point in $POINTS; do
  log "growing the history to $point events"
  grow "$point"
  quiesce
  point_started=$(date +%s)
  at_events=$(grown)
  log "measuring at $at_events events"
  storage_json=$run_dir/storage-$point.json
  "$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --json "$storage_json" >/dev/null
  if [[ -z $base_lsn ]]; then
    cp "$storage_json" "$base_storage"
    psql_db "CHECKPOINT" >/dev/null
    base_lsn=$(psql_db "SELECT pg_current_wal_lsn()")
  fi
  growth=$("$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --since "$base_storage" \
    --wal-since "$base_lsn" --json "$run_dir/now.json" | tail -n 1)
  echo "since the catalog: $growth"
  holds_since=$(jq -r '.holds' "$storage_json")
  holds_since=$((holds_since - $(jq -r '.holds' "$base_storage")))
  db_bytes=$(jq -r '.total_bytes' "$storage_json")
  db_since=$((db_bytes - $(jq -r '.total_bytes' "$base_storage")))
  wal_since=$(psql_db "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$base_lsn')::bigint")
  log_events=$(jq -r '.events' "$storage_json")
  redis=$(redis_bytes)

  lag_sampler >"$run_dir/lag-$point.log" &
  lag_pid=$!
  spread=$(measure_run spread "spread@$point" "${catalog[@]}" --database-url "$PG_URL/$DB_NAME")
  kill "$lag_pid" 2>/dev/null || true
  wait "$lag_pid" 2>/dev/null || true
  lag_max=$(sort -n "$run_dir/lag-$point.log" | tail -n 1)
  reads=$(measure_run reads "reads@$point" "${catalog[@]}")
  search=$(measure_run search "search@$point" "${search_catalog[@]}" --city "$SEARCH_CITY")

  log "audit verify"
  v0=$(date +%s.%N)
  # Its log (each check's time, JSON lines) and then its report (pretty JSON) on stdout.
  LOG_JSON=true "$bin/reservations" audit verify --database-url "$PG_URL/$DB_NAME" \
    >"$run_dir/verify-$point.out" || echo "audit verify FAILED at $point (see $run_dir/verify-$point.out)"
  v1=$(date +%s.%N)
  sed -n '/^{$/,$p' "$run_dir/verify-$point.out" >"$run_dir/verify-$point.json"
  grep '"check"' "$run_dir/verify-$point.out" | jq -c '.fields | {check, seconds}' || true
  verify_ok=$(jq -r '.ok' "$run_dir/verify-$point.json")
  verified=$(jq -r '.events_checked' "$run_dir/verify-$point.json")
  verify_s=$(awk -v a="$v0" -v b="$v1" 'BEGIN { printf "%.3f", b - a }')

  log "availability as known at the moment before"
  known_at=$(date -u -d '-1 second' +%Y-%m-%dT%H:%M:%SZ)
  known_end=$(date -u -d "$START_DATE +30 days" +%F)
  known_ms=$(for _ in $(seq "${AS_KNOWN_AT_READS:-20}"); do
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $ADMIN_TOKEN" \
      "$url/v1/hotels/1/availability?start_date=$START_DATE&end_date=$known_end&as_known_at=$known_at"
  done | awk '{ print $2 * 1000, $1 }' | sort -n | awk '{ v[NR] = $1; if ($2 != 200) bad++ } END {
    printf "{\"p50_ms\": %.1f, \"max_ms\": %.1f, \"not_200\": %d}", v[int((NR + 1) / 2)], v[NR], bad }')
  echo "as known at: $known_ms"

  rebuild_s=null
  rebuilt=null
  if [[ " $REBUILD_POINTS " == *" $point "* ]]; then
    log "rebuilding $REBUILD_PROJECTION"
    rebuilt=$(psql_db "SELECT count(*) FROM events")
    r0=$(date +%s.%N)
    "$bin/reservations" projections rebuild "$REBUILD_PROJECTION" --database-url "$PG_URL/$DB_NAME" \
      --redis-url "$REDIS_URL" >"$run_dir/rebuild-$point.log" 2>&1
    r1=$(date +%s.%N)
    rebuild_s=$(awk -v a="$r0" -v b="$r1" 'BEGIN { printf "%.3f", b - a }')
    # The rebuild reads the whole log in commit order through an index, so its heap
    # pages pass through the buffers (no ring buffer for index scans) and push a hold's
    # working set out: the next minutes of holds would wait on random reads (`working-set`).
    prewarm
  fi
  rss_max=$(rss_max_since "$point_started")
  rss_now=$(awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status")

  jq -nc --argjson point "$point" --argjson grown "$at_events" --argjson log_events "$log_events" \
    --argjson holds "$holds_since" --argjson db_bytes "$db_bytes" --argjson db_since "$db_since" \
    --argjson wal_since "$wal_since" --argjson redis "$redis" --argjson lag_max "${lag_max:-0}" \
    --argjson spread "$spread" --argjson reads "$reads" --argjson search "$search" \
    --argjson verified "$verified" --argjson verify_s "$verify_s" --argjson verify_ok "$verify_ok" \
    --argjson known "$known_ms" \
    --argjson rebuilt "$rebuilt" --argjson rebuild_s "$rebuild_s" \
    --arg projection "$REBUILD_PROJECTION" --argjson rss_max "$rss_max" --argjson rss_now "$rss_now" \
    --argjson elapsed "$(($(date +%s) - started))" \
    '{kind:"point", point:$point, grown_events:$grown, log_events:$log_events,
      holds_since_catalog:$holds, db_bytes:$db_bytes, db_bytes_since_catalog:$db_since,
      wal_bytes_since_catalog:$wal_since,
      bytes_per_hold: (if $holds > 0 then $db_since / $holds else null end),
      wal_bytes_per_hold: (if $holds > 0 then $wal_since / $holds else null end),
      redis_bytes:$redis, projection_lag_max_events:$lag_max,
      spread:(($spread.kinds.hold | {goodput, p50_ms, p99_ms}) + {invariant_ok:$spread.invariant_ok}),
      reads:($reads.kinds.read | {goodput, p50_ms, p99_ms}),
      search:($search.kinds.search | {goodput, p50_ms, p99_ms}),
      verify:{ok:$verify_ok, events:$verified, seconds:$verify_s, events_per_s:($verified / $verify_s)},
      as_known_at:$known,
      rebuild:(if $rebuild_s == null then null else
               {projection:$projection, events:$rebuilt, seconds:$rebuild_s,
                events_per_s:($rebuilt / $rebuild_s)} end),
      server_rss_max_kb:$rss_max, server_rss_kb:$rss_now, elapsed_seconds:$elapsed}' \
    | tee -a "$scale_jsonl"
done

hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status")
jq -nc --argjson hwm "$hwm" --argjson rss_max "$(rss_max_since 0)" \
  --argjson seconds "$(($(date +%s) - started))" \
  '{kind:"end", server_peak_rss_kb:$hwm, server_rss_max_sampled_kb:$rss_max, seconds:$seconds}' \
  | tee -a "$scale_jsonl"
log "charts"
"$bin/scalechart" --input "$scale_jsonl" --out-dir "$CHARTS"
echo "results: $run_dir ($(($(date +%s) - started)) s in all)"
