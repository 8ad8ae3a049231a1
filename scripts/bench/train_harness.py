"""The benchmarks of scripts/bench-train.sh: `train` beside PyTorch training loops, and its
checkpoints beside torch.save / torch.load. Writes bench/train.json.

    train_harness.py

Run from the repository root by scripts/bench-train.sh, which builds the tools, makes the data and
the venv, and passes everything in BENCH_* variables. Every run is its own child process (wall
seconds, peak RSS from wait4, CPU seconds, and how busy other processes kept the machine); the tools
alternate within a run and the order rotates between runs; the shards are in the page cache first.
A run that timed out, or that other processes disturbed, is run once more when the machine is quiet
(a few times in all). A tool that fails is recorded as failed and not run again; the others go on.

Training (same record, so the same MLP, features, data, batch, steps, lr schedule, clipping and
thread count on every side):
  runfn-train       target/release/train --threads T --fresh --record RECORD
  torch-dataloader  train_peers.py train-dataloader  (IterableDataset over the Parquet shards, K workers)
  torch-inmemory    train_peers.py train-inmemory    (tensors built once, a randperm slice per step)
Per step, wait = time blocked on the next batch, compute = the rest of the step. Samples/s =
samples / sum(wait + compute) and data wait fraction = sum(wait) / sum(wait + compute), over all
steps and over the steps after the first W ("steady", the headline). For `train` both come from
OUT/metrics.jsonl, whose lines average wait and compute over each 10 steps; its own whole-loop
figures (which also hold the final val scoring and checkpoint) are reported beside them.

Checkpoints, per model size (hidden widths): the state is the weights plus the AdamW moments.
  runfn-train  train with ckpt_every 1: the `ckpt_s` of every step in metrics.jsonl (encode to
               safetensors, blake3, temp file + fsync + rename + folder fsync for the tensors and
               for the JSON state, prune old checkpoints). Load is not timed: train loads a
               checkpoint only when it resumes, inside the run, and has no command that only loads.
  torch        train_peers.py ckpt: torch.save; torch.save made durable the same way (fsync,
               rename, folder fsync); torch.load(weights_only=True); torch.load + load_state_dict.
"""
import functools
import glob
import json
import os
import statistics
import sys

sys.dont_write_bytecode = True  # keep scripts/bench free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import (CheckFailed, Reruns, bench, bench_record, fmt_mib, interference, log, machine,  # noqa: E402
                    median_of, metrics_lines, now, ratio, read_last_json, rm, rnd, summarize, version, warm,
                    write_json)

common.PREFIX = "bench-train"

