#!/usr/bin/env bash
# The hold's budget: what one spread hold costs, line by line, on this machine. A scratch
# database, a release server with its projections, a catalog; then spread holds for a
# while through HTTP, and per hold made:
#
#   - CPU of each process, from the kernel's own counters: the server, PostgreSQL (every
#     backend, the WAL writer and checkpointer included, and backends that exited), and
#     Redis; during the load, and while the projections catch up after it;
#   - every statement PostgreSQL ran (pg_stat_statements, when it is loaded): calls,
#     execution time and rows per hold, the hold path's and the projections' apart by the
#     tables they touch; and transactions per hold;
#   - bytes of tables and indexes, and WAL, per hold (`loadgen storage`).
#
# Figures and how to read them: docs/benchmarks.md, "The hold's budget".
#
#   scripts/budget.sh                      # 200 hotels x 5 room types x 60 nights, 15 s, 32 clients
#   SECONDS_PER_RUN=30 CLIENTS=64 scripts/budget.sh
#
# Statements need `pg_stat_statements` in `shared_preload_libraries` (then a restart);
# without it the statement table is left out and the script says so.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
DB_NAME=${DB_NAME:-loadgen_budget}
HOTELS=${HOTELS:-200}
ROOM_TYPES=${ROOM_TYPES:-5}
NIGHTS=${NIGHTS:-60}
ROOMS=${ROOMS:-100000}
CLIENTS=${CLIENTS:-32}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
START_DATE=${START_DATE:-$(date -u -d '+30 days' +%F)}
SKIP_BUILD=${SKIP_BUILD:-0}
ADMIN_TOKEN=budget-admin-$RANDOM$RANDOM
CHANNEL_TOKEN=budget-channel-$RANDOM$RANDOM
run_dir=${RUN_DIR:-$repo/target/budget/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$run_dir"
bin=$repo/target/release

psql_admin() { psql "$PG_URL/postgres" -qAtX -c "$1"; }
psql_db() { psql "$PG_URL/$DB_NAME" -qAtX -c "$1"; }

if [[ $SKIP_BUILD != 1 ]]; then
  cargo build --release -p reservations -p loadgen
fi
psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)"

server_log=$run_dir/server.log
env DATABASE_URL="$PG_URL/$DB_NAME" REDIS_URL="$REDIS_URL" LISTEN_ADDR=127.0.0.1:0 \
  API_TOKENS="$ADMIN_TOKEN:admin:budget-admin,$CHANNEL_TOKEN:channel:loadgen" \
  RUN_PROJECTIONS=true HOLD_LIMIT_PER_GUEST=0 INVENTORY_HORIZON_DAYS=0 LOG_JSON=true \
  RUST_LOG="${RUST_LOG:-info,sqlx=warn}" "$bin/reservations" serve >"$server_log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 1200); do
  port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' "$server_log" | head -n 1)
  if [[ -n $port ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
    url=http://127.0.0.1:$port
    break
  fi
  sleep 0.1
done
[[ -n $url ]] || { echo "the server did not start; see $server_log"; exit 1; }

catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS" --start-date "$START_DATE")
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" --rooms "$ROOMS"

QUIESCE_SECONDS=600
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"

# CPU seconds (user + system) a process has used, and its children that have exited.
ticks=$(getconf CLK_TCK)
cpu_of() {
  awk -v t="$ticks" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13 + $14 + $15) / t }' "/proc/$1/stat" 2>/dev/null || echo 0
}
# Every PostgreSQL process: each live one's own time, plus what the postmaster has
# collected from backends that exited (counted once, as its children).
cpu_postgres() {
  local total=0 pid
  for pid in $(pgrep -x postgres || true); do
    total=$(awk -v a="$total" -v b="$(awk -v t="$ticks" '{ sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / t }' "/proc/$pid/stat" 2>/dev/null || echo 0)" 'BEGIN { printf "%.3f", a + b }')
  done
  local master
  master=$(pgrep -o -x postgres || true)
  if [[ -n $master ]]; then
    total=$(awk -v a="$total" -v b="$(awk -v t="$ticks" '{ sub(/^.*\) /, ""); printf "%.3f", ($14 + $15) / t }' "/proc/$master/stat")" 'BEGIN { printf "%.3f", a + b }')
  fi
  echo "$total"
}
cpu_redis() {
  local pid
  pid=$(pgrep -o -x redis-server || true)
  [[ -n $pid ]] && cpu_of "$pid" || echo 0
}
sample() { echo "$(cpu_of "$server_pid") $(cpu_postgres) $(cpu_redis)"; }
holds() { psql_db "SELECT count(*) FROM events WHERE aggregate_type = 'reservation' AND event_type = 'ReservationHeld'"; }
xacts() { psql_db "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"; }

