#!/usr/bin/env bash
# Benchmark `gate`'s paired test against the same computation in numpy/scipy, in the same run:
# 100k test rows, 20 slices of one column, AUC by DeLong and log loss by a 2,000-resample paired
# bootstrap, overall and per slice. Also measures gate's peak memory at twice the rows, to show it
# grows linearly. Writes bench/gate.json and prints a summary on stderr.
#
#   scripts/bench-gate.sh
#
# Environment:
#   BENCH_GATE_ROWS  test rows (default 100000)
#   BENCH_RUNS       timed runs per tool (default 5); the median is reported
#   BENCH_ONLY       comma list of benchmarks; this script runs when it names gate (or is unset)
#   BENCH_GATE_BIN   a gate binary to time instead of building target/release/gate (recorded)
#
# What is timed (wall clock; files in the page cache):
#   gate    target/release/gate -q < record.json   (the record names both per-row score files)
#   numpy   the same numbers in Python: DeLong with scipy's midranks, the paired bootstrap of the
#           log loss with numpy (2,000 resamples, vectorised in chunks), overall and per slice
set -euo pipefail

cd "$(dirname "$0")/.."

ROWS="${BENCH_GATE_ROWS:-100000}"
RUNS="${BENCH_RUNS:-5}"
OUT=bench/gate.json
WORK=bench/work/gate
log() { printf 'bench-gate: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ONLY_IN="${BENCH_ONLY:-gate}"
WANTED=""
for b in ${ONLY_IN//,/ }; do
    case "$b" in
        gate) WANTED=1 ;;
        mf-hash|shardify|ds-validate|leak-check|train|ckpt|ckpt-disk|ddp) ;;  # another script's benchmark
        *) die "unknown benchmark in BENCH_ONLY: $b (this script has gate)" ;;
    esac
done
if [[ -z "$WANTED" ]]; then
    log "BENCH_ONLY=$ONLY_IN does not name gate; nothing to do"
    exit 0
fi
[[ "$ROWS" =~ ^[0-9]+$ ]] && (( ROWS >= 1000 )) || die "BENCH_GATE_ROWS must be an integer >= 1000"
[[ "$RUNS" =~ ^[0-9]+$ ]] && (( RUNS >= 1 )) || die "BENCH_RUNS must be a positive integer"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is required (apt-get install time)"

PYTHON="$(scripts/python-env.sh)"
LIBTORCH="${LIBTORCH:-$(scripts/setup-libtorch.sh)}"
export LIBTORCH
if [[ -n "${BENCH_GATE_BIN:-}" ]]; then
    GATE="$BENCH_GATE_BIN"
else
    log "building gate (release)"
    cargo build --release --quiet -p gate
    GATE=target/release/gate
fi
mkdir -p "$WORK"

# Two models' scores on the same rows, written as evaluate writes them.
make_data() {
    local rows=$1 dir=$2
    mkdir -p "$dir"
    "$PYTHON" - "$rows" "$dir" <<'PY'
import json, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
rows, out = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(7)
y = rng.random(rows) < 0.25
signal = rng.normal(size=rows)
base = 1 / (1 + np.exp(-(1.2 * y - 0.6 + 0.9 * signal)))
cand = 1 / (1 + np.exp(-(1.25 * y - 0.6 + 0.9 * signal + 0.4 * rng.normal(size=rows))))
region = np.array([f"r{i:02d}" for i in range(20)])[rng.integers(0, 20, rows)]
for name, s in [("candidate", cand), ("baseline", base)]:
    table = pa.table({"row": pa.array(np.arange(rows, dtype=np.uint64)), "label": pa.array(y),
                      "score": pa.array(s), "slice:region": pa.array(region)})
    meta = {b"runfn.format": b"runfn-row-scores-v1", b"runfn.split": b"test",
            b"runfn.rows_blake3": b"0" * 64, b"runfn.key": b"row"}
    pq.write_table(table.replace_schema_metadata(meta), f"{out}/{name}.parquet", compression="zstd")
PY
    local cb bb
    cb=$(b3 "$dir/candidate.parquet"); bb=$(b3 "$dir/baseline.parquet")
    cat > "$dir/record.json" <<JSON
{"manifest": {"seed": 7, "eval": {"slices": ["region"], "resamples": 2000,
  "gates": {"auc_min_delta": -0.002, "logloss_min_delta": -0.01, "max_slice_drop": 0.01}}},
 "evaluate": {"overall": {"rows": $rows}, "rows_blake3": "$(printf '0%.0s' {1..64})",
              "row_scores": {"path": "$dir/candidate.parquet", "blake3": "$cb"}},
 "baseline": {"overall": {"rows": $rows}, "rows_blake3": "$(printf '0%.0s' {1..64})",
              "row_scores": {"path": "$dir/baseline.parquet", "blake3": "$bb"}}}
JSON
}

# blake3 of a file: Python's hashlib has none, so the `blake3` package, installed into the venv
# once.
b3() {
    "$PYTHON" -c 'import sys; from blake3 import blake3; print(blake3(open(sys.argv[1],"rb").read()).hexdigest())' "$1"
}
"$PYTHON" -c 'import blake3' 2>/dev/null || "$PYTHON" -m pip install --quiet --disable-pip-version-check blake3==1.0.8 >&2

