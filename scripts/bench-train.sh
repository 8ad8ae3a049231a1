#!/usr/bin/env bash
# Benchmark `train` against PyTorch training loops on the same MLP, data, batch size, steps, lr
# schedule, gradient clipping and thread count, and its checkpoints against torch.save/torch.load,
# each side by side in the same run. Writes bench/train-threadsN.json and a short summary on stderr.
#
#   scripts/bench-train.sh
#   BENCH_RUNS=1 BENCH_TRAIN_STEPS=500 BENCH_CKPT_HIDDEN=64,32 scripts/bench-train.sh   # quick
#
# Environment:
#   BENCH_RUNS           timed runs per tool (default 3); medians are reported
#   BENCH_ONLY           comma list of train,ckpt,ckpt-disk,data-wait (default all four; ckpt-disk: a
#                        ~1 GB checkpoint against torch and against dd's direct write and read of the
#                        same disk, with background checkpoints' cost, scripts/bench/ckpt_disk.py ->
#                        bench/checkpoint-disk.json; data-wait: train's data wait on BENCH_WAIT_ROWS
#                        demo rows at every thread count, scripts/bench/data_wait.py ->
#                        bench/train-data-wait.json). Names of the other bench scripts'
#                        benchmarks (mf-hash, shardify, ds-validate, leak-check, ddp) are ignored, so a
#                        list meant for them skips this script
#   BENCH_TRAIN_STEPS    optimizer steps per training run, a multiple of 10 (default 2000)
#   BENCH_TRAIN_BATCH    global batch (default 1024)
#   BENCH_TRAIN_THREADS  libtorch intra-op thread counts, each measured on every side: train
#                        --threads N and torch.set_num_threads(N) (default "1 2"); results in
#                        bench/train-threadsN.json
#   BENCH_TRAIN_WORKERS  DataLoader workers of the torch-dataloader peer (default 2)
#   BENCH_TRAIN_WARMUP   first steps left out of the steady-state figures, a multiple of 10 (default 20)
#   BENCH_TRAIN_ROWS     rows of the generated churn snapshot (default 200000, as `make run`; shared
#                        with bench-ddp.sh). Another size writes bench/train-rowsROWS-threadsN.json,
#                        so the default figures stay; above 2000000 rows the shards are made
#                        without leak-check, as the data-wait bench's (train-setup.sh says why)
#   BENCH_WAIT_ROWS      rows of the data-wait bench's snapshot (default 10000000, demo-data's most:
#                        about 8M train rows in 9 shards); its shards are made without leak-check
#                        (train-setup.sh says why)
#   BENCH_CKPT_HIDDEN    hidden widths of the checkpoint models, lists separated by spaces
#                        (default "64,32 1024,1024": the run's MLP and one big enough to time)
#   BENCH_CKPT_SAVES     checkpoints saved (and, for torch, loaded) per run (default 10)
#   BENCH_QUIET_WAIT_S   seconds one may wait in all for other processes (a build) to go quiet
#                        before the timed runs (default 600; the JSON records what remained)
#   BENCH_TRAIN_RUN_TIMEOUT_S  a run taking longer is stopped (default 180)
#   BENCH_TRAIN_RETRIES  reruns in all of runs that timed out or that other processes disturbed
#                        (default 4): with every core in use, a busy neighbour slows libtorch's
#                        thread pool many times over
#   RUNFN_CACHE          cache folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/runfn); the peers live
#                        in its bench-train-venv, made here from scripts/bench/requirements-train.txt
#                        (the full torch 2.13.0 wheel, about 4.7 GB, once; never used by `make test`)
#   LIBTORCH             libtorch for building train (default: scripts/setup-libtorch.sh, as make does)
#
# Data (bench/work, git-ignored; regenerated only when its spec changed): bench/work/train-data-ROWS,
# the `make run` pipeline with the release tools on testdata/demo/manifest.yaml pointed at its own
# snapshot: demo-data --rows ROWS --seed 7 -> mf-hash --data-digest -> ds-validate -> leak-check ->
# shardify (scripts/bench/train-setup.sh, shared with bench-ddp.sh). Its shards.json is the record
# every side trains from.
# What is timed and how: scripts/bench/train_harness.py; the PyTorch side: scripts/bench/train_peers.py.
set -euo pipefail

cd "$(dirname "$0")/.."

RUNS="${BENCH_RUNS:-3}"
ONLY_IN="${BENCH_ONLY:-train,ckpt,ckpt-disk,data-wait}"
STEPS="${BENCH_TRAIN_STEPS:-2000}"
BATCH="${BENCH_TRAIN_BATCH:-1024}"
THREADS_LIST="${BENCH_TRAIN_THREADS:-1 2}"
WORKERS="${BENCH_TRAIN_WORKERS:-2}"
WARMUP="${BENCH_TRAIN_WARMUP:-20}"
ROWS="${BENCH_TRAIN_ROWS:-200000}"
WAIT_ROWS="${BENCH_WAIT_ROWS:-10000000}"
CKPT_HIDDEN="${BENCH_CKPT_HIDDEN:-64,32 1024,1024}"
CKPT_SAVES="${BENCH_CKPT_SAVES:-10}"
RUN_TIMEOUT="${BENCH_TRAIN_RUN_TIMEOUT_S:-180}"
RETRIES="${BENCH_TRAIN_RETRIES:-4}"
WORK=bench/work

