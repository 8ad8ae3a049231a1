#!/bin/bash
# A night of the pipeline on a Slurm cluster: each data stage that runs in parts as a job array
# with a dependent merge (--dependency=afterok; leak-check and shardify with an array of
# reducers between them,
# evaluate once per seed), each seed's training as one job of TASKS ranks
# started by srun (Gloo), then evaluate, the noise floor, the gate and register, each a job that
# starts when the one before it passed. Run it from a folder every node sees (paths in the
# manifest resolve against it); it waits for the night and exits with its outcome. `make
# cluster-run` runs it with the Makefile's settings.
#
#   scripts/slurm-night.sh [--local] MANIFEST
#
# Settings, from the environment (defaults in brackets): RUN_DIR, the night's records [.];
# BIN, the folder of the tools [the PATH's]; PARTS, the parts of each array [4]; TASKS, the
# ranks of a training [2]; TRAIN_NODES, the nodes they are spread over [1]; SEEDS, the
# trainings ["7 8"], the first the candidate; MODEL [churn]; RUNFN_REGISTRY [registry];
# SBATCH_ARGS, more sbatch options (a partition, an account), split on spaces. --local runs
# the same stages in this shell instead, one after another (the parts in turn, a training as
# `train --nproc-per-node TASKS`): what one machine writes, for comparison.
#
# The records, under RUN_DIR: manifest.json, validate.json (profile.json beside it), leaks.json,
# shards.json, train-seedS.json, eval-seedS.json, noise.json, gate.json, register.json; the
# parts' partials under RUN_DIR/parts/, the jobs' logs under RUN_DIR/logs/. The night is a first
# night (the gate has no baseline). Exit 0 when the night registered its model, else the exit of
# the first stage that failed (1 a check failed, 2 bad input, 4 the environment) with --local, 1
# on Slurm (the failed job's log, under RUN_DIR/logs/, says which and why).
set -euo pipefail

local_run=false
if [[ ${1:-} == --local ]]; then
  local_run=true
  shift
