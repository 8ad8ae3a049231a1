#!/usr/bin/env bash
# Benchmark the data tools against their peers, each side by side in the same run, and write
#   bench/shardify.json     CSV -> zstd Parquet: shardify vs pyarrow vs DuckDB on three row shapes (wide
#                           demo rows, 10.5M short rows, a real table) and the nine of the shape sweep
#                           (scripts/bench/shapes.py) (+ shardify alone on 4x the wide data)
#   bench/ds-validate.json  profile: ds-validate profile vs DuckDB SUMMARIZE vs pandas describe(include='all')
#                           on the wide demo rows; vs DuckDB on short rows (CSV and Parquet) and a real table
#   bench/leak-check.json   cross-split near-duplicate texts: leak-check vs datasketch MinHashLSH
# with a short summary on stderr.
#
#   scripts/bench-data.sh
#   BENCH_DATA_GB=0.05 BENCH_RUNS=1 BENCH_LEAK_DOCS=10000 BENCH_LEAK_PLANTED=200 scripts/bench-data.sh   # quick
#
# Environment:
#   BENCH_DATA_GB       size of the churn CSV snapshot in GiB (default 1; decimals allowed)
#   BENCH_RUNS          timed runs per tool (default 3); the median is reported
#   BENCH_RUNS_4X       runs of shardify alone on 4x BENCH_DATA_GB (default 1)
#   BENCH_SKIP_4X       1: skip the 4x run
#   BENCH_ONLY          comma list of shardify,ds-validate,leak-check (default: all three). Names of
#                       the other bench scripts' benchmarks (mf-hash, train, ckpt, ddp) are ignored,
#                       so a list meant for them skips this script
#   BENCH_EVENTS_ROWS   rows of ds-validate's Parquet case, bench/work/events-<rows>/events.parquet,
#                       made by DuckDB from a fixed query (default 10500000)
#   BENCH_SHORT_ROWS    rows of the short-row shape of shardify and ds-validate (default 10500000)
#   BENCH_STOPS_COPIES  copies of testdata/real/stops in their real-table shape (default 50)
#   BENCH_SWEEP         0: leave out shardify's shape sweep (default 1)
#   BENCH_SWEEP_SHAPES  comma list of the sweep's shapes (default: every one `shapes.py list` names)
#   BENCH_LEAK_DOCS     documents for leak-check (default 100000)
#   BENCH_LEAK_PLANTED  planted near-duplicate pairs among them (default 2000)
#   BENCH_QUIET_WAIT_S  per benchmark, seconds one may wait in all for other processes (a build)
#                       to go quiet before a timed run (default 600; each JSON records the
#                       interference that remained)
#   XDG_CACHE_HOME      the peers live in a venv at ${XDG_CACHE_HOME:-$HOME/.cache}/runfn/bench-venv,
#                       made here from scripts/bench/requirements.txt (never used by `make test`)
#
# Data (bench/work, git-ignored; regenerated only when its spec changed):
#   bench/work/churn-<rows>   target/release/demo-data --rows N --seed 7 --parts 16, N chosen so the
#                             CSV is about BENCH_DATA_GB GiB (bytes per row probed on 100k rows);
#                             over 8M rows in chunks (seed 7, 8, ...) of 16 parts each
#   bench/work/sweep/NAME     scripts/bench/shapes.py make NAME: one shape of the sweep, remade when
#                             shapes.py or DuckDB (its writer) changed
#   bench/work/leak-docs-*    scripts/bench/make_docs.py: synthetic doc_id,note texts with planted
#                             near copies, and the exact true cross-split pairs (truth.json)
# How each tool is timed and measured: scripts/bench/harness.py (child processes, wall clock, peak
# RSS from wait4, page cache warmed, order rotated per run, a failing peer recorded, not fatal).
# The peers' code: scripts/bench/peers.py.
set -euo pipefail

cd "$(dirname "$0")/.."

