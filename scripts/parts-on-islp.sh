#!/usr/bin/env bash
# leak-check and shardify in parts and reducers, evaluate within a tiny budget and in parts, the gate on disk,
# and predict in parts, on a table of the ISLP package (the ISLR book's data) that no test uses:
# the shards, the sections, row scores and predictions must be the ones one process with room to
# spare writes, byte for byte.
#
#   scripts/parts-on-islp.sh Default default student
#   scripts/parts-on-islp.sh Caravan purchase MOSHOOFD
#
# Arguments: the ISLP table, the label's name here (the table's Yes/No column as 1/0), a slice
# column. BIN: the tools (default target/debug). The package is fetched once with pip download
# into bench/work/islp (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B="$ROOT/${BIN:-target/debug}"; T=$1; LABEL=$2; SLICE=$3
DATA=$ROOT/bench/work/islp
if [[ ! -d $DATA/ISLP/data ]]; then
  mkdir -p "$DATA"
  python3 -m pip download --no-deps -q -d "$DATA" ISLP
  (cd "$DATA" && python3 -m zipfile -e ./*.whl .)
fi
W=$DATA/run-$T
rm -rf $W; mkdir -p $W/snap
python3 - "$T" "$LABEL" "$W/snap" "$DATA" <<'PY'
import csv, sys
t, label, out, data = sys.argv[1:]
rows = list(csv.DictReader(open(f"{data}/ISLP/data/{t}.csv")))
src = {"Default": "default", "Caravan": "Purchase"}[t]
cols = [c for c in rows[0] if c != src]
for k in range(4):
    with open(f"{out}/part-{k}.csv", "w", newline="") as f:
        w = csv.writer(f); w.writerow(["id", label] + cols)
        for i, r in enumerate(rows):
            if i % 4 == k:
                w.writerow([i, 1 if r[src] == "Yes" else 0] + [r[c] for c in cols])
PY
cat > $W/manifest.yaml <<YAML
run_id: islp-$T
data:
  snapshot: ./snap
  entity: id
  label: $LABEL
  splits: {train: "hash(id) < 0.6", val: "0.6 <= hash(id) < 0.8", test: "hash(id) >= 0.8"}
code: {commit: 0000000, image: "registry.example.com/x@sha256:$(printf '0%.0s' {1..64})"}
config: {model: mlp, hidden: [16, 8], lr: 0.01, global_batch: 128, max_steps: 300, ckpt_every: 300, eval_every: 300, patience: 0}
seed: 3
eval: {slices: [$SLICE]}
YAML
cd $W
$B/mf-hash pin manifest.yaml -q > /dev/null
$B/mf-hash manifest.yaml -q > m.json
$B/ds-validate -q < m.json > v.json
# leak-check in 3 parts, 2 reducers and the merge at a budget that spills every sorter: the
# record and the twin pairs one process writes.
$B/leak-check --memory 2M --pairs-out pairs1.jsonl -q < v.json > l1.json || [[ $? -eq 1 ]]
for k in 0 1 2; do $B/leak-check --memory 2M --part $k/3 --parts lparts -q < v.json > /dev/null; done
for r in 0 1; do $B/leak-check --memory 2M --reduce $r/2 --parts lparts --pairs-out unused -q < v.json > /dev/null; done
$B/leak-check --memory 2M --parts lparts --pairs-out pairs2.jsonl -q < v.json > l2.json || [[ $? -eq 1 ]]
cmp pairs1.jsonl pairs2.jsonl && python3 -c "
import json; a=json.load(open('l1.json')); b=json.load(open('l2.json'))
print('leak-check:', {c['name']: c['count'] for c in a['leaks']['checks']}, 'passed', a['leaks']['passed'], '| parts == one, the record and pairs:', a['leaks'] == b['leaks'])"
$B/shardify --in snap --out shards --shard-rows 500 -q < v.json > s.json
# shardify in 3 parts, 2 reducers and the merge: the same shards, index and record.
for k in 0 1 2; do $B/shardify --in snap --shard-rows 500 --part $k/3 --parts sparts -q < v.json > /dev/null; done
for r in 0 1; do $B/shardify --in snap --shard-rows 500 --reduce $r/2 --parts sparts --out shards2 -q < v.json > /dev/null; done
$B/shardify --in snap --shard-rows 500 --parts sparts --out shards2 -q < v.json > s2.json
diff -r shards shards2 > /dev/null && python3 -c "
import json; a=json.load(open('s.json')); b=json.load(open('s2.json'))
for r in (a, b): r.pop('timings'); r['shards'].pop('dir')
print('shardify: shards', sum(s['shards'] for s in a['shards']['splits'].values()), '| parts == one, every shard and the record:', a == b)"
$B/train --out run -q < s.json > t.json
$B/evaluate --memory 1K --predictions p1.csv --row-scores r1.parquet -q < t.json > e1.json
$B/evaluate --memory 8G --predictions p2.csv --row-scores r2.parquet -q < t.json > e2.json
for k in 0 1 2; do $B/evaluate --part $k/3 --parts eparts -q < t.json > /dev/null; done
$B/evaluate --parts eparts --predictions p3.csv --row-scores r3.parquet -q < t.json > e3.json
python3 - <<'PY'
import json
e = [json.load(open(f"e{i}.json"))["evaluate"] for i in (1, 2, 3)]
for x in e: x["row_scores"].pop("path")
print("evaluate: rows", e[0]["overall"]["rows"], "auc", round(e[0]["overall"]["auc"], 4),
      "| 1K == 8G:", e[0] == e[1], "| parts == one:", e[2] == e[1],
      "| slices:", {k: len(v) for k, v in e[0]["slices"].items()})
PY
cmp r1.parquet r2.parquet && cmp r2.parquet r3.parquet && cmp p1.csv p2.csv && cmp p2.csv p3.csv && echo "evaluate files identical"
# The gate paired against another seed's model on the same rows: in memory, and on disk.
$B/train --seed 5 --out run5 -q < s.json > t5.json
$B/evaluate -q --row-scores r5.parquet < t5.json > e5.json
$B/gate --baseline e5.json --gate auc_min_delta=-0.002 --gate max_slice_drop=0.01 --memory 8G -q < e2.json > g8.json || true
$B/gate --baseline e5.json --gate auc_min_delta=-0.002 --gate max_slice_drop=0.01 --memory 1K -q < e2.json > g1.json || true
python3 -c "
import json; a=json.load(open('g8.json'))['gate']; b=json.load(open('g1.json'))['gate']
se = [c.get('se') for c in a['checks'] if c.get('method') == 'delong']
print('gate: checks', len(a['checks']), 'passed', a['passed'], 'delong se', [round(x, 4) for x in se if x], '| on disk == in memory:', a == b)"
$B/gate --no-baseline -q < e2.json > g.json || true
$B/register --registry reg --name $(echo $T | tr A-Z a-z) --promote prod -q < g.json > reg.json
$B/predict --model $(echo $T | tr A-Z a-z)@prod --registry reg --in snap --out one.parquet -q < reg.json > pr1.json || echo "predict exit $?"
for k in 0 1 2; do $B/predict --model $(echo $T | tr A-Z a-z)@prod --registry reg --in snap --part $k/3 --parts pparts -q < reg.json > /dev/null; done
$B/predict --model $(echo $T | tr A-Z a-z)@prod --registry reg --in snap --parts pparts --out merged.parquet -q < reg.json > pr2.json || echo "merge exit $?"
cmp one.parquet merged.parquet && python3 -c "
import json; a=json.load(open('pr1.json'))['predict']; b=json.load(open('pr2.json'))['predict']; a.pop('out'); b.pop('out'); print('predict: rows', a['rows'], 'drift', (a.get('drift') or {}).get('passed'), len((a.get('drift') or {}).get('checks', [])), a.get('no_drift'), '| parts == one:', a==b)"