NUMPY_PEER='
import sys, numpy as np, pyarrow.parquet as pq
from scipy.stats import rankdata, norm
d = sys.argv[1]
c = pq.read_table(f"{d}/candidate.parquet").to_pydict(); b = pq.read_table(f"{d}/baseline.parquet").to_pydict()
y = np.array(c["label"]); a = np.array(c["score"]); bb = np.array(b["score"]); region = np.array(c["slice:region"])
def delong(a, b, y):
    m, n = y.sum(), (~y).sum()
    out = []
    for s in (a, b):
        tz, tx, ty = rankdata(s), rankdata(s[y]), rankdata(s[~y])
        out.append(((tz[y] - tx) / n, 1 - (tz[~y] - ty) / m))
    d10, d01 = out[0][0] - out[1][0], out[0][1] - out[1][1]
    return out[0][0].mean() - out[1][0].mean(), d10.var(ddof=1) / m + d01.var(ddof=1) / n
def boot(a, b, y, k=2000):
    clip = lambda p: np.clip(p, 1e-15, 1 - 1e-15)
    d = -(y * np.log(clip(a)) + (1 - y) * np.log(1 - clip(a))) + (y * np.log(clip(b)) + (1 - y) * np.log(1 - clip(b)))
    rng = np.random.default_rng(1); means = []
    for chunk in range(0, k, 50):
        means.append(d[rng.integers(0, len(d), size=(min(50, k - chunk), len(d)))].mean(1))
    return d.mean(), np.concatenate(means).std(ddof=1)
delong(a, bb, y); boot(a, bb, y)
for r in np.unique(region):
    mask = region == r
    delong(a[mask], bb[mask], y[mask]); boot(a[mask], bb[mask], y[mask])
'

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# One timed run: wall seconds and peak RSS (KiB) of a command.
timed() { /usr/bin/time -f '%e %M' -o "$WORK/time.txt" "$@" > /dev/null 2> "$WORK/stderr.txt" || {
    code=$?; [[ $code == 1 && "$1" == "$GATE" ]] || { cat "$WORK/stderr.txt" >&2; die "$* exited $code"; }; }
    tail -n 1 "$WORK/time.txt"; }

DATA="$WORK/rows-$ROWS"
DOUBLE="$WORK/rows-$((ROWS * 2))"
[[ -f "$DATA/record.json" ]] || { log "generating $ROWS rows"; make_data "$ROWS" "$DATA"; }
[[ -f "$DOUBLE/record.json" ]] || { log "generating $((ROWS * 2)) rows"; make_data "$((ROWS * 2))" "$DOUBLE"; }

gate_times=(); gate_rss=(); numpy_times=()
for ((i = 0; i < RUNS; i++)); do
    read -r t m < <(timed "$GATE" -q --record "$DATA/record.json")
    gate_times+=("$t"); gate_rss+=("$m")
    read -r t _ < <(timed "$PYTHON" -c "$NUMPY_PEER" "$DATA")
    numpy_times+=("$t")
done
read -r _ double_rss < <(timed "$GATE" -q --record "$DOUBLE/record.json")
gate_s=$(printf '%s\n' "${gate_times[@]}" | median)
numpy_s=$(printf '%s\n' "${numpy_times[@]}" | median)
rss_kib=$(printf '%s\n' "${gate_rss[@]}" | median)
# The decision itself, to show the run compared something.
"$GATE" -q --record "$DATA/record.json" > "$WORK/gated.json" || true

GATE_USED="${GATE#"$PWD"/}" "$PYTHON" - "$OUT" "$ROWS" "$RUNS" "$gate_s" "$numpy_s" "$rss_kib" "$double_rss" "$WORK/gated.json" \
    "${gate_times[*]}" "${numpy_times[*]}" <<'PY'
import json, os, sys, datetime, platform, subprocess
out, rows, runs, gate_s, numpy_s, rss, rss2, gated, gate_all, numpy_all = sys.argv[1:]
gate = json.load(open(gated))["gate"]
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
result = {
    "benchmark": "gate: paired test, DeLong + 2,000-resample paired bootstrap, overall and 20 slices",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown",
    "machine": {"cpus": os.cpu_count(), "model": model},
    "data": {"rows": int(rows), "slices": 20, "resamples": 2000, "metrics": ["auc", "logloss"]},
    "runs": int(runs),
    "results": {
        "gate": {"median_s": float(gate_s), "all_s": [float(x) for x in gate_all.split()],
                 "peak_rss_mib": round(int(rss) / 1024, 1),
                 "peak_rss_mib_at_twice_the_rows": round(int(rss2) / 1024, 1),
                 "binary": os.environ.get("GATE_USED", ""),
                 "checks": len(gate["checks"]), "passed": gate["passed"]},
        "numpy": {"median_s": float(numpy_s), "all_s": [float(x) for x in numpy_all.split()]},
    },
    "ratio_vs_numpy": round(float(numpy_s) / float(gate_s), 2),
    "target": "gate under 2 s on 2 cores; memory linear in rows",
    "target_met": float(gate_s) < 2.0,
}
json.dump(result, open(out, "w"), indent=2)
open(out, "a").write("\n")
print(f"bench-gate: gate {gate_s} s ({rss} KiB; {rss2} KiB at twice the rows), numpy {numpy_s} s: {result['ratio_vs_numpy']}x", file=sys.stderr)
PY
