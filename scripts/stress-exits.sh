#!/usr/bin/env bash
# Every way `train` can end, repeated: the exit statuses counted, and a failure when any run ends
# by a signal or with a status the exit-code table does not have. Not part of `make test` (it
# takes about 20 minutes on 2 cores); run it after touching the training loop, the watchdog, the
# launcher or the signal handling.
#
#   scripts/stress-exits.sh                         # 200 / 50 / 50 / 50 / 20 runs
#   STRESS_STALL=20 STRESS_DEAD=5 STRESS_HUNG=5 scripts/stress-exits.sh   # quick
#
# Cases (each run's status must be the one named; anything else is counted and fails the script):
#   stall      manifest.config.stall_timeout_s far below the first batch's time: the loop sees the
#              stall and stops itself; exit 1 with the record            (STRESS_STALL, 200)
#   stuck      the loop stops at step 5 for good (RUNFN_TEST_HANG_AT_STEP): the watchdog writes
#              the record and ends the process from its thread; exit 1  (STRESS_STUCK, 50)
#   dead-rank  train --nproc-per-node 2, rank 1 SIGKILLed after the first checkpoint: the launcher
#              exits 1 and rank 0 exits 1 (not by a signal)             (STRESS_DEAD, 50)
#   hung-rank  the same, rank 1 SIGSTOPped: rank 0 exits 1 within --dist-timeout, the launcher 1
#              (the stopped rank is SIGKILLed by the launcher: that one is expected)
#                                                                       (STRESS_HUNG, 50)
#   sigterm    SIGTERM to train --nproc-per-node 2 at a random moment: exit 3, every rank 3
#                                                                       (STRESS_TERM, 20)
# Writes bench/stress-exits.json: per case, the count of each status seen.
set -euo pipefail
cd "$(dirname "$0")/.."

STALL=${STRESS_STALL:-200}
STUCK=${STRESS_STUCK:-50}
DEAD=${STRESS_DEAD:-50}
HUNG=${STRESS_HUNG:-50}
TERM_RUNS=${STRESS_TERM:-20}
export LIBTORCH=${LIBTORCH:-$(scripts/setup-libtorch.sh)}
cargo build --workspace --bins --quiet
BIN=target/debug
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A small snapshot and its shards: the same data the integration tests train on.
"$BIN"/demo-data --out "$work/snapshot" --rows 12000 --parts 2 --seed 7 -q > /dev/null
"$BIN"/mf-hash testdata/train/manifest.yaml -q \
  | "$BIN"/shardify --in "$work/snapshot" --out "$work/shards" --shard-rows 2500 -q > "$work/shards.json"
with_config() { # KEY=VALUE... -> the record with manifest.config edited
  python3 - "$work/shards.json" "$@" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
for pair in sys.argv[2:]:
    key, value = pair.split("=", 1)
    record["manifest"]["config"][key] = json.loads(value)
print(json.dumps(record))
PY
}
with_config stall_timeout_s=0.001 > "$work/stall.json"
with_config stall_timeout_s=0.5 > "$work/stuck.json"
with_config max_steps=5000 ckpt_every=50 > "$work/long.json"

declare -A counts
bad=0
note() { # CASE STATUS EXPECTED
  local key="$1:$2"
  counts[$key]=$(( ${counts[$key]:-0} + 1 ))
  if [[ "$2" != "$3" ]]; then
    bad=$((bad + 1))
    echo "stress: $1 run ended with status $2, expected $3 (log: $work/last-$1.err)" >&2
    cp "$work/last-${1%-rank*}.err" "bench/stress-$1-failure.err" 2>/dev/null || true
  fi
}

for ((i = 0; i < STALL; i++)); do
  status=0
  "$BIN"/train --out "$work/stall/$i" -q --threads 1 < "$work/stall.json" \
    > "$work/stall.out" 2> "$work/last-stall.err" || status=$?
  # The record must be on stdout, with the failed section.
  grep -q '"reason":"stalled' "$work/stall.out" || status="$status-no-record"
  note stall "$status" 1
  rm -rf "$work/stall/$i"
