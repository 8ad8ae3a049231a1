#!/usr/bin/env bash
# Benchmark `predict` against PyTorch inference of the same weights on the same rows, side by side
# in one run: a CSV snapshot of N rows scored into zstd Parquet (row, key, score) by
# `predict --threads T` and by scripts/bench/predict_peer.py (pyarrow's streaming CSV reader, the
# preprocessing vectorized, torch under inference_mode, torch.set_num_threads(T)). Whole processes
# are timed (what a user runs); peak memory is each process's maximum resident set. Writes
# bench/predict.json and a summary on stderr.
#
#   scripts/bench-predict.sh
#   BENCH_RUNS=1 BENCH_PREDICT_ROWS="200000 1000000" scripts/bench-predict.sh   # quick
#
# Environment:
#   BENCH_RUNS             timed runs per side and size (default 3); medians are reported
#   BENCH_ONLY             comma list of benchmarks to run; this script runs when it names predict
#                          (default: predict)
#   BENCH_PREDICT_ROWS     snapshot sizes, rows (default "1000000 10000000"): memory must stay flat
#   BENCH_PREDICT_THREADS  threads of both sides (default 1)
#   BENCH_TRAIN_ROWS       rows the model is trained on (default 200000; the train bench's data)
#   RUNFN_CACHE            as scripts/bench-train.sh: the peer runs in its bench-train-venv
#
# Data (bench/work, git-ignored): the model is `train` on the train bench's data (the demo
# manifest's config); each snapshot is demo-data --rows N --seed 11 (other customers than the
# training rows), CSV in one part per million rows.
set -euo pipefail

cd "$(dirname "$0")/.."

RUNS="${BENCH_RUNS:-3}"
ONLY="${BENCH_ONLY:-predict}"
SIZES="${BENCH_PREDICT_ROWS:-1000000 10000000}"
THREADS="${BENCH_PREDICT_THREADS:-1}"
TRAIN_ROWS="${BENCH_TRAIN_ROWS:-200000}"
WORK=bench/work

log() { printf 'bench-predict: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

case ",$ONLY," in
  *,predict,*) ;;
  *) log "BENCH_ONLY=$ONLY does not name predict: skipped"; exit 0 ;;
esac

# shellcheck source=scripts/bench/train-setup.sh
source scripts/bench/train-setup.sh
train_setup_build
cargo build --release --bins -p predict >&2 || die "cargo build --release -p predict failed"
train_setup_venv
train_setup_data "$TRAIN_ROWS"

model_record="$WORK/predict-model-$TRAIN_ROWS.json"
if [[ ! -s "$model_record" ]]; then
  log "training the model on $DATA ($TRAIN_ROWS rows)"
  rm -rf "$WORK/predict-model-$TRAIN_ROWS"
  target/release/train --out "$WORK/predict-model-$TRAIN_ROWS" --threads 2 -q < "$DATA/shards.json" \
    > "$model_record.tmp" || die "train failed"
  mv "$model_record.tmp" "$model_record"
fi
MODEL="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train"]["weights"])' "$model_record")"

results="$WORK/predict-results.jsonl"
: > "$results"
for rows in $SIZES; do
  snap="$WORK/predict-rows-$rows"
  if [[ ! -f "$snap/.complete" ]]; then
    log "generating $snap"
    rm -rf "$snap"
    parts=$(( rows / 1000000 )); (( parts >= 1 )) || parts=1
    target/release/demo-data --out "$snap" --rows "$rows" --seed 11 --parts "$parts" -q > /dev/null \
      || die "demo-data failed"
    touch "$snap/.complete"
  fi
  for run in $(seq 1 "$RUNS"); do
    rm -f "$WORK/predict-out.parquet" "$WORK/peer-out.parquet"
    /usr/bin/time -f '%e %M' -o "$WORK/time-runfn" \
      target/release/predict --model "$MODEL" --in "$snap" --out "$WORK/predict-out.parquet" \
        --key customer_id --threads "$THREADS" -q > /dev/null || die "predict failed"
    /usr/bin/time -f '%e %M' -o "$WORK/time-peer" \
      "$PY" scripts/bench/predict_peer.py "$MODEL" "$snap" "$WORK/peer-out.parquet" customer_id "$THREADS" \
        > "$WORK/peer-stdout.json" || die "the PyTorch peer failed"
    read -r runfn_s runfn_kb < "$WORK/time-runfn"
    read -r peer_s peer_kb < "$WORK/time-peer"
    log "$rows rows, run $run: predict ${runfn_s}s $(( runfn_kb / 1024 )) MiB, PyTorch ${peer_s}s $(( peer_kb / 1024 )) MiB"
    # The two files must hold the same rows and keys and the same scores (float32 arithmetic on
    # both sides, in a different order: within 1e-6).
    "$PY" - "$WORK/predict-out.parquet" "$WORK/peer-out.parquet" "$rows" "$run" "$runfn_s" "$runfn_kb" \
        "$peer_s" "$peer_kb" "$WORK/peer-stdout.json" >> "$results" <<'PY'