fi
if [[ $# -ne 1 ]]; then
  echo "usage: scripts/slurm-night.sh [--local] MANIFEST" >&2
  exit 2
fi
MANIFEST=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stage=$here/runfn-stage
export RUNFN_STAGE=$stage
: "${BIN:=$(dirname "$(command -v mf-hash || echo ./mf-hash)")}"
: "${RUN_DIR:=.}" "${PARTS:=4}" "${TASKS:=2}" "${TRAIN_NODES:=1}" "${SEEDS:=7 8}" "${MODEL:=churn}"
: "${RUNFN_REGISTRY:=registry}"
export BIN RUNFN_REGISTRY
for number in "$PARTS" "$TASKS" "$TRAIN_NODES"; do
  if ! [[ $number =~ ^[1-9][0-9]*$ ]]; then
    echo "slurm-night: PARTS, TASKS and TRAIN_NODES are whole numbers from 1, not \`$number\`" >&2
    exit 2
  fi
done
read -r -a seeds <<< "$SEEDS"
for seed in "${seeds[@]}"; do
  if ! [[ $seed =~ ^[0-9]+$ ]]; then
    echo "slurm-night: SEEDS holds \`$seed\`, not a seed (a whole number)" >&2
    exit 2
  fi
done
if [[ ! -x $BIN/mf-hash ]]; then
  echo "slurm-night: no mf-hash in BIN=$BIN: set BIN to the tools' folder" >&2
  exit 2
fi
snapshot=$("$BIN/mf-hash" "$MANIFEST" --print snapshot)
r=$RUN_DIR
mkdir -p "$r/logs" "$r/parts"
rm -rf "$r/parts/mf-hash" "$r/parts/ds-validate" "$r/parts/leak-check" "$r/parts/shardify" "$r"/parts/evaluate-seed*

# submit NAME AFTER ARRAY TASKS -- STAGE ARGS: a job named NAME, started when the job AFTER
# (or none: -) passed, ARRAY tasks (0: not an array) of TASKS tasks each (over TRAIN_NODES
# nodes when TASKS > 1); prints its id.
read -r -a extra <<< "${SBATCH_ARGS:-}"
submit() {
  local name=$1 after=$2 array=$3 tasks=$4
  shift 5
  if $local_run; then
    if [[ $array -gt 0 ]]; then
      for ((k = 0; k < array; k++)); do
        PART_INDEX=$k "$@" 2>> "$r/logs/$name-$k.err"
      done
    else
      "$@" 2>> "$r/logs/$name.err"
    fi
    echo local
    return
  fi
  local options=(--parsable --job-name "runfn-$name" --ntasks "$tasks" --chdir "$PWD"
    --output "$r/logs/$name-%A-%a.out" --error "$r/logs/$name-%A-%a.err" "${extra[@]}")
  if [[ $array -gt 0 ]]; then options+=(--array "0-$((array - 1))"); fi
  if [[ $tasks -gt 1 ]]; then options+=(--nodes "$TRAIN_NODES"); fi
  if [[ $after != - ]]; then options+=(--dependency "afterok:$after" --kill-on-invalid-dep=yes); fi
  sbatch "${options[@]}" "$@" | cut -d';' -f1
}

digest=$(submit digest-parts - "$PARTS" 1 -- "$stage" - - "$BIN/mf-hash" "$MANIFEST" \
  --data-digest "$snapshot" --part "%K/$PARTS" --parts "$r/parts/mf-hash" -q)
hashed=$(submit digest "$digest" 0 1 -- "$stage" "$r/manifest.json" - "$BIN/mf-hash" \
  "$MANIFEST" \
  --data-digest "$snapshot" --parts "$r/parts/mf-hash" -q)
profiled=$(submit validate-parts "$hashed" "$PARTS" 1 -- "$stage" - "$r/manifest.json" \
  "$BIN/ds-validate" --part "%K/$PARTS" --parts "$r/parts/ds-validate" -q)
validated=$(submit validate "$profiled" 0 1 -- "$stage" "$r/validate.json" "$r/manifest.json" \
  "$BIN/ds-validate" --parts "$r/parts/ds-validate" --profile-out "$r/profile.json" \
  --previous-model "$MODEL@prod" --registry "$RUNFN_REGISTRY" -q)
# leak-check: its parts, an array of reducers (each a range of the keys' hashes), the merge.
scanned=$(submit leak-parts "$validated" "$PARTS" 1 -- "$stage" - "$r/validate.json" \
  "$BIN/leak-check" --part "%K/$PARTS" --parts "$r/parts/leak-check" -q)
grouped=$(submit leak-reducers "$scanned" "$PARTS" 1 -- "$stage" - "$r/validate.json" \
  "$BIN/leak-check" --reduce "%K/$PARTS" --parts "$r/parts/leak-check" -q)
leaks=$(submit leaks "$grouped" 0 1 -- "$stage" "$r/leaks.json" "$r/validate.json" \
  "$BIN/leak-check" --parts "$r/parts/leak-check" -q)
# shardify shuffles: its parts, an array of reducers (each a run of the output shards), the merge.
split_up=$(submit shard-parts "$leaks" "$PARTS" 1 -- "$stage" - "$r/leaks.json" "$BIN/shardify" \
  --part "%K/$PARTS" --parts "$r/parts/shardify" -q)
reduced=$(submit shard-reducers "$split_up" "$PARTS" 1 -- "$stage" - "$r/leaks.json" \
  "$BIN/shardify" --reduce "%K/$PARTS" --parts "$r/parts/shardify" --out "$r/shards" -q)
shards=$(submit shards "$reduced" 0 1 -- "$stage" "$r/shards.json" "$r/leaks.json" "$BIN/shardify" \
  --parts "$r/parts/shardify" --out "$r/shards" -q)
evaluated=()
for seed in "${seeds[@]}"; do
  if $local_run; then
    trained=$(submit "train-seed$seed" - 0 1 -- "$stage" "$r/train-seed$seed.json" \
      "$r/shards.json" \
      "$BIN/train" --nproc-per-node "$TASKS" --seed "$seed" --out "$r/train/seed$seed" \
      --threads 1 -q)
  else
    trained=$(submit "train-seed$seed" "$shards" 0 "$TASKS" -- "$here/slurm/train.sh" \
      "$r/shards.json" "$seed" "$r/train/seed$seed" "$r/train-seed$seed.json")
  fi
  scored=$(submit "eval-parts-seed$seed" "$trained" "$PARTS" 1 -- "$stage" - \
    "$r/train-seed$seed.json" "$BIN/evaluate" --part "%K/$PARTS" \
    --parts "$r/parts/evaluate-seed$seed" -q)
  evaluated+=("$(submit "eval-seed$seed" "$scored" 0 1 -- "$stage" "$r/eval-seed$seed.json" \
    "$r/train-seed$seed.json" "$BIN/evaluate" --parts "$r/parts/evaluate-seed$seed" \
    --bootstrap 200 -q)")
done
eval_records=()
for seed in "${seeds[@]}"; do eval_records+=("$r/eval-seed$seed.json"); done
all_evaluated=$(IFS=:; echo "${evaluated[*]}")
noise=$(submit noise "$all_evaluated" 0 1 -- "$stage" "$r/noise.json" - "$BIN/noise-floor" \
  --metric evaluate.overall.auc "${eval_records[@]}" -q)
gated=$(submit gate "$noise" 0 1 -- "$stage" "$r/gate.json" "$r/noise.json" "$BIN/gate" \
  --no-baseline -q)
registered=$(submit register "$gated" 0 1 -- "$stage" "$r/register.json" "$r/gate.json" \
  "$BIN/register" \
  --name "$MODEL" --promote prod --artifacts "$r" -q)

if $local_run; then
  echo "slurm-night: done on this machine; records in $r" >&2
  exit 0
fi
echo "slurm-night: submitted; waiting for job $registered (register)" >&2
# The last job ends when the night does: passed, or cancelled because a stage before it failed.
while squeue --noheader --jobs "$registered" 2> /dev/null | grep -q .; do sleep 1; done
if [[ -f "$r/register.json" ]]; then
  echo "slurm-night: done; records in $r" >&2
  exit 0
fi
echo "slurm-night: the night stopped; the jobs' messages are under $r/logs/" >&2
grep -h . "$r"/logs/*.err >&2 || true
exit 1
