"""The three data benchmarks of scripts/bench-data.sh, each tool beside its peers in one run.

    harness.py shardify      -> bench/shardify.json
    harness.py ds-validate   -> bench/ds-validate.json
    harness.py leak-check    -> bench/leak-check.json (near-duplicate documents; every other check on the row shapes)

Run from the repository root by scripts/bench-data.sh, which builds the tools, makes the data and
the venv, and passes everything in BENCH_* variables. Every tool runs as its own child process:
wall seconds from spawn to reap, peak RSS from wait4 (ru_maxrss). Tools alternate within a run and
the order rotates between runs; the page cache is warmed first. A tool that fails (a crash, the
OOM killer, wrong output) is recorded as failed in the JSON and not run again; the others go on.
"""
import json
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep scripts/bench free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import (CheckFailed, bench, dir_bytes, fmt_mib, fmt_s, interference, log, machine,  # noqa: E402
                    now, ratio, summarize, version, warm, write_json)

env = os.environ
PY = env["BENCH_PY"]                      # the bench venv's python (absolute; never recorded)
PEERS = "scripts/bench/peers.py"
SCRATCH = env["BENCH_SCRATCH"]           # bench/work/scratch
RUNS = int(env["BENCH_RUNS_N"])
PY_SHOWN = "python"                      # how the JSON names the venv python


def peer_versions():
    return common.peer_versions(PY, PEERS)


def rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def load_spec(path):
    with open(path) as f:
        return json.load(f)


def data_block(spec):
    block = {"description": spec["description"], "dir": spec["dir"], "bytes": spec["bytes"],
             "rows": spec["rows"], "files": spec["files"], "generator": spec["command"]}
    # What the sweep's specs say of their shape.
    for key in ("columns", "bytes_per_row", "quoted_bytes_share", "null_share", "split", "newlines_in_values"):
        if key in spec and "name" in spec:
            block[key] = len(spec[key]) if key == "columns" else spec[key]
    return block


def csv_files(spec):
    return [os.path.join(spec["dir"], name) for name in sorted(os.listdir(spec["dir"])) if name.endswith(".csv")]


