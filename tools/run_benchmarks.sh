#!/usr/bin/env bash
# Runs every benchmark under tools/ (bench_*.py): --quick unless FULL=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=--quick; [[ ${FULL:-0} == 1 ]] && mode=
shopt -s nullglob
benches=(tools/bench_*.py)
if ((${#benches[@]} == 0)); then
  echo 'bench: no benchmarks yet'
  exit 0
fi
for bench in "${benches[@]}"; do
  echo "== $bench $mode"
  "${VENV:-.venv}/bin/python" "$bench" $mode
done
