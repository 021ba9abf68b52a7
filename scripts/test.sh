#!/usr/bin/env bash
# `make test`'s two long parts at once, as they share nothing (each starts servers of its own on
# free ports): the conformance runs (scripts/conformance.sh) in the background, their output kept
# in .tools/conformance.log, and pytest in the foreground, in three worker processes (pytest-xdist:
# most of a test's time is waiting on the servers it started). Once both are done, the conformance
# runs' totals are printed (the whole log on a failure) and pytest's last line closes the output.
# Fails when either failed.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tools
log=.tools/conformance.log
scripts/conformance.sh >"$log" 2>&1 &
conformance=$!
trap 'kill "$conformance" 2>/dev/null' EXIT
.venv/bin/pytest -q -n 3 | tee .tools/pytest.log
unit=${PIPESTATUS[0]}
wait "$conformance"
conformed=$?
trap - EXIT
echo
if [ "$conformed" -ne 0 ]; then
  cat "$log"
  echo "conformance failed (exit $conformed): the log above, kept in $log" >&2
else
  grep -E '^(== |Total: )' "$log"
  echo "conformance: every run passed (the whole log: $log)"
fi
tail -n 1 .tools/pytest.log
[ "$unit" -eq 0 ] && [ "$conformed" -eq 0 ]
