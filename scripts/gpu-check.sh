#!/usr/bin/env bash
# GPU check for train: a few hundred CUDA steps on the demo data (fp32 and bf16), throughput,
# a kill-and-resume on the GPU compared with an uninterrupted GPU run, and the NCCL process group
# (world size 1 through --nproc-per-node 1, which must give the plain CUDA run's weights, and Gloo
# over CUDA tensors). Fits in 10 minutes on one GPU. Never part of `make test`; results go to
# ${OUT:-bench}/gpu-check.json.
#
# Needs a CUDA build of libtorch 2.13.0: LIBTORCH_CUDA=<dir with lib/libtorch_cuda.so>, or the
# cache from `scripts/setup-libtorch.sh --cuda`, or an installed torch==2.13.0 Python package.
# The NCCL shim also needs the CUDA CRT and CCCL headers, which the torch wheel lacks: they are
# installed once from the nvidia-cuda-crt and nvidia-cuda-cccl packages into the cache folder.
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS="${OUT:-bench}"
WORK="${WORK:-$(mktemp -d)}"
STEPS="${STEPS:-600}"
mkdir -p "$RESULTS"
log() { printf 'gpu-check: %s\n' "$*" >&2; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2 || {
  log "no NVIDIA GPU visible (nvidia-smi failed)"; exit 2; }

find_libtorch() {
  if [[ -n "${LIBTORCH_CUDA:-}" && -f "$LIBTORCH_CUDA/lib/libtorch_cuda.so" ]]; then
    printf '%s\n' "$LIBTORCH_CUDA"; return
  fi
  local cache="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}/libtorch-2.13.0-cuda/torch"
  if [[ -f "$cache/lib/libtorch_cuda.so" ]]; then printf '%s\n' "$cache"; return; fi
  local py
  py="$(python3 -c 'import torch, os; assert torch.__version__.startswith("2.13.0"); print(os.path.dirname(torch.__file__))' 2>/dev/null || true)"
  if [[ -n "$py" && -f "$py/lib/libtorch_cuda.so" ]]; then
    [[ -f "$py/build-version" ]] || printf '2.13.0\n' > "$py/build-version" 2>/dev/null || true
    printf '%s\n' "$py"; return
  fi
  scripts/setup-libtorch.sh --cuda
}
export LIBTORCH="$(find_libtorch)"
log "libtorch: $LIBTORCH"
HEADERS="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}/cuda-headers-13.0"
if [[ ! -d "$HEADERS/nvidia/cu13/include/crt" ]]; then
  log "installing the CUDA CRT and CCCL headers into $HEADERS"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$HEADERS" \
    nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85 >&2
fi
# ProcessGroupNCCL is compiled into the shim; the binaries then need the CUDA libtorch to start.
export RUNFN_NCCL=1 RUNFN_CUDA_INCLUDE="$HEADERS/nvidia/cu13/include"
cargo build --release --quiet -p train -p evaluate -p demo-data -p mf-hash -p shardify
BIN=target/release

"$BIN/demo-data" --out "$WORK/snapshot" --rows 200000 --seed 7 -q > /dev/null
sed "s#./runs/demo/snapshot#$WORK/snapshot#" testdata/demo/manifest.yaml > "$WORK/manifest.yaml"
"$BIN/mf-hash" "$WORK/manifest.yaml" -q | "$BIN/shardify" --out "$WORK/shards" -q > "$WORK/shards.json"
python3 - "$WORK/shards.json" "$STEPS" > "$WORK/record.json" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
record["manifest"]["config"].update({"max_steps": int(sys.argv[2]), "ckpt_every": 100, "eval_every": 300})
record["manifest_hash"] = record["manifest_hash"] + "+gpu-check"
print(json.dumps(record))
PY

run() { # name, extra flags...
  local name="$1"; shift
  "$BIN/train" --out "$WORK/$name" --fresh -q "$@" < "$WORK/record.json" > "$WORK/$name.json"
}
run cpu --device cpu
run cuda --device cuda
run cuda-bf16 --device cuda --bf16
run cuda-again --device cuda
# A one-rank job: the NCCL group is created, every gradient goes through its all-reduce.
run cuda-nccl --device cuda --nproc-per-node 1
run cuda-gloo --device cuda --nproc-per-node 1 --dist-backend gloo

# Kill the GPU run after its second checkpoint, then resume it.
"$BIN/train" --out "$WORK/cuda-killed" --fresh -q --device cuda < "$WORK/record.json" > /dev/null &
pid=$!
while [[ ! -f "$WORK/cuda-killed/checkpoints/step-0000000200.json" ]] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
"$BIN/train" --out "$WORK/cuda-killed" -q --device cuda < "$WORK/record.json" > "$WORK/cuda-killed.json"
"$BIN/evaluate" --device cuda -q < "$WORK/cuda.json" > "$WORK/cuda-eval.json"

python3 - "$WORK" "$RESULTS/gpu-check.json" <<'PY'
import json, sys, subprocess
work, out = sys.argv[1], sys.argv[2]
def section(name):
    return json.load(open(f"{work}/{name}.json"))["train"]
runs = {n: section(n) for n in ["cpu", "cuda", "cuda-bf16", "cuda-again", "cuda-killed", "cuda-nccl",
                                 "cuda-gloo"]}
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
result = {
    "gpu": gpu,
    "runs": {n: {k: s.get(k) for k in ["device", "steps", "samples_per_s", "step_time_s",
             "data_wait_fraction", "ckpt_mean_s", "weights_blake3", "resumed_from"]}
             | {"val_auc": (s.get("val") or {}).get("auc")} for n, s in runs.items()},
    "cuda_rerun_bit_identical": runs["cuda"]["weights_blake3"] == runs["cuda-again"]["weights_blake3"],
    "cuda_resume_bit_identical": runs["cuda"]["weights_blake3"] == runs["cuda-killed"]["weights_blake3"],
    "nccl_world1_bit_identical": runs["cuda"]["weights_blake3"] == runs["cuda-nccl"]["weights_blake3"],
    "gloo_on_cuda_world1_bit_identical": runs["cuda"]["weights_blake3"] == runs["cuda-gloo"]["weights_blake3"],
    "distributed": {n: runs[n].get("distributed") for n in ["cuda-nccl", "cuda-gloo"]},
    "cuda_speedup_vs_cpu": runs["cuda"]["samples_per_s"] / runs["cpu"]["samples_per_s"],
    "test_auc_cuda": json.load(open(f"{work}/cuda-eval.json"))["evaluate"]["overall"]["auc"],
}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps(result, indent=2))
PY
