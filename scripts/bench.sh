#!/usr/bin/env bash
# The HTTP load benchmarks in one command (see docs/benchmarks.md, "HTTP load"):
# builds the release binaries, starts the server on a scratch database, loads the
# catalogs, runs every scenario (spread, hot, reads, mixed; and the rate plans' scenarios: spread again
# on a catalog with rate plans and restrictions, interleaved with spread, the city
# search, and a year of bulk ARI), runs the raw-SQL baseline on the same PostgreSQL
# server, sweeps the write strategies on the hot scenario, draws the chart and prints
# every figure with its ratio to the baseline and its target.
#
#   scripts/bench.sh              # full size (about 15 minutes)
#   SMALL=1 scripts/bench.sh      # a tiny catalog and 2-second runs: a smoke test
#   SERVER_BIN=/path/to/reservations scripts/bench.sh   # another build's server, for before/after
#
# Every knob is an environment variable; see the defaults below.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
BASELINE=${BASELINE:-$repo/tools/baseline/run.sh}

SMALL=${SMALL:-0}
if [[ $SMALL == 1 ]]; then
  : "${HOTELS:=5}" "${ROOM_TYPES:=2}" "${NIGHTS:=20}"
  : "${SECONDS_PER_RUN:=2}" "${WARMUP:=0.5}"
  : "${SPREAD_CLIENTS:=4}" "${HOT_CLIENTS:=4}" "${READS_CLIENTS:=4}" "${MIXED_CLIENTS:=4}"
  : "${SWEEP_CLIENTS:=1 4}"
  : "${SEARCH_HOTELS:=10}" "${SEARCH_CLIENTS:=4}"
  : "${ARI_HOTELS:=2}" "${ARI_ROOM_TYPES:=2}"
fi
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}   # server only, no database
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
DB_NAME=${DB_NAME:-loadgen_bench}                      # scratch: dropped and recreated
BASELINE_DB_NAME=${BASELINE_DB_NAME:-loadgen_baseline} # scratch: dropped and recreated
HOTELS=${HOTELS:-1000}
ROOM_TYPES=${ROOM_TYPES:-5}
NIGHTS=${NIGHTS:-60}
ROOMS=${ROOMS:-100000}
# The hot nights get every hold of the hot run and of the whole strategy sweep, on one
# database: 1,000,000 (the most the API allows) keeps them from selling out.
HOT_ROOMS=${HOT_ROOMS:-1000000}
START_DATE=${START_DATE:-$(date -u -d '+30 days' +%F)}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
WARMUP=${WARMUP:-2}
SPREAD_CLIENTS=${SPREAD_CLIENTS:-32}
HOT_CLIENTS=${HOT_CLIENTS:-64}
READS_CLIENTS=${READS_CLIENTS:-32}
MIXED_CLIENTS=${MIXED_CLIENTS:-32}
WRITE_STRATEGY=${WRITE_STRATEGY:-group}                # of the scenario runs
# Spread with plans: a second catalog of the main one's shape (hotels from
# PLANS_FIRST_HOTEL), every room type with three rate plans and restrictions the stays
# satisfy; PLANS_ROUNDS pairs of spread / spread-plans runs, in alternating order
# (spread, spread-plans, spread-plans, spread, ...), the first spread being the one
# compared with the baseline.
PLANS_HOTELS=${PLANS_HOTELS:-$HOTELS}
PLANS_FIRST_HOTEL=${PLANS_FIRST_HOTEL:-1000001}
PLANS_ROUNDS=${PLANS_ROUNDS:-2}
# The city search: SEARCH_HOTELS hotels of SEARCH_ROOM_TYPES room types with three plans
# each, all in SEARCH_CITY.
SEARCH_HOTELS=${SEARCH_HOTELS:-50}
SEARCH_ROOM_TYPES=${SEARCH_ROOM_TYPES:-3}
SEARCH_FIRST_HOTEL=${SEARCH_FIRST_HOTEL:-2000001}
SEARCH_CITY=${SEARCH_CITY:-Searchville}
SEARCH_CLIENTS=${SEARCH_CLIENTS:-32}
SEARCH_PER_HOLD=${SEARCH_PER_HOLD:-100}                 # search-booking: searches per hold
# A year of ARI as bulk requests, after the other scenarios.
ARI_HOTELS=${ARI_HOTELS:-20}
ARI_ROOM_TYPES=${ARI_ROOM_TYPES:-5}
ARI_NIGHTS=${ARI_NIGHTS:-365}
ARI_FIRST_HOTEL=${ARI_FIRST_HOTEL:-3000001}
ARI_CONCURRENCY=${ARI_CONCURRENCY:-1}
SWEEP_STRATEGIES=${SWEEP_STRATEGIES:-optimistic pessimistic group}
SWEEP_CLIENTS=${SWEEP_CLIENTS:-1 8 32 64}
BASELINE_SECONDS=${BASELINE_SECONDS:-$SECONDS_PER_RUN}
BASELINE_CLIENTS=${BASELINE_CLIENTS:-$(printf '%s\n' "$SPREAD_CLIENTS" "$HOT_CLIENTS" | sort -nu | tr '\n' ' ')}
SKIP_BUILD=${SKIP_BUILD:-0}
SKIP_SWEEP=${SKIP_SWEEP:-0}
SKIP_BASELINE=${SKIP_BASELINE:-0}
SKIP_PLANS=${SKIP_PLANS:-0}
SKIP_SEARCH=${SKIP_SEARCH:-0}
SKIP_ARI=${SKIP_ARI:-0}
# Spread runs back to back on the same database (the first is the one compared with the
# baseline; the rest show whether holds slow as the tables grow).
SPREAD_ROUNDS=${SPREAD_ROUNDS:-1}
KEEP_DB=${KEEP_DB:-0}

