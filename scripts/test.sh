#!/usr/bin/env bash
# Runs every test: starts PostgreSQL, Redis and NATS with JetStream (installing them from
# Debian's packages when missing) and what the tests use beside them (see
# `ensure_test_tools`), then `cargo test --workspace` with any arguments given.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh
ensure_postgres
ensure_redis
ensure_nats
ensure_test_tools
exec cargo test --workspace "$@"