GB="${BENCH_DATA_GB:-1}"
RUNS="${BENCH_RUNS:-3}"
RUNS_4X="${BENCH_RUNS_4X:-1}"
ONLY_IN="${BENCH_ONLY:-shardify,ds-validate,leak-check}"
LEAK_DOCS="${BENCH_LEAK_DOCS:-100000}"
LEAK_PLANTED="${BENCH_LEAK_PLANTED:-2000}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/runfn"
VENV="$CACHE/bench-venv"
REQS=scripts/bench/requirements.txt
WORK=bench/work
PARTS=16
SEED=7

log() { printf 'bench-data: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
wants() { [[ ",$ONLY," == *",$1,"* ]]; }

[[ "$GB" =~ ^[0-9]+(\.[0-9]+)?$ ]] && python3 -c "import sys; sys.exit(not float('$GB') > 0)" \
    || die "BENCH_DATA_GB must be a positive number"
for v in RUNS RUNS_4X LEAK_DOCS LEAK_PLANTED; do
    [[ "${!v}" =~ ^[0-9]+$ ]] && (( ${!v} >= 1 )) || die "BENCH_$v must be a positive integer"
done
(( LEAK_PLANTED * 2 < LEAK_DOCS )) || die "BENCH_LEAK_PLANTED must be under half of BENCH_LEAK_DOCS"
ONLY=""
for b in ${ONLY_IN//,/ }; do
    case "$b" in
        shardify|ds-validate|leak-check) ONLY="${ONLY:+$ONLY,}$b" ;;
        mf-hash|train|ckpt|ckpt-disk|ddp|gate) ;;  # another script's benchmark
        *) die "unknown benchmark in BENCH_ONLY: $b (this script has shardify, ds-validate, leak-check)" ;;
    esac
done
if [[ -z "$ONLY" ]]; then
    log "BENCH_ONLY=$ONLY_IN names none of shardify, ds-validate, leak-check; nothing to do"
    exit 0
fi
command -v python3 >/dev/null || die "python3 is required"
[[ -f "$REQS" ]] || die "$REQS is missing"
mkdir -p "$WORK" bench

# --- build (the tree may be mid-edit: wait a minute and retry once) ------------------------------
build() {
    log "building $1 (release)"
    cargo build --release -p "$1" >&2 && return 0
    log "build of $1 failed; retrying once in 60 s"
    sleep 60
    cargo build --release -p "$1" >&2
}
build demo-data || die "cargo build --release -p demo-data failed twice"
if wants shardify; then build shardify || die "cargo build --release -p shardify failed twice"; fi
if wants leak-check; then build leak-check || die "cargo build --release -p leak-check failed twice"; fi
DSV_STATUS=""
if wants ds-validate; then
    # ds-validate may not exist yet: record it as not run and still time the peers
    if [[ ! -f tools/ds-validate/Cargo.toml ]]; then
        DSV_STATUS="not built: tools/ds-validate does not exist"
    elif ! build ds-validate; then
        DSV_STATUS="not built: cargo build --release -p ds-validate failed"
    elif [[ ! -x target/release/ds-validate ]]; then
        DSV_STATUS="not built: target/release/ds-validate is missing"
    fi
    [[ -z "$DSV_STATUS" ]] || log "ds-validate: $DSV_STATUS"
fi

# --- peers: a bench-only venv, (re)installed when requirements.txt changed ------------------------
REQS_SUM="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed (is the venv module installed?)"
fi
if [[ "$(cat "$VENV/.runfn-requirements" 2>/dev/null || true)" != "$REQS_SUM" ]]; then
    log "installing the peers from $REQS into $VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet -r "$REQS" >&2 || die "pip install -r $REQS failed"
    printf '%s\n' "$REQS_SUM" > "$VENV/.runfn-requirements"
fi
PY="$VENV/bin/python"