import json, sys
import numpy as np, pyarrow.parquet as pq
ours, theirs, rows, run, runfn_s, runfn_kb, peer_s, peer_kb, peer_out = sys.argv[1:]
a = pq.read_table(ours, columns=["row", "customer_id", "score"])
b = pq.read_table(theirs, columns=["row", "customer_id", "score"])
assert a.num_rows == b.num_rows == int(rows), (a.num_rows, b.num_rows, rows)
assert a.column("customer_id").equals(b.column("customer_id")), "keys differ"
diff = float(np.max(np.abs(a.column("score").to_numpy() - b.column("score").to_numpy())))
assert diff <= 1e-6, f"scores differ by {diff}"
print(json.dumps({"rows": int(rows), "run": int(run), "runfn_s": float(runfn_s), "runfn_kb": int(runfn_kb),
                  "peer_s": float(peer_s), "peer_kb": int(peer_kb),
                  "peer_loop_s": json.load(open(peer_out))["loop_s"], "max_abs_score_diff": diff}))
PY
  done
done

python3 - "$results" "$RUNS" "$THREADS" "$MODEL" "$TRAIN_ROWS" "$("$PY" -c 'import torch; print(torch.__version__)')" <<'PY' > bench/predict.json.tmp
import json, os, statistics, subprocess, sys, datetime
path, runs, threads, model, train_rows, torch_version = sys.argv[1:]
lines = [json.loads(l) for l in open(path)]
sizes = {}
for rows in sorted({l["rows"] for l in lines}):
    mine = [l for l in lines if l["rows"] == rows]
    med = lambda k: statistics.median(l[k] for l in mine)
    runfn_s, peer_s = med("runfn_s"), med("peer_s")
    sizes[str(rows)] = {
        "runfn_s": runfn_s, "peer_s": peer_s, "peer_loop_s": med("peer_loop_s"),
        "runfn_rows_per_s": rows / runfn_s, "peer_rows_per_s": rows / peer_s,
        "runfn_rss_mib": med("runfn_kb") / 1024, "peer_rss_mib": med("peer_kb") / 1024,
        "max_abs_score_diff": max(l["max_abs_score_diff"] for l in mine),
        "ratios": {"peer_over_runfn": peer_s / runfn_s},
    }
keys = sorted(sizes, key=int)
growth = sizes[keys[-1]]["runfn_rss_mib"] / sizes[keys[0]]["runfn_rss_mib"]
ratios_met = all(s["ratios"]["peer_over_runfn"] >= 1.0 for s in sizes.values())
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "benchmark": f"predict: a CSV snapshot scored into Parquet with a runfn model file, against PyTorch "
                 f"{torch_version} inference of the same weights on the same rows (pyarrow streaming CSV, "
                 f"vectorized preprocessing, inference_mode), {threads} thread(s) each; whole processes",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": commit, "machine": {"cpus": os.cpu_count(), "model": cpu},
    "runs": int(runs), "threads": int(threads), "model": model, "trained_on_rows": int(train_rows),
    "sizes": sizes,
    "memory": {"runfn_rss_growth": growth, "smallest_rows": int(keys[0]), "largest_rows": int(keys[-1])},
    "target": {"text": "peer_over_runfn >= 1.0 at every size; predict's peak memory at the largest size "
                       "<= 1.25x the smallest", "value": f"ratios {[round(sizes[k]['ratios']['peer_over_runfn'], 3) for k in keys]}, memory growth {growth:.2f}x",
               "met": ratios_met and growth <= 1.25},
}, indent=2))
PY
mv bench/predict.json.tmp bench/predict.json
log "wrote bench/predict.json"
python3 -c 'import json; d=json.load(open("bench/predict.json")); print(d["target"])' >&2
