#!/usr/bin/env bash
# Benchmark `mf-hash --data-digest DIR` against the peers `b3sum` and `sha256sum`, in the same run,
# on a deterministic folder of mixed file sizes (default 2 GiB), and against b3sum on the row shapes
# scripts/bench-data.sh makes (wide demo rows, short rows, a real table; "not run" where absent, so
# `make bench` runs this after it). Writes bench/mf-hash-digest.json and a short summary on stderr.
#
#   scripts/bench-mf-hash.sh
#
# Environment:
#   BENCH_DIGEST_BYTES  total size of the generated data (default 2147483648 = 2 GiB)
#   BENCH_RUNS          timed runs per tool (default 3); the median is reported
#   BENCH_ONLY          comma list of benchmarks to run; this script runs when it names mf-hash (or
#                       is unset). Names of the other bench scripts' benchmarks (shardify,
#                       ds-validate, leak-check, train, ckpt, ddp) are ignored
#   XDG_CACHE_HOME      b3sum is installed under ${XDG_CACHE_HOME:-$HOME/.cache}/runfn/bench-tools
#
# Data: bench/work/digest-data (git-ignored), regenerated only when its spec or size changed.
# Layout: 4 large files (1/8 of the total each), 64 medium (1/256 each), and the remaining quarter
# as small files of 4-64 KiB in nested folders; contents from a seeded PRNG.
#
# What is timed (wall clock, page cache warmed first, tools alternated, order rotated per run):
#   mf-hash    target/release/mf-hash testdata/mf-hash/churn.yaml --data-digest DATA -q
#   b3sum      (cd DATA && find . -type f -print0 | xargs -0 -s MAX b3sum)
#   sha256sum  (cd DATA && find . -type f -print0 | xargs -0 -s MAX sha256sum)
# MAX is the largest command line xargs can use here, so each peer normally runs as ONE process
# over every file; the JSON records the number of xargs batches ("processes") actually needed.
# The file walk is inside the timing for all three tools, since mf-hash walks the folder itself.
set -euo pipefail

cd "$(dirname "$0")/.."

BYTES="${BENCH_DIGEST_BYTES:-2147483648}"
RUNS="${BENCH_RUNS:-3}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/runfn"
TOOLS="$CACHE/bench-tools"
WORK=bench/work
DATA="$WORK/digest-data"
OUT=bench/mf-hash-digest.json
MANIFEST=testdata/mf-hash/churn.yaml
MF_HASH=target/release/mf-hash

log() { printf 'bench-mf-hash: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ONLY_IN="${BENCH_ONLY:-mf-hash}"
WANTED=""
for b in ${ONLY_IN//,/ }; do
    case "$b" in
        mf-hash) WANTED=1 ;;
        shardify|ds-validate|leak-check|train|ckpt|ckpt-disk|ddp|gate) ;;  # another script's benchmark
        *) die "unknown benchmark in BENCH_ONLY: $b (this script has mf-hash)" ;;
    esac
done
if [[ -z "$WANTED" ]]; then
    log "BENCH_ONLY=$ONLY_IN does not name mf-hash; nothing to do"
    exit 0
fi
[[ "$BYTES" =~ ^[0-9]+$ ]] && (( BYTES >= 1048576 )) || die "BENCH_DIGEST_BYTES must be an integer >= 1048576"
[[ "$RUNS" =~ ^[0-9]+$ ]] && (( RUNS >= 1 )) || die "BENCH_RUNS must be a positive integer"
command -v python3 >/dev/null || die "python3 is required"
command -v sha256sum >/dev/null || die "sha256sum is required"
[[ -f "$MANIFEST" ]] || die "$MANIFEST is missing"
mkdir -p "$WORK" bench

# --- build mf-hash (the tree may be mid-edit: wait a minute and retry once) -------------------
log "building mf-hash (release)"
if ! cargo build --release -p mf-hash >&2; then
    log "build failed; retrying once in 60 s"
    sleep 60
    cargo build --release -p mf-hash >&2 || die "cargo build --release -p mf-hash failed twice"
fi
[[ -x "$MF_HASH" ]] || die "$MF_HASH was not built"

# --- b3sum from crates.io, cached; fall back to one on PATH -----------------------------------
B3SUM="$TOOLS/bin/b3sum"
if [[ ! -x "$B3SUM" ]]; then
    log "installing b3sum into $TOOLS"
    if ! cargo install --locked b3sum --root "$TOOLS" >&2; then
        B3SUM="$(command -v b3sum || true)"
        [[ -n "$B3SUM" ]] || die "cargo install b3sum failed and no b3sum is on PATH"
        log "cargo install b3sum failed; using $B3SUM from PATH"
    fi
fi

# --- data ---------------------------------------------------------------------------------------
log "checking data in $DATA ($BYTES bytes)"
python3 - "$DATA" "$BYTES" <<'PY'
import json, os, random, shutil, sys

