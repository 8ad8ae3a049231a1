# Sourced by scripts/bench-train.sh and scripts/bench-ddp.sh (not run on its own): the release
# tools, the bench-train venv and the training data both benchmarks use. The caller has cd'd to
# the repository root and defined log and die.
#
#   train_setup_build             cargo build --release of train and the data tools (LIBTORCH from
#                                 scripts/setup-libtorch.sh when unset); retried once after 60 s
#   train_setup_venv              sets PY: the venv's python, (re)installed when REQS changed
#   train_setup_data ROWS [no-leak-check]
#                                 sets DATA and SPEC: bench/work/train-data-ROWS (regenerated only
#                                 when its spec changed) and its spec JSON; DATA/shards.json is the
#                                 record every side trains from. no-leak-check: shardify reads
#                                 ds-validate's record (folder train-data-ROWS-no-leak-check): on
#                                 millions of demo rows leak-check takes minutes and fails on the
#                                 demo's planted near twins, and the data-wait bench measures only
#                                 train's input pipeline
#
# Data: the `make run` pipeline with the release tools on testdata/demo/manifest.yaml pointed at
# its own snapshot: demo-data --rows ROWS --seed 7 -> mf-hash --data-digest -> ds-validate ->
# leak-check -> shardify.

TRAIN_SETUP_CACHE="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}"
TRAIN_SETUP_VENV="$TRAIN_SETUP_CACHE/bench-train-venv"
TRAIN_SETUP_REQS=scripts/bench/requirements-train.txt
TRAIN_SETUP_WORK=bench/work
TRAIN_SETUP_SEED=7
TRAIN_SETUP_MANIFEST=testdata/demo/manifest.yaml
TRAIN_SETUP_TOOLS=(train demo-data mf-hash ds-validate leak-check shardify)

# --- build (the tree may be mid-edit: wait a minute and retry once) ------------------------------
train_setup_build() {
    if [[ -z "${LIBTORCH:-}" ]]; then
        LIBTORCH="$(scripts/setup-libtorch.sh)" || die "libtorch is not available; scripts/setup-libtorch.sh said why above"
        export LIBTORCH
    fi
    local pkgs=() t
    for t in "${TRAIN_SETUP_TOOLS[@]}"; do pkgs+=(-p "$t"); done
    log "building ${TRAIN_SETUP_TOOLS[*]} (release)"
    if ! cargo build --release --bins "${pkgs[@]}" >&2; then
        log "build failed; retrying once in 60 s"
        sleep 60
        cargo build --release --bins "${pkgs[@]}" >&2 || die "cargo build --release failed twice"
    fi
    for t in "${TRAIN_SETUP_TOOLS[@]}"; do
        [[ -x "target/release/$t" ]] || die "target/release/$t was not built"
    done
}

# --- peers: a bench-only venv, (re)installed when requirements-train.txt changed -------------------
train_setup_venv() {
    local venv="$TRAIN_SETUP_VENV" reqs="$TRAIN_SETUP_REQS" sum
    [[ -f "$reqs" ]] || die "$reqs is missing"
    sum="$(sha256sum "$reqs" | cut -d' ' -f1)"
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating $venv"
        mkdir -p "$TRAIN_SETUP_CACHE"
        python3 -m venv "$venv" || die "python3 -m venv failed (is the venv module installed?)"
    fi
    if [[ "$(cat "$venv/.runfn-requirements" 2>/dev/null || true)" != "$sum" ]]; then
        log "installing the peers from $reqs into $venv (the full torch wheel: about 4.7 GB, once)"
        "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
        "$venv/bin/python" -m pip install --quiet -r "$reqs" >&2 || die "pip install -r $reqs failed"
        "$venv/bin/python" -c 'import torch, pyarrow, numpy' || die "the venv cannot import torch, pyarrow and numpy"
        printf '%s\n' "$sum" > "$venv/.runfn-requirements"
    fi
    PY="$venv/bin/python"
}

