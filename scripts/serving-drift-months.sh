#!/usr/bin/env bash
# Serving drift on later rows of a real table: the police-stops model is trained on January to
# August 2017 (testdata/real/stops), registered as stops@prod, and each later month is scored
# with `predict --model stops@prod`, as a nightly job would. Prints one line per month (rows,
# exit, the score drift, each failed check) and the JSON records under OUT.
#
#   scripts/serving-drift-months.sh [OUT]     # default: a temporary folder; BIN=target/release
#
# BIN: the folder of the built tools (default target/debug, as `make test` builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-target/debug}"
OUT="${1:-$(mktemp -d)}"
mkdir -p "$OUT/train-snapshot"
python3 - "$OUT" <<'PY'
import csv, sys
out = sys.argv[1]
rows = list(csv.reader(open("testdata/real/stops/snapshot/stops.csv", newline="")))
header, body = rows[0], rows[1:]
date = header.index("date")
def write(path, keep):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(r for r in body if keep(r[date][:7]))
write(f"{out}/train-snapshot/stops.csv", lambda month: month < "2017-09")
for month in ["2017-09", "2017-10", "2017-11", "2017-12"]:
    write(f"{out}/{month}.csv", lambda m, month=month: m == month)
PY
cat > "$OUT/manifest.yaml" <<YAML
run_id: stops-serving
data:
  snapshot: $OUT/train-snapshot@snapshot=stops-2017-01-to-08
  entity: idNum
  time: date
  label: personSearch
  label_positive: "YES"
  categorical: [policePrecinct]
  splits: {train: "date < 2017-07-01", val: "2017-07", test: "date >= 2017-08-01"}
code: {commit: 9c41be0, image: "registry.example.com/train@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a"}
config:
  model: mlp
  hidden: [16]
  lr: 0.003
  max_steps: 300
  global_batch: 256
  eval_every: 100
  features:
    numeric: [lat, long]
    categorical: [problem, race, gender, policePrecinct, neighborhood, preRace]
seed: 3
leaks:
  exact_duplicates: {max_fraction: 0.05, reason: "stops at one place and hour with the same people are distinct stops"}
  near_duplicates: {max_fraction: 0.05, reason: "as exact_duplicates"}
YAML
q=(-q)
"$BIN/mf-hash" "$OUT/manifest.yaml" --data-digest "$OUT/train-snapshot" "${q[@]}" \
  | "$BIN/ds-validate" --profile-out "$OUT/profile.json" "${q[@]}" \
  | "$BIN/leak-check" "${q[@]}" \
  | "$BIN/shardify" --out "$OUT/shards" "${q[@]}" \
  | "$BIN/train" --out "$OUT/train" --threads 1 "${q[@]}" \
  | "$BIN/evaluate" "${q[@]}" \
  | "$BIN/gate" --no-baseline "${q[@]}" \
  | "$BIN/register" --registry "$OUT/registry" --name stops --promote prod "${q[@]}" > "$OUT/registered.json"
printf '%-8s %6s %5s %-28s %s\n' month rows exit "score drift (limit, noise)" "failed feature checks (value > limit, noise)"
for month in 2017-09 2017-10 2017-11 2017-12; do
  set +e
  "$BIN/predict" --model stops@prod --registry "$OUT/registry" --in "$OUT/$month.csv" \
    --out "$OUT/scores-$month.parquet" -q < "$OUT/registered.json" > "$OUT/predict-$month.json" 2> "$OUT/predict-$month.log"
  code=$?
  set -e
  python3 - "$OUT/predict-$month.json" "$month" "$code" <<'PY'
import json, sys
path, month, code = sys.argv[1:]
p = json.load(open(path))["predict"]
d = p["drift"]
s = d["score"]
score = f"{s['value']:.4f} ({s['threshold']}, {s['noise']:.4f})" + ("" if s["passed"] else " DRIFT")
failed = [f"{c['column']} {c['name']} {c['value']:.3f} > {c['threshold']}, {c['noise']:.3f}"
          for c in d["checks"] if not c["passed"] and c["fails_run"]]
print(f"{month:<8} {p['rows']:>6} {code:>5} {score:<28} {'; '.join(failed) or 'none'}")
PY
done
