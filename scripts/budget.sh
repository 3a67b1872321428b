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
#   - bytes of tables and indexes, and WAL, per hold (`loadgen storage`);
#   - beside it, the raw-SQL baseline's spread booking (`tools/baseline`) on the same
#     PostgreSQL for as long: PostgreSQL's and pgbench's CPU, statements, WAL and bytes
#     per booking (BASELINE=0 leaves it out).
#
# Figures and how to read them: docs/benchmarks.md, "The hold's budget".
#
#   scripts/budget.sh                      # 200 hotels x 5 room types x 60 nights, 15 s, 32 clients
#   SECONDS_PER_RUN=30 CLIENTS=64 scripts/budget.sh
#
# Statements need `pg_stat_statements` in `shared_preload_libraries` (then a restart);
# without it the statement table is left out and the script says so. Planning time
# needs `pg_stat_statements.track_planning = on` too.
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
BASELINE=${BASELINE:-1}
ADMIN_TOKEN=budget-admin-$RANDOM$RANDOM
CHANNEL_TOKEN=budget-channel-$RANDOM$RANDOM
run_dir=${RUN_DIR:-$repo/target/budget/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$run_dir"
bin=$repo/target/release
# The server measured (another build's, to compare two versions on this machine).
SERVER_BIN=${SERVER_BIN:-$bin/reservations}

psql_admin() { psql "$PG_URL/postgres" -qAtX -c "$1"; }
psql_db() { psql "$PG_URL/$DB_NAME" -qAtX -c "$1"; }

if [[ $SKIP_BUILD != 1 ]]; then
  cargo build --release -p reservations -p loadgen
fi
psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)"

# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
start_measured_server "$SERVER_BIN" "$PG_URL/$DB_NAME" "$run_dir/server.log" "$ADMIN_TOKEN" "$CHANNEL_TOKEN"

catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS" --start-date "$START_DATE")
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" --rooms "$ROOMS"

QUIESCE_SECONDS=600

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
# The server's WAL counters (every database; nothing else writes during a run): records,
# full-page images (a page's first change after a checkpoint logs the whole page), bytes.
wal_counters() { psql "$PG_URL/postgres" -qAtX -F ' ' -c "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal"; }
wal_per() { # records0 fpi0 bytes0 records1 fpi1 bytes1 count what
  awk -v r0="$1" -v f0="$2" -v b0="$3" -v r1="$4" -v f1="$5" -v b1="$6" -v n="$7" -v what="$8" \
    'BEGIN { if (n > 0) printf "WAL per %s: %.1f records, %.2f full-page images, %.0f bytes\n", what, (r1 - r0) / n, (f1 - f0) / n, (b1 - b0) / n }'
}

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
read -r w0r w0f w0b < <(wal_counters)
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
read -r w1r w1f w1b < <(wal_counters)
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
  wal_per "$w0r" "$w0f" "$w0b" "$w1r" "$w1f" "$w1b" "$holds_made" hold
  # What the WAL holds, by record type (pg_walinspect, PostgreSQL 15 and later).
  if psql_db "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null 2>&1; then
    echo
    echo "| WAL record type | records per hold | bytes per hold | of which full-page images |"
    echo "|---|---|---|---|"
    psql_db "SELECT '| ' || \"resource_manager/record_type\" || ' | ' || round(count::numeric / $holds_made, 2)
                    || ' | ' || round(combined_size::numeric / $holds_made) || ' | ' || round(fpi_size::numeric / $holds_made) || ' |'
               FROM pg_get_wal_stats('$lsn', pg_current_wal_lsn(), true)
              WHERE count > 0 ORDER BY combined_size DESC LIMIT 12"
  fi
} | tee "$run_dir/budget.md"