statements=0
if [[ $(psql_db "SHOW shared_preload_libraries") == *pg_stat_statements* ]]; then
  psql_db "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
  statements=1
fi

quiesce
"$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --json "$run_dir/before.json" >/dev/null
psql_db "CHECKPOINT" >/dev/null
lsn=$(psql_db "SELECT pg_current_wal_lsn()")
holds_before=$(holds)
xacts_before=$(xacts)
[[ $statements == 1 ]] && psql_db "SELECT pg_stat_statements_reset()" >/dev/null
read -r s0 p0 r0 < <(sample)
started=$(date +%s.%N)
"$bin/loadgen" run spread --url "$url" --token "$CHANNEL_TOKEN" --clients "$CLIENTS" \
  --seconds "$SECONDS_PER_RUN" --warmup 0 "${catalog[@]}" \
  --database-url "$PG_URL/$DB_NAME" --label budget --out "$run_dir/spread.jsonl" | tee "$run_dir/spread.txt"
read -r s1 p1 r1 < <(sample)
loaded=$(date +%s.%N)
quiesce
read -r s2 p2 r2 < <(sample)
caught_up=$(date +%s.%N)
holds_made=$(($(holds) - holds_before))
xacts_made=$(($(xacts) - xacts_before))
"$bin/loadgen" storage --database-url "$PG_URL/$DB_NAME" --wal-since "$lsn" \
  --since "$run_dir/before.json" --json "$run_dir/after.json" | tee "$run_dir/storage.txt"

per_hold() { awk -v a="$1" -v b="$2" -v n="$holds_made" 'BEGIN { if (n > 0) printf "%.3f", (b - a) * 1000 / n; else print "-" }'; }
{
  echo
  echo "## The hold's budget: $holds_made spread holds in ${SECONDS_PER_RUN} s, $CLIENTS clients"
  echo
  awk -v a="$started" -v b="$loaded" -v c="$caught_up" -v n="$holds_made" \
    'BEGIN { printf "load %.1f s (%.0f holds/s), projections caught up %.1f s after\n\n", b - a, n / (b - a), c - b }'
  echo "| CPU per hold (ms) | during the load | catching up after | total |"
  echo "|---|---|---|---|"
  echo "| server | $(per_hold "$s0" "$s1") | $(per_hold "$s1" "$s2") | $(per_hold "$s0" "$s2") |"
  echo "| PostgreSQL | $(per_hold "$p0" "$p1") | $(per_hold "$p1" "$p2") | $(per_hold "$p0" "$p2") |"
  echo "| Redis | $(per_hold "$r0" "$r1") | $(per_hold "$r1" "$r2") | $(per_hold "$r0" "$r2") |"
  echo
  awk -v x="$xacts_made" -v n="$holds_made" 'BEGIN { if (n > 0) printf "PostgreSQL transactions per hold (every connection): %.2f\n", x / n }'
} | tee "$run_dir/budget.md"

if [[ $statements == 1 ]]; then
  {
    echo
    echo "| statement (first 90 characters) | calls per hold | ms per hold | rows per hold |"
    echo "|---|---|---|---|"
    psql_db "SELECT '| ' || replace(left(regexp_replace(query, '\s+', ' ', 'g'), 90), '|', '/')
                    || ' | ' || round(calls::numeric / $holds_made, 3)
                    || ' | ' || round((total_exec_time / $holds_made)::numeric, 4)
                    || ' | ' || round(rows::numeric / $holds_made, 2) || ' |'
               FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
              ORDER BY total_exec_time DESC LIMIT ${TOP_STATEMENTS:-30}"
    psql_db "SELECT 'statements per hold: ' || round(sum(calls)::numeric / $holds_made, 2)
                    || ', execution ' || round((sum(total_exec_time) / $holds_made)::numeric, 3) || ' ms per hold'
               FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
  } | tee -a "$run_dir/budget.md"
else
  echo "(statements: add pg_stat_statements to shared_preload_libraries and restart PostgreSQL)" | tee -a "$run_dir/budget.md"
fi
echo "results: $run_dir"
