#!/usr/bin/env bash
# Reads beyond one machine (docs/scaling.md, "Beyond one machine: measured"): the same
# catalog read by hotel availability and city searches through five deployments, one
# after the other, each a `reservations serve` of its own on the same data:
#
#   redis       one Redis (the read model), the primary behind it
#   cluster     a Redis Cluster of three masters with a replica each
#   primary     no Redis: every read answered by the PostgreSQL primary
#   replica     no Redis, a streaming replica: the reads answered by the replica
#   relay       the cluster, the replica and the JetStream relay, under spread holds:
#               the relay's lag (events) sampled every half second
#
# It starts everything it needs on loopback ports of its own (a PostgreSQL primary and
# its replica by initdb and pg_basebackup, six redis-server nodes, one single Redis),
# uses the machine's NATS for the relay, and removes it all at the end.
#
#   scripts/deployment.sh               # about 5 minutes
#   SECONDS_PER_RUN=3 HOTELS=50 scripts/deployment.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
HOTELS=${HOTELS:-1000}
ROOM_TYPES=${ROOM_TYPES:-5}
NIGHTS=${NIGHTS:-60}
ROOMS=${ROOMS:-100000}
START_DATE=${START_DATE:-$(date -u -d '+30 days' +%F)}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-32}
SEARCH_HOTELS=${SEARCH_HOTELS:-50}
SEARCH_ROOM_TYPES=${SEARCH_ROOM_TYPES:-3}
SEARCH_FIRST_HOTEL=${SEARCH_FIRST_HOTEL:-2000001}
SEARCH_CITY=${SEARCH_CITY:-Deployville}
NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
SKIP_BUILD=${SKIP_BUILD:-0}
DB_NAME=deploy_bench