def stdout_json(s, path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as err:
        raise CheckFailed(f"no JSON on stdout ({err})") from None


def target_block(name, value, minimum):
    return {"metric": name, "min": minimum, "value": value, "met": None if value is None else value >= minimum}


# --- 1. shardify ---------------------------------------------------------------------------------
# The shapes shardify is measured on, each against both peers: the demo's wide rows (a long free
# text per row), many short rows (ids, a date, codes, two numbers, a short note) and a real table
# (Minneapolis police stops, testdata/real/stops, its rows repeated). A target is met only when
# it is met on every shape.
SHARDIFY_SHAPES = {
    "wide": {"spec_env": "BENCH_SPEC_1X", "time": "signup_date",
             "splits": ["train=signup_date < 2026-07-01", "val=2026-07", "test=2026-08..2026-09"]},
    "short": {"spec_env": "BENCH_SPEC_SHORT", "time": "event_date",
              "splits": ["train=event_date < 2025-06-01", "val=2025-06..2025-08", "test=2025-09..2025-11"]},
    "real": {"spec_env": "BENCH_SPEC_REAL", "time": "date",
             "splits": ["train=date < 2017-09-01", "val=2017-09..2017-10", "test=2017-11..2017-12"]},
}


# The shape sweep (scripts/bench/shapes.py): tables of the shapes users bring, each with its own
# split (date, hash or range) and whether its quoted values hold line breaks. Their specs arrive
# as BENCH_SWEEP_SPECS, colon-separated; each is a shape of its own, named `sweep-NAME`.
def sweep_shapes():
    shapes = {}
    for path in filter(None, env.get("BENCH_SWEEP_SPECS", "").split(":")):
        spec = load_spec(path)
        shapes[f"sweep-{spec['name']}"] = {"spec_path": path, "time": spec.get("time"), "splits": spec["split"],
                                           "newlines": spec.get("newlines_in_values", False)}
    return shapes


def shardify_tool(spec, shape, out_dir, stdout):
    shardify = env["BENCH_SHARDIFY"]
    splits = [a for rule in shape["splits"] for a in ("--split", rule)]
    time = ["--time", shape["time"]] if shape.get("time") else []
    argv = [shardify, "--in", spec["dir"], "--out", out_dir, "--seed", "7", *splits, *time,
            "--memory", "1G", "-q"]

    def check(s):
        rec = stdout_json(s, stdout)
        got = sum(v["rows"] for v in rec["shards"]["splits"].values())
        left = rec["shards"].get("unassigned_rows", 0)
        # Rows no rule takes (the real table's few without a date in range) are counted, not lost.
        if got + left != spec["rows"] or left > spec["rows"] // 100:
            raise CheckFailed(f"shards hold {got} rows and {left} in no split, expected {spec['rows']}")
        s["output_bytes"] = dir_bytes(out_dir)

    return {"argv": argv, "stdout": stdout, "prepare": lambda: rm(out_dir), "check": check,
            "command": " ".join(a if " " not in a else f"'{a}'" for a in argv) + " < /dev/null"}


def shardify_shape(name, spec, shape, versions):
    rows = spec["rows"]

    def peer(cmd, out_file, stdout):
        def check(s):
            rec = stdout_json(s, stdout)
            if rec.get("rows") != rows:
                raise CheckFailed(f"{rec.get('rows')} rows written, expected {rows}")
            s["output_bytes"] = os.path.getsize(out_file)

        return {"argv": [PY, PEERS, cmd, spec["dir"], out_file], "stdout": stdout,
                "prepare": lambda: rm(out_file), "check": check,
                "command": f"{PY_SHOWN} {PEERS} {cmd} {spec['dir']} {out_file}"}

    tools = {
        "shardify": shardify_tool(spec, shape, f"{SCRATCH}/shardify-out", f"{SCRATCH}/shardify.stdout"),
        # pyarrow reads a quoted line break only when told to (and is slower then).
        "pyarrow": peer("pyarrow-parquet-newlines" if shape.get("newlines") else "pyarrow-parquet",
                        f"{SCRATCH}/pyarrow.parquet", f"{SCRATCH}/pyarrow.stdout"),
        "duckdb": peer("duckdb-parquet", f"{SCRATCH}/duckdb.parquet", f"{SCRATCH}/duckdb.stdout"),
    }
    log(f"shardify, {name} rows: warming the page cache ({spec['bytes'] / 2**30:.2f} GiB)")
    warm(csv_files(spec))
    samples = bench(tools, RUNS, f"shardify-{name}")
    for t in tools.values():
        t["prepare"]()  # leave no GiB of output behind
    results = {}
    for tool, t in tools.items():
        outs = [s.get("output_bytes") for s in samples[tool] if s.get("output_bytes")]
        results[tool] = summarize(samples[tool], versions[tool], t["command"],
                                  {"output_bytes": outs[-1] if outs else None})
    results["shardify"]["note"] = ("also assigns rows to 3 splits, shuffles each by the seed and writes "
                                   "per-split shards of 1M rows plus a hashed index; the peers write one file")
    peer_times = [results[p]["median_s"] for p in ("pyarrow", "duckdb") if results[p]["median_s"] is not None]
    faster = min(peer_times) if peer_times else None
    faster_name = next((p for p in ("pyarrow", "duckdb") if results[p]["median_s"] == faster), None) if faster else None
    ratios = {"faster_peer": faster_name,
              "faster_peer_over_shardify": ratio(faster, results["shardify"]["median_s"]),
              "pyarrow_over_shardify": ratio(results["pyarrow"]["median_s"], results["shardify"]["median_s"]),
              "duckdb_over_shardify": ratio(results["duckdb"]["median_s"], results["shardify"]["median_s"])}
    block = {"data": data_block(spec), "interference": interference(results), "results": results,
             "ratios": ratios, "target": target_block("faster_peer_over_shardify",
                                                      ratios["faster_peer_over_shardify"], 1.0)}
    log(f"shardify, {name} rows: {spec['bytes'] / 2**30:.2f} GiB, {rows} rows, median of {RUNS}")
    for tool in tools:
        r = results[tool]
        log(f"  {tool:10s} {fmt_s(r['median_s'])}  peak RSS {fmt_mib(r.get('peak_rss_bytes'))}"
            + ("" if r["status"] == "ok" else f"  FAILED: {r['failure']}"))
    log(f"  faster peer ({faster_name}) / shardify = {ratios['faster_peer_over_shardify']} (target >= 1.0: "
        f"{'met' if block['target']['met'] else 'NOT met'})")
    return block


def run_shardify():
    out_json = "bench/shardify.json"
    pv = peer_versions()
    versions = {"shardify": version([env["BENCH_SHARDIFY"], "--version"]),
                "pyarrow": f"pyarrow {pv.get('pyarrow', '?')}", "duckdb": f"duckdb {pv.get('duckdb', '?')} (python)"}
    shapes = {}
    for name, shape in SHARDIFY_SHAPES.items():
        if not env.get(shape["spec_env"]):
            shapes[name] = {"status": "not run", "failure": f"{shape['spec_env']} not set"}
            continue
        shapes[name] = shardify_shape(name, load_spec(env[shape["spec_env"]]), shape, versions)
    sweep = sweep_shapes()
    for name, shape in sweep.items():
        shapes[name] = shardify_shape(name, load_spec(shape["spec_path"]), shape, versions)
    wide = shapes["wide"]

    # bounded memory: shardify alone on the 4x input of the wide rows
    scaling = {"memory_flag": "1G", "1x": {"bytes": wide["data"]["bytes"], "rows": wide["data"]["rows"],
                                           "peak_rss_bytes": wide["results"]["shardify"].get("peak_rss_bytes"),
                                           "median_s": wide["results"]["shardify"].get("median_s")}}
    spec4 = load_spec(env["BENCH_SPEC_4X"]) if env.get("BENCH_SPEC_4X") else None
    if spec4:
        runs4 = int(env.get("BENCH_RUNS_4X_N", "1"))
        t4 = shardify_tool(spec4, SHARDIFY_SHAPES["wide"], f"{SCRATCH}/shardify-4x-out", f"{SCRATCH}/shardify-4x.stdout")
        log(f"shardify: 4x input ({spec4['bytes'] / 2**30:.2f} GiB), shardify alone, {runs4} run(s)")
        warm(csv_files(spec4))  # only partly cached when it exceeds free memory; that is the point
        s4 = bench({"shardify": t4}, runs4, "shardify-4x")["shardify"]
        t4["prepare"]()
        b4 = summarize(s4, versions["shardify"], t4["command"])
        scaling["4x"] = {"bytes": spec4["bytes"], "rows": spec4["rows"], "data": data_block(spec4),
                         **{k: b4.get(k) for k in ("status", "median_s", "all_s", "peak_rss_bytes", "other_cores_busy", "failure", "command")}}
        r1, r4 = scaling["1x"]["peak_rss_bytes"], b4.get("peak_rss_bytes")
        scaling["peak_rss_4x_over_1x"] = ratio(r4, r1)
        scaling["time_4x_over_1x"] = ratio(b4.get("median_s"), scaling["1x"]["median_s"])
    else:
        scaling["4x"] = {"status": "not run", "failure": "BENCH_SKIP_4X set"}

    measured = {name: b["ratios"]["faster_peer_over_shardify"] for name, b in shapes.items() if "ratios" in b}
    every = len(measured) == len(SHARDIFY_SHAPES) + len(sweep) and all(r is not None for r in measured.values())
    worst = min(measured.values()) if every else None
    worst_shape = min(measured, key=measured.get) if every else None
    doc = {"benchmark": "CSV -> zstd Parquet: shardify vs pyarrow vs DuckDB, on every row shape",
           "date": now(), "commit": common.commit(), "machine": machine(), "runs": RUNS,
           "timing": "wall seconds of the child process, median of runs, page cache warm; peak RSS = max "
                     "ru_maxrss of the child over the runs; python peers include interpreter start-up",
           "shapes": shapes, "memory_scaling": scaling,
           "target": {"metric": "faster_peer_over_shardify on every shape (wide, short, real and the "
                                 f"{len(sweep)} of the sweep)", "min": 1.0, "value": worst,
                      "worst_shape": worst_shape, "met": None if worst is None else worst >= 1.0}}
    write_json(out_json, doc)
    if spec4:
        log(f"  shardify --memory 1G peak RSS: 1x {fmt_mib(scaling['1x']['peak_rss_bytes'])}, "
            f"4x {fmt_mib(scaling['4x'].get('peak_rss_bytes'))} ({scaling['4x']['status']})")
    log(f"shardify: worst faster-peer/shardify over the shapes = {worst} (target >= 1.0 on every shape: "
        f"{ {True: 'met', False: 'NOT met', None: 'not measured'}[doc['target']['met']] })")
    log(f"wrote {out_json}")


# --- 2. ds-validate profile -------------------------------------------------------------------------
def run_ds_validate():
    spec, out_json = load_spec(env["BENCH_SPEC_1X"]), "bench/ds-validate.json"
    dsv = env.get("BENCH_DS_VALIDATE", "")
    dsv_status = env.get("BENCH_DS_VALIDATE_STATUS", "")
    rows = spec["rows"]

    def peer(cmd, out_file, stdout, check_rows):
        def check(s):
            rec = stdout_json(s, stdout)
            if check_rows and rec.get("rows") != rows:
                raise CheckFailed(f"{rec.get('rows')} rows counted, expected {rows}")
            if rec.get("columns") != len(spec["columns"]):
                raise CheckFailed(f"{rec.get('columns')} columns profiled, expected {len(spec['columns'])}")

        return {"argv": [PY, PEERS, cmd, spec["dir"], out_file], "stdout": stdout,
                "prepare": lambda: rm(out_file), "check": check,
                "command": f"{PY_SHOWN} {PEERS} {cmd} {spec['dir']} {out_file}"}

    tools = {}
    dsv_out = f"{SCRATCH}/ds-validate-profile.json"
    if dsv and os.access(dsv, os.X_OK) and not dsv_status:
        def check_dsv(s):
            try:
                with open(dsv_out) as f:
                    json.load(f)
            except (OSError, ValueError) as err:
                raise CheckFailed(f"profile is not JSON ({err})") from None

        # The roles a run's manifest declares (as `make run` does): the label, and the entity and
        # free-text columns, which get no category counts.
        roles = f"{SCRATCH}/ds-validate-roles.json"
        with open(roles, "w") as f:
            json.dump({"manifest": {"data": {"entity": "customer_id", "text": ["support_note"], "label": "churned"}}}, f)
        tools["ds-validate"] = {"argv": [dsv, "profile", "--in", spec["dir"], "--record", roles], "stdout": dsv_out,
                                "prepare": lambda: rm(dsv_out), "check": check_dsv,
                                "command": f"{dsv} profile --in {spec['dir']} --record roles.json > profile.json"}
        # What a user runs by default: only the label declared, so the id and the free text are
        # found to be high-cardinality by the profile itself.
        label_only = f"{SCRATCH}/ds-validate-label-only.json"
        with open(label_only, "w") as f:
            json.dump({"manifest": {"data": {"label": "churned"}}}, f)
        tools["ds-validate-undeclared"] = {
            "argv": [dsv, "profile", "--in", spec["dir"], "--record", label_only], "stdout": dsv_out,
            "prepare": lambda: rm(dsv_out), "check": check_dsv,
            "command": f"{dsv} profile --in {spec['dir']} --record label-only.json > profile.json"}
    tools["duckdb"] = peer("duckdb-summarize", f"{SCRATCH}/duckdb-summarize.csv", f"{SCRATCH}/duckdb-summarize.stdout", True)
    tools["pandas"] = peer("pandas-describe", f"{SCRATCH}/pandas-describe.csv", f"{SCRATCH}/pandas-describe.stdout", True)

    log(f"ds-validate: warming the page cache ({spec['bytes'] / 2**30:.2f} GiB)")
    warm(csv_files(spec))
    samples = bench(tools, RUNS, "ds-validate")

    pv = peer_versions()
    versions = {"ds-validate": version([dsv, "--version"]) if "ds-validate" in tools else None,
                "ds-validate-undeclared": version([dsv, "--version"]) if "ds-validate" in tools else None,
                "duckdb": f"duckdb {pv.get('duckdb', '?')} (python)", "pandas": f"pandas {pv.get('pandas', '?')}"}
    results = {}
    for name, t in tools.items():
        results[name] = summarize(samples[name], versions[name], t["command"])
    if "ds-validate" not in tools:
        for name in ("ds-validate", "ds-validate-undeclared"):
            results[name] = {"status": "not run", "median_s": None, "all_s": [], "peak_rss_bytes": None,
                             "version": None, "command": "target/release/ds-validate profile --in "
                             f"{spec['dir']} > profile.json",
                             "failure": dsv_status or "target/release/ds-validate is missing"}
    else:
        try:
            with open(dsv_out) as f:
                prof = json.load(f)
            results["ds-validate"]["profile_top_level_keys"] = list(prof)[:20]
        except (OSError, ValueError):
            pass
    results["duckdb"]["query"] = f"SUMMARIZE SELECT * FROM read_csv_auto('{spec['dir']}/*.csv')"
    results["pandas"]["code"] = "pd.concat([pd.read_csv(f) for f in parts]).describe(include='all')"

    ratios = {"duckdb_over_ds_validate": ratio(results["duckdb"]["median_s"], results["ds-validate"]["median_s"]),
              "pandas_over_ds_validate": ratio(results["pandas"]["median_s"], results["ds-validate"]["median_s"]),
              "duckdb_over_ds_validate_undeclared": ratio(results["duckdb"]["median_s"],
                                                          results["ds-validate-undeclared"]["median_s"])}
    doc = {"benchmark": "profile a CSV snapshot: ds-validate profile vs DuckDB SUMMARIZE vs pandas describe",
           "date": now(), "commit": common.commit(), "machine": machine(), "data": data_block(spec), "runs": RUNS,
           "timing": "wall seconds of the child process, median of runs, page cache warm; peak RSS = max "
                     "ru_maxrss of the child over the runs; python peers include interpreter start-up",
           "interference": interference(results), "results": results, "ratios": ratios,
           "target": target_block("duckdb_over_ds_validate", ratios["duckdb_over_ds_validate"], 2.0),
           "target_undeclared": target_block("duckdb_over_ds_validate_undeclared",
                                             ratios["duckdb_over_ds_validate_undeclared"], 2.0)}
    doc["parquet"] = run_ds_validate_parquet(dsv if "ds-validate" in tools else None, dsv_status)
    doc["shapes"] = run_ds_validate_shapes(dsv if "ds-validate" in tools else None, dsv_status)
    # A target is met only when met on every shape: the wide CSV, the Parquet and the two others.
    every = [ratios["duckdb_over_ds_validate_undeclared"], doc["parquet"]["ratio_duckdb_over_ds_validate_undeclared"]]
    every += [b["ratios"]["duckdb_over_ds_validate_undeclared"] for b in doc["shapes"].values() if "ratios" in b]
    worst = None if None in every or len(every) < 2 + len(DSV_SHAPES) else min(every)
    doc["target_every_shape"] = target_block("worst duckdb_over_ds_validate_undeclared over the shapes", worst, 2.0)
    write_json(out_json, doc)
    for t in tools.values():
        t["prepare"]()

    log(f"ds-validate: {spec['bytes'] / 2**30:.2f} GiB, {rows} rows, median of {RUNS}")
    for name in ("ds-validate", "ds-validate-undeclared", "duckdb", "pandas"):
        r = results[name]
        shown = fmt_s(r["median_s"]) if r["status"] != "not run" else "  not run"
        log(f"  {name:22s} {shown}  peak RSS {fmt_mib(r.get('peak_rss_bytes'))}"
            + ("" if r["status"] == "ok" else f"  {r['status'].upper()}: {r['failure']}"))
    log(f"  duckdb / ds-validate = {ratios['duckdb_over_ds_validate']} (target >= 2.0: "
        f"{ {True: 'met', False: 'NOT met', None: 'not measured'}[doc['target']['met']] })")
    log(f"  duckdb / ds-validate with nothing declared = {ratios['duckdb_over_ds_validate_undeclared']} "
        f"(target >= 2.0: { {True: 'met', False: 'NOT met', None: 'not measured'}[doc['target_undeclared']['met']] })")
    log(f"wrote {out_json}")


EVENTS_ROWS = int(env.get("BENCH_EVENTS_ROWS", "10500000"))


def run_ds_validate_parquet(dsv, dsv_status):
    """ds-validate profile (only the label declared) vs DuckDB SUMMARIZE on one Parquet file of
    10.5M short rows: the shape where one large file has to keep both cores busy."""
    pq_dir = f"bench/work/events-{EVENTS_ROWS}"
    if not os.path.exists(f"{pq_dir}/events.parquet"):
        log(f"ds-validate: making {pq_dir}/events.parquet ({EVENTS_ROWS} rows) with DuckDB")
        subprocess.run([PY, PEERS, "make-events", pq_dir, str(EVENTS_ROWS)], check=True, stdout=subprocess.DEVNULL)
    results, value = dsv_against_duckdb("events", pq_dir, EVENTS_ROWS, "label", "duckdb-summarize-parquet",
                                        [f"{pq_dir}/events.parquet"], dsv, dsv_status)
    return {"data": {"description": "one Parquet file of short rows (an id, a date, two categories, two "
                                    "numbers, a short note, a 0/1 label), 250k-row groups, zstd",
                     "dir": pq_dir, "rows": EVENTS_ROWS, "bytes": os.path.getsize(f"{pq_dir}/events.parquet"),
                     "generator": f"{PY_SHOWN} {PEERS} make-events {pq_dir} {EVENTS_ROWS}"},
            "results": results, "interference": interference(results),
            "ratio_duckdb_over_ds_validate_undeclared": value,
            "target": target_block("duckdb_over_ds_validate_undeclared", value, 2.0)}


# The CSV shapes ds-validate is measured on besides the wide demo rows (run_ds_validate), each
# against DuckDB SUMMARIZE, with only the label declared (what a user runs by default). pandas is
# left out: it reads 10M rows into memory as Python objects, which says nothing new.
DSV_SHAPES = {"short": {"spec_env": "BENCH_SPEC_SHORT", "label": "label"},
              "real": {"spec_env": "BENCH_SPEC_REAL", "label": "personSearch"}}


def dsv_against_duckdb(name, in_dir, rows, label, peer_cmd, files, dsv, dsv_status):
    """ds-validate profile with only `label` declared against peers.py's `peer_cmd` (a DuckDB
    SUMMARIZE) on the snapshot in `in_dir` of `rows` rows, both checked to count every row.
    Returns (results, DuckDB's seconds over ds-validate's)."""
    label_only = f"{SCRATCH}/ds-validate-{name}-label.json"
    with open(label_only, "w") as f:
        json.dump({"manifest": {"data": {"label": label}}}, f)
    dsv_out, duck_out = f"{SCRATCH}/ds-validate-{name}.json", f"{SCRATCH}/duckdb-{name}.csv"
    duck_stdout = f"{SCRATCH}/duckdb-{name}.stdout"

    def check_dsv(s):
        with open(dsv_out) as f:
            if json.load(f).get("rows") != rows:
                raise CheckFailed(f"the profile does not count {rows} rows")

    def check_duck(s):
        if stdout_json(s, duck_stdout).get("rows") != rows:
            raise CheckFailed(f"SUMMARIZE does not count {rows} rows")

    tools = {"duckdb": {"argv": [PY, PEERS, peer_cmd, in_dir, duck_out], "stdout": duck_stdout,
                        "prepare": lambda: rm(duck_out), "check": check_duck,
                        "command": f"{PY_SHOWN} {PEERS} {peer_cmd} {in_dir} {duck_out}"}}
    if dsv:
        tools["ds-validate-undeclared"] = {
            "argv": [dsv, "profile", "--in", in_dir, "--record", label_only], "stdout": dsv_out,
            "prepare": lambda: rm(dsv_out), "check": check_dsv,
            "command": f"{dsv} profile --in {in_dir} --record label-only.json > profile.json"}
    warm(files)
    samples = bench(tools, RUNS, f"ds-validate-{name}")
    pv = peer_versions()
    versions = {"duckdb": f"duckdb {pv.get('duckdb', '?')} (python)",
                "ds-validate-undeclared": version([dsv, "--version"]) if dsv else None}
    results = {n: summarize(samples[n], versions[n], t["command"]) for n, t in tools.items()}
    if not dsv:
        results["ds-validate-undeclared"] = {"status": "not run", "median_s": None, "all_s": [],
                                             "failure": dsv_status or "target/release/ds-validate is missing"}
    value = ratio(results["duckdb"]["median_s"], results["ds-validate-undeclared"]["median_s"])
    log(f"  {name}, {rows} rows: ds-validate {fmt_s(results['ds-validate-undeclared']['median_s'])}, "
        f"duckdb {fmt_s(results['duckdb']['median_s'])}: {value}")
    for t in tools.values():
        t["prepare"]()
    return results, value


def run_ds_validate_shape(name, spec, shape, dsv, dsv_status):
    results, value = dsv_against_duckdb(name, spec["dir"], spec["rows"], shape["label"], "duckdb-summarize",
                                        csv_files(spec), dsv, dsv_status)
    return {"data": data_block(spec), "results": results, "interference": interference(results),
            "ratios": {"duckdb_over_ds_validate_undeclared": value}}


def run_ds_validate_shapes(dsv, dsv_status):
    shapes = {}
    for name, shape in DSV_SHAPES.items():
        if not env.get(shape["spec_env"]):
            shapes[name] = {"status": "not run", "failure": f"{shape['spec_env']} not set"}
            continue
        shapes[name] = run_ds_validate_shape(name, load_spec(env[shape["spec_env"]]), shape, dsv, dsv_status)
    return shapes


# --- 3. leak-check near duplicates -------------------------------------------------------------------
def run_leak_check():
    docs_dir, out_json = env["BENCH_DOCS"], "bench/leak-check.json"
    docs = f"{docs_dir}/docs.csv"
    with open(f"{docs_dir}/truth.json") as f:
        truth = json.load(f)
    true_pairs = {frozenset((p["a"], p["b"])) for p in truth["pairs"]
                  if p["jaccard"] >= truth["threshold"] and p["split_a"] != p["split_b"]}
    planted = {frozenset((p["a"], p["b"])) for p in truth["pairs"]}
    leak_check = env["BENCH_LEAK_CHECK"]
    lc_out = f"{SCRATCH}/leak-check.json"
    lc_pairs = f"{SCRATCH}/leak-check-pairs.jsonl"
    argv = [leak_check, "--in", docs, "--split", "a=hash(doc_id) < 0.5", "--split", "b=hash(doc_id) >= 0.5",
            "--text", "note", "--pairs-out", lc_pairs, "-q"]
    found = {}

    def check_lc(s):
        rec = stdout_json(s, lc_out)
        nd = next((c for c in rec["leaks"]["checks"] if c["name"] == "near_duplicates"), None)
        if nd is None or "count" not in nd:
            raise CheckFailed("no near_duplicates check in the record")
        found["count"] = nd["count"]
        try:
            with open(lc_pairs) as f:
                found["pairs"] = [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError) as err:
            raise CheckFailed(f"no --pairs-out list ({err})") from None

    def peer(cmd, out_file):
        def check(s):
            try:
                with open(out_file) as f:
                    found[cmd] = json.load(f)
            except (OSError, ValueError) as err:
                raise CheckFailed(f"no pair list ({err})") from None

        return {"argv": [PY, PEERS, cmd, docs, out_file], "prepare": lambda: rm(out_file), "check": check,
                "command": f"{PY_SHOWN} {PEERS} {cmd} {docs} {out_file}"}

    tools = {
        "leak-check": {"argv": argv, "stdout": lc_out, "ok_codes": (0, 1), "check": check_lc,
                       "prepare": lambda: (rm(lc_out), rm(lc_pairs)),
                       "command": " ".join(a if " " not in a else f"'{a}'" for a in argv) + " < /dev/null"},
        "datasketch": peer("datasketch-lsh", f"{SCRATCH}/datasketch-pairs.json"),
    }
    if env.get("BENCH_DATASKETCH_20X6", "1") == "1":
        tools["datasketch-20x6"] = peer("datasketch-lsh-20x6", f"{SCRATCH}/datasketch-20x6-pairs.json")
    warm([docs])
    samples = bench(tools, RUNS, "leak-check")

    pv = peer_versions()
    versions = {"leak-check": version([leak_check, "--version"]), "datasketch": f"datasketch {pv.get('datasketch', '?')}",
                "datasketch-20x6": f"datasketch {pv.get('datasketch', '?')}"}
    results = {name: summarize(samples[name], versions[name], t["command"]) for name, t in tools.items()}

    for name, cmd in (("datasketch", "datasketch-lsh"), ("datasketch-20x6", "datasketch-lsh-20x6")):
        if name not in tools or cmd not in found:
            continue
        got = {frozenset((a, b)) for a, b, _ in found[cmd]["pairs"]}
        hit = len(got & true_pairs)
        results[name].update({
            "pairs_found": len(got), "true_pairs": len(true_pairs), "true_positives": hit,
            "recall": ratio(hit, len(true_pairs)), "pairs_outside_planted": len(got - planted),
            "candidates_verified": found[cmd]["candidates"],
            "lsh": {"threshold": 0.8, "num_perm": 120, "bands": found[cmd]["bands"],
                    "rows_per_band": found[cmd]["rows_per_band"]}})
    # leak-check: every pair from --pairs-out, by data row, checked against the truth
    outside = max((results[n].get("pairs_outside_planted", 0) for n in results), default=0)
    if "pairs" in found:
        import csv

        with open(docs, newline="") as f:
            reader = csv.reader(f)
            next(reader)
            ids = [doc_id for doc_id, _ in reader]
        got = {frozenset((ids[p["earlier"]["row"] - 1], ids[p["later"]["row"] - 1]))
               for p in found["pairs"] if p["check"] == "near_duplicates"}
        hit = len(got & true_pairs)
        results["leak-check"].update({
            "pairs_found": len(got), "true_pairs": len(true_pairs), "true_positives": hit,
            "recall": ratio(hit, len(true_pairs)), "pairs_outside_planted": len(got - planted),
            "rows_with_a_twin": found["count"],
            "recall_note": "every pair from --pairs-out (each verified at exact Jaccard >= 0.8), matched to the "
                           "planted truth by data row; the check's count is the rows of the later split with a "
                           "twin, not pairs" + (f"; the datasketch runs found {outside} cross-split pair(s) >= 0.8 "
                                                "outside the planted ones" if outside else "")})
    if "datasketch-20x6" in results:
        results["datasketch-20x6"]["note"] = "not a target peer: the same code with params=(20, 6), leak-check's banding"

    lc_t = results["leak-check"]["median_s"]
    ratios = {"datasketch_over_leak_check": ratio(results["datasketch"]["median_s"], lc_t)}
    if "datasketch-20x6" in results:
        ratios["datasketch_20x6_over_leak_check"] = ratio(results["datasketch-20x6"]["median_s"], lc_t)
    size = os.path.getsize(docs)
    doc = {"benchmark": "cross-split near-duplicate texts: leak-check vs datasketch MinHashLSH",
           "date": now(), "commit": common.commit(), "machine": machine(),
           "data": {"description": "synthetic documents (doc_id,note), 15-45 words from a 4,000-word vocabulary, "
                                   "with planted near copies (one word replaced)",
                    "file": docs, "bytes": size, "rows": truth["docs"], "planted_pairs": truth["planted_pairs"],
                    "planted_at_or_above_0_8": truth["planted_at_or_above_threshold"],
                    "true_pairs": len(true_pairs), "planted_jaccard_range": [truth["jaccard_min"], truth["jaccard_max"]],
                    "splits": "a = hash(doc_id) < 0.5, b = hash(doc_id) >= 0.5",
                    "generator": f"{PY_SHOWN} scripts/bench/make_docs.py {docs_dir} {truth['docs']} {truth['planted_pairs']}"},
           "runs": RUNS,
           "timing": "wall seconds of the child process end to end (read, shingle, MinHash, LSH, verify), median of "
                     "runs; peak RSS = max ru_maxrss of the child; the python peer includes interpreter start-up",
           "interference": interference(results), "results": results, "ratios": ratios,
           "target": target_block("datasketch_over_leak_check", ratios["datasketch_over_leak_check"], 20.0)}
    doc["shapes"] = run_leak_check_shapes(leak_check)
    every = [b["ratios"]["duckdb_over_leak_check"] for b in doc["shapes"].values() if "ratios" in b]
    worst = None if None in every or len(every) < len(LEAK_SHAPES) else min(every)
    doc["target_every_shape"] = target_block("worst duckdb_over_leak_check over the shapes", worst, 1.0)
    write_json(out_json, doc)
    for t in tools.values():
        t["prepare"]()

    log(f"leak-check: {truth['docs']} documents, {len(true_pairs)} true cross-split pairs, median of {RUNS}")
    for name in tools:
        r = results[name]
        extra = (f"  pairs {r.get('pairs_found')}" + (f", recall {r['recall']}" if "recall" in r else "")) \
            if r["status"] == "ok" else f"  FAILED: {r['failure']}"
        log(f"  {name:16s} {fmt_s(r['median_s'])}  peak RSS {fmt_mib(r.get('peak_rss_bytes'))}{extra}")
    log(f"  datasketch / leak-check = {ratios['datasketch_over_leak_check']} (target >= 20: "
        f"{ {True: 'met', False: 'NOT met', None: 'not measured'}[doc['target']['met']] })")
    log(f"wrote {out_json}")


# The row shapes leak-check is measured on besides the documents: every check but the text one
# (entity overlap, time order, exact twins, label proxies) with a date split, against the same checks
# written in DuckDB SQL (peers.py duckdb-leaks). Both must find the same counts.
LEAK_SHAPES = {
    "wide": {"spec_env": "BENCH_SPEC_1X", "entity": "customer_id", "time": "signup_date", "label": "churned",
             "test_from": "2025-10-01", "test_from_sql": "DATE '2025-10-01'", "positive_sql": "churned = 1"},
    "short": {"spec_env": "BENCH_SPEC_SHORT", "entity": "user_id", "time": "event_date", "label": "label",
              "test_from": "2025-06-01", "test_from_sql": "DATE '2025-06-01'", "positive_sql": "label = 1"},
    "real": {"spec_env": "BENCH_SPEC_REAL", "entity": "idNum", "time": "date", "label": "personSearch",
             "positive": "YES", "test_from": "2017-10-01",
             "test_from_sql": "TIMESTAMPTZ '2017-10-01 00:00:00Z'", "positive_sql": "personSearch = 'YES'"},
}
# What both sides report, compared shape by shape: leak-check's check name -> the peer's key.
LEAK_COUNTS = {"entity_overlap": "entity_overlap", "time_order": "time_order",
               "exact_duplicates": "exact_duplicates", "label_proxy": "label_proxy"}


def run_leak_check_shape(name, spec, shape, leak_check):
    record = f"{SCRATCH}/leak-check-{name}-record.json"
    data = {"label_positive": shape["positive"]} if "positive" in shape else {}
    with open(record, "w") as f:
        json.dump({"manifest": {"data": data}}, f)
    config = f"{SCRATCH}/duckdb-leaks-{name}.json"
    with open(config, "w") as f:
        json.dump({k: shape[k] for k in ("entity", "time", "label", "positive_sql")}
                  | {"test_from": shape["test_from_sql"]}, f)
    time = shape["time"]
    argv = [leak_check, "--in", spec["dir"], "--split", f"train={time} < {shape['test_from']}",
            "--split", f"test={time} >= {shape['test_from']}", "--entity", shape["entity"], "--time", time,
            "--label", shape["label"], "--record", record, "-q"]
    lc_out, duck_out = f"{SCRATCH}/leak-check-{name}.json", f"{SCRATCH}/duckdb-leaks-{name}.stdout"
    found = {}

    def check_lc(s):
        checks = {c["name"]: c for c in stdout_json(s, lc_out)["leaks"]["checks"]}
        found["leak-check"] = {k: checks[k]["count"] for k in LEAK_COUNTS}
        found["leak-check"]["entity_overlap_of"] = checks["entity_overlap"].get("of")

    def check_duck(s):
        found["duckdb"] = stdout_json(s, duck_out)
        if found["duckdb"].get("rows") != spec["rows"]:
            raise CheckFailed(f"DuckDB read {found['duckdb'].get('rows')} rows, expected {spec['rows']}")

    tools = {"leak-check": {"argv": argv, "stdout": lc_out, "ok_codes": (0, 1), "check": check_lc,
                            "prepare": lambda: rm(lc_out),
                            "command": " ".join(a if " " not in a else f"'{a}'" for a in argv)},
             "duckdb": {"argv": [PY, PEERS, "duckdb-leaks", spec["dir"], config], "stdout": duck_out,
                        "prepare": lambda: rm(duck_out), "check": check_duck,
                        "command": f"{PY_SHOWN} {PEERS} duckdb-leaks {spec['dir']} config.json"}}
    warm(csv_files(spec))
    samples = bench(tools, RUNS, f"leak-check-{name}")
    pv = peer_versions()
    versions = {"leak-check": version([leak_check, "--version"]), "duckdb": f"duckdb {pv.get('duckdb', '?')} (python)"}
    results = {n: summarize(samples[n], versions[n], t["command"]) for n, t in tools.items()}
    results["duckdb"]["config"] = json.load(open(config))
    for n in tools:
        if n in found:
            results[n]["found"] = {k: found[n].get(v if n == "duckdb" else k) for k, v in LEAK_COUNTS.items()} \
                | {"entity_overlap_of": found[n].get("entity_overlap_of")}
    agree = None
    if "leak-check" in found and "duckdb" in found:
        agree = results["leak-check"]["found"] == results["duckdb"]["found"]
        if not agree:
            log(f"  {name}: leak-check and DuckDB disagree: {results['leak-check']['found']} vs {results['duckdb']['found']}")
    value = ratio(results["duckdb"]["median_s"], results["leak-check"]["median_s"]) if agree else None
    log(f"  {name}, {spec['rows']} rows: leak-check {fmt_s(results['leak-check']['median_s'])} "
        f"(peak RSS {fmt_mib(results['leak-check'].get('peak_rss_bytes'))}), duckdb "
        f"{fmt_s(results['duckdb']['median_s'])}: {value}")
    for t in tools.values():
        t["prepare"]()
    return {"data": data_block(spec), "results": results, "interference": interference(results),
            "splits": f"train = {time} < {shape['test_from']}, test = {time} >= {shape['test_from']}",
            "same_counts": agree, "ratios": {"duckdb_over_leak_check": value}}


def run_leak_check_shapes(leak_check):
    shapes = {}
    for name, shape in LEAK_SHAPES.items():
        if not env.get(shape["spec_env"]):
            shapes[name] = {"status": "not run", "failure": f"{shape['spec_env']} not set"}
            continue
        shapes[name] = run_leak_check_shape(name, load_spec(env[shape["spec_env"]]), shape, leak_check)
    return shapes


if __name__ == "__main__":
    os.makedirs(SCRATCH, exist_ok=True)
    {"shardify": run_shardify, "ds-validate": run_ds_validate, "leak-check": run_leak_check}[sys.argv[1]]()