# --- data ------------------------------------------------------------------------------------------
# make_snapshot ROWS -> prints the spec file of bench/work/churn-ROWS, generating it if needed.
# demo-data makes at most 10M rows a run, so bigger snapshots are made in chunks of <= 8M rows
# (seed 7, 8, ...; PARTS files each), renamed into one folder as part-00000 ... in chunk order.
CHUNK_ROWS=8000000
make_snapshot() {
    local rows="$1" dir="$WORK/churn-$1" spec="$WORK/churn-$1.spec.json"
    local chunks=$(( (rows + CHUNK_ROWS - 1) / CHUNK_ROWS ))
    local want; want="$(printf '{"rows": %s, "parts": %s, "seed": %s, "chunks": %s, "generator": "%s"}' \
        "$rows" "$PARTS" "$SEED" "$chunks" "$(target/release/demo-data --version)")"
    if python3 - "$spec" "$want" <<'PY'
import json, os, sys
try:
    spec, want = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
    ok = all(spec.get(k) == v for k, v in want.items()) and sum(
        os.path.getsize(os.path.join(spec["dir"], f)) for f in os.listdir(spec["dir"])) == spec["bytes"]
except (OSError, ValueError, KeyError):
    ok = False
sys.exit(0 if ok else 1)
PY
    then
        log "reusing $dir ($rows rows)"
        printf '%s\n' "$spec"
        return
    fi
    log "generating $dir ($rows rows, $chunks chunk(s) of $PARTS parts)"
    rm -rf "$dir" "$dir".chunk-* "$spec"
    mkdir -p "$dir"
    local k cmds=() done_rows=0
    for (( k = 0; k < chunks; k++ )); do
        local n=$(( (rows - done_rows) / (chunks - k) ))
        local cmd=(target/release/demo-data --out "$dir.chunk-$k" --rows "$n" --seed $(( SEED + k )) --parts "$PARTS" -q)
        "${cmd[@]}" > "$dir.chunk-$k.record.json" || die "demo-data failed"
        cmds+=("${cmd[*]}")
        done_rows=$(( done_rows + n ))
    done
    python3 - "$dir" "$chunks" "$spec" "$want" "${cmds[@]}" <<'PY'
import json, os, sys
out, chunks, spec_path, want, commands = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5:]
files, rows, columns = [], 0, None
for k in range(chunks):
    rec = json.load(open(f"{out}.chunk-{k}.record.json"))["demo_data"]
    if columns not in (None, rec["columns"]):
        sys.exit("demo-data chunks disagree on the columns")
    columns, rows = rec["columns"], rows + rec["rows"]
    for f in rec["files"]:
        target = os.path.join(out, f"part-{len(files):05d}.csv")
        os.rename(f, target)
        files.append(target)
    os.remove(f"{out}.chunk-{k}.record.json")
    os.rmdir(f"{out}.chunk-{k}")
if rows != want["rows"]:
    sys.exit(f"demo-data made {rows} rows, expected {want['rows']}")
spec = dict(want, dir=out, files=len(files), columns=columns,
            bytes=sum(os.path.getsize(f) for f in files),
            command=" && ".join(commands) + (" (then renamed into one folder)" if chunks > 1 else ""),
            description="demo-data churn snapshot, CSV with a header per part: " + ", ".join(columns))
json.dump(spec, open(spec_path + ".tmp", "w"), indent=2)
os.replace(spec_path + ".tmp", spec_path)
PY
    printf '%s\n' "$spec"
}

SPEC_1X="" SPEC_4X=""
if wants shardify || wants ds-validate || wants leak-check; then
    PROBE="$WORK/churn-probe"
    rm -rf "$PROBE"
    target/release/demo-data --out "$PROBE" --rows 100000 --seed "$SEED" --parts 1 -q >/dev/null
    ROWS_1X="$(python3 -c "import os; b = os.path.getsize('$PROBE/part-00000.csv'); print(max(1000, round($GB * 2**30 * 100000 / b)))")"
    rm -rf "$PROBE"
    SPEC_1X="$(make_snapshot "$ROWS_1X")"
    if wants shardify && [[ "${BENCH_SKIP_4X:-0}" != 1 ]]; then
        SPEC_4X="$(make_snapshot $(( ROWS_1X * 4 )))"
    fi