done

for ((i = 0; i < STUCK; i++)); do
  status=0
  RUNFN_TEST_HANG_AT_STEP=5 "$BIN"/train --out "$work/stuck/$i" -q --threads 1 < "$work/stuck.json" \
    > "$work/stuck.out" 2> "$work/last-stuck.err" || status=$?
  grep -q '"reason":"stalled: the step counter stayed at 5' "$work/stuck.out" || status="$status-no-record"
  note stuck "$status" 1
  rm -rf "$work/stuck/$i"
done

# The pid of rank R of the launcher LAUNCHER.
rank_pid() {
  local pid
  for pid in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$2"; then
      echo "$pid"
      return
    fi
  done
}

wait_for_file() { # PATH PID: until PATH exists, while PID runs (at most 120 s)
  local deadline=$((SECONDS + 120))
  while [[ ! -e "$1" ]] && kill -0 "$2" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.01; done
}

# The status each rank ended with, from the launcher's closing line.
rank_status() { # STDERR-FILE RANK
  grep -o "rank $2 \(exited with status [0-9]*\|was killed by signal [0-9]*\)" "$1" | tail -n 1 \
    | sed -e 's/.*status /status-/' -e 's/.*signal /signal-/'
}

ranks_case() { # NAME COUNT SIGNAL-FOR-RANK-1 TIMEOUT
  local name=$1 count=$2 how=$3 timeout=$4 i status r1 out
  for ((i = 0; i < count; i++)); do
    out="$work/$name/$i"
    status=0
    "$BIN"/train --out "$out" --threads 1 --nproc-per-node 2 --dist-timeout "$timeout" \
      < "$work/long.json" > "$work/$name.out" 2> "$work/last-$name.err" &
    PID=$!
    wait_for_file "$out/checkpoints/step-0000000050.json" "$PID"
    r1=$(rank_pid "$PID" 1)
    [[ -n "$r1" ]] && kill "-$how" "$r1" 2>/dev/null || true
    wait "$PID" || status=$?
    note "$name" "$status" 1
    note "$name-rank0" "$(rank_status "$work/last-$name.err" 0)" status-1
    rm -rf "$out"
  done
}
ranks_case dead-rank "$DEAD" KILL 10
ranks_case hung-rank "$HUNG" STOP 3

for ((i = 0; i < TERM_RUNS; i++)); do
  out="$work/term/$i"
  status=0
  "$BIN"/train --out "$out" --threads 1 --nproc-per-node 2 --dist-timeout 10 \
    < "$work/long.json" > "$work/term.out" 2> "$work/last-term.err" &
  PID=$!
  wait_for_file "$out/checkpoints/step-0000000050.json" "$PID"
  sleep "0.$((RANDOM % 10))"
  # A run that already ended is counted with the status it ended with.
  kill -TERM "$PID" 2>/dev/null || true
  wait "$PID" || status=$?
  note term "$status" 3
  for r in 0 1; do note "term-rank$r" "$(rank_status "$work/last-term.err" $r)" status-3; done
  rm -rf "$out"
done

mkdir -p bench
{
  printf '{"machine": "%s, %s cores", "cases": {' "$(uname -m)" "$(nproc)"
  first=1
  for key in $(printf '%s\n' "${!counts[@]}" | sort); do
    [[ $first == 1 ]] || printf ', '
    first=0
    printf '"%s": %s' "$key" "${counts[$key]}"
  done
  printf '}, "unexpected": %s}\n' "$bad"
} > bench/stress-exits.json
cat bench/stress-exits.json
if (( bad > 0 )); then
  echo "stress: $bad run(s) ended otherwise than expected" >&2
  exit 1
fi
echo "stress: every run ended with its expected status" >&2