log() { printf 'bench-train: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

positive() { [[ "$2" =~ ^[0-9]+$ ]] && (( $2 >= 1 )) || die "$1 must be a positive integer (got '$2')"; }
positive BENCH_RUNS "$RUNS"
positive BENCH_TRAIN_STEPS "$STEPS"
positive BENCH_TRAIN_BATCH "$BATCH"
for t in $THREADS_LIST; do positive BENCH_TRAIN_THREADS "$t"; done
positive BENCH_TRAIN_ROWS "$ROWS"
positive BENCH_WAIT_ROWS "$WAIT_ROWS"
positive BENCH_CKPT_SAVES "$CKPT_SAVES"
positive BENCH_TRAIN_RUN_TIMEOUT_S "$RUN_TIMEOUT"
[[ "$RETRIES" =~ ^[0-9]+$ ]] || die "BENCH_TRAIN_RETRIES must be an integer >= 0"
[[ "$WORKERS" =~ ^[0-9]+$ ]] || die "BENCH_TRAIN_WORKERS must be an integer >= 0"
(( STEPS % 10 == 0 )) || die "BENCH_TRAIN_STEPS must be a multiple of 10 (train's metrics window)"
[[ "$WARMUP" =~ ^[0-9]+$ ]] && (( WARMUP % 10 == 0 && WARMUP < STEPS )) \
    || die "BENCH_TRAIN_WARMUP must be a multiple of 10 below BENCH_TRAIN_STEPS"
for h in $CKPT_HIDDEN; do
    [[ "$h" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "BENCH_CKPT_HIDDEN: '$h' is not a comma list of widths"
done
ONLY=""
for b in ${ONLY_IN//,/ }; do
    case "$b" in
        train|ckpt|ckpt-disk|data-wait) ONLY="${ONLY:+$ONLY,}$b" ;;
        mf-hash|shardify|ds-validate|leak-check|ddp|gate) ;;  # another script's benchmark
        *) die "unknown benchmark in BENCH_ONLY: $b (this script has train, ckpt, ckpt-disk, data-wait)" ;;
    esac
done
if [[ -z "$ONLY" ]]; then
    log "BENCH_ONLY=$ONLY_IN names none of train, ckpt, ckpt-disk, data-wait; nothing to do"
    exit 0
fi
command -v python3 >/dev/null || die "python3 is required"
command -v timeout >/dev/null || die "timeout (coreutils) is required"
mkdir -p "$WORK" bench

# --- build, peers, data: scripts/bench/train-setup.sh, shared with bench-ddp.sh ---------------------
source scripts/bench/train-setup.sh
train_setup_build
train_setup_venv
if (( ROWS > 2000000 )); then
  train_setup_data "$ROWS" no-leak-check
else
  train_setup_data "$ROWS"
fi
TRAIN_OUT_PREFIX=bench/train-
(( ROWS == 200000 )) || TRAIN_OUT_PREFIX="bench/train-rows$ROWS-"

# --- the benchmarks ----------------------------------------------------------------------------------
# One result file per thread count: on 2 cores one intra-op thread beats two for this model,
# so each side is measured at both and the best of each is compared.
for THREADS in $THREADS_LIST; do
  [[ ",$ONLY," == *,train,* || ",$ONLY," == *,ckpt,* ]] || break
  log "intra-op threads: $THREADS"
  export PYTHONDONTWRITEBYTECODE=1 BENCH_PY="$PY" BENCH_TRAIN=target/release/train BENCH_RECORD="$DATA/shards.json" \
      BENCH_DATA_SPEC="$SPEC" BENCH_SCRATCH="$WORK/train-scratch" BENCH_OUT="${TRAIN_OUT_PREFIX}threads$THREADS.json" \
      BENCH_RUNS_N="$RUNS" BENCH_TRAIN_STEPS_N="$STEPS" BENCH_TRAIN_BATCH_N="$BATCH" BENCH_TRAIN_THREADS_N="$THREADS" \
      BENCH_TRAIN_WORKERS_N="$WORKERS" BENCH_TRAIN_WARMUP_N="$WARMUP" BENCH_CKPT_HIDDEN_N="$CKPT_HIDDEN" \
      BENCH_CKPT_SAVES_N="$CKPT_SAVES" BENCH_ONLY_N="$ONLY" BENCH_TRAIN_RUN_TIMEOUT_N="$RUN_TIMEOUT" \
      BENCH_TRAIN_RETRIES_N="$RETRIES" \
      BENCH_LIBTORCH_VERSION="$(cat "$LIBTORCH/build-version" 2>/dev/null || echo unknown)"
  rm -rf "$BENCH_SCRATCH"
  mkdir -p "$BENCH_SCRATCH"
  "$PY" scripts/bench/train_harness.py || die "the train harness failed"
done

# --- checkpoints of about 1 GB at the disk's speed ---------------------------------------------------
if [[ ",$ONLY," == *,ckpt-disk,* ]]; then
  cargo build --release -p train --example ckpt_load >&2 || die "building examples/ckpt_load failed"
  log "checkpoint of about 1 GB: runfn vs torch vs dd (bench/checkpoint-disk.json)"
  "$PY" scripts/bench/ckpt_disk.py target/release bench/checkpoint-disk.json --runs "$RUNS" \
      || die "the checkpoint disk bench failed"
fi

# --- the data wait on millions of rows ---------------------------------------------------------------
if [[ ",$ONLY," == *,data-wait,* ]]; then
  train_setup_data "$WAIT_ROWS" no-leak-check
  log "data wait on $WAIT_ROWS demo rows at threads $THREADS_LIST (bench/train-data-wait.json)"
  rm -rf "$WORK/data-wait-scratch"
  PYTHONDONTWRITEBYTECODE=1 python3 scripts/bench/data_wait.py --bench bench/train-data-wait.json \
      --record "$DATA/shards.json" --spec "$SPEC" --train target/release/train --threads "$THREADS_LIST" \
      --runs "$RUNS" --steps "$STEPS" --batch "$BATCH" --scratch "$WORK/data-wait-scratch" \
      || die "the data-wait bench failed"
fi