data, total = sys.argv[1], int(sys.argv[2])
spec_path = data + ".spec.json"
KiB, MiB = 1024, 1024 * 1024


def layout(total):
    """[(relative path, size)] summing exactly to `total`; depends only on `total`."""
    rng = random.Random(f"runfn-bench-digest-layout-{total}")
    files = []
    large, medium = total // 8, total // 256
    files += [(f"large/l{i}.bin", large) for i in range(4)]
    files += [(f"medium/m{i % 8}/m{i:03d}.bin", medium) for i in range(64)]
    rest, i = total - 4 * large - 64 * medium, 0
    while rest > 0:
        size = min(rng.randint(4 * KiB, 64 * KiB), rest)
        files.append((f"small/s{i // 1024:02d}/{(i // 64) % 16:x}/s{i:05d}.bin", size))
        rest -= size
        i += 1
    return files


files = layout(total)
spec = {"layout": "runfn-bench-digest-v1", "bytes": total, "files": len(files)}


def existing_ok():
    try:
        with open(spec_path) as f:
            if json.load(f) != spec:
                return False
        return all(os.path.getsize(os.path.join(data, p)) == s for p, s in files) and sum(
            len(names) for _, _, names in os.walk(data)
        ) == len(files)
    except (OSError, ValueError):
        return False


if existing_ok():
    print(f"bench-mf-hash: reusing {data} ({len(files)} files)", file=sys.stderr)
    sys.exit(0)

print(f"bench-mf-hash: generating {data} ({len(files)} files, {total} bytes)", file=sys.stderr)
tmp = data + ".partial"
for stale in (tmp, data):
    if os.path.isdir(stale):
        shutil.rmtree(stale)
if os.path.exists(spec_path):
    os.remove(spec_path)