cd "$repo"
target_dir=${CARGO_TARGET_DIR:-$repo/target}
[[ $target_dir == /* ]] || target_dir=$repo/$target_dir
bin=$target_dir/release
run_dir=${RUN_DIR:-$target_dir/deployment/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$run_dir"
runs=$run_dir/runs.jsonl
scratch=$(mktemp -d /tmp/deploy-bench.XXXXXX)
ADMIN_TOKEN=deploy-admin-$RANDOM$RANDOM
CHANNEL_TOKEN=deploy-channel-$RANDOM$RANDOM
STREAM=DEPLOY_BENCH_$RANDOM$RANDOM
server_pid=""
url=""
redis_pids=()

log() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pg_bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
as_postgres() {
  if [[ $(id -un) == postgres ]]; then "$@"; else runuser -u postgres -- "$@"; fi
}
chown postgres "$scratch" 2>/dev/null || true
PRIMARY_PORT=$(free_port)
REPLICA_PORT=$(free_port)
PRIMARY=postgres://postgres@127.0.0.1:$PRIMARY_PORT
REPLICA=postgres://postgres@127.0.0.1:$REPLICA_PORT

stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# Deletes the relay's stream: a JetStream API request, written in NATS's own text
# protocol (no NATS client needed here).
delete_stream() {
  local address=${NATS_URL#nats://}
  local host=${address%:*} port=${address##*:}
  {
    exec 3<>"/dev/tcp/$host/$port" || return 0
    printf 'CONNECT {"verbose":false}\r\nPUB $JS.API.STREAM.DELETE.%s 0\r\n\r\nPING\r\n' "$STREAM" >&3
    timeout 5 grep -q -m 1 PONG <&3 || true
    exec 3>&-
  } 2>/dev/null || true
}

cleanup() {
  stop_server
  for pid in "${redis_pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for name in replica primary; do
    [[ -d $scratch/$name ]] && as_postgres "$pg_bin/pg_ctl" -D "$scratch/$name" -m immediate -w stop >/dev/null 2>&1 || true
  done
  delete_stream
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $SKIP_BUILD != 1 ]]; then
  log "building release binaries"
  cargo build --release -p reservations -p loadgen
fi

log "PostgreSQL primary ($PRIMARY_PORT) and streaming replica ($REPLICA_PORT)"
as_postgres "$pg_bin/initdb" -D "$scratch/primary" -U postgres --auth=trust -E UTF8 --no-sync >"$run_dir/initdb.log"
cat >>"$scratch/primary/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$scratch'
wal_level = replica
max_wal_senders = 4
hot_standby = on
shared_buffers = 1GB
max_connections = 200
EOF
as_postgres "$pg_bin/pg_ctl" -D "$scratch/primary" -l "$scratch/primary.log" -o "-p $PRIMARY_PORT" -w start >/dev/null
as_postgres "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -D "$scratch/replica" -R -X stream --no-sync
as_postgres "$pg_bin/pg_ctl" -D "$scratch/replica" -l "$scratch/replica.log" -o "-p $REPLICA_PORT" -w start >/dev/null

log "Redis: one server and a cluster of three masters with a replica each"
start_redis() {
  local port=$1
  shift
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$scratch" "$@" \
    >/dev/null 2>&1 &
  redis_pids+=($!)
}
SINGLE_PORT=$(free_port)
start_redis "$SINGLE_PORT"
cluster_ports=()
for _ in 1 2 3 4 5 6; do
  port=$(free_port)
  cluster_ports+=("$port")
  start_redis "$port" --cluster-enabled yes --cluster-port "$(free_port)" \
    --cluster-config-file "$scratch/nodes-$port.conf" --cluster-node-timeout 2000
done
for port in "$SINGLE_PORT" "${cluster_ports[@]}"; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${cluster_ports[@]}") --cluster-replicas 1 \
  --cluster-yes >"$run_dir/cluster-create.log"
for _ in $(seq 1 100); do
  redis-cli -p "${cluster_ports[0]}" cluster info | grep -q cluster_state:ok && break
  sleep 0.2
done
SINGLE=redis://127.0.0.1:$SINGLE_PORT
CLUSTER=$(printf 'redis://127.0.0.1:%s,' "${cluster_ports[@]}")
CLUSTER=${CLUSTER%,}
# Not a Redis URL: the server starts without the read model and reads PostgreSQL.
NO_REDIS=none

# start_server LABEL [VAR=VALUE...]: a server on the primary with those settings.
start_server() {
  local label=$1
  shift
  local server_log=$run_dir/server-$label.log
  env DATABASE_URL="$PRIMARY/$DB_NAME" LISTEN_ADDR=127.0.0.1:0 \
    API_TOKENS="$ADMIN_TOKEN:admin:deploy-admin,$CHANNEL_TOKEN:channel:loadgen" \
    HOLD_LIMIT_PER_GUEST=0 INVENTORY_HORIZON_DAYS=0 LOG_JSON=true RUST_LOG=info,sqlx=warn "$@" \
    "$bin/reservations" serve >"$server_log" 2>&1 &
  server_pid=$!
  local port=""
  for _ in $(seq 1 1200); do
    kill -0 "$server_pid" 2>/dev/null || { echo "the server exited; see $server_log"; exit 1; }
    [[ -n $port ]] || port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' "$server_log" | head -n 1)
    if [[ -n $port ]] && curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
      url=http://127.0.0.1:$port
      echo "server '$label' at $url"
      return 0
    fi
    sleep 0.1
  done
  echo "the server '$label' did not start; see $server_log"
  exit 1
}

# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
catalog=(--hotels "$HOTELS" --room-types "$ROOM_TYPES" --nights "$NIGHTS" --start-date "$START_DATE")
search_catalog=(--hotels "$SEARCH_HOTELS" --room-types "$SEARCH_ROOM_TYPES" --nights "$NIGHTS"
  --start-date "$START_DATE" --first-hotel "$SEARCH_FIRST_HOTEL")

measure() {
  local scenario=$1 label=$2
  shift 2
  "$bin/loadgen" run "$scenario" --url "$url" --token "$CHANNEL_TOKEN" --clients "$CLIENTS" \
    --seconds "$SECONDS_PER_RUN" --warmup "$WARMUP" --label "$label" --out "$runs" "$@" \
    | grep -E 'goodput|read from' || true
}

reads_and_searches() {
  local label=$1
  measure reads "reads@$label" "${catalog[@]}"
  measure search "search@$label" "${search_catalog[@]}" --city "$SEARCH_CITY"
}

log "the catalog: $HOTELS hotels x $ROOM_TYPES room types x $NIGHTS nights, and $SEARCH_HOTELS in $SEARCH_CITY"
start_server redis REDIS_URL="$SINGLE"
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${catalog[@]}" --rooms "$ROOMS" --wait-seconds 0
"$bin/loadgen" setup --url "$url" --admin-token "$ADMIN_TOKEN" "${search_catalog[@]}" --rooms "$ROOMS" \
  --plans search --city "$SEARCH_CITY" --wait-seconds 0
quiesce

log "redis: one Redis"
reads_and_searches redis
stop_server

log "cluster: a Redis Cluster (the model built afresh in it first)"
start_server cluster REDIS_URL="$CLUSTER"
quiesce
reads_and_searches cluster
stop_server

log "primary: no Redis, every read from the primary"
start_server primary REDIS_URL="$NO_REDIS" RUN_PROJECTIONS=false
reads_and_searches primary
stop_server

log "replica: no Redis, the reads from the streaming replica"
start_server replica REDIS_URL="$NO_REDIS" RUN_PROJECTIONS=false READ_DATABASE_URL="$REPLICA/$DB_NAME"
reads_and_searches replica
curl -fsS "$url/metrics" | grep -E '^replica_(reads_total|fallbacks_total)' || true
stop_server

log "relay: the cluster, the replica and the JetStream relay, under spread holds"
start_server relay REDIS_URL="$CLUSTER" READ_DATABASE_URL="$REPLICA/$DB_NAME" \
  NATS_URL="$NATS_URL" NATS_STREAM="$STREAM" NATS_SUBJECT_PREFIX="deploybench$RANDOM.events"
QUIESCE_SECONDS=600 quiesce   # the relay publishes the whole catalog first
(
  while true; do
    curl -fsS "$url/metrics" 2>/dev/null \
      | awk '/^projection_lag_events\{projection="jetstream_relay"\}/ { print $NF }'
    sleep 0.5
  done
) >"$run_dir/relay-lag.log" &
sampler=$!
published_before=$(curl -fsS "$url/metrics" | awk '/^relay_events_published_total/ { s += $NF } END { print s + 0 }')
measure spread "spread@relay" "${catalog[@]}" --database-url "$PRIMARY/$DB_NAME"
kill "$sampler" 2>/dev/null || true
published_after=$(curl -fsS "$url/metrics" | awk '/^relay_events_published_total/ { s += $NF } END { print s + 0 }')
quiesce
lag_max=$(sort -n "$run_dir/relay-lag.log" | tail -n 1)
lag_p50=$(sort -n "$run_dir/relay-lag.log" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
stop_server

log "results (reads/s and p99 ms; $CLIENTS clients, $SECONDS_PER_RUN s each)"
jq -r 'select(.kinds != null) | .label as $l | .kinds | to_entries[]
       | select(.key == "read" or .key == "search" or .key == "hold")
       | "\($l)\t\(.value.goodput | floor)/s\tp50 \(.value.p50_ms) ms\tp99 \(.value.p99_ms) ms"' "$runs" \
  | column -t -s $'\t'
echo "relay: $((published_after - published_before)) events published during the spread run;" \
  "lag sampled every 0.5 s: median ${lag_p50:-?}, largest ${lag_max:-?} events"
echo "results: $run_dir"
