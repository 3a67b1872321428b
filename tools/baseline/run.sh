#!/usr/bin/env bash
# The raw-SQL baseline: tools/baseline/run.sh DATABASE_URL [seconds] [clients]
#
# (Re)creates the reference tables in DATABASE_URL -- a scratch database: its tables of
# the same names are dropped -- then runs each pgbench workload for `seconds` (default
# 10) with `clients` connections (default 32) and prints one line per workload:
#
#   baseline spread <clients> <tps>
#   baseline hot <clients> <tps>
#
# scripts/bench.sh runs it between the server's scenarios and its strategy sweep, on the
# same PostgreSQL server, and reports its own figures as ratios to these.
set -euo pipefail

database_url=${1:?usage: run.sh DATABASE_URL [seconds] [clients]}
seconds=${2:-10}
clients=${3:-32}
dir=$(cd "$(dirname "$0")" && pwd)

psql -q "$database_url" -v ON_ERROR_STOP=1 -f "$dir/schema.sql" >/dev/null

for workload in spread hot; do
  # -n: pgbench vacuums none of its own tables (it has none here); -j 2: two threads.
  tps=$(pgbench -n -f "$dir/$workload.sql" -c "$clients" -j 2 -T "$seconds" "$database_url" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  echo "baseline $workload $clients $tps"
done