fi
# The other two row shapes of the shardify benchmark: many short rows (the events table, as CSV
# parts of 1M rows, made by DuckDB from a fixed query) and a real table (testdata/real/stops,
# its data rows repeated STOPS_COPIES times over parts of 5 copies each).
SHORT_ROWS="${BENCH_SHORT_ROWS:-10500000}"
STOPS_COPIES="${BENCH_STOPS_COPIES:-50}"
SPEC_SHORT="" SPEC_REAL=""
if wants shardify || wants ds-validate || wants leak-check; then
    SPEC_SHORT="$WORK/events-csv-$SHORT_ROWS.spec.json"
    if [[ ! -s "$SPEC_SHORT" ]]; then
        log "generating $WORK/events-csv-$SHORT_ROWS ($SHORT_ROWS short rows, DuckDB)"
        rm -rf "$WORK/events-csv-$SHORT_ROWS"
        "$PY" scripts/bench/peers.py make-events-csv "$WORK/events-csv-$SHORT_ROWS" "$SHORT_ROWS" >/dev/null \
            || die "make-events-csv failed"
        python3 - "$WORK/events-csv-$SHORT_ROWS" "$SHORT_ROWS" "$SPEC_SHORT" <<'PY'
import json, os, sys
out, rows, spec_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".csv"))
columns = open(files[0]).readline().strip().split(",")
spec = {"rows": rows, "dir": out, "files": len(files), "columns": columns,
        "bytes": sum(os.path.getsize(f) for f in files),
        "command": f"python scripts/bench/peers.py make-events-csv {out} {rows}",
        "description": "short rows (the events table of peers.py, as CSV): " + ", ".join(columns)}
json.dump(spec, open(spec_path + ".tmp", "w"), indent=2)
os.replace(spec_path + ".tmp", spec_path)
PY
    fi
    SPEC_REAL="$WORK/stops-x$STOPS_COPIES.spec.json"
    if [[ ! -s "$SPEC_REAL" ]]; then
        log "generating $WORK/stops-x$STOPS_COPIES (testdata/real/stops, $STOPS_COPIES copies)"
        python3 - testdata/real/stops/snapshot/stops.csv "$WORK/stops-x$STOPS_COPIES" "$STOPS_COPIES" "$SPEC_REAL" <<'PY'
import json, os, shutil, sys
source, out, copies, spec_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
with open(source, "rb") as f:
    header = f.readline()
    body = f.read()
if not body.endswith(b"\n"):
    body += b"\n"
