#!/usr/bin/env bash
# Retraining from cron: `make run` under a lock so runs never overlap, with everything it prints
# appended to a log that is rotated by size. Exits 0 when another run holds the lock (and says
# so), 0 when the run passed, else the failing stage's exit code (1 a check failed, the gate
# blocking included; 2 bad input; 3 training preempted; 4 the environment failed), or make's own
# when no stage had failed. A run that ends with exit 4 (a store unreachable or timing out, a full
# disk, a failed rendezvous, a crash) is run again after a wait, up to RETRAIN_RETRIES times: the
# stages that passed are kept, so a retry starts at the stage that failed. A failed run also runs
# the alert command (scripts/alert.sh), except on an attempt that will be retried. Arguments are
# passed to make (for example MANIFEST=... RUN_DIR=...). Relative paths are the caller's: the
# script runs make in the folder it was started from, wherever the clone is.
#
#   RETRAIN_RETRIES        retries of a run that ended with exit 4 (default 2); other exits are
#                          never retried, as the same input would fail the same way
#   RETRAIN_BACKOFF_S      seconds before the first retry, doubled before each next (default 60)
#   RETRAIN_LOG            the log file (default RUN_DIR/retrain.log)
#   RETRAIN_LOCK           the lock file (default RUN_DIR/.retrain.lock)
#   RETRAIN_LOG_MAX_BYTES  rotate the log when a run starts and it holds at least this many bytes
#                          (default 10485760, 10 MiB): retrain.log -> retrain.log.1 -> ... -> .N
#   RETRAIN_LOG_KEEP       how many rotated logs to keep (default 5)
#   crontab:  17 3 * * *  cd /srv/models && /srv/runfn/scripts/retrain.sh MANIFEST=churn.yaml RUN_DIR=runs/churn
# Cron should call this script, not `make retrain`: make says 2 for any failed recipe, so only
# the script's own exit carries the stage's code (1, 2, 3 or 4) to cron.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run_dir=${RUN_DIR:-runs/demo}
for arg in "$@"; do
  [[ $arg == RUN_DIR=* ]] && run_dir=${arg#RUN_DIR=}
done
mkdir -p "$run_dir"
LOG="${RETRAIN_LOG:-$run_dir/retrain.log}"
LOCK="${RETRAIN_LOCK:-$run_dir/.retrain.lock}"
MAX_BYTES="${RETRAIN_LOG_MAX_BYTES:-10485760}"
KEEP="${RETRAIN_LOG_KEEP:-5}"
RETRIES="${RETRAIN_RETRIES:-2}"
BACKOFF="${RETRAIN_BACKOFF_S:-60}"
if ! [[ $MAX_BYTES =~ ^[0-9]+$ && $KEEP =~ ^[0-9]+$ ]] || (( KEEP < 1 )); then
  echo "retrain: RETRAIN_LOG_MAX_BYTES and RETRAIN_LOG_KEEP must be whole numbers (KEEP at least 1)" >&2
  exit 2
fi
if ! [[ $RETRIES =~ ^[0-9]+$ && $BACKOFF =~ ^[0-9]+$ ]] || (( RETRIES > 100 )); then
  echo "retrain: RETRAIN_RETRIES (0 to 100) and RETRAIN_BACKOFF_S must be whole numbers" >&2
  exit 2
fi
exec 9>>"$LOCK"
if ! flock -n 9; then
  echo "retrain: another retrain is running (lock $LOCK is held); this one exits without doing anything" >&2
  exit 0
fi
# Under the lock, so two runs never rotate at once; whole runs stay in one file.
size=$(stat -c %s "$LOG" 2> /dev/null || echo 0)
if (( size >= MAX_BYTES && size > 0 )); then
  for ((i = KEEP - 1; i >= 1; i--)); do
    [[ -f $LOG.$i ]] && mv -f "$LOG.$i" "$LOG.$((i + 1))"
  done
  mv -f "$LOG" "$LOG.1"
fi
stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }
echo "== retrain started $(stamp) ==" >> "$LOG"
attempts=$((RETRIES + 1)) wait_s=$BACKOFF
for ((attempt = 1; ; attempt++)); do
  stage=""
  # The lock's descriptor stays in this shell alone (9>&-): a background child of the alert
  # command that inherited it would hold the lock after this run ends, and every later night
  # would find "another retrain is running".
  RUNFN_RETRY_ATTEMPT=$attempt RUNFN_RETRY_ATTEMPTS=$attempts \
    make --no-print-directory -f "$root/Makefile" run RUN_DIR="$run_dir" "$@" >> "$LOG" 2>&1 9>&-
  code=$?
  # make says 2 for any failed recipe; the stage's own code is in failed.stage (`run` clears it first).
  if (( code != 0 )) && [[ -f $run_dir/failed.stage ]]; then
    read -r stage stage_code < "$run_dir/failed.stage"
    [[ $stage_code =~ ^[0-9]+$ ]] && code=$stage_code
  fi
  (( code == 4 && attempt < attempts )) || break
  line="retrain: stage ${stage:-make} exited 4 (the environment failed) on attempt $attempt of $attempts; retrying in $wait_s s"
  echo "== $line ==" >> "$LOG"
  sleep "$wait_s"
  wait_s=$((wait_s * 2))
  echo "== retrain attempt $((attempt + 1)) of $attempts started $(stamp) ==" >> "$LOG"
done
echo "== retrain ended $(stamp): exit $code after $attempt attempt(s) ==" >> "$LOG"
if (( code != 0 )); then
  echo "retrain: a stage failed (exit $code) after $attempt attempt(s); see $LOG" >&2
fi
exit "$code"
