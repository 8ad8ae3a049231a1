#!/usr/bin/env bash
# Reading shards in pieces against reading them whole, on the real tables: test AUC of the
# default config (a manifest whose config is only `model: mlp`) over seeds, each table's shards
# cut into pieces of at most PIECE_ROWS rows (the test build's RUNFN_TEST_PIECE_ROWS; the shipped
# train cuts only shards of more than 131,072 rows, which these tables do not have).
#
#   scripts/pieces-trials.sh [SEEDS] [PIECE_ROWS]      # default 9 seeds, pieces of 500 rows
#
# Needs the test build (`make test`, or cargo build --workspace --bins --features
# train/fault-injection,register/fault-injection). Prints one line per table and seed, then per
# table the mean and the range of each side.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS="${1:-9}"
PIECES="${2:-500}"
BIN=target/debug
for t in mf-hash ds-validate leak-check shardify train train-with-faults evaluate; do
    [[ -x "$BIN/$t" ]] || { echo "pieces-trials: $BIN/$t is not built (run make test)" >&2; exit 2; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results"
for table in telco resume email; do
    dir="$work/$table"
    mkdir -p "$dir"
    sed 's/^config:.*/config: {model: mlp}/' "testdata/real/$table/manifest.yaml" > "$dir/manifest.yaml"
    "$BIN/mf-hash" "$dir/manifest.yaml" --data-digest "testdata/real/$table/snapshot" -q \
        | "$BIN/ds-validate" -q | "$BIN/leak-check" -q \
        | "$BIN/shardify" --out "$dir/shards" -q > "$dir/shards.json"
    for seed in $(seq 1 "$SEEDS"); do
        for side in whole pieces; do
            if [[ $side == pieces ]]; then
                run=(env RUNFN_TEST_PIECE_ROWS="$PIECES" "$BIN/train-with-faults")
            else
                run=("$BIN/train")
            fi
            auc="$("${run[@]}" --seed "$seed" --threads 1 --fresh -q --out "$dir/out-$side" < "$dir/shards.json" \
                | "$BIN/evaluate" -q | python3 -c 'import json,sys; print(json.load(sys.stdin)["evaluate"]["overall"]["auc"])')"
            echo "$table $seed $side $auc" | tee -a "$results"
        done
    done
done
python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    table, _, side, auc = line.split()
    runs[(table, side)].append(float(auc))
for (table, side), aucs in sorted(runs.items()):
    print(f"{table:7} {side:7} test AUC mean {statistics.mean(aucs):.4f}, min {min(aucs):.4f}, "
          f"max {max(aucs):.4f} ({len(aucs)} seeds)")
PY
