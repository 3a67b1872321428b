# Brings up what the server and the tests need on this machine (sourced, not run):
# PostgreSQL on 127.0.0.1:5432 with trust auth, Redis on 6379 and NATS with JetStream on
# 4222 are started when stopped, and installed from Debian's packages when missing. Each
# `ensure_*` returns at once when its service already answers.

services_log() { printf '\n== %s\n' "$*" >&2; }

# Runs a command as root (directly, or through sudo when there is one).
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root for: $*" >&2; return 1
  fi
}

apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then return; fi
  local fresh_install=0
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    services_log "installing PostgreSQL"
    apt_install postgresql postgresql-contrib
    fresh_install=1
  fi
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  if [ "$fresh_install" = 1 ]; then
    # The server and the tests connect over TCP as "postgres" without a password, as
    # on the development machines: trust local connections on this host only.
    local hba="/etc/postgresql/$version/main/pg_hba.conf"
    as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
  fi
  services_log "starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 60); do
    pg_isready -q -h 127.0.0.1 -p 5432 && return
    sleep 1
  done
  echo "PostgreSQL did not come up" >&2
  return 1
}

ensure_redis() {
  if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then return; fi
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    services_log "installing Redis"
    apt_install redis-server redis-tools
  fi
  services_log "starting Redis"
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
    --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do
    redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && return
    sleep 1
  done
  echo "Redis did not come up" >&2
  return 1
}

ensure_nats() {
  if (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then return; fi
  if ! command -v nats-server >/dev/null; then
    services_log "installing NATS"
    apt_install nats-server
  fi
  services_log "starting NATS with JetStream"
  as_root mkdir -p /var/lib/nats /var/log/nats
  nohup nats-server -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats \
    >/tmp/nats-server.log 2>&1 &
  for _ in $(seq 1 30); do
    (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && return
    sleep 1
  done
  echo "NATS did not come up" >&2
  return 1
}

# What the tests need beyond the three services: redis-cli (the Redis Cluster tests
# join their own nodes with it), aiosmtpd (the mail tests' SMTP server), Chromium,
# Node.js and the pinned playwright-core of e2e/ (the console's browser test).
ensure_test_tools() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if ! command -v redis-cli >/dev/null; then
    services_log "installing redis-tools"
    apt_install redis-tools
  fi
  if ! python3 -c 'import aiosmtpd' 2>/dev/null; then
    services_log "installing aiosmtpd (the mail tests' SMTP server)"
    python3 -m pip install -q aiosmtpd 2>/dev/null ||
      python3 -m pip install -q --break-system-packages aiosmtpd
  fi
  if [ ! -x /usr/bin/chromium ]; then
    services_log "installing Chromium (the console's browser test)"
    apt_install chromium
  fi
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    services_log "installing Node.js and npm (the console's browser test)"
    apt_install nodejs npm
  fi
  if [ ! -d "$root/e2e/node_modules/playwright-core" ]; then
    services_log "browser test packages (npm ci in e2e/)"
    npm ci --prefix "$root/e2e" --no-audit --no-fund
  fi
  # Each step of the browser scenario leaves a screenshot here.
  mkdir -p "$root/artifacts/console-e2e"
}
