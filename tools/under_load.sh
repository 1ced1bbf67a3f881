#!/usr/bin/env bash
# Runs a command RUNS times in a row (default 3) while LOAD busy processes (default: one per CPU)
# keep every core busy: stress-ng --cpu when installed, else shell busy loops. Stops at the first
# failing run and says which; the load ends with the script, however it ends.
#   tools/under_load.sh tools/run_pytest.sh -x
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${RUNS:-3}
load=${LOAD:-$(nproc)}
pids=()
stop_load() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait "${pids[@]}" 2>/dev/null
}
trap stop_load EXIT
trap 'exit 130' INT TERM
if command -v stress-ng >/dev/null; then
  stress-ng --cpu "$load" --quiet &
  pids+=($!)
  what="stress-ng --cpu $load"
else
  for ((i = 0; i < load; i++)); do
    bash -c 'while :; do :; done' &
    pids+=($!)
  done
  what="$load busy loops"
fi
echo "under_load: $what; $runs run(s) of: $*"
for ((k = 1; k <= runs; k++)); do
  start=$(date +%s)
  "$@"
  status=$?
  echo "under_load: run $k/$runs exit $status in $(($(date +%s) - start)) s ($what)"
  if [[ $status -ne 0 ]]; then
    exit "$status"
  fi
done
echo "under_load: $runs of $runs runs passed ($what)"
