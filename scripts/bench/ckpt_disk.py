"""Checkpoints of a large state at the disk's speed, all measured in one run on one disk:

- the disk: dd's sequential write (oflag=direct, conv=fsync) and read (iflag=direct) of as many
  bytes as a checkpoint, into a new file each time, before and after the tools (the physical limit);
- runfn: train's blocking save of a wide MLP with its AdamW moments (hidden 9216,9216: 85M
  parameters, about 1 GB a checkpoint), each checkpoint's `ckpt_s` (tensors written and fsynced,
  hashed, JSON committed, older checkpoints pruned); its load by checkpoint::load_latest in one
  process (tools/train/examples/ckpt_load.rs: read, blake3-verified, tensors ready), from the
  page cache (warm) and with the file's pages dropped first (cold: what a resume on a new machine
  reads);
- torch: the same state (train_peers.py ckpt --cold): a durable torch.save (fsync, rename, folder
  fsync, as runfn's), torch.load(weights_only=True) warm and cold;
- background checkpoints: the same run with ckpt_every E, log_every 1, asynchronous against
  --sync-checkpoints. Per checkpoint (the first, which allocates the copy, and the last, which ends
  the run, left out): what the loop was held up (its ckpt_blocking_s, plus the next update's wait
  for the copy) plus how much longer the next step took than the median of the steps before the
  checkpoint. The cost seen by training is the mean of that, against the blocking save's.

  python scripts/bench/ckpt_disk.py BIN_DIR OUT_JSON [--runs N] [--hidden 9216,9216] [--batch 32]
      [--steps 24] [--every 4] [--work DIR]

BIN_DIR holds release builds of demo-data, mf-hash, shardify, train and examples/ckpt_load; run
with the bench venv's python (torch). WORK (default bench/work/ckpt-disk) must be on the disk the
checkpoints are meant for; it is removed at the end. Ratios > 1: runfn is faster.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from common import bench_record, commit, machine, write_json  # noqa: E402

DD_BLOCK = 16 << 20
med = statistics.median


def run(argv, stdin=None):
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv[:2])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def dd_seconds(argv):
    """dd's own figure for the copy (its last stderr line: '... copied, S s, ...')."""
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"dd failed: {r.stderr}")
    return float(re.search(r"copied, ([0-9.]+) s", r.stderr).group(1))


