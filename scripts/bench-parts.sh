#!/usr/bin/env bash
# What cutting a data stage into parts costs: `mf-hash --data-digest`, `ds-validate`,
# `leak-check` (the train manifest's roles: entity, time, label, text, feature times),
# `shardify` (PARTS parts, PARTS reducers, the merge) and `evaluate` (the snapshot's train split,
# shardified, scored by a model trained on 12,000 demo rows) on the demo snapshot, once as one process and once as PARTS parts (run one after another here) plus
# their merge, with the CPU seconds, wall seconds and peak memory of each, the parts' CPU over
# the single process's (the overhead), and a check that the records are identical. Writes
# bench/parts.json and a summary on stderr.
#
#   scripts/bench-parts.sh
#
# Environment:
#   BENCH_PARTS_ROWS  demo rows (default 2000000, in 8 files)
#   BENCH_PARTS       parts (default 4)
#   BIN               the tools (default target/release; the JSON names it)
# Data: bench/work/parts-demo (git-ignored), regenerated when the row count changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${BENCH_PARTS_ROWS:-2000000}"
PARTS="${BENCH_PARTS:-4}"
BIN="${BIN:-target/release}"
WORK=bench/work/parts-demo
OUT=bench/parts.json
for tool in mf-hash ds-validate demo-data leak-check shardify train evaluate; do
  if [[ ! -x $BIN/$tool ]]; then
    echo "bench-parts: $BIN/$tool is missing; build first (make build) or set BIN" >&2
    exit 2
  fi
done
mkdir -p "$WORK"
if [[ ! -f $WORK/rows || $(cat "$WORK/rows") != "$ROWS" ]]; then
  rm -rf "$WORK/snapshot"
  "$BIN/demo-data" --out "$WORK/snapshot" --rows "$ROWS" --parts 8 --seed 7 -q > /dev/null
  echo "$ROWS" > "$WORK/rows"
fi
rm -rf "$WORK/run"
mkdir -p "$WORK/run"
snapshot=$WORK/snapshot
printf '{"data": {"snapshot": "%s", "entity": "customer_id", "label": "churned"}, "validate": {"fail_on": "all"}}\n' \
  "$snapshot" > "$WORK/run/manifest.json"
"$BIN/mf-hash" pin "$WORK/run/manifest.json" -q > /dev/null

# measure NAME IN OUT COMMAND...: runs COMMAND under /usr/bin/time, appends a JSON line to
# $WORK/run/times.jsonl: {name, cpu_s, wall_s, max_rss_bytes}.
# Exit 1 (a check failed: leak-check finds the demo's planted leaks) is a result; above it, not.
measure() {
  local name=$1 in=$2 out=$3 status=0
  shift 3
  /usr/bin/time -f '%U %S %e %M' -o "$WORK/run/time" "$@" < "$in" > "$out" || status=$?
  if [[ $status -gt 1 ]]; then
    echo "bench-parts: $name exited $status" >&2
    exit "$status"
  fi
  # time says "Command exited with non-zero status 1" on a line before its figures.
  read -r user sys wall rss < <(tail -n 1 "$WORK/run/time")
  python3 -c 'import json, sys; n, u, s, w, r = sys.argv[1:]; print(json.dumps({"name": n, "cpu_s": round(float(u) + float(s), 3), "wall_s": float(w), "max_rss_bytes": int(r) * 1024}))' \
    "$name" "$user" "$sys" "$wall" "$rss" >> "$WORK/run/times.jsonl"
}

