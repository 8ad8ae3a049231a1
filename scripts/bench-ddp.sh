#!/usr/bin/env bash
# Benchmark 2-rank data-parallel training on the CPU: `train --nproc-per-node 2` against PyTorch
# DistributedDataParallel over Gloo (started by torchrun), on the same MLP, data, global batch,
# steps, lr schedule, gradient clipping and one intra-op thread per rank, side by side in the same
# run. Reports samples/s and the share of a step spent in the gradient all-reduce on each side.
# Writes bench/ddp.json and a short summary on stderr.
#
#   scripts/bench-ddp.sh
#   BENCH_RUNS=1 BENCH_DDP_STEPS=200 scripts/bench-ddp.sh   # quick
#
# Environment:
#   BENCH_RUNS               timed runs per side (default 3); medians are reported
#   BENCH_ONLY               comma list of benchmarks; this script runs when it names ddp (or is
#                            unset). Names of the other bench scripts' benchmarks (mf-hash, shardify,
#                            ds-validate, leak-check, train, ckpt) are ignored
#   BENCH_DDP_STEPS          optimizer steps per run, a multiple of 10 (default 1000)
#   BENCH_DDP_BATCH          global batch, split evenly over the 2 ranks (default 1024)
#   BENCH_DDP_WARMUP         first steps left out of the steady-state figures, a multiple of 10
#                            (default 50)
#   BENCH_DDP_NOSYNC_STEPS   extra PyTorch steps under ddp.no_sync() after the loop, timed for the
#                            all-reduce cost (default 200; 0: not measured)
#   BENCH_TRAIN_ROWS         rows of the generated churn snapshot (default 200000; shared with
#                            bench-train.sh)
#   BENCH_QUIET_WAIT_S       seconds one may wait in all for other processes (a build) to go quiet
#                            before the timed runs (default 600; the JSON records what remained)
#   BENCH_DDP_RUN_TIMEOUT_S  a run taking longer is stopped (default 180)
#   BENCH_DDP_RETRIES        reruns in all of runs that timed out or that other processes disturbed
#                            (default 4)
#   RUNFN_CACHE              cache folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/runfn); PyTorch
#                            and torchrun come from its bench-train-venv, as for bench-train.sh
#   LIBTORCH                 libtorch for building train (default: scripts/setup-libtorch.sh)
#
# Build, venv and data: scripts/bench/train-setup.sh, shared with bench-train.sh; the record every
# side trains from is bench/work/train-data-ROWS/shards.json (git-ignored, regenerated only when
# its spec changed). What is timed and how: scripts/bench/ddp_harness.py; the PyTorch side:
# scripts/bench/ddp_peer.py (the model and preprocessing from scripts/bench/train_peers.py).
set -euo pipefail

cd "$(dirname "$0")/.."

RUNS="${BENCH_RUNS:-3}"
ONLY_IN="${BENCH_ONLY:-ddp}"
STEPS="${BENCH_DDP_STEPS:-1000}"
BATCH="${BENCH_DDP_BATCH:-1024}"
WARMUP="${BENCH_DDP_WARMUP:-50}"
NOSYNC="${BENCH_DDP_NOSYNC_STEPS:-200}"
ROWS="${BENCH_TRAIN_ROWS:-200000}"
RUN_TIMEOUT="${BENCH_DDP_RUN_TIMEOUT_S:-180}"
RETRIES="${BENCH_DDP_RETRIES:-4}"
WORK=bench/work

log() { printf 'bench-ddp: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

WANTED=""
for b in ${ONLY_IN//,/ }; do
    case "$b" in
        ddp) WANTED=1 ;;
        mf-hash|shardify|ds-validate|leak-check|train|ckpt|ckpt-disk|gate) ;;  # another script's benchmark
        *) die "unknown benchmark in BENCH_ONLY: $b (this script has ddp)" ;;
    esac
done
if [[ -z "$WANTED" ]]; then
    log "BENCH_ONLY=$ONLY_IN does not name ddp; nothing to do"
    exit 0
fi

positive() { [[ "$2" =~ ^[0-9]+$ ]] && (( $2 >= 1 )) || die "$1 must be a positive integer (got '$2')"; }
positive BENCH_RUNS "$RUNS"
positive BENCH_DDP_STEPS "$STEPS"
positive BENCH_DDP_BATCH "$BATCH"
positive BENCH_TRAIN_ROWS "$ROWS"
positive BENCH_DDP_RUN_TIMEOUT_S "$RUN_TIMEOUT"
(( BATCH % 2 == 0 )) || die "BENCH_DDP_BATCH must be even (it is split over 2 ranks)"
(( STEPS % 10 == 0 )) || die "BENCH_DDP_STEPS must be a multiple of 10 (train's metrics window)"
[[ "$WARMUP" =~ ^[0-9]+$ ]] && (( WARMUP % 10 == 0 && WARMUP < STEPS )) \
    || die "BENCH_DDP_WARMUP must be a multiple of 10 below BENCH_DDP_STEPS"
[[ "$NOSYNC" =~ ^[0-9]+$ ]] || die "BENCH_DDP_NOSYNC_STEPS must be an integer >= 0"
[[ "$RETRIES" =~ ^[0-9]+$ ]] || die "BENCH_DDP_RETRIES must be an integer >= 0"
command -v python3 >/dev/null || die "python3 is required"
command -v timeout >/dev/null || die "timeout (coreutils) is required"
mkdir -p "$WORK" bench

# --- build, peers, data: scripts/bench/train-setup.sh, shared with bench-train.sh ---------------------
source scripts/bench/train-setup.sh
train_setup_build
train_setup_venv
train_setup_data "$ROWS"
TORCHRUN="$(dirname "$PY")/torchrun"
[[ -x "$TORCHRUN" ]] || die "$TORCHRUN is missing (it comes with torch)"

# --- the benchmark -----------------------------------------------------------------------------------
export PYTHONDONTWRITEBYTECODE=1 BENCH_PY="$PY" BENCH_TORCHRUN="$TORCHRUN" BENCH_TRAIN=target/release/train \
    BENCH_RECORD="$DATA/shards.json" BENCH_DATA_SPEC="$SPEC" BENCH_SCRATCH="$WORK/ddp-scratch" \
    BENCH_OUT=bench/ddp.json BENCH_RUNS_N="$RUNS" BENCH_DDP_STEPS_N="$STEPS" BENCH_DDP_BATCH_N="$BATCH" \
    BENCH_DDP_WARMUP_N="$WARMUP" BENCH_DDP_NOSYNC_N="$NOSYNC" BENCH_DDP_RUN_TIMEOUT_N="$RUN_TIMEOUT" \
    BENCH_DDP_RETRIES_N="$RETRIES" \
    BENCH_LIBTORCH_VERSION="$(cat "$LIBTORCH/build-version" 2>/dev/null || echo unknown)"
rm -rf "$BENCH_SCRATCH"
mkdir -p "$BENCH_SCRATCH"
"$PY" scripts/bench/ddp_harness.py || die "the ddp harness failed"
