#!/usr/bin/env bash
# The binaries `make run` and `make retrain` use against the others: the dev build (what the
# tests run and make run reuses: every crate at opt-level 3, ours with overflow checks but
# without debug assertions, with the tests' features) and the release build (thin LTO, one codegen unit),
# on the same demo snapshot, stage by stage: ds-validate, leak-check, shardify and train (2,000
# steps, one thread). Medians of RUNS runs each, alternating the builds so drift in the
# machine's speed hits both. Writes bench/profiles.json. Never part of `make test`.
#   RUNS (default 3), ROWS (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
export LIBTORCH=${LIBTORCH:-$(scripts/setup-libtorch.sh)}
cargo build --workspace --bins --features train/fault-injection,register/fault-injection --quiet
cargo build --workspace --bins --release --quiet
RUNS=${RUNS:-3} ROWS=${ROWS:-200000}
work=bench/work/profiles
rm -rf "$work"
mkdir -p "$work/runs/demo"
python3 - "$work" "$RUNS" "$ROWS" <<'PY'
import json, os, statistics, subprocess, sys, time, datetime, platform, shutil
sys.path.insert(0, "scripts/bench")
import common

work, runs, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
root = os.getcwd()
manifest = os.path.join(work, "manifest.yaml")
text = open("testdata/demo/manifest.yaml").read().replace("max_steps: 4000", "max_steps: 2000")
open(manifest, "w").write(text)

def tool(profile, name):
    return os.path.join(root, "target", profile, name)

def sh(args, stdin=None, out=None):
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as i, open(out or os.devnull, "wb") as o:
        start = time.perf_counter()
        subprocess.run(args, stdin=i, stdout=o, check=True, cwd=work)
        return time.perf_counter() - start

sh([tool("release", "demo-data"), "--out", "runs/demo/snapshot", "--rows", str(rows), "--seed", "7", "-q"],
   out=os.path.join(work, "snapshot.json"))
rec = lambda name: os.path.join(work, name)
sh([tool("release", "mf-hash"), "manifest.yaml", "--data-digest", "runs/demo/snapshot", "-q"], out=rec("m.json"))
stages = [
    ("ds-validate", lambda p: ([tool(p, "ds-validate"), "-q"], rec("m.json"), rec(f"v-{p}.json"))),
    ("leak-check", lambda p: ([tool(p, "leak-check"), "-q"], rec(f"v-{p}.json"), rec(f"l-{p}.json"))),
    ("shardify", lambda p: ([tool(p, "shardify"), "--out", f"shards-{p}", "-q"], rec(f"l-{p}.json"), rec(f"s-{p}.json"))),
    ("train", lambda p: ([tool(p, "train"), "--out", f"train-{p}", "--threads", "1", "--fresh", "-q"], rec(f"s-{p}.json"), rec(f"t-{p}.json"))),
]
times = {name: {"debug": [], "release": []} for name, _ in stages}
for run in range(runs):
    for name, make in stages:
        for profile in (["debug", "release"] if run % 2 == 0 else ["release", "debug"]):
            args, stdin, out = make(profile)
            if name == "shardify":
                shutil.rmtree(os.path.join(work, f"shards-{profile}"), ignore_errors=True)
            times[name][profile].append(round(sh(args, stdin, out), 3))
results = {}
for name, t in times.items():
    d, r = statistics.median(t["debug"]), statistics.median(t["release"])
    results[name] = {"dev_median_s": d, "release_median_s": r, "dev_all_s": t["debug"], "release_all_s": t["release"],
                     "dev_over_release": round(d / r, 3)}
worst = max(v["dev_over_release"] for v in results.values())
# The build make run and make retrain use, read from the Makefile's default, so the target below
# fails if that default is slower than release by more than 5% on any stage.
import re
make_profile = re.search(r"^BUILD_PROFILE \?= (\S+)", open("Makefile").read(), re.M).group(1)
make_dir = "debug" if make_profile in ("dev", "test") else make_profile
if make_dir not in ("debug", "release"):
    sys.exit(f"bench-profiles: make run uses the {make_profile} build, which this bench does not time")
make_over_release = max(
    (statistics.median(t[make_dir]) / statistics.median(t["release"]) for t in times.values()))
out = {
    "benchmark": "the binaries make run uses: dev build vs release build, per stage, same demo snapshot",
    "date": common.now(), "commit": common.commit(), "machine": common.machine(),
    "data": {"rows": rows, "generator": f"demo-data --rows {rows} --seed 7", "train": "max_steps 2000, 1 thread"},
    "runs": runs, "results": results,
    "ratios": {f"dev_over_release_{k}": v["dev_over_release"] for k, v in results.items()},
    "target": {"metric": "time of make run's binaries over release's, the slowest stage", "max": 1.05,
               "value": round(make_over_release, 3), "met": make_over_release <= 1.05,
               "note": f"make run and make retrain use the {make_profile} build; the dev build is up to {worst}x slower"},
}
path = "bench/profiles.json"
open(path + ".new", "w").write(json.dumps(out, indent=2) + "\n")
os.replace(path + ".new", path)
print(json.dumps(results, indent=1))
PY