run=$WORK/run
manifest=$run/manifest.json
# Warm the page cache, so neither side pays the first read.
cat "$snapshot"/* > /dev/null
measure digest-one /dev/null "$run/digest-one.json" "$BIN/mf-hash" "$manifest" --drift-only \
  --data-digest "$snapshot" -q
for ((k = 0; k < PARTS; k++)); do
  measure "digest-part-$k" /dev/null /dev/null "$BIN/mf-hash" "$manifest" --drift-only \
    --data-digest "$snapshot" --part "$k/$PARTS" --parts "$run/digest-parts" -q
done
measure digest-merge /dev/null "$run/digest-merged.json" "$BIN/mf-hash" "$manifest" --drift-only \
  --data-digest "$snapshot" --parts "$run/digest-parts" -q
measure validate-one "$run/digest-one.json" "$run/validate-one.json" "$BIN/ds-validate" \
  --profile-out "$run/profile-one.json" -q
for ((k = 0; k < PARTS; k++)); do
  measure "validate-part-$k" "$run/digest-one.json" /dev/null "$BIN/ds-validate" \
    --part "$k/$PARTS" --parts "$run/validate-parts" -q
done
measure validate-merge "$run/digest-one.json" "$run/validate-merged.json" "$BIN/ds-validate" \
  --parts "$run/validate-parts" --profile-out "$run/profile-merged.json" -q

# evaluate: a small model, the snapshot's shards, the train split (the largest) scored.
"$BIN/mf-hash" testdata/train/manifest.yaml -q > "$run/train-manifest.json"
"$BIN/demo-data" --out "$run/small" --rows 12000 --parts 2 --seed 7 -q > /dev/null
"$BIN/shardify" --in "$run/small" --out "$run/small-shards" -q < "$run/train-manifest.json" > "$run/small-shards.json"
"$BIN/train" --out "$run/model" -q < "$run/small-shards.json" > "$run/trained-small.json"
# leak-check: one process, then PARTS parts and the merge.
measure leaks-one "$run/train-manifest.json" "$run/leaks-one.json" "$BIN/leak-check" \
  --in "$snapshot" -q
for ((k = 0; k < PARTS; k++)); do
  measure "leaks-part-$k" "$run/train-manifest.json" /dev/null "$BIN/leak-check" --in "$snapshot" \
    --part "$k/$PARTS" --parts "$run/leaks-parts" -q
done
measure leaks-merge "$run/train-manifest.json" "$run/leaks-merged.json" "$BIN/leak-check" \
  --in "$snapshot" --parts "$run/leaks-parts" -q
rm -rf "$run/leaks-parts"
measure shardify-one "$run/train-manifest.json" "$run/shards.json" "$BIN/shardify" --in "$snapshot" \
  --out "$run/shards" -q
# shardify: PARTS parts, PARTS reducers, the merge; the shards and index must be one process's.
for ((k = 0; k < PARTS; k++)); do
  measure "shardify-part-$k" "$run/train-manifest.json" /dev/null "$BIN/shardify" --in "$snapshot" \
    --part "$k/$PARTS" --parts "$run/shardify-parts" -q
done
for ((k = 0; k < PARTS; k++)); do
  measure "shardify-reduce-$k" "$run/train-manifest.json" /dev/null "$BIN/shardify" --in "$snapshot" \
    --reduce "$k/$PARTS" --parts "$run/shardify-parts" --out "$run/shards-parted" -q
done
measure shardify-merge "$run/train-manifest.json" "$run/shardify-merged.json" "$BIN/shardify" \
  --in "$snapshot" --parts "$run/shardify-parts" --out "$run/shards-parted" -q
rm -rf "$run/shardify-parts"
cp "$run/shards.json" "$run/shardify-one.json"
python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); t["shards"] = json.load(open(sys.argv[2]))["shards"]; print(json.dumps(t))' \
  "$run/trained-small.json" "$run/shards.json" > "$run/trained.json"
measure evaluate-one "$run/trained.json" "$run/evaluate-one.json" "$BIN/evaluate" --split train \
  --row-scores "$run/row-scores-one.parquet" -q
for ((k = 0; k < PARTS; k++)); do
  measure "evaluate-part-$k" "$run/trained.json" /dev/null "$BIN/evaluate" --split train \
    --part "$k/$PARTS" --parts "$run/evaluate-parts" -q
done
measure evaluate-merge "$run/trained.json" "$run/evaluate-merged.json" "$BIN/evaluate" --split train \
  --parts "$run/evaluate-parts" --row-scores "$run/row-scores-merged.parquet" -q

python3 - "$run" "$ROWS" "$PARTS" "$BIN" "$OUT" << 'PY'
import json, os, subprocess, sys
run, rows, parts, bin_, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
times = {t["name"]: t for t in map(json.loads, open(f"{run}/times.jsonl"))}
def computed(path):
    record = json.load(open(path))
    record.pop("timings", None)
    record.get("validate", {}).pop("profile_file", None)
    record.get("evaluate", {}).get("row_scores", {}).pop("path", None)
    record.get("shards", {}).pop("dir", None)
    return record
def same_tree(a, b):
    files = lambda root: sorted(os.path.relpath(os.path.join(dp, f), root) for dp, _, fs in os.walk(root) for f in fs if not f.startswith("."))
    return files(a) == files(b) and all(open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read() for f in files(a))
stages = {}
for stage in ["digest", "validate", "leaks", "evaluate", "shardify"]:
    one = times[f"{stage}-one"]
    part_times = [times[f"{stage}-part-{k}"] for k in range(parts)]
    reducers = [times[f"{stage}-reduce-{k}"] for k in range(parts) if f"{stage}-reduce-{k}" in times]
    merge = times[f"{stage}-merge"]
    cpu_parts = sum(t["cpu_s"] for t in part_times + reducers) + merge["cpu_s"]
    stages[stage] = {
        "one_process": one,
        "parts": part_times,
        **({"reducers": reducers} if reducers else {}),
        "merge": merge,
        "cpu_s_parts_and_merge": round(cpu_parts, 3),
        "cpu_overhead": round(cpu_parts / one["cpu_s"] - 1, 4) if one["cpu_s"] > 0 else None,
        "slowest_part_wall_s": max(t["wall_s"] for t in part_times),
        "max_rss_bytes_part": max(t["max_rss_bytes"] for t in part_times),
        "identical": computed(f"{run}/{stage}-one.json") == computed(f"{run}/{stage}-merged.json"),
    }
stages["validate"]["profile_file_identical"] = (
    open(f"{run}/profile-one.json", "rb").read() == open(f"{run}/profile-merged.json", "rb").read())
stages["evaluate"]["row_scores_identical"] = (
    open(f"{run}/row-scores-one.parquet", "rb").read() == open(f"{run}/row-scores-merged.parquet", "rb").read())
stages["shardify"]["shards_identical"] = same_tree(f"{run}/shards", f"{run}/shards-parted")
stages["shardify"]["identical"] = stages["shardify"]["identical"] and stages["shardify"]["shards_identical"]
stages["evaluate"]["rows"] = json.load(open(f"{run}/evaluate-one.json"))["evaluate"]["overall"]["rows"]
snapshot_bytes = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(f"{run}/../snapshot") for f in fs)
for stage, s in stages.items():
    s["target"] = {
        "text": f"CPU of {parts} parts + merge within 1.10x one process's, records identical",
        "value": f"{1 + s['cpu_overhead']:.3f}x",
        "met": s["cpu_overhead"] <= 0.10 and s["identical"],
    }
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "unknown")
memory = next(int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemTotal"))
result = {
    "benchmark": "parts: one process against PARTS parts, run one after another, plus their merge, on the demo snapshot",
    "machine": {"cpus": os.cpu_count(), "model": model, "memory_bytes": memory},
    "date": __import__("datetime").date.today().isoformat(),
    "commit": commit,
    "bin": bin_,
    "rows": rows,
    "snapshot_bytes": snapshot_bytes,
    "parts": parts,
    "stages": stages,
}
tmp = out + ".next"
with open(tmp, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
os.replace(tmp, out)
for stage, s in stages.items():
    print(f"bench-parts: {stage}: one process {s['one_process']['cpu_s']} CPU s, {parts} parts + merge "
          f"{s['cpu_s_parts_and_merge']} CPU s (overhead {100 * s['cpu_overhead']:.1f}%), "
          f"identical: {s['identical']}", file=sys.stderr)
PY
