"""The benchmark of scripts/bench-ddp.sh: 2-rank data-parallel training on the CPU, `train
--nproc-per-node 2` beside PyTorch DistributedDataParallel over Gloo started by torchrun. Writes
bench/ddp.json.

    ddp_harness.py

Run from the repository root by scripts/bench-ddp.sh, which builds the tools, makes the data and
the venv, and passes everything in BENCH_* variables. Every run is its own child process (the
launcher with its ranks: wall seconds, CPU seconds, the largest process's peak RSS, how busy other
processes kept the machine); the sides alternate within a run and the order rotates between runs;
the shards are in the page cache first. A run that timed out, or that other processes disturbed,
is run once more when the machine is quiet (a few times in all).

Same record on every side, so the same MLP, features, data, global batch (split evenly over the
ranks), steps, lr schedule and clipping, and one intra-op thread per rank:
  runfn-train      target/release/train --nproc-per-node 2 --threads 1 (c10d Gloo, gradients
                   averaged in 25 MiB buckets after backward; each rank pinned to its share of the
                   CPUs, train's default)
  torch-ddp        torchrun --standalone --nproc-per-node 2 ddp_peer.py --comm-hook timed: DDP with a
                   comm hook that times every all-reduce (the all-reduce fraction)
  torch-ddp-plain  the same with DDP's built-in hook (plain DDP throughput; nothing timed)
  torch-ddp-pinned DDP's built-in hook with each rank pinned to its share of the CPUs, as train
                   does (--pin-cpus)
Throughput = global samples / sum(wait + compute) of rank 0's steps after the first W ("steady",
the headline) and over all steps. For `train` it comes from OUT/metrics.jsonl, whose lines
average wait, compute and all-reduce over each 10 steps; its own whole-loop figures (which also
hold the final val scoring and checkpoint) are reported beside them.
"""
import functools
import glob
import json
import os
import sys

sys.dont_write_bytecode = True  # keep scripts/bench free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import (CheckFailed, Reruns, bench, bench_record, fmt_mib, interference, log, machine,  # noqa: E402
                    median_of, metrics_lines, now, ratio, read_last_json, rm, rnd, summarize, version, warm,
                    write_json)

common.PREFIX = "bench-ddp"

env = os.environ
PY = env["BENCH_PY"]                      # the bench venv's python (absolute; never recorded)
TORCHRUN = env["BENCH_TORCHRUN"]          # the bench venv's torchrun
PEER = "scripts/bench/ddp_peer.py"
PEERS = "scripts/bench/train_peers.py"    # for the peers' versions
TRAIN = env["BENCH_TRAIN"]                # target/release/train
BASE = env["BENCH_RECORD"]                # the shardify record of the bench data
DATA_SPEC = env["BENCH_DATA_SPEC"]
SCRATCH = env["BENCH_SCRATCH"]
OUT = env.get("BENCH_OUT", "bench/ddp.json")
RUNS = int(env["BENCH_RUNS_N"])
STEPS = int(env["BENCH_DDP_STEPS_N"])
BATCH = int(env["BENCH_DDP_BATCH_N"])
WARMUP = int(env["BENCH_DDP_WARMUP_N"])
NOSYNC = int(env["BENCH_DDP_NOSYNC_N"])
RUN_TIMEOUT = int(env.get("BENCH_DDP_RUN_TIMEOUT_N", "180"))
RETRIES = int(env.get("BENCH_DDP_RETRIES_N", "4"))
WORLD = 2           # ranks, on this one machine
THREADS = 1         # intra-op threads per rank
DISTURBED = 0.5     # cores kept busy by other processes during a run
RERUNS = Reruns(RETRIES, busy=DISTURBED)
LR = 0.003          # the demo manifest's lr
LOG_EVERY = 10      # train's metrics window; WARMUP is a multiple of it
TARGET_SPEEDUP = 1.5
RATES = ("samples_per_s", "data_wait_fraction", "step_time_s", "allreduce_fraction", "allreduce_s_per_step")


@functools.cache
def train_version():
    return version([TRAIN, "--version"])


