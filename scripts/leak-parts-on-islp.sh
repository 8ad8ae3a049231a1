#!/usr/bin/env bash
# leak-check in parts on every CSV table of the ISLP package (the ISLR book's data) that no test
# uses: each table with a row id added, cut into 5 files, split 70/30 by the id's hash, checked
# by one process and by 3 parts, 2 reducers and their merge at --memory 2M (every sorter spills).
# The records and the twin pairs must be equal byte for byte; prints one line per table with
# what the checks found, and exits 1 if any table differs.
#
#   scripts/leak-parts-on-islp.sh            # every table
#   scripts/leak-parts-on-islp.sh OJ Wage    # these
#
# BIN: the tools (default target/debug). The package is fetched once with pip download into
# bench/work/islp (git-ignored), as scripts/parts-on-islp.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
B="$PWD/${BIN:-target/debug}"
DATA=$PWD/bench/work/islp
if [[ ! -d $DATA/ISLP/data ]]; then
  mkdir -p "$DATA"
  python3 -m pip download --no-deps -q -d "$DATA" ISLP
  (cd "$DATA" && python3 -m zipfile -e ./*.whl .)
fi
tables=("$@")
if [[ ${#tables[@]} -eq 0 ]]; then
  for f in "$DATA"/ISLP/data/*.csv; do
    name=$(basename "$f" .csv)
    # Default and Caravan are scripts/parts-on-islp.sh's; Khan's are bare matrices.
    case $name in Default | Caravan | Khan_*) continue ;; esac
    tables+=("$name")
  done
fi
status=0
for t in "${tables[@]}"; do
  W=$DATA/leaks-$t
  rm -rf "$W"
  mkdir -p "$W/snap"
  python3 - "$DATA/ISLP/data/$t.csv" "$W/snap" << 'PY'
import csv, sys
source, out = sys.argv[1:]
rows = list(csv.reader(open(source, newline="")))
header, body = rows[0], rows[1:]
# A first column with no name is the row names R wrote: keep it as a feature.
header = [h or "rownames" for h in header]
for k in range(5):
    with open(f"{out}/part-{k}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row_id"] + header)
        for i, r in enumerate(body):
            if i * 5 // len(body) == k:
                w.writerow([i] + r)
PY
  cd "$W"
  args=(--in snap --split 'train=hash(row_id) < 0.7' --split 'test=hash(row_id) >= 0.7'
    --entity row_id --memory 2M -q)
  "$B/leak-check" "${args[@]}" --pairs-out one.pairs < /dev/null > one.json 2> /dev/null || [[ $? -eq 1 ]]
  for k in 0 1 2; do "$B/leak-check" "${args[@]}" --part "$k/3" --parts parts < /dev/null > /dev/null; done
  for r in 0 1; do
    "$B/leak-check" "${args[@]}" --reduce "$r/2" --parts parts --pairs-out x < /dev/null > /dev/null
  done
  "$B/leak-check" "${args[@]}" --parts parts --pairs-out merged.pairs < /dev/null > merged.json 2> /dev/null \
    || [[ $? -eq 1 ]]
  if ! python3 - "$t" << 'PY'; then status=1; fi
import json, sys
one, merged = (json.load(open(f))["leaks"] for f in ("one.json", "merged.json"))
same = one == merged and open("one.pairs", "rb").read() == open("merged.pairs", "rb").read()
found = {c["name"]: c["count"] for c in one["checks"] if c["count"]}
print(f"{sys.argv[1]}: {sum(1 for _ in open('one.pairs'))} twin pairs, found {found}, passed {one['passed']} | parts == one: {same}")
sys.exit(0 if same else 1)
PY
  cd - > /dev/null
done
exit "$status"