rng = random.Random("runfn-bench-digest-content")
for path, size in files:
    full = os.path.join(tmp, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        left = size
        while left:
            n = min(left, 8 * MiB)
            f.write(rng.randbytes(n))
            left -= n
os.rename(tmp, data)
with open(spec_path, "w") as f:
    json.dump(spec, f)
PY

# --- warm the page cache ------------------------------------------------------------------------
log "warming the page cache"
find "$DATA" -type f -print0 | xargs -0 cat >/dev/null

# --- timed runs and JSON ------------------------------------------------------------------------
XARGS_MAX="$(xargs --show-limits </dev/null 2>&1 | sed -n 's/^Maximum length of command we could actually use: //p')"
[[ "$XARGS_MAX" =~ ^[0-9]+$ ]] || die "cannot read xargs --show-limits"
XARGS_MAX=$(( XARGS_MAX - 4096 ))  # headroom for the environment of the child processes

# The row shapes of scripts/bench-data.sh, where it has made them: the wide demo rows (the
# smallest churn snapshot), the short rows and the real table.
SHAPE_SPECS=""
WIDE_SPEC="$(ls "$WORK"/churn-*.spec.json 2>/dev/null | sort -t- -k2 -n | head -1 || true)"
SHORT_SPEC="$(ls "$WORK"/events-csv-*.spec.json 2>/dev/null | head -1 || true)"
REAL_SPEC="$(ls "$WORK"/stops-x*.spec.json 2>/dev/null | head -1 || true)"
for pair in "wide=$WIDE_SPEC" "short=$SHORT_SPEC" "real=$REAL_SPEC"; do
    SHAPE_SPECS="${SHAPE_SPECS:+$SHAPE_SPECS:}$pair"
done
export BENCH_SHAPE_SPECS="$SHAPE_SPECS"
export BENCH_DATA="$DATA" BENCH_RUNS_N="$RUNS" BENCH_OUT="$OUT" BENCH_MANIFEST="$MANIFEST" \
    BENCH_MF_HASH="$MF_HASH" BENCH_B3SUM="$B3SUM" BENCH_SHA256SUM="$(command -v sha256sum)" BENCH_XARGS_MAX="$XARGS_MAX" \
    BENCH_SCRATCH="$WORK/digest-out"
python3 - <<'PY'
import datetime, json, math, os, shlex, statistics, subprocess, sys, time

env = os.environ
data, runs, out = env["BENCH_DATA"], int(env["BENCH_RUNS_N"]), env["BENCH_OUT"]
mf_hash, xargs_max = env["BENCH_MF_HASH"], int(env["BENCH_XARGS_MAX"])
scratch = env["BENCH_SCRATCH"]
os.makedirs(scratch, exist_ok=True)


def fail(msg):
    print(f"bench-mf-hash: error: {msg}", file=sys.stderr)
    sys.exit(1)


# The file list, as find gives it inside DATA, for the byte/file totals and the xargs batch count.
names = subprocess.run(["find", ".", "-type", "f", "-print0"], cwd=data, check=True,
                       capture_output=True).stdout.split(b"\0")[:-1]
n_files = len(names)
n_bytes = sum(os.path.getsize(os.path.join(data, os.fsdecode(n))) for n in names)


def xargs_batches(command):
    """How many processes GNU xargs -s xargs_max starts: each argument costs len + 1 bytes."""
    base = len(os.fsencode(command)) + 1
    batches, used = 1, base
    for name in names:
        cost = len(name) + 1
        if used + cost > xargs_max:
            batches, used = batches + 1, base
        used += cost
    return batches


def version(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()[0].strip()
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def peer(tool):
    """A peer run as ONE `xargs -0 -s MAX tool` over every file (or as few batches as fit)."""
    tool, name = os.path.abspath(tool), os.path.basename(tool)
    out_file = os.path.join(scratch, f"{name}.txt")
    out_rel = os.path.relpath(out_file, data)  # the command runs inside DATA

    def script(exe):
        return (f"set -o pipefail; cd {shlex.quote(data)} && find . -type f -print0 "
                f"| xargs -0 -s {xargs_max} {shlex.quote(exe)} > {shlex.quote(out_rel)}")

    def check():
        with open(out_file, "rb") as f:
            lines = sum(1 for _ in f)
        if lines != n_files:
            fail(f"{tool} printed {lines} lines for {n_files} files")

    # "command" names the tool without this machine's install path.
    return {"argv": ["bash", "-c", script(tool)], "stdout": None, "check": check, "command": script(name),
            "version": version([tool, "--version"]), "processes": xargs_batches(tool), "output": out_file}


mf_out = os.path.join(scratch, "mf-hash.json")
mf_argv = [mf_hash, env["BENCH_MANIFEST"], "--data-digest", data, "-q"]
digests = set()


def mf_check():
    with open(mf_out) as f:
        record = json.load(f)
    d = record["mf_hash"]["data_digest"]
    if (d["files"], d["bytes"]) != (n_files, n_bytes):
        fail(f"mf-hash saw {d['files']} files / {d['bytes']} bytes, expected {n_files} / {n_bytes}")
    digests.add(d["digest"])


tools = {
    "mf-hash": {"argv": mf_argv, "stdout": mf_out, "check": mf_check,
                "command": shlex.join(mf_argv), "version": version([mf_hash, "--version"])},
    "b3sum": peer(env["BENCH_B3SUM"]),
    "sha256sum": peer(env["BENCH_SHA256SUM"]),
}

times = {name: [] for name in tools}
order = list(tools)
for run in range(runs):
    rotated = order[run % len(order):] + order[:run % len(order)]
    for name in rotated:
        t = tools[name]
        stdout = open(t["stdout"], "wb") if t["stdout"] else None
        try:
            start = time.perf_counter()
            proc = subprocess.run(t["argv"], stdout=stdout)
            elapsed = time.perf_counter() - start
        finally:
            if stdout:
                stdout.close()
        if proc.returncode != 0:
            fail(f"{name} exited {proc.returncode} (run {run + 1})")
        t["check"]()
        times[name].append(elapsed)
        print(f"bench-mf-hash: run {run + 1}/{runs} {name:9s} {elapsed:7.3f} s", file=sys.stderr)
if len(digests) != 1:
    fail(f"mf-hash gave different digests across runs: {sorted(digests)}")

# Cross-check: rebuild the runfn-data-v1 digest from b3sum's per-file hashes (tag, then per file in
# byte order of the relative path: path length u64 LE, path, size u64 LE, 32-byte blake3) and hash
# that stream with b3sum; it must equal what mf-hash reported.
per_file = {}
with open(tools["b3sum"]["output"], "rb") as f:
    for line in f:
        hex_hash, path = line.rstrip(b"\n").split(b"  ", 1)
        per_file[path.removeprefix(b"./")] = bytes.fromhex(hex_hash.decode())
stream = bytearray(b"runfn-data-v1\n")
for rel in sorted(per_file):
    size = os.path.getsize(os.path.join(data, os.fsdecode(rel)))
    stream += len(rel).to_bytes(8, "little") + rel + size.to_bytes(8, "little") + per_file[rel]
combined = subprocess.run([env["BENCH_B3SUM"], "--no-names"], input=bytes(stream), capture_output=True,
                          check=True).stdout.decode().strip()
mf_digest = next(iter(digests))
if f"blake3:{combined}" != mf_digest:
    fail(f"mf-hash digest {mf_digest} differs from the one rebuilt from b3sum's hashes (blake3:{combined})")
print("bench-mf-hash: mf-hash digest matches the one rebuilt from b3sum's per-file hashes", file=sys.stderr)

MiB = 1024 * 1024
results = {}
for name, t in tools.items():
    med = statistics.median(times[name])
    results[name] = {"median_s": round(med, 4), "all_s": [round(x, 4) for x in times[name]],
                     "mib_per_s": round(n_bytes / med / MiB, 1), "version": t["version"],
                     "command": t["command"]}
    if "processes" in t:
        results[name]["processes"] = t["processes"]
results["mf-hash"]["digest"] = mf_digest
results["mf-hash"]["digest_matches_b3sum"] = True

thr = {name: n_bytes / statistics.median(times[name]) for name in tools}
ratios = {"mf_hash_vs_b3sum": round(thr["mf-hash"] / thr["b3sum"], 3),
          "mf_hash_vs_sha256sum": round(thr["mf-hash"] / thr["sha256sum"], 3)}

# The row shapes the other data tools are measured on (made by scripts/bench-data.sh): the same
# digest against b3sum over each folder's files, the two alternating, medians of the runs.
shapes = {}
for item in filter(None, env.get("BENCH_SHAPE_SPECS", "").split(":")):
    name, spec_path = item.split("=", 1)
    try:
        with open(spec_path) as f:
            shape_dir = json.load(f)["dir"]
    except (OSError, ValueError, KeyError):
        shapes[name] = {"status": "not run", "failure": f"{spec_path}: no data (scripts/bench-data.sh makes it)"}
        continue
    shape_files = sorted(os.path.join(shape_dir, f) for f in os.listdir(shape_dir))
    shape_bytes = sum(os.path.getsize(f) for f in shape_files)
    subprocess.run(["cat", *shape_files], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    argvs = {"mf-hash": [mf_hash, env["BENCH_MANIFEST"], "--data-digest", shape_dir, "-q"],
             "b3sum": [env["BENCH_B3SUM"], *shape_files]}
    shape_times = {tool: [] for tool in argvs}
    for run in range(runs):
        for tool in (list(argvs) if run % 2 == 0 else list(argvs)[::-1]):
            start = time.perf_counter()
            proc = subprocess.run(argvs[tool], stdout=subprocess.DEVNULL)
            shape_times[tool].append(time.perf_counter() - start)
            if proc.returncode != 0:
                fail(f"{tool} exited {proc.returncode} on the {name} shape")
    med = {tool: statistics.median(t) for tool, t in shape_times.items()}
    shapes[name] = {"dir": shape_dir, "files": len(shape_files), "bytes": shape_bytes,
                    "results": {tool: {"median_s": round(med[tool], 4), "all_s": [round(x, 4) for x in t],
                                       "command": shlex.join(argvs[tool][:4]) + (" ..." if len(argvs[tool]) > 4 else "")}
                                for tool, t in shape_times.items()},
                    "ratios": {"mf_hash_vs_b3sum": round(med["b3sum"] / med["mf-hash"], 3)}}
    print(f"bench-mf-hash: {name}: {shape_bytes / 2**20:.0f} MiB in {len(shape_files)} files, mf-hash "
          f"{med['mf-hash']:.3f} s, b3sum {med['b3sum']:.3f} s", file=sys.stderr)

# The same machine description as the data-plane benchmarks.
sys.path.insert(0, "scripts/bench")
from common import machine  # noqa: E402

doc = {
    "benchmark": "mf-hash --data-digest",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown",
    "machine": machine(),
    "data": {"bytes": n_bytes, "files": n_files},
    "runs": runs,
    "results": results,
    "ratios": ratios,
    "target": {"mf_hash_vs_b3sum_min": 0.9, "met": ratios["mf_hash_vs_b3sum"] >= 0.9},
    "shapes": shapes,
}
every = [ratios["mf_hash_vs_b3sum"]] + [b["ratios"]["mf_hash_vs_b3sum"] for b in shapes.values() if "ratios" in b]
doc["target_every_shape"] = {"metric": "worst mf_hash_vs_b3sum over the layouts and row shapes", "min": 0.9,
                             "value": min(every), "met": min(every) >= 0.9 and all("ratios" in b for b in shapes.values())}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
os.replace(tmp, out)

print(f"bench-mf-hash: {n_bytes / MiB:.0f} MiB in {n_files} files, {doc['machine']['cpus']} cpus, "
      f"median of {runs}", file=sys.stderr)
for name in tools:
    r = results[name]
    print(f"  {name:9s} {r['median_s']:8.3f} s  {r['mib_per_s']:8.1f} MiB/s", file=sys.stderr)
print(f"  mf-hash / b3sum = {ratios['mf_hash_vs_b3sum']:.3f} (target >= 0.9: "
      f"{'met' if doc['target']['met'] else 'NOT met'}), mf-hash / sha256sum = "
      f"{ratios['mf_hash_vs_sha256sum']:.3f}", file=sys.stderr)
print(f"bench-mf-hash: wrote {out}", file=sys.stderr)
PY