def ours_tool(record):
    out_dir, stdout = os.path.join(SCRATCH, "runfn-train"), os.path.join(SCRATCH, "runfn-train.json")
    argv = [TRAIN, "--nproc-per-node", str(WORLD), "--threads", str(THREADS), "--out", out_dir, "--fresh", "-q",
            "--record", record]

    def check(s):
        t = read_last_json(stdout).get("train") or {}
        if not t.get("passed") or t.get("steps") != STEPS:
            raise CheckFailed(f"train did not pass {STEPS} steps: {t.get('reason') or t.get('steps')}")
        d = t.get("distributed") or {}
        if d.get("world_size") != WORLD:
            raise CheckFailed(f"train ran with world size {d.get('world_size')}, expected {WORLD}")
        prev, windows = 0, []
        for line in metrics_lines(os.path.join(out_dir, "metrics.jsonl")):
            if "step_time_s" not in line:
                continue
            n = line["step"] - prev
            busy = line["step_time_s"] * n
            windows.append({"from": prev, "steps": n, "busy": busy, "wait": line["data_wait_fraction"] * busy,
                            "reduce": line.get("allreduce_fraction", 0.0) * busy})
            prev = line["step"]
        if sum(w["steps"] for w in windows) != STEPS:
            raise CheckFailed("metrics.jsonl does not cover every step")

        def block(ws):
            steps = sum(w["steps"] for w in ws)
            busy, wait, reduce = (sum(w[k] for w in ws) for k in ("busy", "wait", "reduce"))
            return {"steps": steps, "samples_per_s": BATCH * steps / busy if busy else None,
                    "data_wait_fraction": wait / busy if busy else None,
                    "step_time_s": busy / steps if steps else None,
                    "allreduce_fraction": reduce / busy if busy else None,
                    "allreduce_s_per_step": reduce / steps if steps else None}

        val = t.get("val") or {}
        s["metrics"] = {
            "all": block(windows), "steady": block([w for w in windows if w["from"] >= WARMUP]),
            "loop": {"samples_per_s": t["samples_per_s"], "data_wait_fraction": t["data_wait_fraction"],
                     "allreduce_fraction": d.get("allreduce_fraction"),
                     "allreduce_s_per_step": d.get("allreduce_s_per_step")},
            "distributed": d, "final_loss": t.get("final_loss"),
            "val": {"auc": val.get("auc"), "logloss": val.get("logloss"), "rows": val.get("rows")},
            "parameters": t.get("parameters"),
        }

    return {"argv": argv, "stdout": stdout, "prepare": lambda: rm(out_dir), "check": check,
            "command": f"train --nproc-per-node {WORLD} --threads {THREADS} --out OUT --fresh -q --record RECORD"}


def peer_tool(hook, record, pin=False):
    name = "torch-ddp-pinned" if pin else "torch-ddp" if hook == "timed" else "torch-ddp-plain"
    out_json, stdout = os.path.join(SCRATCH, f"{name}.out.json"), os.path.join(SCRATCH, f"{name}.json")
    flags = ["--threads", str(THREADS), "--warmup", str(WARMUP), "--nosync-steps", str(NOSYNC), "--comm-hook", hook]
    if pin:
        flags.append("--pin-cpus")
    argv = [TORCHRUN, "--standalone", "--nproc-per-node", str(WORLD), PEER, record, out_json, *flags]

    def check(s):
        r = read_last_json(out_json)
        if r.get("steps") != STEPS or r.get("world_size") != WORLD:
            raise CheckFailed(f"{r.get('steps')} steps on {r.get('world_size')} ranks, expected {STEPS} on {WORLD}")
        s["metrics"] = {"all": r["all"], "steady": r["steady"], "nosync": r["nosync"],
                        "allreduce_cost_fraction": r["allreduce_cost_fraction"],
                        "ranks_allreduce_fraction": [x["steady"]["allreduce_fraction"] for x in r["ranks"]],
                        "ranks_allreduce_cost_fraction": [x.get("allreduce_cost_fraction") for x in r["ranks"]],
                        "final_loss": r["final_loss"], "val": r["val"], "fit_s": r["fit_s"],
                        "setup_s": r["setup_s"], "parameters": r["parameters"]}

    return name, {"argv": argv, "stdout": stdout, "prepare": lambda: rm(out_json), "check": check,
                  "command": f"torchrun --standalone --nproc-per-node {WORLD} {PEER} RECORD OUT.json {' '.join(flags)}"}


