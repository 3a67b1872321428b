#!/usr/bin/env bash
# Runs the server on this machine's PostgreSQL and Redis, starting them (or installing
# them from Debian's packages) first; the database `reservations` is created and
# migrated at start. Any argument goes to `reservations serve`; the settings are the
# environment's (docs/operations.md, "Configuration"), with demo tokens when API_TOKENS is unset.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh
ensure_postgres
ensure_redis
export API_TOKENS="${API_TOKENS:-admin-secret:admin:staff,web-secret:channel:web,audit-secret:auditor}"
export PAYMENT_WEBHOOK_SECRET="${PAYMENT_WEBHOOK_SECRET:-whsec-demo}"
exec cargo run --release -- serve "$@"