if [[ $statements == 1 ]]; then
  {
    echo
    echo "| statement (first 90 characters) | calls per hold | ms per hold | plans per hold | planning ms per hold | rows per hold |"
    echo "|---|---|---|---|---|---|"
    psql_db "SELECT '| ' || replace(left(regexp_replace(query, '\s+', ' ', 'g'), 90), '|', '/')
                    || ' | ' || round(calls::numeric / $holds_made, 3)
                    || ' | ' || round((total_exec_time / $holds_made)::numeric, 4)
                    || ' | ' || round(plans::numeric / $holds_made, 3)
                    || ' | ' || round((total_plan_time / $holds_made)::numeric, 4)
                    || ' | ' || round(rows::numeric / $holds_made, 2) || ' |'
               FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
              ORDER BY total_exec_time DESC LIMIT ${TOP_STATEMENTS:-30}"
    psql_db "SELECT 'statements per hold: ' || round(sum(calls)::numeric / $holds_made, 2)
                    || ', execution ' || round((sum(total_exec_time) / $holds_made)::numeric, 3) || ' ms per hold'
                    || ', planning ' || round((sum(total_plan_time) / $holds_made)::numeric, 3) || ' ms per hold'
                    || ' (planning is counted with pg_stat_statements.track_planning on)'
               FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
  } | tee -a "$run_dir/budget.md"
else
  echo "(statements: add pg_stat_statements to shared_preload_libraries and restart PostgreSQL)" | tee -a "$run_dir/budget.md"
fi

# The baseline: the seeds' booking in raw SQL, as many seconds, as many clients.
if [[ $BASELINE == 1 ]]; then
  base_db=${DB_NAME}_baseline
  psql_admin "DROP DATABASE IF EXISTS \"$base_db\" WITH (FORCE)"
  psql_admin "CREATE DATABASE \"$base_db\""
  base_url=$PG_URL/$base_db
  psql -q "$base_url" -v ON_ERROR_STOP=1 -f "$repo/tools/baseline/schema.sql" >/dev/null
  psql_base() { psql "$base_url" -qAtX -c "$1"; }
  [[ $statements == 1 ]] && psql_base "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
  psql_base "CHECKPOINT" >/dev/null
  base_lsn=$(psql_base "SELECT pg_current_wal_lsn()")
  base_bytes=$(psql_base "SELECT sum(pg_total_relation_size(oid)) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace")
  [[ $statements == 1 ]] && psql_base "SELECT pg_stat_statements_reset()" >/dev/null
  read -r b0r b0f b0b < <(wal_counters)
  pg0=$(cpu_postgres)
  # `times` prints the shell's, then its children's (pgbench's) user and system time.
  bench_out=$(bash -c "pgbench -n -f '$repo/tools/baseline/spread.sql' -c $CLIENTS -j 2 -T $SECONDS_PER_RUN '$base_url' 2>/dev/null; times")
  pg1=$(cpu_postgres)
  read -r b1r b1f b1b < <(wal_counters)
  booked=$(echo "$bench_out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
  client_cpu=$(echo "$bench_out" | tail -n 1 | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); sub(/s/, "", p[2]); n += p[1] * 60 + p[2] } print n }')
  base_wal=$(psql_base "SELECT pg_current_wal_lsn() - '$base_lsn'::pg_lsn")
  base_after=$(psql_base "SELECT sum(pg_total_relation_size(oid)) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace")
  {
    echo
    echo "## Beside it, the raw-SQL baseline: $booked spread bookings in ${SECONDS_PER_RUN} s, $CLIENTS clients"
    echo
    awk -v n="$booked" -v a="$pg0" -v b="$pg1" -v c="$client_cpu" -v w="$base_wal" -v x="$base_bytes" -v y="$base_after" -v s="$SECONDS_PER_RUN" \
      'BEGIN { if (n > 0) printf "%.0f bookings/s; CPU per booking: PostgreSQL %.3f ms, pgbench %.3f ms; WAL %.0f bytes, tables and indexes %.0f bytes per booking\n", n / s, (b - a) * 1000 / n, c * 1000 / n, w / n, (y - x) / n }'
    wal_per "$b0r" "$b0f" "$b0b" "$b1r" "$b1f" "$b1b" "$booked" booking
    if [[ $statements == 1 ]]; then
      psql_base "SELECT 'statements per booking: ' || round(sum(calls)::numeric / $booked, 2)
                        || ', execution ' || round((sum(total_exec_time) / $booked)::numeric, 3) || ' ms per booking'
                   FROM pg_stat_statements
                  WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
    fi
  } | tee -a "$run_dir/budget.md"
  psql_admin "DROP DATABASE IF EXISTS \"$base_db\" WITH (FORCE)"
fi
echo "results: $run_dir"