def say(m):
    st = m["steady"]
    text = (f"{st['samples_per_s']:9.0f} samples/s  {1000 * st['step_time_s']:.2f} ms/step  "
            f"wait {100 * st['data_wait_fraction']:4.1f}%")
    if st.get("allreduce_fraction") is not None:
        text += f"  all-reduce {100 * st['allreduce_fraction']:4.1f}%"
    if m.get("allreduce_cost_fraction") is not None:
        text += f"  no_sync {100 * m['allreduce_cost_fraction']:4.1f}% shorter"
    return text + f"  val auc {m['val'].get('auc') or float('nan'):.4f}"


def shard_files():
    with open(BASE) as f:
        shards_dir = json.load(f)["shards"]["dir"]
    return sorted(glob.glob(os.path.join(shards_dir, "*", "*.parquet")))


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    with open(DATA_SPEC) as f:
        spec = json.load(f)
    log(f"warming the page cache ({len(shard_files())} shard files)")
    warm(shard_files())
    config = {"model": "mlp", "hidden": [64, 32], "lr": LR, "global_batch": BATCH, "max_steps": STEPS,
              "eval_every": STEPS, "ckpt_every": STEPS, "log_every": LOG_EVERY}
    record = bench_record(BASE, SCRATCH, "ddp", config)
    tools = {"runfn-train": ours_tool(record)}
    # train pins each rank to its share of the CPUs by default, so PyTorch is also run pinned.
    for hook, pin in (("timed", False), ("default", False), ("default", True)):
        name, tool = peer_tool(hook, record, pin)
        tools[name] = tool
    samples = bench(tools, RUNS, "ddp", timeout=RUN_TIMEOUT, reruns=RERUNS,
                    check_errors=(CheckFailed, OSError, ValueError, KeyError, TypeError),
                    describe=lambda name, t, s: f"{name:16s} {s['seconds']:6.2f} s  {say(s['metrics'])}",
                    show_stderr=True)
    for t in tools.values():
        t["prepare"]()

    pv = common.peer_versions(PY, PEERS)
    torch_v = f"torch {pv.get('torch', '?')} (python {pv.get('python', '?')}), torchrun, Gloo"
    results = {}
    for name, t in tools.items():
        ss = samples[name]
        extra = {}
        for part in ("steady", "all"):
            extra[part] = {k: rnd(median_of(ss, part, k), 6 if k in ("step_time_s", "allreduce_s_per_step") else 4)
                           for k in RATES}
            extra[part]["samples_per_s_runs"] = [rnd(s["metrics"][part]["samples_per_s"], 1) for s in ss if s["ok"]]
        extra["final_loss"] = rnd(median_of(ss, "final_loss"))
        extra["val"] = {"auc": rnd(median_of(ss, "val", "auc")), "logloss": rnd(median_of(ss, "val", "logloss"))}
        good = [s for s in ss if s["ok"]]
        if good:
            extra["parameters"] = good[0]["metrics"]["parameters"]
        if name == "runfn-train":
            extra["loop"] = {k: rnd(median_of(ss, "loop", k), 6 if k.endswith("_step") else 4)
                             for k in ("samples_per_s", "data_wait_fraction", "allreduce_fraction",
                                       "allreduce_s_per_step")}
            extra["loop_note"] = ("train's own `train` section and train.distributed: samples and all-reduce time "
                                  "over the whole loop, which also holds the val scoring and the checkpoint after "
                                  "the last step")
            if good:
                d = good[0]["metrics"]["distributed"]
                extra["distributed"] = {k: d.get(k) for k in ("world_size", "backend", "buckets", "bucket_bytes")}
        else:
            extra["allreduce_cost_fraction"] = rnd(median_of(ss, "allreduce_cost_fraction"))
            extra["allreduce_cost_fraction_runs"] = [rnd(s["metrics"]["allreduce_cost_fraction"]) for s in good]
            extra["nosync_step_time_s"] = rnd(median_of(ss, "nosync", "step_time_s"), 6)
            extra["ranks_allreduce_fraction_runs"] = [[rnd(x) for x in s["metrics"]["ranks_allreduce_fraction"]]
                                                      for s in good]
            extra["fit_s"] = rnd(median_of(ss, "fit_s"), 3)
            extra["setup_s"] = rnd(median_of(ss, "setup_s"), 3)
            extra["setup_note"] = ("fit_s: process group joined and preprocessing fitted on train (every rank); "
                                   "setup_s: model, DDP and the whole train split read and preprocessed in memory; "
                                   "both before the loop, in the process wall time but not in samples/s")
        results[name] = summarize(ss, train_version() if name == "runfn-train" else torch_v, t["command"], extra)
        results[name]["process_note"] = ("median_s, all_s, cpu_s: the whole launcher with its ranks, start-up "
                                         "included; peak_rss_bytes: the largest single process")

    ours = results["runfn-train"]["steady"]["samples_per_s"]
    timed = results["torch-ddp"]["steady"]["samples_per_s"]
    plain = results["torch-ddp-plain"]["steady"]["samples_per_s"]
    pinned = results["torch-ddp-pinned"]["steady"]["samples_per_s"]
    best_name, best = max((("torch-ddp", timed), ("torch-ddp-plain", plain), ("torch-ddp-pinned", pinned)),
                          key=lambda kv: -1 if kv[1] is None else kv[1])
    value = ratio(ours, best)
    aucs = [r["val"]["auc"] for r in results.values() if r["val"]["auc"] is not None]
    doc = {
        "benchmark": "ddp: 2-rank data-parallel training on the CPU, runfn `train --nproc-per-node 2` vs PyTorch "
                     "DistributedDataParallel (Gloo, torchrun) on the same MLP, data, global batch and steps",
        "date": now(), "commit": common.commit(), "machine": machine(),
        "versions": {"train": train_version(), "libtorch_of_train": env.get("BENCH_LIBTORCH_VERSION"),
                     "peers": pv},
        "data": spec, "runs": RUNS,
        "settings": {
            "world_size": WORLD, "backend": "gloo", "threads_per_rank": THREADS, "global_batch": BATCH,
            "local_batch": BATCH // WORLD, "steps": STEPS, "steady_excludes_first_steps": WARMUP,
            "torch_nosync_steps": NOSYNC, "bucket_mb": 25,
            "config": config | {"warmup_steps": min(STEPS // 20, 200), "dropout": 0.1, "weight_decay": 0.01,
                                "min_lr_ratio": 0.05, "grad_clip": 1.0, "embedding_dim": 8, "max_vocab": 1000},
            "train_rows": (spec.get("splits") or {}).get("train", {}).get("rows"),
        },
        "results": results,
        "ratio_samples_per_s": value,
        "ratios": {"runfn_train_over_best_torch_ddp": value, "best_torch_ddp": best_name,
                   "runfn_train_over_torch_ddp": ratio(ours, timed),
                   "runfn_train_over_torch_ddp_plain": ratio(ours, plain),
                   "runfn_train_over_torch_ddp_pinned": ratio(ours, pinned),
                   "note": "steady-state samples/s, medians over the runs; best_torch_ddp is the fastest of "
                           "the three PyTorch runs (with the timing comm hook; with DDP's own hook; with its "
                           "own hook and each rank pinned to its share of the CPUs, as train pins by default)"},
        "target": {"metric": "ratio_samples_per_s", "min": TARGET_SPEEDUP, "value": value,
                   "met": None if value is None else value >= TARGET_SPEEDUP},
        "allreduce": {
            "runfn-train": {"allreduce_fraction": results["runfn-train"]["steady"]["allreduce_fraction"],
                            "allreduce_s_per_step": results["runfn-train"]["steady"]["allreduce_s_per_step"]},
            "torch-ddp": {"allreduce_fraction": results["torch-ddp"]["steady"]["allreduce_fraction"],
                          "allreduce_s_per_step": results["torch-ddp"]["steady"]["allreduce_s_per_step"],
                          "allreduce_cost_fraction": results["torch-ddp"].get("allreduce_cost_fraction")},
            "torch-ddp-plain": {"allreduce_cost_fraction": results["torch-ddp-plain"].get("allreduce_cost_fraction")},
            "torch-ddp-pinned": {
                "allreduce_cost_fraction": results["torch-ddp-pinned"].get("allreduce_cost_fraction")},
            "definitions": {
                "allreduce_fraction": "time inside the gradient all-reduce / step time (wait + compute), rank 0, "
                                      "steady steps. runfn-train: train's own timer around the bucketed all-reduce "
                                      "(gradients plus the loss, then the division), after backward, not "
                                      "overlapped. torch-ddp: the union per step of the intervals from each "
                                      "bucket's all_reduce call in the comm hook to its .then() callback; it "
                                      "overlaps the rest of backward. Both include any wait for the slower rank",
                "allreduce_cost_fraction": f"torch only: 1 - t_nosync / t_sync, t_nosync the step time of "
                                           f"{NOSYNC} more steps under ddp.no_sync() (no communication) after the "
                                           "loop, t_sync the steady step time; what the communication adds to a "
                                           "step. Not measured for runfn-train, whose all-reduce does not overlap "
                                           "compute, so its allreduce_fraction is that cost",
            },
        },
        "same_model": {"val_auc": {n: r["val"]["auc"] for n, r in results.items()},
                       "val_logloss": {n: r["val"]["logloss"] for n, r in results.items()},
                       "auc_spread": rnd(max(aucs) - min(aucs)) if aucs else None,
                       "note": "a check that every side trained the same model: val AUC and log loss should agree "
                               "to about 0.01 (the sides differ only in their random streams: init, dropout, data "
                               "order)"},
        "interference": interference(results) | {
            "reruns": RERUNS.used, "rerun_rule": f"a run that timed out ({RUN_TIMEOUT} s) or beside which other "
            f"processes kept more than {DISTURBED} cores busy was run once more after the machine went quiet, "
            f"at most {RETRIES} times in all; only the rerun is kept"},
        "notes": [
            f"Both sides run libtorch 2.13.0 on the CPU, {WORLD} ranks of {THREADS} intra-op thread each "
            "(train --threads, torch.set_num_threads), on the same machine, over c10d's Gloo on loopback.",
            "Each rank trains on its half of every global batch; the gradients are averaged over the ranks, so "
            "both sides train the model one process would with the whole batch.",
            "PyTorch: the whole train split preprocessed in memory in every rank, each step's rows gathered from "
            "a shared per-epoch permutation (train_peers.py's in-memory input path, the fastest for PyTorch); "
            "train: its own Parquet loader with an in-memory cache, prefetching on a thread of each rank.",
            "Samples/s counts wait + compute of rank 0's steps only; process start-up, preprocessing fit, the "
            "final val scoring and writing the weights are outside it (the process wall times are apart).",
            "train also all-reduces the loss with the gradients and reseeds libtorch's generator each step (for "
            "bit-exact resume); the PyTorch ranks report their local loss.",
        ],
    }
    write_json(OUT, doc)
    rm(SCRATCH)

    log(f"ddp: {STEPS} steps of {BATCH} on {WORLD} ranks x {THREADS} thread, median of {RUNS}, "
        f"steady = after step {WARMUP}")
    for name, r in results.items():
        if r["status"] != "ok":
            log(f"  {name:16s} FAILED: {r['failure']}")
            continue
        st = r["steady"]
        frac = st.get("allreduce_fraction")
        cost = r.get("allreduce_cost_fraction")
        log(f"  {name:16s} {st['samples_per_s']:9.0f} samples/s  {1000 * st['step_time_s']:.2f} ms/step"
            + ("" if frac is None else f"  all-reduce {100 * frac:.1f}% of the step")
            + ("" if cost is None else f"  (steps under no_sync {100 * cost:.1f}% shorter)")
            + f"  val auc {r['val']['auc']}  process {r['median_s']:.1f} s, peak RSS {fmt_mib(r['peak_rss_bytes'])}")
    met = doc["target"]["met"]
    log(f"  train / best torch DDP ({best_name}) = {value} "
        f"(target >= {TARGET_SPEEDUP}: {({True: 'met', False: 'NOT met', None: 'not measured'})[met]})")
    log(f"wrote {OUT}")


if __name__ == "__main__":
    main()
