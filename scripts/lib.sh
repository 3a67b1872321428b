# Shared by the benchmark scripts (sourced, not run): starting a measured server, and
# waiting for its projections.

# quiesce: until every projection of the server at $url has applied everything (lag 0
# on two readings, the gauge being refreshed every couple of seconds), at most
# ${QUIESCE_SECONDS:-120} s. A run is then measured on its own, not while the
# projections still apply the writes before it.
quiesce() {
  local zeros=0 lag="?"
  for _ in $(seq 1 $((${QUIESCE_SECONDS:-120} * 2))); do
    lag=$(curl -fsS "$url/metrics" 2>/dev/null \
      | awk '/^projection_lag_events\{/ { s += $NF; n++ } END { if (n) print s; else print "?" }')
    if [[ $lag == 0 ]]; then
      zeros=$((zeros + 1))
      [[ $zeros -ge 2 ]] && return 0
    else
      zeros=0
    fi
    sleep 0.5
  done
  echo "(projections still behind after ${QUIESCE_SECONDS:-120} s: lag $lag)"
}

# start_measured_server BIN DATABASE_URL LOG ADMIN_TOKEN CHANNEL_TOKEN: a server with its
# projections on a port of its own, with the settings a measurement wants (no per-guest
# hold limit, no inventory horizon, JSON logs), stopped when the script exits. Sets
# $server_pid and $url, or exits if it does not answer /readyz within two minutes.
start_measured_server() {
  local bin=$1 database_url=$2 log=$3 admin=$4 channel=$5 port
  env DATABASE_URL="$database_url" REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}" \
    LISTEN_ADDR=127.0.0.1:0 API_TOKENS="$admin:admin:bench-admin,$channel:channel:loadgen" \
    RUN_PROJECTIONS=true HOLD_LIMIT_PER_GUEST=0 INVENTORY_HORIZON_DAYS=0 LOG_JSON=true \
    RUST_LOG="${RUST_LOG:-info,sqlx=warn}" "$bin" serve >"$log" 2>&1 &
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
  url=""
  for _ in $(seq 1 1200); do
    port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
    if [[ -n $port ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
      url=http://127.0.0.1:$port
      return 0
    fi
    sleep 0.1
  done
  echo "the server did not start; see $log"
  exit 1
}