per_part, files = 5, []
for part in range((copies + per_part - 1) // per_part):
    path = os.path.join(out, f"part-{part:05d}.csv")
    with open(path, "wb") as f:
        f.write(header)
        for _ in range(min(per_part, copies - part * per_part)):
            f.write(body)
    files.append(path)
rows = copies * body.count(b"\n")
columns = header.decode().strip().split(",")
spec = {"rows": rows, "dir": out, "files": len(files), "columns": columns,
        "bytes": sum(os.path.getsize(f) for f in files),
        "command": f"testdata/real/stops/snapshot/stops.csv, its data rows {copies} times over parts of {per_part} copies",
        "description": "a real table (Minneapolis police stops 2017, testdata/real/stops), rows repeated: "
                       + ", ".join(columns)}
json.dump(spec, open(spec_path + ".tmp", "w"), indent=2)
os.replace(spec_path + ".tmp", spec_path)
PY
    fi
fi
# The shape sweep of shardify: each shape's CSV parts and spec, remade when the generator changed.
SWEEP_SPECS=""
if wants shardify && [[ "${BENCH_SWEEP:-1}" != 0 ]]; then
    SWEEP_PRINT="$(sha256sum scripts/bench/shapes.py | cut -d' ' -f1) $("$PY" -c 'import duckdb; print(duckdb.__version__)')"
    mapfile -t ALL_SHAPES < <("$PY" scripts/bench/shapes.py list | "$PY" -c 'import json, sys; [print(json.loads(l)["name"]) for l in sys.stdin]')
    WANT_SHAPES="${BENCH_SWEEP_SHAPES:-$(IFS=,; echo "${ALL_SHAPES[*]}")}"
    for shape in ${WANT_SHAPES//,/ }; do
        [[ " ${ALL_SHAPES[*]} " == *" $shape "* ]] || die "unknown shape in BENCH_SWEEP_SHAPES: $shape (shapes: ${ALL_SHAPES[*]})"
        dir="$WORK/sweep/$shape" spec="$WORK/sweep/$shape.spec.json"
        if [[ -s "$spec" && "$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("fingerprint"))' "$spec")" == "$SWEEP_PRINT" ]]; then
            log "reusing $dir"
        else
            log "generating $dir (scripts/bench/shapes.py make $shape)"
            rm -rf "$dir" "$spec"
            mkdir -p "$WORK/sweep"
            "$PY" scripts/bench/shapes.py make "$shape" "$dir" \
                | "$PY" -c 'import json, sys; d = json.load(sys.stdin); d["fingerprint"] = sys.argv[1]; print(json.dumps(d, indent=2))' "$SWEEP_PRINT" \
                > "$spec.tmp" || die "shapes.py make $shape failed"
            mv "$spec.tmp" "$spec"
        fi
        SWEEP_SPECS="${SWEEP_SPECS:+$SWEEP_SPECS:}$spec"
    done
fi
DOCS="$WORK/leak-docs-$LEAK_DOCS-$LEAK_PLANTED"
if wants leak-check; then
    DOCS_SPEC="$(sha256sum scripts/bench/make_docs.py | cut -d' ' -f1)"
    if [[ -f "$DOCS/truth.json" && "$(cat "$DOCS/.spec" 2>/dev/null || true)" == "$DOCS_SPEC" ]]; then
        log "reusing $DOCS"
    else
        rm -rf "$DOCS"
        "$PY" scripts/bench/make_docs.py "$DOCS" "$LEAK_DOCS" "$LEAK_PLANTED" || die "make_docs.py failed"
        printf '%s\n' "$DOCS_SPEC" > "$DOCS/.spec"
    fi
fi

# --- the three benchmarks, one after the other (never two heavy things at once) -------------------
export PYTHONDONTWRITEBYTECODE=1 BENCH_PY="$PY" BENCH_SCRATCH="$WORK/scratch" BENCH_RUNS_N="$RUNS" BENCH_RUNS_4X_N="$RUNS_4X" \
    BENCH_SPEC_1X="$SPEC_1X" BENCH_SPEC_4X="$SPEC_4X" BENCH_DOCS="$DOCS" \
    BENCH_SPEC_SHORT="$SPEC_SHORT" BENCH_SPEC_REAL="$SPEC_REAL" BENCH_SWEEP_SPECS="$SWEEP_SPECS" \
    BENCH_SHARDIFY=target/release/shardify BENCH_LEAK_CHECK=target/release/leak-check \
    BENCH_DS_VALIDATE=target/release/ds-validate BENCH_DS_VALIDATE_STATUS="$DSV_STATUS"
rm -rf "$BENCH_SCRATCH"
mkdir -p "$BENCH_SCRATCH"
status=0
for b in shardify ds-validate leak-check; do
    wants "$b" || continue
    log "=== $b ==="
    "$PY" scripts/bench/harness.py "$b" || { log "error: the $b harness failed"; status=1; }
done
rm -rf "$BENCH_SCRATCH"
exit "$status"
