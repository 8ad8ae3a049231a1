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


def run(argv, stdin=None):
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv[:2])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bin_dir")
    p.add_argument("bench_json")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hidden", default="1024,1024")
    args = p.parse_args()
    tool = lambda name: os.path.join(args.bin_dir, name)  # noqa: E731
    hidden = [int(w) for w in args.hidden.split(",")]
    with tempfile.TemporaryDirectory() as work:
        run([tool("demo-data"), "--out", f"{work}/snapshot", "--rows", "20000", "--parts", "2", "-q"])
        record = run([tool("mf-hash"), "testdata/train/manifest.yaml", "-q"])
        record = run([tool("shardify"), "--in", f"{work}/snapshot", "--out", f"{work}/shards",
                      "--shard-rows", "5000", "-q"], record)
        rec = json.loads(record)
        rec["manifest"]["config"].update({"hidden": hidden, "max_steps": 10, "ckpt_every": 1,
                                          "eval_every": 10, "log_every": 1, "global_batch": 1024})
        path = f"{work}/record.json"
        with open(path, "w") as f:
            json.dump(rec, f)
        argv = [tool("train"), "--out", f"{work}/run", "--threads", str(args.threads), "-q", "--record", path]
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
