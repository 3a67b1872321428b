#!/usr/bin/env bash
# What partner webhooks cost and how fast they go (docs/benchmarks.md, "Partner
# webhooks under load"): the release server on a scratch database with its projections
# and workers, a catalog, and a receiver on loopback (Python, threaded, answering 204).
# Spread holds are run twice, alternated with and without a subscription to every
# event ("*"); with one, the deliveries made, how long after the load they were all
# delivered, and the webhooks projection's lag are printed.
#
#   scripts/notify.sh              # 200 hotels x 5 room types x 60 nights, 10 s runs
#   SMALL=1 scripts/notify.sh      # a smoke test
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"

SMALL=${SMALL:-0}
if [[ $SMALL == 1 ]]; then
  : "${HOTELS:=5}" "${ROOM_TYPES:=2}" "${NIGHTS:=20}" "${SECONDS_PER_RUN:=2}" "${CLIENTS:=4}"
fi
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
DB_NAME=${DB_NAME:-notify_bench}
HOTELS=${HOTELS:-200}
ROOM_TYPES=${ROOM_TYPES:-5}
NIGHTS=${NIGHTS:-60}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-32}
RECEIVER_PORT=${RECEIVER_PORT:-19091}
SKIP_BUILD=${SKIP_BUILD:-0}
ADMIN_TOKEN=notify-admin
CHANNEL_TOKEN=notify-channel
SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw

target_dir=${CARGO_TARGET_DIR:-$repo/target}
[[ $target_dir == /* ]] || target_dir=$repo/$target_dir
bin=$target_dir/release
out_dir=$target_dir/notify/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out_dir"

log() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }
psql_admin() { psql -q "$PG_URL/postgres" -v ON_ERROR_STOP=1 -c "$1" >/dev/null; }
sql() { psql -qtA "$PG_URL/$DB_NAME" -c "$1"; }

if [[ $SKIP_BUILD != 1 ]]; then
  log "release build"
  (cd "$repo" && cargo build --release -p reservations -p loadgen)
fi

server_pid="" receiver_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [[ -n $receiver_pid ]] && kill "$receiver_pid" 2>/dev/null && wait "$receiver_pid" 2>/dev/null
  true
}
trap cleanup EXIT

log "scratch database $DB_NAME, receiver on $RECEIVER_PORT"
psql_admin "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)"
python3 -c '
import http.server, sys
class R(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # the default 5 drops connections under load (1 s retries)
S(("127.0.0.1", int(sys.argv[1])), R).serve_forever()
' "$RECEIVER_PORT" &
receiver_pid=$!

env DATABASE_URL="$PG_URL/$DB_NAME" REDIS_URL="$REDIS_URL" LISTEN_ADDR=127.0.0.1:0 \
  API_TOKENS="$ADMIN_TOKEN:admin:bench-admin,$CHANNEL_TOKEN:channel:loadgen" \
  HOLD_LIMIT_PER_GUEST=0 INVENTORY_HORIZON_DAYS=0 WEBHOOK_POLL_MS=100 \
  LOG_JSON=true RUST_LOG=warn,reservations=info \
  "$bin/reservations" serve >"$out_dir/server.log" 2>&1 &
server_pid=$!
url=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' "$out_dir/server.log" | head -n 1)
  if [[ -n $port ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
    url=http://127.0.0.1:$port
    break
  fi
  sleep 0.1
done
[[ -n $url ]] || { echo "the server did not start; see $out_dir/server.log"; exit 1; }

log "catalog: $HOTELS hotels x $ROOM_TYPES room types x $NIGHTS nights"
catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS"
  --start-date "$(date -u -d '+30 days' +%F)")
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" \
  --rooms 100000 >/dev/null

spread() {
  local label=$1
  quiesce
  "$bin/loadgen" run spread --url "$url" --token "$CHANNEL_TOKEN" --clients "$CLIENTS" \
    --seconds "$SECONDS_PER_RUN" --warmup 1 "${catalog[@]}" --label "$label" \
    --database-url "$PG_URL/$DB_NAME" --out "$out_dir/runs.jsonl" \
    >"$out_dir/$label.txt" 2>&1 || true
  grep -E '^  hold|invariant' "$out_dir/$label.txt" | sed "s/^ */  [$label] /"
}

subscribe() {
  curl -fsS -o /dev/null -X PUT "$url/v1/webhooks/bench" -H "Authorization: Bearer $ADMIN_TOKEN" \
    -H 'Content-Type: application/json' \
    -d "{\"url\": \"http://127.0.0.1:$RECEIVER_PORT/hooks\", \"events\": [\"*\"], \"secret\": \"$SECRET\"}"
}
unsubscribe() {
  curl -fsS -o /dev/null -X DELETE "$url/v1/webhooks/bench" -H "Authorization: Bearer $ADMIN_TOKEN" || true
}

# Drains the deliveries of the run just ended: how many, and how long until none is
# pending, read from the database.
drain() {
  local started made pending
  started=$(date +%s.%N)
  quiesce
  for n in $(seq 1 2400); do
    pending=$(sql "SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'")
    [[ $pending == 0 ]] && break
    (( n % 20 == 0 )) && echo "  ($pending pending)"
    sleep 0.25
  done
  made=$(sql "SELECT count(*) FROM webhook_deliveries")
  printf '  deliveries made: %s; all delivered %.1f s after the load ended; failed: %s\n' \
    "$made" "$(echo "$(date +%s.%N) - $started" | bc)" \
    "$(sql "SELECT count(*) FROM webhook_deliveries WHERE state = 'failed'")"
  printf '  by type: %s\n' "$(sql "SELECT string_agg(event_type || ' ' || n, ', ') FROM (SELECT event_type, count(*) n FROM webhook_deliveries GROUP BY 1 ORDER BY 1) t")"
  sql "DELETE FROM webhook_deliveries" >/dev/null
}

log "spread, alternated: without a subscription, with one to every event"
spread none-1
subscribe
spread webhooks-1
drain
unsubscribe
spread none-2
subscribe
spread webhooks-2
drain
unsubscribe
echo
echo "runs: $out_dir"
