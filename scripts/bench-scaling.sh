#!/usr/bin/env bash
# The scaling curve of the data stages: short rows (the events table of scripts/bench/peers.py:
# an id, a date, two categories, two numbers, a short note, a label) at each row count of
# BENCH_SCALING_ROWS, every stage as one process within its --memory, and the stages that run in
# parts (the digest, ds-validate, leak-check, shardify with PARTS reducers, evaluate) also as PARTS parts run
# one after another plus their merge; then the gate on evaluate's scores (within the budget). For each stage and row count: wall and CPU seconds and the peak RSS; the peak's growth
# from the smallest to the largest row count; and a projection of each stage to 1B rows on 32
# nodes from the measured cost per row. Writes bench/scaling.json and a summary on stderr.
#
#   scripts/bench-scaling.sh
#
# Environment:
#   BENCH_SCALING_ROWS  row counts (default "1000000 10000000 50000000")
#   BENCH_PARTS         parts (default 4)
#   BIN                 the tools (default target/release; the JSON names it)
#   BENCH_SCALING_MEMORY       --memory of ds-validate, shardify, evaluate and gate (default 1G)
#   BENCH_SCALING_LEAK_MEMORY  --memory of leak-check (default 2G)
#   BENCH_SCALING_OUT          the JSON (default bench/scaling.json)
# Data: bench/work/scaling/events-<rows> (git-ignored), made once per row count with DuckDB in
# the benchmark's venv (scripts/bench-data.sh makes it). Train is not measured here: its cost per
# row and its scaling over ranks are bench/train.json and bench/ddp.json.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS_LIST="${BENCH_SCALING_ROWS:-1000000 10000000 50000000}"
PARTS="${BENCH_PARTS:-4}"
BIN="${BIN:-target/release}"
WORK=bench/work/scaling
OUT="${BENCH_SCALING_OUT:-bench/scaling.json}"
MEM="${BENCH_SCALING_MEMORY:-1G}"
LEAK_MEM="${BENCH_SCALING_LEAK_MEMORY:-2G}"
PY="${XDG_CACHE_HOME:-$HOME/.cache}/runfn/bench-venv/bin/python"
[[ -x $PY ]] || { echo "bench-scaling: no benchmark venv at $PY: run scripts/bench-data.sh once" >&2; exit 2; }
for tool in mf-hash ds-validate leak-check shardify train evaluate gate; do
  [[ -x $BIN/$tool ]] || { echo "bench-scaling: $BIN/$tool is missing; build first or set BIN" >&2; exit 2; }
done
mkdir -p "$WORK"
: > "$WORK/times.jsonl"
: > "$WORK/identical.jsonl"

# measure NAME ROWS IN COMMAND...: COMMAND under /usr/bin/time (stdin IN, stdout to
# $WORK/out/NAME.json); one JSON line {name, rows, cpu_s, wall_s, max_rss_bytes, exit}.
measure() {
  local name=$1 rows=$2 in=$3
  shift 3
  mkdir -p "$WORK/out"
  local code=0
  /usr/bin/time -f '%U %S %e %M' -o "$WORK/time" "$@" < "$in" > "$WORK/out/$name-$rows.json" || code=$?
  read -r user sys wall rss < <(tail -1 "$WORK/time")
  python3 -c 'import json, sys; n, r, u, s, w, m, c = sys.argv[1:]; print(json.dumps({"name": n, "rows": int(r), "cpu_s": round(float(u) + float(s), 3), "wall_s": float(w), "max_rss_bytes": int(m) * 1024, "exit": int(c)}))' \
    "$name" "$rows" "$user" "$sys" "$wall" "$rss" "$code" >> "$WORK/times.jsonl"
  echo "bench-scaling: $name at $rows rows: ${wall}s, $((rss / 1024)) MiB, exit $code" >&2
}

