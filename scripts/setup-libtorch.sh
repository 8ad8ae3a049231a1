#!/usr/bin/env bash
# Installs libtorch once into a cache folder keyed by version and flavour, and prints the LIBTORCH
# path on stdout. Idempotent: a complete install is reused; a half-finished one is never used.
#
#   scripts/setup-libtorch.sh          CPU set (about 1.2 GB download): what make and CI use
#   scripts/setup-libtorch.sh --cuda   the full CUDA build (about 4.7 GB), for --device cuda
#
# libtorch comes from the `torch` wheel on PyPI, whose version must match what the `tch` crate
# expects. libtorch_cpu.so links the CUDA runtime and CUPTI even on CPU, so those two small
# packages are installed beside it, and the CUDA-only libraries are dropped to save about 700 MB.
# The CUDA flavour keeps everything, with the NVIDIA runtime packages pip brings along; build with
# LIBTORCH set to its path and `train --device cuda` loads libtorch_cuda.so from there.
#
#   RUNFN_CACHE   cache folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/runfn)
set -euo pipefail

TORCH_VERSION=2.13.0
CUDA_RUNTIME=nvidia-cuda-runtime==13.0.96
CUPTI=nvidia-cuda-cupti==13.0.85
CACHE="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}"
FLAVOUR=cpu
case "${1:-}" in
  "") ;;
  --cuda) FLAVOUR=cuda ;;
  *) echo "setup-libtorch: unknown option '$1' (expected --cuda or nothing)" >&2; exit 2 ;;
esac
DIR="$CACHE/libtorch-$TORCH_VERSION-$FLAVOUR"

log() { printf 'setup-libtorch: %s\n' "$*" >&2; }

if [[ -f "$DIR/torch/build-version" && -f "$DIR/torch/lib/libtorch_cpu.so" ]]; then
  printf '%s\n' "$DIR/torch"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  log "error: python3 is needed to fetch libtorch from the torch wheel; install Python 3 with pip (or set PYTHON)"
  exit 2
fi
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  log "error: pip is missing for $PYTHON; install it (for example the python3-pip package)"
  exit 2
fi

mkdir -p "$CACHE"
staging="$(mktemp -d "$CACHE/.libtorch-staging.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
if [[ $FLAVOUR == cpu ]]; then
  log "installing torch==$TORCH_VERSION (CPU set, about 1.2 GB download) into $DIR"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --target "$staging" \
    "torch==$TORCH_VERSION" "$CUDA_RUNTIME" "$CUPTI" >&2
  rm -f "$staging"/torch/lib/libtorch_cuda*.so "$staging"/torch/lib/libc10_cuda.so \
    "$staging"/torch/lib/libtorch_python.so "$staging"/torch/lib/libtorch_nvshmem.so \
    "$staging"/torch/lib/libcaffe2_nvrtc.so "$staging"/torch/lib/libshm.so
else
  log "installing torch==$TORCH_VERSION with its CUDA libraries (about 4.7 GB) into $DIR"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$staging" \
    "torch==$TORCH_VERSION" >&2
fi
# The wheel has no build-version file; tch's version check reads it.
printf '%s\n' "$TORCH_VERSION" > "$staging/torch/build-version"
rm -rf "$DIR"
mv "$staging" "$DIR"
trap - EXIT
log "libtorch ready"
printf '%s\n' "$DIR/torch"
