"""Checkpoint load and save of runfn `train` beside torch.load / torch.save, quickly: one [1024,
1024] MLP with its AdamW moments, on a small demo snapshot, with the binaries already built (no
release build, no 200,000-row data set). A narrower check than scripts/bench-train.sh, for
iterating on the checkpoint code; the JSON goes under the `checkpoint.side_by_side` key of the
given bench file.

  python scripts/bench/train_ckpt_side_by_side.py BIN_DIR BENCH_JSON [--runs N] [--threads T]

runfn: `train` with ckpt_every 1 for max_steps 10 (save: ckpt_s of each checkpoint in
metrics.jsonl), then N reruns of the finished run, each a new process that loads the newest
checkpoint and does no step (load: resumed_from.load_s: JSON read, tensors file read and
blake3-verified, decoded, copied into a new model and AdamW), and, when BIN_DIR/examples/ckpt_load
is built, checkpoint::load_latest ten times in one process (load_in_process_s: read, verified,
decoded, as torch.load is timed). torch: train_peers.py ckpt on the
same record (torch.save, torch.save + fsync, torch.load(weights_only=True), torch.load +
load_state_dict), medians of 10. Run with the bench venv's python (scripts/bench/train-setup.sh).

  python scripts/bench/train_ckpt_side_by_side.py BIN_DIR BENCH_JSON --overhead [--runs N]

The step-time overhead of a checkpoint, background write against blocking save (no torch, any
python): the same run of max_steps 60 with ckpt_every 5 and with ckpt_every 1000 (only the final
checkpoint), each with and without --sync-checkpoints, N times in turn. The overhead of one
checkpoint is the loop time (steps x batch / samples_per_s) with checkpoints less the loop time
without, over the 11 checkpoints before the final one (both pay that one, so it cancels); medians
of the N; on a shared machine run-to-run noise swamps it. So also, within each run (log_every 1):
train's ckpt_blocking_s plus how much longer the step after a checkpoint took than the next
three (the writer thread's share of that step), against a blocking save's ckpt_blocking_s. The
JSON goes under `checkpoint.async_overhead`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from common import bench_record  # noqa: E402


def run(argv, stdin=None):
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv[:2])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def excess_after_checkpoints(metrics, every, steps):
    """Median over the checkpoints before the last of how much longer the step after one took
    (the step a background write runs beside) than the median of the next three."""
    times = {}
    for line in open(metrics):
        entry = json.loads(line)
        if "step_time_s" in entry:
            times[entry["step"]] = entry["step_time_s"]
    return statistics.median(
        times[k + 1] - statistics.median(times[k + j] for j in (2, 3, 4))
        for k in range(every, steps - every + 1, every))


def overhead(tool, work, rec, args):
    """Loop seconds of each (mode, ckpt_every) run, N times in turn, and train's own figures."""
    steps, every = 60, 5
    checkpoints = steps // every - 1
    loop = {(mode, e): [] for mode in ("async", "sync") for e in (every, 1000)}
    figures = {"async": [], "sync": []}
    for i in range(args.runs):
        for (mode, e), times in loop.items():
            rec["manifest"]["config"].update({"max_steps": steps, "ckpt_every": e, "log_every": 1,
                                              "eval_every": 1000})
            # train checks the manifest against its hash: mf-hash hashes the edited one.
            path = bench_record(f"{work}/base.json", work, f"every-{e}", rec["manifest"]["config"],
                                mf_hash=tool("mf-hash"))
            argv = [tool("train"), "--out", f"{work}/run-{mode}-{e}", "--threads", str(args.threads),
                    "-q", "--fresh", "--record", path] + (["--sync-checkpoints"] if mode == "sync" else [])
            train = json.loads(run(argv).strip().splitlines()[-1])["train"]
            times.append(steps * rec["manifest"]["config"]["global_batch"] / train["samples_per_s"])
            if e == every:
                figures[mode].append({k: train[k] for k in ("ckpt_blocking_s", "ckpt_mean_s", "step_time_s")})
                figures[mode][-1]["after_ckpt_excess_s"] = excess_after_checkpoints(
                    f"{work}/run-{mode}-{e}/metrics.jsonl", every, steps)
    med = statistics.median
    per_ckpt = {mode: (med(loop[(mode, every)]) - med(loop[(mode, 1000)])) / checkpoints
                for mode in ("async", "sync")}
    train_figures = {mode: {k: med(f[k] for f in figures[mode]) for k in figures[mode][0]}
                     for mode in figures}
    step_overhead = {mode: f["ckpt_blocking_s"] + max(f["after_ckpt_excess_s"], 0.0)
                     for mode, f in train_figures.items()}
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": f"python scripts/bench/train_ckpt_side_by_side.py BIN_DIR BENCH_JSON --overhead "
                   f"--runs {args.runs} --threads {args.threads} --hidden {args.hidden}",
        "binaries": os.path.basename(os.path.normpath(args.bin_dir)),
        "hidden": rec["manifest"]["config"]["hidden"], "threads": args.threads, "optimizer": "adamw",
        "global_batch": rec["manifest"]["config"]["global_batch"], "max_steps": steps, "ckpt_every": every,
        "loadavg_at_end": list(os.getloadavg()),
        "loop_s": {f"{mode}-every-{e}": t for (mode, e), t in loop.items()},
        "overhead_per_checkpoint_s": per_ckpt,
        "overhead_ratio_async_over_sync": round(per_ckpt["async"] / per_ckpt["sync"], 3),
        "train_figures": train_figures,
        "blocking_ratio_async_over_sync": round(train_figures["async"]["ckpt_blocking_s"]
                                                / train_figures["sync"]["ckpt_blocking_s"], 3),
        "step_overhead_s": step_overhead,
        "step_overhead_ratio_async_over_sync": round(step_overhead["async"] / step_overhead["sync"], 3),
        "measured": "overhead_per_checkpoint_s: (median loop time with ckpt_every 5 - median without) / 11; "
                    "it counts the copy, any wait for the previous write and whatever the writer thread "
                    "takes from the steps. train_figures: medians of train's ckpt_blocking_s (what the loop "
                    "was held up per checkpoint), ckpt_mean_s (the whole write) and step_time_s; "
                    "after_ckpt_excess_s: median over checkpoints of the step after one less the median of "
                    "the next three (what the writer thread took from the step it ran beside; the sync figure "
                    "is the control, what a checkpoint costs the next step without one). step_overhead_s: ckpt_blocking_s + that excess (if > 0), the "
                    "within-run figure, robust to the run-to-run noise of a shared machine that loop_s "
                    "suffers from",
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bin_dir")
    p.add_argument("bench_json")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--batch", type=int, default=1024,
                   help="global batch (a small one keeps the steps of a wide model short)")
    p.add_argument("--overhead", action="store_true",
                   help="measure a checkpoint's step-time overhead, background vs blocking, only")
    args = p.parse_args()
    tool = lambda name: os.path.join(args.bin_dir, name)  # noqa: E731
    hidden = [int(w) for w in args.hidden.split(",")]
    with tempfile.TemporaryDirectory() as work:
        run([tool("demo-data"), "--out", f"{work}/snapshot", "--rows", "20000", "--parts", "2", "-q"])
        record = run([tool("mf-hash"), "testdata/train/manifest.yaml", "-q"])
        record = run([tool("shardify"), "--in", f"{work}/snapshot", "--out", f"{work}/shards",
                      "--shard-rows", "5000", "-q"], record)
        rec = json.loads(record)
        with open(f"{work}/base.json", "w") as f:
            f.write(record)
        rec["manifest"]["config"].update({"hidden": hidden, "max_steps": 10, "ckpt_every": 1,
                                          "eval_every": 10, "log_every": 1, "global_batch": args.batch})
        if args.overhead:
            block = overhead(tool, work, rec, args)
            with open(args.bench_json) as f:
                doc = json.load(f)
            doc.setdefault("checkpoint", {})["async_overhead"] = block
            with open(args.bench_json, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
            print(json.dumps({k: block[k] for k in ("overhead_per_checkpoint_s", "overhead_ratio_async_over_sync",
                                                     "blocking_ratio_async_over_sync", "step_overhead_s",
                                                     "step_overhead_ratio_async_over_sync")}), file=sys.stderr)
            return
        path = bench_record(f"{work}/base.json", work, "ckpt", rec["manifest"]["config"], mf_hash=tool("mf-hash"))
        # Blocking saves, so that each checkpoint's whole save is its line's ckpt_s.
        argv = [tool("train"), "--out", f"{work}/run", "--threads", str(args.threads), "-q", "--record", path,
                "--sync-checkpoints"]
        run(argv + ["--fresh"])
        saves = [json.loads(l)["ckpt_s"] for l in open(f"{work}/run/metrics.jsonl") if '"ckpt_s"' in l]
        loads = []
        for _ in range(args.runs):
            resumed = json.loads(run(argv).strip().splitlines()[-1])["train"]["resumed_from"]
            assert resumed["step"] == 10, resumed
            loads.append(resumed["load_s"])
        # The same load in one process, ten times, as torch.load is timed (examples/ckpt_load.rs).
        example = os.path.join(args.bin_dir, "examples", "ckpt_load")
        warm = json.loads(run([example, f"{work}/run/checkpoints", "10"]))["load_s"] \
            if os.path.exists(example) else None
        states = sorted(f for f in os.listdir(f"{work}/run/checkpoints") if f.endswith(".json"))
        with open(f"{work}/run/checkpoints/{states[-1]}") as f:
            file_bytes = json.load(f)["tensors"]["bytes"]
        run([sys.executable, os.path.join(HERE, "train_peers.py"), "ckpt", path, f"{work}/torch.json",
             "--dir", f"{work}/torch", "--threads", str(args.threads), "--saves", "10"])
        with open(f"{work}/torch.json") as f:
            peer = json.load(f)
    med = statistics.median
    ours = {"save_s": med(saves), "save_all_s": saves, "load_s": med(loads), "load_all_s": loads,
            "load_in_process_s": warm and med(warm), "load_in_process_all_s": warm, "file_bytes": file_bytes}
    torch_r = {k: med(peer[k]) for k in ("save_s", "save_durable_s", "load_s", "load_apply_s")}
    torch_r["file_bytes"] = peer["file_bytes"]
    ratio = lambda a, b: round(a / b, 3)  # noqa: E731
    block = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": f"python scripts/bench/train_ckpt_side_by_side.py BIN_DIR BENCH_JSON --runs {args.runs} "
                   f"--threads {args.threads} --hidden {args.hidden}",
        "binaries": os.path.basename(os.path.normpath(args.bin_dir)),
        "hidden": hidden, "threads": args.threads, "loadavg_at_end": list(os.getloadavg()),
        "runfn-train": ours, "torch": torch_r,
        "ratios": {"torch_load_over_runfn_load": ratio(torch_r["load_s"], ours["load_s"]),
                   "torch_load_apply_over_runfn_load": ratio(torch_r["load_apply_s"], ours["load_s"]),
                   "torch_load_over_runfn_load_in_process": warm and ratio(torch_r["load_s"],
                                                                           ours["load_in_process_s"]),
                   "torch_save_over_runfn_save": ratio(torch_r["save_s"], ours["save_s"]),
                   "torch_durable_save_over_runfn_save": ratio(torch_r["save_durable_s"], ours["save_s"]),
                   "note": "> 1: runfn is faster. runfn's load verifies the blake3 and fills a new model and "
                           "AdamW in a new process, so torch's load_apply_s is the like-for-like one; runfn's "
                           "save always fsyncs, so torch's durable save is. load_in_process_s is the like of "
                           "torch.load (read, verify, tensors ready, in a warm process)"},
    }
    with open(args.bench_json) as f:
        doc = json.load(f)
    doc.setdefault("checkpoint", {})["side_by_side"] = block
    with open(args.bench_json, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps(block["ratios"]), file=sys.stderr)


if __name__ == "__main__":
    main()