# manifest ROWS SNAPSHOT: the events manifest (entity user_id, label, splits by event_date). The
# note is not declared text: its 500 short values ("ok #12") are near twins of each other by the
# thousand, a search bench/leak-check.json measures on documents instead.
manifest() {
  python3 - "$1" "$2" << 'PY'
import json, sys
rows, snapshot = sys.argv[1], sys.argv[2]
print(json.dumps({
    "run_id": f"scaling-{rows}", "seed": 7,
    "code": {"commit": "0000000", "image": "registry.example.com/bench@sha256:" + "0" * 64},
    "data": {"snapshot": snapshot, "entity": "user_id", "label": "label", "time": "event_date",
             "splits": {"train": "event_date < 2025-01-01", "val": "2025-01-01..2025-03-31",
                        "test": "event_date >= 2025-04-01"}},
    "config": {"model": "mlp", "hidden": [16, 8], "lr": 0.01, "global_batch": 1024, "max_steps": 300,
               "ckpt_every": 300, "eval_every": 300, "patience": 0},
    "eval": {"slices": ["channel", "country"]},
}))
PY
}

model_record=""
for rows in $ROWS_LIST; do
  snap=$WORK/events-$rows
  if [[ ! -f $snap/.done ]]; then
    rm -rf "$snap"
    "$PY" scripts/bench/peers.py make-events-csv "$snap" "$rows" > /dev/null
    touch "$snap/.done"
  fi
  run=$WORK/run-$rows
  rm -rf "$run"
  mkdir -p "$run"
  manifest "$rows" "$snap" > "$run/manifest.json"
  "$BIN/mf-hash" pin "$run/manifest.json" -q > /dev/null
  "$BIN/mf-hash" "$run/manifest.json" -q > "$run/record.json"
  cat "$snap"/*.csv > /dev/null
  measure digest "$rows" /dev/null "$BIN/mf-hash" "$run/manifest.json" --data-digest "$snap" -q
  for ((k = 0; k < PARTS; k++)); do
    measure "digest-part-$k" "$rows" /dev/null "$BIN/mf-hash" "$run/manifest.json" \
      --data-digest "$snap" --part "$k/$PARTS" --parts "$run/digest-parts" -q
  done
  measure digest-merge "$rows" /dev/null "$BIN/mf-hash" "$run/manifest.json" --data-digest "$snap" \
    --parts "$run/digest-parts" -q
  measure ds-validate "$rows" "$run/record.json" "$BIN/ds-validate" --memory "$MEM" -q
  for ((k = 0; k < PARTS; k++)); do
    measure "ds-validate-part-$k" "$rows" "$run/record.json" "$BIN/ds-validate" --memory "$MEM" \
      --part "$k/$PARTS" --parts "$run/validate-parts" -q
  done
  measure ds-validate-merge "$rows" "$run/record.json" "$BIN/ds-validate" --memory "$MEM" \
    --parts "$run/validate-parts" -q
  measure leak-check "$rows" "$run/record.json" "$BIN/leak-check" --memory "$LEAK_MEM" -q
  for ((k = 0; k < PARTS; k++)); do
    measure "leak-check-part-$k" "$rows" "$run/record.json" "$BIN/leak-check" \
      --memory "$LEAK_MEM" --part "$k/$PARTS" --parts "$run/leak-check-parts" -q
  done
  measure leak-check-merge "$rows" "$run/record.json" "$BIN/leak-check" --memory "$LEAK_MEM" \
    --parts "$run/leak-check-parts" -q
  python3 -c 'import json, sys; a, b = (json.load(open(f))["leaks"] for f in sys.argv[2:]); print(json.dumps({"rows": int(sys.argv[1]), "leak_check_identical": a == b}))' \
    "$rows" "$WORK/out/leak-check-$rows.json" "$WORK/out/leak-check-merge-$rows.json" >> "$WORK/identical.jsonl"
  rm -rf "$run/leak-check-parts"
  measure shardify "$rows" "$run/record.json" "$BIN/shardify" --out "$run/shards" --memory "$MEM" -q
  # shardify in parts: PARTS parts, PARTS reducers, the merge; the shards must be one process's.
  for ((k = 0; k < PARTS; k++)); do
    measure "shardify-part-$k" "$rows" "$run/record.json" "$BIN/shardify" --memory "$MEM" \
      --part "$k/$PARTS" --parts "$run/shardify-parts" -q
  done
  for ((k = 0; k < PARTS; k++)); do
    measure "shardify-reduce-$k" "$rows" "$run/record.json" "$BIN/shardify" --memory "$MEM" \
      --reduce "$k/$PARTS" --parts "$run/shardify-parts" --out "$run/shards-parted" -q
  done
  measure shardify-merge "$rows" "$run/record.json" "$BIN/shardify" --memory "$MEM" \
    --parts "$run/shardify-parts" --out "$run/shards-parted" -q
  diff -rq "$run/shards" "$run/shards-parted" > /dev/null \
    && echo "{\"rows\": $rows, \"shardify_shards_identical\": true}" >> "$WORK/identical.jsonl" \
    || echo "{\"rows\": $rows, \"shardify_shards_identical\": false}" >> "$WORK/identical.jsonl"
  rm -rf "$run/shardify-parts" "$run/shards-parted"
  # One model for every row count: trained on the smallest one's shards, one epoch.
  if [[ -z $model_record ]]; then
    rm -rf "$WORK/model"
    "$BIN/train" --out "$WORK/model" -q < "$WORK/out/shardify-$rows.json" > "$WORK/trained.json"
    model_record=$WORK/trained.json
  fi
  python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); t["shards"] = json.load(open(sys.argv[2]))["shards"]; print(json.dumps(t))' \
    "$model_record" "$WORK/out/shardify-$rows.json" > "$run/trained.json"
  measure evaluate "$rows" "$run/trained.json" "$BIN/evaluate" --split train --memory "$MEM" \
    --row-scores "$run/row-scores-one.parquet" -q
  for ((k = 0; k < PARTS; k++)); do
    measure "evaluate-part-$k" "$rows" "$run/trained.json" "$BIN/evaluate" --split train \
      --memory "$MEM" --part "$k/$PARTS" --parts "$run/evaluate-parts" -q
  done
  measure evaluate-merge "$rows" "$run/trained.json" "$BIN/evaluate" --split train --memory "$MEM" \
    --parts "$run/evaluate-parts" --row-scores "$run/row-scores-merged.parquet" -q
  # The gate on those scores (the merged evaluation as the baseline: the same rows, paired),
  # within the same budget: past it, its AUC tests sort the rows on disk.
  measure gate "$rows" "$WORK/out/evaluate-$rows.json" "$BIN/gate" --memory "$MEM" \
    --baseline "$WORK/out/evaluate-merge-$rows.json" --gate auc_min_delta=-0.002 \
    --gate max_slice_drop=0.01 -q
  cmp -s "$run/row-scores-one.parquet" "$run/row-scores-merged.parquet" \
    && echo "{\"rows\": $rows, \"evaluate_row_scores_identical\": true}" >> "$WORK/identical.jsonl" \
    || echo "{\"rows\": $rows, \"evaluate_row_scores_identical\": false}" >> "$WORK/identical.jsonl"
  rm -rf "$run/shards" "$run"/*.parquet "$run/evaluate-parts"
done

python3 - "$WORK" "$PARTS" "$BIN" "$OUT" "$ROWS_LIST" "$MEM" "$LEAK_MEM" << 'PY'
import datetime, json, os, subprocess, sys
work, parts, bin_, out, rows_list = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], [int(r) for r in sys.argv[5].split()]
def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)
memory, leak_memory = size(sys.argv[6]), size(sys.argv[7])
times = {}
for line in open(f"{work}/times.jsonl"):
    t = json.loads(line)
    times[(t["name"], t["rows"])] = t
budgets = {"digest": None, "ds-validate": memory, "leak-check": leak_memory, "shardify": memory, "evaluate": memory, "gate": memory}
stages = {}
for stage, budget in budgets.items():
    curve = []
    for rows in rows_list:
        one = times.get((stage, rows))
        if one is None:
            continue
        point = {"rows": rows, "one_process": one}
        if (f"{stage}-merge", rows) in times:
            part_times = [times[(f"{stage}-part-{k}", rows)] for k in range(parts)]
            reducers = [times[(f"{stage}-reduce-{k}", rows)] for k in range(parts) if (f"{stage}-reduce-{k}", rows) in times]
            merge = times[(f"{stage}-merge", rows)]
            cpu = sum(t["cpu_s"] for t in part_times + reducers) + merge["cpu_s"]
            point["parts"] = {
                "cpu_s": round(cpu, 3),
                "cpu_overhead": round(cpu / one["cpu_s"] - 1, 4) if one["cpu_s"] else None,
                "slowest_part_wall_s": max(t["wall_s"] for t in part_times),
                "merge_wall_s": merge["wall_s"],
                "max_rss_bytes_part": max(t["max_rss_bytes"] for t in part_times),
                **({"slowest_reducer_wall_s": max(t["wall_s"] for t in reducers),
                    "max_rss_bytes_reducer": max(t["max_rss_bytes"] for t in reducers)} if reducers else {}),
                "max_rss_bytes_merge": merge["max_rss_bytes"],
            }
        curve.append(point)
    if not curve:
        continue
    first, last = curve[0], curve[-1]
    growth = last["one_process"]["max_rss_bytes"] / first["one_process"]["max_rss_bytes"]
    cpu_per_row = last["one_process"]["cpu_s"] / last["rows"]
    entry = {
        "memory_budget_bytes": budget,
        "curve": curve,
        "peak_growth": round(growth, 3),
        "target": {"text": f"peak RSS grows at most 1.25x from {first['rows']} to {last['rows']} rows", "value": f"{growth:.3f}x", "met": growth <= 1.25},
        # From the second row count on, where the budget is reached: the plateau.
        "peak_growth_after_first": round(last["one_process"]["max_rss_bytes"] / curve[min(1, len(curve) - 1)]["one_process"]["max_rss_bytes"], 3),
        "cpu_s_per_million_rows": round(cpu_per_row * 1e6, 3),
    }
    if budget is not None:
        entry["within_budget_plus_256MiB"] = all(p["one_process"]["max_rss_bytes"] <= budget + (256 << 20) for p in curve)
    # 1B rows on 32 nodes of this machine's cores: the measured CPU per row spread over the
    # nodes (in parts where the stage has them), plus the merge's CPU per row run on one node.
    nodes, cores = 32, os.cpu_count()
    if "parts" in last:
        merge_cpu_per_row = times[(f"{stage}-merge", last["rows"])]["cpu_s"] / last["rows"]
        part_cpu_per_row = (last["parts"]["cpu_s"] - times[(f"{stage}-merge", last["rows"])]["cpu_s"]) / last["rows"]
        entry["projection_1b_rows_32_nodes_wall_s"] = round(1e9 * part_cpu_per_row / (nodes * cores) + 1e9 * merge_cpu_per_row / cores, 1)
    else:
        entry["projection_1b_rows_one_node_wall_s"] = round(1e9 * cpu_per_row / cores, 1)
    stages[stage] = entry
identical = [json.loads(l) for l in open(f"{work}/identical.jsonl")] if os.path.exists(f"{work}/identical.jsonl") else []
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
result = {
    "benchmark": "scaling: the data stages on short rows (the events table) at each row count, one process within --memory and in parts",
    "machine": {"cpus": os.cpu_count(), "model": model},
    "date": datetime.date.today().isoformat(),
    "commit": commit,
    "bin": bin_,
    "parts": parts,
    "stages": stages,
    "evaluate_row_scores_identical": identical,
}
tmp = out + ".next"
with open(tmp, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
os.replace(tmp, out)
for stage, s in stages.items():
    pts = ", ".join(f"{p['rows']}: {p['one_process']['wall_s']}s {p['one_process']['max_rss_bytes'] >> 20} MiB" for p in s["curve"])
    print(f"bench-scaling: {stage}: {pts}; peak growth {s['peak_growth']}x", file=sys.stderr)
PY