# --- data: the `make run` pipeline, release tools, own folder --------------------------------------
train_setup_data() {
    local rows="$1" mode="${2:-}" seed="$TRAIN_SETUP_SEED" manifest="$TRAIN_SETUP_MANIFEST" want t
    local leak_check=1
    case "$mode" in
        "") ;;
        no-leak-check) leak_check=0 ;;
        *) die "train_setup_data: unknown mode '$mode'" ;;
    esac
    [[ -f "$manifest" ]] || die "$manifest is missing"
    mkdir -p "$TRAIN_SETUP_WORK"
    DATA="$TRAIN_SETUP_WORK/train-data-$rows${mode:+-$mode}"
    SPEC="$DATA.spec.json"
    local versions=()
    for t in "${TRAIN_SETUP_TOOLS[@]:1}"; do versions+=("$(target/release/"$t" --version)"); done
    want="$(python3 - "$rows" "$seed" "$(sha256sum "$manifest" | cut -d' ' -f1)" "$leak_check" "${versions[@]}" <<'PY'
import json, sys
rows, seed, manifest, leak_check, *tools = sys.argv[1:]
print(json.dumps({"rows": int(rows), "seed": int(seed), "manifest_sha256": manifest,
                  "leak_check": leak_check == "1", "tools": tools}))
PY
)"
    if python3 - "$SPEC" "$want" "$DATA" <<'PY'
import json, os, sys
try:
    spec, want, data = json.load(open(sys.argv[1])), json.loads(sys.argv[2]), sys.argv[3]
    ok = all(spec.get(k) == v for k, v in want.items()) and os.path.isfile(os.path.join(data, "shards.json")) \
        and os.path.isfile(os.path.join(data, "shards", "index.json"))
except (OSError, ValueError):
    ok = False
sys.exit(0 if ok else 1)
PY
    then
        log "reusing $DATA ($rows rows)"
        return
    fi
    log "generating $DATA ($rows rows: demo-data -> mf-hash -> ds-validate -> ${mode:-leak-check} -> shardify)"
    rm -rf "$DATA" "$SPEC"
    mkdir -p "$DATA"
    target/release/demo-data --out "$DATA/snapshot" --rows "$rows" --seed "$seed" -q > "$DATA/snapshot.json" \
        || die "demo-data failed"
    # the demo manifest, normalized by mf-hash, with the snapshot moved to this folder
    target/release/mf-hash "$manifest" -q | python3 -c '
import json, sys
m = json.load(sys.stdin)["manifest"]
m["data"]["snapshot"] = sys.argv[1]
json.dump(m, sys.stdout, indent=2)
' "$DATA/snapshot@snapshot=demo-seed$seed-$rows" > "$DATA/manifest.json" || die "mf-hash $manifest failed"
    target/release/mf-hash "$DATA/manifest.json" --data-digest "$DATA/snapshot" -q > "$DATA/record.json" \
        || die "mf-hash --data-digest failed"
    target/release/ds-validate --profile-out "$DATA/profile.json" -q < "$DATA/record.json" > "$DATA/validate.json" \
        || die "ds-validate failed (see $DATA/validate.json)"
    local checked="$DATA/validate.json"
    if (( leak_check )); then
        target/release/leak-check -q < "$DATA/validate.json" > "$DATA/leaks.json" || die "leak-check failed (see $DATA/leaks.json)"
        checked="$DATA/leaks.json"
    fi
    target/release/shardify --out "$DATA/shards" -q < "$checked" > "$DATA/shards.json" || die "shardify failed"
    python3 - "$SPEC" "$want" "$DATA" "$rows" "$seed" "$manifest" "$leak_check" <<'PY'
import json, os, sys
path, want, data, rows, seed, manifest, leak_check = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:]
steps = "ds-validate; leak-check" if leak_check == "1" else "ds-validate (leak-check skipped)"
shards = json.load(open(os.path.join(data, "shards.json")))["shards"]
splits = {name: {"rows": s["rows"], "shards": s["shards"]} for name, s in shards["splits"].items()}
spec = dict(want, dir=data, record=os.path.join(data, "shards.json"), shards=shards["dir"], splits=splits,
            description="demo-data churn snapshot (the `make run` demo pipeline), split by signup_date "
                        "and shuffled into zstd Parquet shards by shardify",
            generator=f"target/release/demo-data --out {data}/snapshot --rows {rows} --seed {seed}; mf-hash "
                      f"({manifest} with data.snapshot moved there) --data-digest; {steps}; shardify --out {data}/shards")
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(spec, f, indent=2)
os.replace(tmp, path)
PY
}
