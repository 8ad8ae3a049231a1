#!/usr/bin/env bash
# The alert for a failed run: runs the user's command (RUNFN_ALERT_CMD, else the manifest's
# `alert:`) through `sh -c`, with the failing stage's record on stdin (empty when the stage
# failed on bad input, which writes no record) and in the environment:
#
#   RUNFN_ALERT_SUMMARY  one line: which model, which stage, which exit code and what it means,
#                        and why: the failed checks the stage named on stderr (RUN_DIR/failed.err:
#                        `leak-check: failed: entity_overlap job_ad_id: 954 of 963 ...`, up to
#                        three, then how many more), else its last message
#   RUNFN_ALERT_STAGE    the stage (manifest, validate, leaks, shards, train-seed7, gate, ...),
#                        or `make` when the run failed before any stage did
#   RUNFN_ALERT_EXIT     the stage's exit code (1 a check failed, 2 bad input, 3 preempted,
#                        4 the environment failed)
#   RUNFN_ALERT_ATTEMPTS how many times retrain.sh ran the night (it retries exit 4); 1 under
#                        plain `make run`
#   RUNFN_ALERT_RECORD   the record's file (RUN_DIR/failed.json), empty when there is none
#   RUNFN_ALERT_MANIFEST, RUNFN_ALERT_MODEL
#
# Examples:  RUNFN_ALERT_CMD='mail -s "$RUNFN_ALERT_SUMMARY" ops@example.com'
#            RUNFN_ALERT_CMD='curl -fsS -X POST --data-binary @- https://hooks.example.com/runfn'
# Usage (from the Makefile): alert.sh RUN_DIR MANIFEST MODEL BIN. Exits 0 even when the alert
# command fails (it says so): the run's own exit code is what cron sees.
set -uo pipefail
run_dir=$1 manifest=$2 model=$3 bin=$4
command="${RUNFN_ALERT_CMD:-}"
if [[ -z $command && -f $manifest ]]; then
  command=$("$bin/mf-hash" "$manifest" --print alert 2> /dev/null) || command=""
fi
stage=make code=2 record=""
if [[ -f $run_dir/failed.stage ]]; then
  read -r stage code < "$run_dir/failed.stage"
  [[ -s $run_dir/failed.json ]] && record=$run_dir/failed.json
fi
case $code in
  1) meaning="a check failed" ;;
  2) meaning="bad usage or input" ;;
  3) meaning="training was preempted" ;;
  4) meaning="the environment failed; a retry may pass" ;;
  *) meaning="an error" ;;
esac
# Why: the checks the stage says failed (tools print them even under -q), else its last message
# (a bad input's one line).
reason=""
if [[ -f $run_dir/failed.err ]]; then
  mapfile -t failures < <(grep -E '^[a-z][a-z-]*: (failed|blocked|warned): ' "$run_dir/failed.err" | tr -d '\r')
  if (( ${#failures[@]} > 0 )); then
    reason=$(printf '%s; ' "${failures[@]:0:3}")
    reason=${reason%; }
    (( ${#failures[@]} > 3 )) && reason+="; and $(( ${#failures[@]} - 3 )) more in $run_dir/failed.err"
  else
    reason=$(tail -n 1 "$run_dir/failed.err" | tr -d '\r')
  fi
fi
attempt=${RUNFN_RETRY_ATTEMPT:-1} attempts=${RUNFN_RETRY_ATTEMPTS:-1}
# retrain.sh runs this night again: only the last attempt's failure is news.
if [[ $code == 4 ]] && (( attempt < attempts )); then
  echo "alert: stage $stage exited 4 (the environment failed) on attempt $attempt of $attempts; retrain will retry, no alert sent" >&2
  exit 0
fi
summary="runfn: $model run failed at stage $stage (exit $code: $meaning)"
(( attempt > 1 )) && summary+=" on attempt $attempt of $attempts"
[[ -n $reason ]] && summary+=": $reason"
summary+="; manifest $manifest"
[[ -n $record ]] && summary+="; record $record"
echo "alert: $summary" >&2
if [[ -z $command ]]; then
  echo "alert: no alert command (set RUNFN_ALERT_CMD or alert: in the manifest)" >&2
  exit 0
fi
RUNFN_ALERT_SUMMARY=$summary RUNFN_ALERT_STAGE=$stage RUNFN_ALERT_EXIT=$code RUNFN_ALERT_ATTEMPTS=$attempt \
  RUNFN_ALERT_RECORD=$record RUNFN_ALERT_MANIFEST=$manifest RUNFN_ALERT_MODEL=$model \
  sh -c "$command" < "${record:-/dev/null}"
status=$?
if (( status != 0 )); then
  echo "alert: the alert command exited $status" >&2
fi
exit 0
