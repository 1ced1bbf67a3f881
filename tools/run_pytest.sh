#!/usr/bin/env bash
# pytest with the venv; "no tests collected" (exit 5) is a failure, not a pass.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
"${VENV:-.venv}/bin/python" -m pytest "$@"
status=$?
if [[ $status -eq 5 ]]; then
  echo 'run_pytest: pytest collected no tests (exit 5): treated as a failure' >&2
  exit 1
fi
exit $status
