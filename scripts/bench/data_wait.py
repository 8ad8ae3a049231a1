"""Where train's data wait falls in a run on millions of rows, from each run's metrics.jsonl: the
whole run, "steady" (after step 20, as bench-train.sh reports it), steps 20-150 (while the next
pieces decode beside the first batches) and after 150, and the first window's wait per step (the
first piece's decode before step 1). Also each run's weights hash, so runs that should train the
same model can be compared.

Two ways to run it:

  python scripts/bench/data_wait.py RECORD THREADS RUNS NAME=TRAIN_BINARY [NAME=TRAIN_BINARY ...]
      binaries side by side (alternating runs), one JSON line a run on stdout: to compare builds.
      RECORD: a record train reads, e.g. what --bench makes (OUT's scratch) or common.bench_record's.

  python scripts/bench/data_wait.py --bench OUT --record SHARDS_JSON --spec SPEC --train BINARY \
      --threads "1 2" --runs N [--steps 2000] [--batch 1024] [--scratch DIR]
      the benchmark of scripts/bench-train.sh (BENCH_ONLY=data-wait): the bench's MLP [64, 32],
      lr 0.003, log_every 10, trained from SHARDS_JSON (a shardify record) RUNS times at each
      thread count (alternating); writes OUT with every run and the medians, and the target: the
      data wait over the whole run under 5% at every thread count. The weights of the runs at one
      thread count must be identical (determinism), or the harness fails.
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep scripts/bench free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

common.PREFIX = "bench-train"

TARGET = 0.05  # the data wait over the whole run, at every thread count
LOG_EVERY = 10
WARMUP = 20


def weighted(lines):
    total = sum(line["step_time_s"] for line in lines)
    return round(sum(line["data_wait_fraction"] * line["step_time_s"] for line in lines) / total, 4)


def run(binary, record, threads, out):
    subprocess.run([binary, "--threads", str(threads), "--fresh", "-q", "--out", out, "--record", record],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [line for line in map(json.loads, f) if "data_wait_fraction" in line]
    with open(os.path.join(out, "model.safetensors"), "rb") as f:
        weights = hashlib.sha256(f.read()).hexdigest()[:16]
    return {"whole": weighted(lines),
            "steady": weighted([line for line in lines if line["step"] > WARMUP]),
            "steps_20_150": weighted([line for line in lines if WARMUP < line["step"] <= 150]),
            "after_150": weighted([line for line in lines if line["step"] > 150]),
            "first_window_wait_per_step_s": round(lines[0]["data_wait_fraction"] * lines[0]["step_time_s"], 4),
            "weights_sha256": weights}


def side_by_side(argv):
    record, threads, runs = argv[0], int(argv[1]), int(argv[2])
    binaries = dict(arg.split("=", 1) for arg in argv[3:])
    with tempfile.TemporaryDirectory() as work:
        for _ in range(runs):
            for name, binary in binaries.items():
                figures = run(binary, record, threads, os.path.join(work, name))
                print(json.dumps({"binary": name, "threads": threads} | figures), flush=True)


def bench(args):
    threads_list = [int(t) for t in args.threads.split()]
    config = {"model": "mlp", "hidden": [64, 32], "lr": 0.003, "global_batch": args.batch,
              "max_steps": args.steps, "eval_every": args.steps, "ckpt_every": args.steps,
              "log_every": LOG_EVERY}
    os.makedirs(args.scratch, exist_ok=True)
    record = common.bench_record(args.record, args.scratch, "data-wait", config,
                                 mf_hash=os.path.join(os.path.dirname(args.train), "mf-hash"))
    with open(args.spec) as f:
        spec = json.load(f)
    shards = [os.path.join(root, name) for root, _, names in os.walk(spec["shards"]) for name in names
              if name.endswith(".parquet")]
    common.warm(shards)
    runs = {t: [] for t in threads_list}
    for i in range(args.runs):
        for t in threads_list:
            common.wait_quiet()
            common.log(f"data wait: run {i + 1} of {args.runs}, {t} thread(s)")
            runs[t].append(run(args.train, record, t, os.path.join(args.scratch, f"out-{t}")))
    per_threads = {}
    for t, rs in runs.items():
        if len({r["weights_sha256"] for r in rs}) != 1:
            sys.exit(f"data_wait.py: {t} thread(s): the runs trained different weights: "
                     f"{[r['weights_sha256'] for r in rs]}")
        median = {k: round(statistics.median(r[k] for r in rs), 4)
                  for k in ("whole", "steady", "steps_20_150", "after_150", "first_window_wait_per_step_s")}
        per_threads[str(t)] = {"median": median, "runs": rs}
    worst = max(p["median"]["whole"] for p in per_threads.values())
    doc = {
        "benchmark": "train's data wait on millions of rows: the share of the training loop's time spent "
                     "waiting for the next batch, over the whole run and after step 20, at each thread count",
        "date": common.now(),
        "commit": common.commit(),
        "machine": common.machine(),
        "versions": {"train": common.version([args.train, "--version"])},
        "data": spec,
        "runs": args.runs,
        "config": config,
        "threads": per_threads,
        "target": {"text": f"data wait over the whole run < {TARGET:.0%} at every thread count "
                           f"({', '.join(map(str, threads_list))})",
                   "value": worst, "met": worst < TARGET},
        "notes": "whole: every step, the first piece's decode before step 1 included; steady: after step "
                 f"{WARMUP}; from train's metrics.jsonl (wait and step time per {LOG_EVERY}-step window). "
                 "Each thread count's runs trained identical weights (checked).",
    }
    common.write_json(args.bench, doc)
    for t, p in per_threads.items():
        m = p["median"]
        common.log(f"data wait at {t} thread(s): whole run {m['whole']:.1%}, steady {m['steady']:.1%}")
    common.log(f"target (whole run < {TARGET:.0%} at every thread count): {'met' if worst < TARGET else 'NOT met'}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--bench":
        p = argparse.ArgumentParser(prog="data_wait.py")
        p.add_argument("--bench", required=True, help="the JSON to write")
        p.add_argument("--record", required=True, help="the shardify record (shards.json) of the data")
        p.add_argument("--spec", required=True, help="the data's spec JSON")
        p.add_argument("--train", required=True, help="the train binary (mf-hash beside it)")
        p.add_argument("--threads", default="1 2")
        p.add_argument("--runs", type=int, default=3)
        p.add_argument("--steps", type=int, default=2000)
        p.add_argument("--batch", type=int, default=1024)
        p.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "runfn-data-wait"))
        bench(p.parse_args())
    elif len(sys.argv) >= 5:
        side_by_side(sys.argv[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