def disk(work, nbytes, runs):
    """Sequential write and read of nbytes (rounded up to 16 MiB blocks), O_DIRECT, a new file
    each time (a file rewritten in place would skip allocating its blocks)."""
    count = -(-nbytes // DD_BLOCK)
    path, out = os.path.join(work, "dd.bin"), {"write_s": [], "read_s": [], "bytes": count * DD_BLOCK}
    for _ in range(runs):
        out["write_s"].append(dd_seconds(["dd", "if=/dev/zero", f"of={path}", f"bs={DD_BLOCK}", f"count={count}",
                                          "oflag=direct", "conv=fsync"]))
        out["read_s"].append(dd_seconds(["dd", f"if={path}", "of=/dev/null", f"bs={DD_BLOCK}", "iflag=direct"]))
        os.remove(path)
    return out


def lines(metrics):
    with open(metrics) as f:
        return {entry["step"]: entry for entry in map(json.loads, f) if "step_time_s" in entry}


def costs_per_checkpoint(metrics, every, steps):
    """Per checkpoint but the first and the last: the loop's hold and the next step's excess."""
    by_step, out = lines(metrics), []
    for k in range(2 * every, steps, every):
        before = med(by_step[k - j]["step_time_s"] for j in range(1, every))
        after = by_step[k + 1]
        held = by_step[k]["ckpt_blocking_s"]
        out.append({"step": k, "held_s": held, "copy_wait_s": after.get("ckpt_copy_wait_s", 0.0),
                    "next_step_excess_s": after["step_time_s"] - before,
                    "cost_s": held + max(after["step_time_s"] - before, 0.0),
                    "save_s": by_step[k].get("ckpt_s")})
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bin_dir")
    p.add_argument("out_json")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--hidden", default="9216,9216")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", default=os.path.join(ROOT, "bench", "work", "ckpt-disk"))
    args = p.parse_args()
    if args.steps < 3 * args.every:
        p.error("--steps must leave at least one checkpoint between the first and the last")
    tool = lambda name: os.path.join(args.bin_dir, name)  # noqa: E731
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        run([tool("demo-data"), "--out", f"{work}/snapshot", "--rows", "20000", "--parts", "2", "-q"])
        record = run([tool("mf-hash"), "testdata/train/manifest.yaml", "-q"])
        base = os.path.join(work, "base.json")
        with open(base, "w") as f:
            f.write(run([tool("shardify"), "--in", f"{work}/snapshot", "--out", f"{work}/shards",
                         "--shard-rows", "5000", "-q"], record))
        with open(base) as f:
            config = json.load(f)["manifest"]["config"]
        config.update({"hidden": [int(w) for w in args.hidden.split(",")], "global_batch": args.batch,
                       "max_steps": args.steps, "ckpt_every": args.every, "keep_checkpoints": 2,
                       "eval_every": 10 * args.steps, "log_every": 1})
        rec = bench_record(base, work, "ckpt", config, mf_hash=tool("mf-hash"))

        disk_before = disk(work, 1 << 30, args.runs)
        modes = {"async": [], "sync": []}
        for i in range(args.runs):
            for mode in modes:
                out = os.path.join(work, f"run-{mode}")
                argv = [tool("train"), "--out", out, "--threads", str(args.threads), "-q", "--fresh",
                        "--record", rec] + (["--sync-checkpoints"] if mode == "sync" else [])
                run(argv)
                modes[mode] += costs_per_checkpoint(f"{out}/metrics.jsonl", args.every, args.steps)
        ckpts = os.path.join(work, "run-sync", "checkpoints")
        newest = sorted(f for f in os.listdir(ckpts) if f.endswith(".json"))[-1]
        with open(os.path.join(ckpts, newest)) as f:
            file_bytes = json.load(f)["tensors"]["bytes"]
        example = tool(os.path.join("examples", "ckpt_load"))
        load_warm = json.loads(run([example, ckpts, str(max(args.runs, 5))]))["load_s"]
        load_cold = json.loads(run([example, ckpts, str(max(args.runs, 5)), "--cold"]))["load_s"]
        run([sys.executable, os.path.join(HERE, "train_peers.py"), "ckpt", rec, f"{work}/torch.json",
             "--dir", f"{work}/torch", "--threads", str(args.threads), "--saves", str(max(args.runs, 5)),
             "--cold"])
        with open(f"{work}/torch.json") as f:
            peer = json.load(f)
        disk_after = disk(work, file_bytes, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    write_s = med(disk_before["write_s"] + disk_after["write_s"])
    read_s = med(disk_before["read_s"] + disk_after["read_s"])
    dd_bytes = disk_after["bytes"]
    save_s = med(c["save_s"] for c in modes["sync"])
    # Means, not medians: most background checkpoints cost the next step nothing measurable, so a
    # median says 0 however slow the few others are. A negative excess counts as 0 (the steps'
    # own noise is not a gain), which errs against the background write.
    blocking = statistics.mean(c["cost_s"] for c in modes["sync"])
    background = statistics.mean(c["cost_s"] for c in modes["async"])
    ours = {"save_s": save_s, "load_warm_s": med(load_warm), "load_cold_s": med(load_cold),
            "file_bytes": file_bytes, "load_warm_all_s": load_warm, "load_cold_all_s": load_cold}
    torch_r = {k: med(peer[k]) for k in ("save_durable_s", "save_s", "load_s", "load_cold_s")}
    torch_r["file_bytes"] = peer["file_bytes"]
    mb_s = lambda nbytes, s: round(nbytes / s / 1e6, 1)  # noqa: E731
    rnd = lambda x: round(x, 3)  # noqa: E731
    block = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": f"python scripts/bench/ckpt_disk.py BIN_DIR OUT_JSON --runs {args.runs} --hidden {args.hidden} "
                   f"--batch {args.batch} --steps {args.steps} --every {args.every} --threads {args.threads}",
        "machine": machine(), "loadavg_at_end": list(os.getloadavg()),
        "hidden": config["hidden"], "global_batch": args.batch, "threads": args.threads,
        "disk": {"write_MB_s": mb_s(dd_bytes, write_s), "read_MB_s": mb_s(dd_bytes, read_s),
                 "write_s": write_s, "read_s": read_s, "bytes": dd_bytes,
                 "before": disk_before, "after": disk_after},
        "runfn-train": ours | {"save_MB_s": mb_s(file_bytes, save_s),
                               "load_cold_MB_s": mb_s(file_bytes, ours["load_cold_s"])},
        "torch": torch_r,
        "background": {"every": args.every, "steps": args.steps,
                       "cost_s": background, "blocking_cost_s": blocking,
                       # The control: a blocking save's next step has no writer beside it, so
                       # its excess is the steps' own noise.
                       "next_step_excess_mean_s": {m: statistics.mean(c["next_step_excess_s"] for c in cs)
                                                   for m, cs in modes.items()},
                       "per_checkpoint": modes},
        "ratios": {
            "save_over_disk_write": rnd(mb_s(file_bytes, save_s) / mb_s(dd_bytes, write_s)),
            "load_cold_over_disk_read": rnd(mb_s(file_bytes, ours["load_cold_s"]) / mb_s(dd_bytes, read_s)),
            "torch_durable_save_over_runfn_save": rnd(torch_r["save_durable_s"] / save_s),
            "torch_load_over_runfn_load_warm": rnd(torch_r["load_s"] / ours["load_warm_s"]),
            "torch_load_cold_over_runfn_load_cold": rnd(torch_r["load_cold_s"] / ours["load_cold_s"]),
            "background_cost_over_blocking_save": rnd(background / blocking),
            "note": "save_over_disk_write and load_cold_over_disk_read: checkpoint bytes per second over "
                    "dd's with O_DIRECT (target >= 0.8); torch_*: the peer's seconds over runfn's "
                    "(target >= 1.0); background_cost_over_blocking_save: the mean cost a background "
                    "checkpoint puts on training over a blocking one's (target <= 0.10)",
        },
    }
    r = block["ratios"]
    block["targets"] = {
        "save": {"target": {
            "text": "save >= 0.8x dd's direct write and >= 1.0x a durable torch.save",
            "value": f"{r['save_over_disk_write']}x disk, {r['torch_durable_save_over_runfn_save']}x torch",
            "met": r["save_over_disk_write"] >= 0.8 and r["torch_durable_save_over_runfn_save"] >= 1.0}},
        "load": {"target": {
            "text": "cold load >= 0.8x dd's direct read; loads >= 1.0x torch.load, warm and cold",
            "value": f"{r['load_cold_over_disk_read']}x disk, {r['torch_load_over_runfn_load_warm']}x torch warm, "
                     f"{r['torch_load_cold_over_runfn_load_cold']}x torch cold",
            "met": r["load_cold_over_disk_read"] >= 0.8 and r["torch_load_over_runfn_load_warm"] >= 1.0
                   and r["torch_load_cold_over_runfn_load_cold"] >= 1.0}},
        "background": {"target": {
            "text": "a background checkpoint's cost to training <= 10% of a blocking save's",
            "value": r["background_cost_over_blocking_save"],
            "met": r["background_cost_over_blocking_save"] <= 0.10}},
    }
    doc = {"benchmark": "checkpoints of a ~1 GB state (wide MLP + AdamW) at the disk's speed: runfn train "
                        "vs torch.save/torch.load vs dd O_DIRECT, and background vs blocking checkpoints",
           "commit": commit(), "runs": args.runs} | block
    write_json(args.out_json, doc)
    print(json.dumps(block["ratios"] | {"met": {k: v["target"]["met"] for k, v in block["targets"].items()}}),
          file=sys.stderr)


if __name__ == "__main__":
    main()
