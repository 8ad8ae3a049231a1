#!/usr/bin/env bash
# Retraining from cron: `make run` under a lock so runs never overlap, with everything it prints
# appended to a log. Exits 0 when another run holds the lock (and says so), else with make's exit
# code. Arguments are passed to make (for example MANIFEST=... RUN_DIR=...).
#
#   RETRAIN_LOG    the log file (default runs/retrain.log)
#   RETRAIN_LOCK   the lock file (default runs/.retrain.lock)
#   crontab:  17 3 * * *  cd /srv/runfn && make retrain
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs
LOG="${RETRAIN_LOG:-runs/retrain.log}"
LOCK="${RETRAIN_LOCK:-runs/.retrain.lock}"
exec 9>>"$LOCK"
if ! flock -n 9; then
  echo "retrain: another retrain is running (lock $LOCK is held); this one exits without doing anything" >&2
  exit 0
fi
stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }
echo "== retrain started $(stamp) ==" >> "$LOG"
make --no-print-directory run "$@" >> "$LOG" 2>&1
code=$?
echo "== retrain ended $(stamp): exit $code ==" >> "$LOG"
if (( code != 0 )); then
  echo "retrain: a stage failed (exit $code); see $LOG" >&2
fi
exit "$code"
