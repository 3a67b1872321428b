# Shared by the benchmark scripts (sourced, not run): waiting for the projections.

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