env = os.environ
PY = env["BENCH_PY"]                      # the bench venv's python (absolute; never recorded)
PY_SHOWN = "python"                       # how the JSON names it
PEERS = "scripts/bench/train_peers.py"
TRAIN = env["BENCH_TRAIN"]                # target/release/train
BASE = env["BENCH_RECORD"]                # the shardify record of the bench data
DATA_SPEC = env["BENCH_DATA_SPEC"]
SCRATCH = env["BENCH_SCRATCH"]
OUT = env.get("BENCH_OUT", "bench/train.json")
RUNS = int(env["BENCH_RUNS_N"])
STEPS = int(env["BENCH_TRAIN_STEPS_N"])
BATCH = int(env["BENCH_TRAIN_BATCH_N"])
THREADS = int(env["BENCH_TRAIN_THREADS_N"])
WORKERS = int(env["BENCH_TRAIN_WORKERS_N"])
WARMUP = int(env["BENCH_TRAIN_WARMUP_N"])
CKPT_HIDDEN = [[int(w) for w in h.split(",")] for h in env["BENCH_CKPT_HIDDEN_N"].split()]
CKPT_SAVES = int(env["BENCH_CKPT_SAVES_N"])
ONLY = env["BENCH_ONLY_N"].split(",")
RUN_TIMEOUT = int(env.get("BENCH_TRAIN_RUN_TIMEOUT_N", "180"))
RETRIES = int(env.get("BENCH_TRAIN_RETRIES_N", "4"))
DISTURBED = 0.5     # cores kept busy by other processes during a run
RERUNS = Reruns(RETRIES, busy=DISTURBED)  # reruns of disturbed runs, over the whole harness
LR = 0.003          # the demo manifest's lr
LOG_EVERY = 10      # train's metrics window; WARMUP is a multiple of it
TARGET_SPEEDUP = 1.5
TAIL = max(LOG_EVERY, STEPS // 10 // LOG_EVERY * LOG_EVERY)  # last steps whose train loss is compared


def make_record(tag, config):
    """The bench data's record with manifest.config replaced (common.bench_record)."""
    return bench_record(BASE, SCRATCH, tag, config)


def run_all(tools, label):
    """tools: {name: {"argv", "stdout", "prepare"?, "check", "say"}}; check(sample) parses the
    outputs into sample["metrics"] or raises CheckFailed. A run that timed out or that other
    processes disturbed (more than DISTURBED cores busy beside it: with every core in use by the
    benchmark, that slows libtorch's thread pool many times over) is run once more after the machine
    calmed down, RETRIES times in all. Returns {name: [samples]}."""
    return bench(tools, RUNS, label, timeout=RUN_TIMEOUT, reruns=RERUNS,
                 check_errors=(CheckFailed, OSError, ValueError, KeyError, TypeError),
                 describe=lambda name, t, s: f"{name:16s} {s['seconds']:7.2f} s  {t['say'](s['metrics'])}",
                 show_stderr=True)


@functools.cache
def train_version():
    return version([TRAIN, "--version"])


def peer_versions():
    return common.peer_versions(PY, PEERS)


def shard_files():
    with open(BASE) as f:
        shards_dir = json.load(f)["shards"]["dir"]
    return sorted(glob.glob(os.path.join(shards_dir, "*", "*.parquet")))


# --- 1. training throughput ---------------------------------------------------------------------------
def ours_train_tool(record):
    out_dir, stdout = os.path.join(SCRATCH, "runfn-train"), os.path.join(SCRATCH, "runfn-train.json")
    # A blocking save: only then does each metrics line carry the write's own ckpt_s.
    argv = [TRAIN, "--out", out_dir, "--threads", str(THREADS), "--fresh", "--sync-checkpoints", "-q",
            "--record", record]

    def check(s):
        t = read_last_json(stdout).get("train") or {}
        if not t.get("passed") or t.get("steps") != STEPS:
            raise CheckFailed(f"train did not pass {STEPS} steps: {t.get('reason') or t.get('steps')}")
        prev, windows = 0, []
        for line in metrics_lines(os.path.join(out_dir, "metrics.jsonl")):
            if "step_time_s" not in line:
                continue
            n = line["step"] - prev
            busy = line["step_time_s"] * n
            windows.append({"from": prev, "steps": n, "busy": busy, "wait": line["data_wait_fraction"] * busy,
                            "loss": line["loss"]})
            prev = line["step"]
        if sum(w["steps"] for w in windows) != STEPS:
            raise CheckFailed("metrics.jsonl does not cover every step")

        def block(ws):
            steps = sum(w["steps"] for w in ws)
            busy, wait = sum(w["busy"] for w in ws), sum(w["wait"] for w in ws)
            return {"steps": steps, "samples_per_s": BATCH * steps / busy if busy else None,
                    "data_wait_fraction": wait / busy if busy else None,
                    "step_time_s": (busy - wait) / steps if steps else None}

        val = t.get("val") or {}
        s["metrics"] = {
            "all": block(windows), "steady": block([w for w in windows if w["from"] >= WARMUP]),
            "loop": {"samples_per_s": t["samples_per_s"], "data_wait_fraction": t["data_wait_fraction"],
                     "step_time_s": t["step_time_s"]},
            "train_wall_s": t["wall_s"], "final_loss": windows[-1]["loss"],
            "tail_loss": sum(w["loss"] * w["steps"] for w in windows if w["from"] >= STEPS - TAIL) / TAIL,
            "val": {"auc": val.get("auc"), "logloss": val.get("logloss"), "rows": val.get("rows")},
            "parameters": t.get("parameters"), "features": t.get("features"),
        }

    return {"argv": argv, "stdout": stdout, "prepare": lambda: rm(out_dir), "check": check,
            "command": f"train --out OUT --threads {THREADS} --fresh -q --record RECORD",
            "say": say_train}


def peer_train_tool(mode, record):
    out_json, stdout = os.path.join(SCRATCH, f"torch-{mode}.out.json"), os.path.join(SCRATCH, f"torch-{mode}.json")
    flags = ["--threads", str(THREADS), "--warmup", str(WARMUP)]
    if mode == "dataloader":
        flags += ["--workers", str(WORKERS)]
    argv = [PY, PEERS, f"train-{mode}", record, out_json, *flags]

    def check(s):
        r = read_last_json(out_json)
        if r.get("steps") != STEPS:
            raise CheckFailed(f"{r.get('steps')} steps, expected {STEPS}")
        s["metrics"] = {"all": r["all"], "steady": r["steady"], "final_loss": r["final_loss"],
                        "tail_loss": statistics.fmean(r["losses"][-TAIL:]), "val": r["val"],
                        "fit_s": r["fit_s"], "setup_s": r["setup_s"], "loop_s": r["loop_s"],
                        "parameters": r["parameters"], "features": r["features"]}

    return {"argv": argv, "stdout": stdout, "prepare": lambda: rm(out_json), "check": check,
            "command": f"{PY_SHOWN} {PEERS} train-{mode} RECORD OUT.json {' '.join(flags)}",
            "say": say_train}


def say_train(m):
    st = m["steady"]
    return (f"{st['samples_per_s']:10.0f} samples/s  wait {100 * st['data_wait_fraction']:5.1f}%  "
            f"compute {1000 * st['step_time_s']:.2f} ms/step  val auc {m['val'].get('auc') or float('nan'):.4f}")


def run_train():
    config = {"model": "mlp", "hidden": [64, 32], "lr": LR, "global_batch": BATCH, "max_steps": STEPS,
              "eval_every": STEPS, "ckpt_every": STEPS, "log_every": LOG_EVERY}
    record = make_record("train", config)
    tools = {"runfn-train": ours_train_tool(record),
             "torch-dataloader": peer_train_tool("dataloader", record),
             "torch-inmemory": peer_train_tool("inmemory", record)}
    samples = run_all(tools, "train")
    for t in tools.values():
        t["prepare"]()

    pv = peer_versions()
    torch_v = f"torch {pv.get('torch', '?')}, pyarrow {pv.get('pyarrow', '?')}, numpy {pv.get('numpy', '?')}"
    versions = {"runfn-train": train_version(), "torch-dataloader": torch_v, "torch-inmemory": torch_v}
    results = {}
    for name, t in tools.items():
        ss = samples[name]
        extra = {}
        for part in ("steady", "all"):
            extra[part] = {k: rnd(median_of(ss, part, k), 6 if k == "step_time_s" else 4)
                           for k in ("samples_per_s", "data_wait_fraction", "step_time_s")}
            extra[part]["samples_per_s_runs"] = [rnd(s["metrics"][part]["samples_per_s"], 1)
                                                 for s in ss if s["ok"]]
        extra["final_loss"] = rnd(median_of(ss, "final_loss"))
        extra["tail_loss"] = rnd(median_of(ss, "tail_loss"))
        extra["val"] = {"auc": rnd(median_of(ss, "val", "auc")), "logloss": rnd(median_of(ss, "val", "logloss"))}
        good = [s for s in ss if s["ok"]]
        if good:
            extra["parameters"] = good[0]["metrics"]["parameters"]
        if name == "runfn-train":
            extra["loop"] = {k: rnd(median_of(ss, "loop", k), 6 if k == "step_time_s" else 4)
                             for k in ("samples_per_s", "data_wait_fraction", "step_time_s")}
            extra["loop_note"] = ("train's own `train` section: samples over the whole loop, which also holds "
                                  "the val scoring and the checkpoint after the last step")
            extra["prefetch_batches"] = 8
        else:
            extra["fit_s"] = rnd(median_of(ss, "fit_s"), 3)
            extra["setup_s"] = rnd(median_of(ss, "setup_s"), 3)
            extra["setup_note"] = ("fit_s: preprocessing fitted on train; setup_s: model, optimizer and input "
                                   "pipeline built (in-memory: the whole train split read and preprocessed); both "
                                   "before the loop, in the process wall time but not in samples/s")
        if name == "torch-dataloader":
            extra["dataloader"] = {"num_workers": WORKERS, "batch_size": None, "persistent_workers": True,
                                   "prefetch_factor": 2}
        results[name] = summarize(ss, versions[name], t["command"], extra)
        results[name]["process_note"] = ("median_s, all_s, cpu_s, peak_rss_bytes: the whole process, start-up "
                                         "included; cpu_s counts DataLoader workers, peak_rss_bytes is the largest "
                                         "single process (workers not added)")

    ours = results["runfn-train"]["steady"]["samples_per_s"]
    dl = results["torch-dataloader"]["steady"]["samples_per_s"]
    mem = results["torch-inmemory"]["steady"]["samples_per_s"]
    best_name, best = max((("torch-dataloader", dl), ("torch-inmemory", mem)),
                          key=lambda kv: -1 if kv[1] is None else kv[1])
    ratios = {"runfn_train_over_best_torch": ratio(ours, best), "best_torch": best_name,
              "runfn_train_over_torch_dataloader": ratio(ours, dl),
              "runfn_train_over_torch_inmemory": ratio(ours, mem)}
    wait = {name: results[name]["steady"]["data_wait_fraction"] for name in results}
    aucs = [r["val"]["auc"] for r in results.values() if r["val"]["auc"] is not None]
    same_model = {"val_auc": {n: r["val"]["auc"] for n, r in results.items()},
                  "val_logloss": {n: r["val"]["logloss"] for n, r in results.items()},
                  f"train_loss_last_{TAIL}_steps": {n: r["tail_loss"] for n, r in results.items()},
                  "auc_spread": rnd(max(aucs) - min(aucs)) if aucs else None,
                  "note": "a check that every side trained the same model: val AUC and log loss should agree to "
                          "about 0.01 (the sides differ only in their random streams: init, dropout, data order)"}
    with open(BASE) as f:
        base = json.load(f)
    block = {
        "config": config | {"warmup_steps": min(STEPS // 20, 200), "dropout": 0.1, "weight_decay": 0.01,
                            "min_lr_ratio": 0.05, "grad_clip": 1.0, "embedding_dim": 8, "max_vocab": 1000},
        "threads": THREADS, "steps": STEPS, "global_batch": BATCH, "steady_excludes_first_steps": WARMUP,
        "train_rows": base["shards"]["splits"]["train"]["rows"] if "splits" in base["shards"] else None,
        "results": results, "ratios": ratios, "data_wait_fraction": wait, "same_model": same_model,
        "target": {"metric": "runfn_train_over_best_torch", "min": TARGET_SPEEDUP,
                   "value": ratios["runfn_train_over_best_torch"],
                   "met": None if ratios["runfn_train_over_best_torch"] is None
                   else ratios["runfn_train_over_best_torch"] >= TARGET_SPEEDUP},
    }
    log(f"train: {STEPS} steps of {BATCH}, {THREADS} threads, median of {RUNS}, steady = after step {WARMUP}")
    for name, r in results.items():
        if r["status"] != "ok":
            log(f"  {name:16s} FAILED: {r['failure']}")
            continue
        st = r["steady"]
        log(f"  {name:16s} {st['samples_per_s']:10.0f} samples/s  data wait {100 * st['data_wait_fraction']:5.1f}%  "
            f"compute {1000 * st['step_time_s']:.2f} ms/step  val auc {r['val']['auc']}  "
            f"process {r['median_s']:.1f} s, peak RSS {fmt_mib(r['peak_rss_bytes'])}")
    met = block["target"]["met"]
    log(f"  train / best torch ({best_name}) = {ratios['runfn_train_over_best_torch']} "
        f"(target >= {TARGET_SPEEDUP}: {({True: 'met', False: 'NOT met', None: 'not measured'})[met]})")
    return block


# --- 2. checkpoints -----------------------------------------------------------------------------------
def ours_ckpt_tool(tag, record):
    out_dir, stdout = os.path.join(SCRATCH, f"runfn-ckpt-{tag}"), os.path.join(SCRATCH, f"runfn-ckpt-{tag}.json")
    # A blocking save: only then does each metrics line carry the write's own ckpt_s.
    argv = [TRAIN, "--out", out_dir, "--threads", str(THREADS), "--fresh", "--sync-checkpoints", "-q",
            "--record", record]

    def check(s):
        t = read_last_json(stdout).get("train") or {}
        if not t.get("passed"):
            raise CheckFailed(f"train failed: {t.get('reason')}")
        saves = [line["ckpt_s"] for line in metrics_lines(os.path.join(out_dir, "metrics.jsonl")) if "ckpt_s" in line]
        if len(saves) != CKPT_SAVES:
            raise CheckFailed(f"{len(saves)} checkpoints in metrics.jsonl, expected {CKPT_SAVES}")
        states = sorted(glob.glob(os.path.join(out_dir, "checkpoints", "step-*.json")))
        with open(states[-1]) as f:
            tensor_bytes = json.load(f)["tensors"]["bytes"]
        s["metrics"] = {"save_s": statistics.median(saves), "save_all_s": saves, "file_bytes": tensor_bytes,
                        "state_json_bytes": os.path.getsize(states[-1]), "parameters": t.get("parameters")}

    return {"argv": argv, "stdout": stdout, "prepare": lambda: rm(out_dir), "check": check,
            "command": f"train --out OUT --threads {THREADS} --fresh -q --record RECORD "
                       f"(manifest.config.ckpt_every 1, max_steps {CKPT_SAVES})",
            "say": lambda m: f"save {1000 * m['save_s']:.2f} ms (median of {CKPT_SAVES}), {fmt_size(m['file_bytes'])}"}


def peer_ckpt_tool(tag, record):
    out_json, stdout = os.path.join(SCRATCH, f"torch-ckpt-{tag}.out.json"), os.path.join(SCRATCH, f"torch-ckpt-{tag}.json")
    ckpt_dir = os.path.join(SCRATCH, f"torch-ckpt-{tag}")
    argv = [PY, PEERS, "ckpt", record, out_json, "--dir", ckpt_dir, "--threads", str(THREADS),
            "--saves", str(CKPT_SAVES)]

    def check(s):
        r = read_last_json(out_json)
        s["metrics"] = {k: statistics.median(r[k]) for k in ("save_s", "save_durable_s", "load_s", "load_apply_s")}
        s["metrics"].update({"file_bytes": r["file_bytes"], "tensor_bytes": r["tensor_bytes"],
                             "parameters": r["parameters"]})

    def prepare():
        rm(out_json)
        rm(ckpt_dir)

    return {"argv": argv, "stdout": stdout, "prepare": prepare, "check": check,
            "command": f"{PY_SHOWN} {PEERS} ckpt RECORD OUT.json --dir DIR --threads {THREADS} --saves {CKPT_SAVES}",
            "say": lambda m: (f"save {1000 * m['save_s']:.2f} ms, durable {1000 * m['save_durable_s']:.2f} ms, "
                              f"load {1000 * m['load_s']:.2f} ms, {fmt_size(m['file_bytes'])}")}


def run_ckpt():
    sizes = {}
    pv = peer_versions()
    for hidden in CKPT_HIDDEN:
        tag = "mlp-" + "-".join(map(str, hidden))
        config = {"model": "mlp", "hidden": hidden, "lr": LR, "global_batch": BATCH, "max_steps": CKPT_SAVES,
                  "ckpt_every": 1, "keep_checkpoints": 2, "eval_every": CKPT_SAVES, "log_every": 1}
        record = make_record(f"ckpt-{tag}", config)
        tools = {"runfn-train": ours_ckpt_tool(tag, record), "torch": peer_ckpt_tool(tag, record)}
        samples = run_all(tools, f"checkpoint {tag}")
        for t in tools.values():
            t["prepare"]()
        res = {}
        for name, t in tools.items():
            ss = samples[name]
            keys = ("save_s",) if name == "runfn-train" else ("save_s", "save_durable_s", "load_s", "load_apply_s")
            extra = {k: rnd(median_of(ss, k), 6) for k in keys}
            extra[f"{keys[0]}_runs"] = [rnd(s["metrics"]["save_s"], 6) for s in ss if s["ok"]]
            good = [s for s in ss if s["ok"]]
            if good:
                m = good[-1]["metrics"]
                extra["file_bytes"] = m["file_bytes"]
                extra["parameters"] = m["parameters"]
                if name == "torch":
                    extra["tensor_bytes"] = m["tensor_bytes"]
                else:
                    extra["state_json_bytes"] = m["state_json_bytes"]
            if name == "runfn-train":
                extra["load_s"] = None
                extra["measured"] = ("save: train's own ckpt_s for each of the run's checkpoints (median of "
                                     f"{CKPT_SAVES} per run, then of the runs): safetensors encode, blake3, tensors "
                                     "and JSON state each written to a temp file, fsynced, renamed, folder fsynced, "
                                     "old checkpoints pruned. load: not measured (only done inside a resuming run)")
                ver = train_version()
            else:
                extra["measured"] = (f"median of {CKPT_SAVES} per run, then of the runs. save_s: torch.save(state, "
                                     "path), no fsync; save_durable_s: torch.save to a temp file, flush, fsync, "
                                     "rename, folder fsync; load_s: torch.load(weights_only=True) from the page "
                                     "cache; load_apply_s: torch.load + model/optimizer load_state_dict")
                ver = f"torch {pv.get('torch', '?')}"
            res[name] = summarize(ss, ver, t["command"], extra)
            res[name].pop("median_s", None)  # the process wall time says nothing about a checkpoint
            res[name]["process_all_s"] = res[name].pop("all_s", None)
        ours, torch_r = res["runfn-train"], res["torch"]
        ratios = {"torch_save_over_runfn_save": ratio(torch_r.get("save_s"), ours.get("save_s")),
                  "torch_durable_save_over_runfn_save": ratio(torch_r.get("save_durable_s"), ours.get("save_s")),
                  "note": "> 1: runfn's save is faster; runfn's save is always durable (fsync), so the "
                          "durable torch figure is the like-for-like one"}
        sizes[tag] = {"hidden": hidden, "parameters": ours.get("parameters") or torch_r.get("parameters"),
                      "results": res, "ratios": ratios}
        log(f"checkpoint {tag}: runfn save {fmt_ms(ours.get('save_s'))}, torch.save {fmt_ms(torch_r.get('save_s'))}, "
            f"durable {fmt_ms(torch_r.get('save_durable_s'))}, torch.load {fmt_ms(torch_r.get('load_s'))}; "
            f"torch.save / runfn = {ratios['torch_save_over_runfn_save']}, durable / runfn = "
            f"{ratios['torch_durable_save_over_runfn_save']}")
    return {"saves_per_run": CKPT_SAVES, "state": "model weights + AdamW first and second moments (fp32)",
            "sizes": sizes}


def fmt_ms(x):
    return "failed" if x is None else f"{1000 * x:.2f} ms"


def fmt_size(n):
    return "-" if n is None else f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    with open(DATA_SPEC) as f:
        spec = json.load(f)
    log(f"warming the page cache ({len(shard_files())} shard files)")
    warm(shard_files())
    doc = {"benchmark": "train: runfn `train` vs PyTorch training loops on the same MLP, data, batch and steps; "
                        "checkpoint save/load vs torch.save/torch.load",
           "date": now(), "commit": common.commit(), "machine": machine(),
           "versions": {"train": train_version(), "libtorch_of_train": env.get("BENCH_LIBTORCH_VERSION"),
                        "peers": peer_versions()},
           "data": spec, "runs": RUNS}
    if os.path.exists(OUT):  # keep the other benchmark's block when only one runs
        try:
            with open(OUT) as f:
                old = json.load(f)
            for key in ("train", "checkpoint"):
                if key not in ONLY and key in old:
                    doc[key] = old[key] | {"stale": f"from the run of {old.get('date')}; not rerun this time"}
        except (OSError, ValueError):
            pass
    blocks = {}
    if "train" in ONLY:
        log("=== train ===")
        blocks["train"] = run_train()
    if "ckpt" in ONLY:
        log("=== checkpoint ===")
        blocks["checkpoint"] = run_ckpt()
    doc.update(blocks)
    results = {}
    for b in blocks.values():
        if "results" in b:
            results.update(b["results"])
        for tag, size in b.get("sizes", {}).items():
            results.update({f"{tag}/{n}": r for n, r in size["results"].items()})
    doc["interference"] = interference(results) | {
        "reruns": RERUNS.used, "rerun_rule": f"a run that timed out ({RUN_TIMEOUT} s) or beside which other "
        f"processes kept more than {DISTURBED} cores busy was run once more after the machine went quiet, "
        f"at most {RETRIES} times in all; only the rerun is kept"}
    doc["notes"] = [
        "Both sides run libtorch 2.13.0 on the CPU with the same intra-op thread count (train --threads, "
        "torch.set_num_threads); the DataLoader workers are extra processes on the same cores.",
        "train also reseeds libtorch's generator before every step (for bit-exact resume); the peers do not.",
        "Samples/s counts wait + compute of each step only; process start-up, preprocessing fit, the final val "
        "scoring and writing the weights are outside it (the process wall times are reported apart).",
    ]
    order = ["benchmark", "date", "commit", "machine", "versions", "data", "runs", "train", "checkpoint", "interference", "notes"]
    write_json(OUT, {k: doc[k] for k in order if k in doc})
    rm(SCRATCH)
    log(f"wrote {OUT}")


if __name__ == "__main__":
    main()