cd "$repo"
target_dir=${CARGO_TARGET_DIR:-$repo/target}
[[ $target_dir == /* ]] || target_dir=$repo/$target_dir
bin=$target_dir/release
OUT_DIR=${OUT_DIR:-$target_dir/bench}
if [[ $SMALL == 1 ]]; then
  CHART=${CHART:-$OUT_DIR/hot-strategies.svg}   # a smoke run does not replace the docs' chart
else
  CHART=${CHART:-$repo/docs/hot-strategies.svg}
fi
run_dir=$OUT_DIR/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$run_dir"
main_jsonl=$run_dir/main.jsonl
sweep_jsonl=$run_dir/sweep.jsonl
baseline_jsonl=$run_dir/baseline.jsonl

ADMIN_TOKEN=bench-admin-$RANDOM$RANDOM
CHANNEL_TOKEN=bench-channel-$RANDOM$RANDOM
server_pid=""
server_label=""
url=""
failed=0

log() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }

psql_admin() { PGOPTIONS='-c client_min_messages=warning' psql -qAt "$PG_URL/postgres" -v ON_ERROR_STOP=1 -c "$1"; }

clear_redis() {
  # The server keeps its read model under keys named after its database. One key a
  # line: a city's key has the city's name in it, spaces included.
  if command -v redis-cli >/dev/null; then
    redis-cli -u "$REDIS_URL" --scan --pattern "rsv:$DB_NAME:*" 2>/dev/null \
      | xargs -r -d '\n' -n 500 redis-cli -u "$REDIS_URL" del >/dev/null 2>&1 || true
  fi
}

stop_server() {
  [[ -n $server_pid ]] || return 0
  local hwm
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || true)
  if [[ -n $hwm ]]; then
    echo "server ($server_label) peak RSS: $((hwm / 1024)) MiB (VmHWM $hwm kB)"
    printf '{"kind":"server","label":"%s","peak_rss_kb":%s}\n' "$server_label" "$hwm" >>"$baseline_jsonl"
  fi
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "server did not stop within 30 s; killing it"
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

cleanup() {
  stop_server
  if [[ $KEEP_DB != 1 ]]; then
    psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)" 2>/dev/null || true
    psql_admin "DROP DATABASE IF EXISTS \"$BASELINE_DB_NAME\" WITH (FORCE)" 2>/dev/null || true
    clear_redis
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server STRATEGY LABEL: on a free port; returns 1 if it exits or is not ready.
start_server() {
  local strategy=$1 label=$2
  local server_log=$run_dir/server-$label.log
  server_label=$label
  env DATABASE_URL="$PG_URL/$DB_NAME" REDIS_URL="$REDIS_URL" LISTEN_ADDR=127.0.0.1:0 \
    API_TOKENS="$ADMIN_TOKEN:admin:bench-admin,$CHANNEL_TOKEN:channel:loadgen" \
    WRITE_STRATEGY="$strategy" RUN_PROJECTIONS=true HOLD_LIMIT_PER_GUEST=0 INVENTORY_HORIZON_DAYS=0 \
    LOG_JSON=true RUST_LOG="${RUST_LOG:-info,sqlx=warn}" \
    "${SERVER_BIN:-$bin/reservations}" serve >"$server_log" 2>&1 &
  server_pid=$!
  local port=""
  for _ in $(seq 1 1200); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      wait "$server_pid" 2>/dev/null || true
      server_pid=""
      echo "the server (WRITE_STRATEGY=$strategy) exited at start; the end of $server_log:"
      tail -n 5 "$server_log" | sed 's/^/  /'
      return 1
    fi
    [[ -n $port ]] || port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' "$server_log" | head -n 1)
    if [[ -n $port ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
      url=http://127.0.0.1:$port
      echo "server up at $url (WRITE_STRATEGY=$strategy, log: $server_log)"
      return 0
    fi
    sleep 0.1
  done
  echo "the server (WRITE_STRATEGY=$strategy) was not ready within 120 s"
  stop_server
  return 1
}

catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS" --start-date "$START_DATE")
plans_catalog=(--hotels "$PLANS_HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS"
  --start-date "$START_DATE" --first-hotel "$PLANS_FIRST_HOTEL")
search_catalog=(--hotels "$SEARCH_HOTELS" --room-types "$SEARCH_ROOM_TYPES" --nights "$NIGHTS"
  --start-date "$START_DATE" --first-hotel "$SEARCH_FIRST_HOTEL")

# quiesce (scripts/lib.sh) before every run.
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"

# run_scenario SCENARIO CLIENTS LABEL OUT [CATALOG AND OTHER ARGS...] (default: the
# main catalog)
run_scenario() {
  local scenario=$1 clients=$2 label=$3 out=$4
  shift 4
  [[ $# -gt 0 ]] || set -- "${catalog[@]}"
  quiesce
  log "$scenario: $clients clients, $SECONDS_PER_RUN s (+$WARMUP s warm-up), WRITE_STRATEGY=$label"
  if ! "$bin/loadgen" run "$scenario" --url "$url" --token "$CHANNEL_TOKEN" --clients "$clients" \
      --seconds "$SECONDS_PER_RUN" --warmup "$WARMUP" "$@" \
      --database-url "$PG_URL/$DB_NAME" --label "$label" --out "$out"; then
    echo "!! $scenario at $clients clients: the invariant check failed"
    failed=1
  fi
}

log "benchmark run $(basename "$run_dir"): $(nproc) cores, PostgreSQL $(psql_admin 'SHOW server_version'), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "results: $run_dir"

if [[ $SKIP_BASELINE != 1 && ! -f $BASELINE ]]; then
  echo "the baseline script $BASELINE is missing (set BASELINE, or SKIP_BASELINE=1)" >&2
  exit 1
fi

if [[ $SKIP_BUILD != 1 ]]; then
  log "building release binaries"
  cargo build --release -p reservations -p loadgen
fi

log "scratch databases $DB_NAME and $BASELINE_DB_NAME on $PG_URL"
psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)"
psql_admin "DROP DATABASE IF EXISTS \"$BASELINE_DB_NAME\" WITH (FORCE)"
psql_admin "CREATE DATABASE \"$BASELINE_DB_NAME\""
clear_redis

log "server (WRITE_STRATEGY=$WRITE_STRATEGY) and catalog"
start_server "$WRITE_STRATEGY" "$WRITE_STRATEGY-scenarios" || exit 1
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" \
  --rooms "$ROOMS" --hot-rooms "$HOT_ROOMS"
if [[ $SKIP_PLANS != 1 ]]; then
  log "catalog with rate plans and restrictions (spread-plans)"
  "$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${plans_catalog[@]}" \
    --rooms "$ROOMS" --plans spread --city Planville
fi
if [[ $SKIP_SEARCH != 1 ]]; then
  log "catalog of the city search ($SEARCH_CITY)"
  "$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${search_catalog[@]}" \
    --rooms "$ROOMS" --plans search --city "$SEARCH_CITY"
fi
# A checkpoint, so the first run does not pay for flushing the load. (No ANALYZE here:
# it would record the still-empty allocation and reservation tables as empty, and the
# planner trusts that until autovacuum analyzes them again, up to a minute into the
# runs: measured, spread 394 -> 335 holds/s and hot 1,044 -> 460.)
psql -q "$PG_URL/$DB_NAME" -c "CHECKPOINT" >/dev/null || true

run_spread_plans() {
  run_scenario spread-plans "$SPREAD_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl" "${plans_catalog[@]}"
}
# Round r is (spread, spread-plans) when r is odd and (spread-plans, spread) when it is
# even: spread, spread-plans, spread-plans, spread, ... so a drift of the machine weighs
# on both alike. The first spread is the one compared with the baseline.
quiesce
"$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --json "$run_dir/storage-before.json" >/dev/null
wal_from=$(psql -qAtX "$PG_URL/$DB_NAME" -c "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 "$SPREAD_ROUNDS"); do
  run_scenario spread "$SPREAD_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl"
done
quiesce
log "bytes and WAL per spread hold"
"$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --wal-since "$wal_from" \
  --since "$run_dir/storage-before.json" --json "$run_dir/storage-after.json" || true
if [[ $SKIP_PLANS != 1 ]]; then
  for round in $(seq 1 "$PLANS_ROUNDS"); do
    if ((round % 2 == 1)); then
      ((round == 1)) || run_scenario spread "$SPREAD_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl"
      run_spread_plans
    else
      run_spread_plans
      run_scenario spread "$SPREAD_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl"
    fi
  done
fi
run_scenario hot "$HOT_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl"
run_scenario reads "$READS_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl"
if [[ $SKIP_SEARCH != 1 ]]; then
  run_scenario search "$SEARCH_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl" "${search_catalog[@]}" \
    --city "$SEARCH_CITY"
  # The same searches while holds land in the city (one in SEARCH_PER_HOLD + 1 requests).
  run_scenario search-booking "$SEARCH_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl" \
    "${search_catalog[@]}" --city "$SEARCH_CITY" --reads-per-hold "$SEARCH_PER_HOLD"
fi
run_scenario mixed "$MIXED_CLIENTS" "$WRITE_STRATEGY" "$main_jsonl"
if [[ $SKIP_ARI != 1 ]]; then
  quiesce
  log "a year of ARI: $ARI_HOTELS hotels x $ARI_ROOM_TYPES room types x $ARI_NIGHTS nights, bulk requests, $ARI_CONCURRENCY hotel(s) at once"
  if ! "$bin/loadgen" ari --url "$url" --admin-token "$ADMIN_TOKEN" --hotels "$ARI_HOTELS" \
      --room-types "$ARI_ROOM_TYPES" --nights "$ARI_NIGHTS" --start-date "$START_DATE" \
      --first-hotel "$ARI_FIRST_HOTEL" --concurrency "$ARI_CONCURRENCY" \
      --database-url "$PG_URL/$DB_NAME" --label "$WRITE_STRATEGY" --out "$main_jsonl"; then
    echo "!! the ARI year failed"
    failed=1
  fi
fi
stop_server

if [[ $SKIP_BASELINE != 1 ]]; then
  for clients in $BASELINE_CLIENTS; do
    log "baseline (raw SQL, pgbench): $clients clients, $BASELINE_SECONDS s per workload"
    bash "$BASELINE" "$PG_URL/$BASELINE_DB_NAME" "$BASELINE_SECONDS" "$clients" | tee "$run_dir/baseline-$clients.txt"
    while read -r word workload c tps; do
      if [[ $word == baseline && $tps =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
        printf '{"kind":"baseline","workload":"%s","clients":%s,"tps":%s}\n' "$workload" "$c" "$tps" >>"$baseline_jsonl"
      fi
    done <"$run_dir/baseline-$clients.txt"
  done
fi

if [[ $SKIP_SWEEP != 1 ]]; then
  for strategy in $SWEEP_STRATEGIES; do
    log "hot sweep: WRITE_STRATEGY=$strategy"
    if ! start_server "$strategy" "$strategy-sweep"; then
      echo "skipping WRITE_STRATEGY=$strategy: its server did not start"
      continue
    fi
    for clients in $SWEEP_CLIENTS; do
      run_scenario hot "$clients" "$strategy" "$sweep_jsonl"
    done
    stop_server
  done
  if [[ -s $sweep_jsonl ]]; then
    log "chart"
    "$bin/benchchart" --input "$sweep_jsonl" --baseline "$baseline_jsonl" --out "$CHART" \
      --note "$(nproc) cores, ${SECONDS_PER_RUN} s a run"
  fi
fi

log "results ($run_dir)"
"$bin/loadgen" report --main "$main_jsonl" --sweep "$sweep_jsonl" --baseline "$baseline_jsonl" || failed=1
exit "$failed"
