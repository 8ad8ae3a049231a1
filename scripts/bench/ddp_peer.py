"""The PyTorch side of scripts/bench-ddp.sh: data-parallel training with DistributedDataParallel
over Gloo on the CPU, one rank per process, started by torchrun.

    torchrun --standalone --nproc-per-node 2 ddp_peer.py RECORD OUT.json [--threads N] [--warmup W]
        [--nosync-steps S] [--comm-hook timed|default] [--seed K]

RECORD is the run record `train` reads; the model, preprocessing, AdamW, lr schedule and gradient
clipping are train_peers.py's (build, train_step, fit, apply), so both sides train the same model.
Every rank fits the preprocessing on the train split (the same result on each) and holds the whole
preprocessed split in memory; each step takes the next global batch of B rows from a per-epoch
torch.randperm that every rank draws from the same seed, and rank r trains on its rows
[r * B/world, (r + 1) * B/world). The model is wrapped in DistributedDataParallel (default
bucket_cap_mb 25), which averages the gradients during backward.

All-reduce time (--comm-hook timed, the default): a DDP comm hook does what the built-in one does
(all_reduce of the bucket, async, divided by the world size in .then()) and records the wall
interval from the call to the moment the then-callback runs. Per step, the union of those
intervals is the step's all-reduce time; allreduce_fraction = sum of them / sum of step times
(wait + compute) over the steady steps. It includes any wait for the slower rank, and it overlaps
the rest of backward. --comm-hook default leaves DDP's built-in C++ hook in place (no Python in
the all-reduce path, nothing timed): the plain DDP throughput.

All-reduce cost: after the timed loop, S more steps under ddp.no_sync() (no communication; each
rank steps on its own gradients) give t_nosync per step; allreduce_cost_fraction =
1 - t_nosync / t_sync, t_sync the steady step time of the loop. The weights of the timed loop are
restored before rank 0 scores the val split.

Timing as train_peers.py: per step, wait = gathering this rank's batch, compute = forward,
backward (with the all-reduce), loss.item(), clipping, optimizer and scheduler step. samples/s =
global samples / sum(wait + compute) over the steady steps (after the first W) and over all steps,
from rank 0's clock; every rank's own figures are in `ranks`. loss is rank 0's local loss.
Rank 0 writes OUT.json and prints one JSON line.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True  # keep scripts/bench free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from train_peers import apply, build, columns_of, prepare, read_columns, score_val, train_step  # noqa: E402


class HookState:
    """What the comm hook needs: the world size and the list its intervals go to."""

    def __init__(self, world):
        self.world = world
        self.intervals = []


def timed_allreduce_hook(state, bucket):
    """The default allreduce hook (sum, then divide by the world size), timing each all-reduce."""
    t0 = time.perf_counter()
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()

    def done(f):
        state.intervals.append((t0, time.perf_counter()))
        return f.value()[0].div_(state.world)

    return fut.then(done)


def union_seconds(intervals):
    """Length of the union of (start, end) intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def pin_to_share(local_rank, local_world):
    """Pins this thread, and the threads started after it (OpenMP, Gloo), to the local rank's
    contiguous share of the allowed CPUs; nothing when there are fewer CPUs than ranks."""
    cpus = sorted(os.sched_getaffinity(0))
    per = len(cpus) // local_world
    if per:
        os.sched_setaffinity(0, cpus[local_rank * per:(local_rank + 1) * per])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("record")
    p.add_argument("out")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--nosync-steps", type=int, default=200)
    p.add_argument("--comm-hook", choices=["timed", "default"], default="timed")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--pin-cpus", action="store_true",
                   help="pin each rank to an equal share of the allowed CPUs, as train's --cpu-affinity split")
    args = p.parse_args()

    if args.pin_cpus:
        pin_to_share(int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"]))
    t_start = time.perf_counter()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg, lay, prep = prepare(args)  # torch.set_num_threads(args.threads), the seed, the fitted preprocessing
    t_fit = time.perf_counter()
    batch, steps = cfg["global_batch"], cfg["max_steps"]
    if batch % world:
        sys.exit(f"global_batch {batch} is not a multiple of the world size {world}")
    local = batch // world
    lo, hi = rank * local, (rank + 1) * local

    model, opt, sched = build(prep, cfg)
    model.train()
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters; bucket_cap_mb 25
    hook = HookState(world)
    timed = args.comm_hook == "timed"
    if timed:
        ddp.register_comm_hook(hook, timed_allreduce_hook)

    num, cat, y = (torch.from_numpy(a) for a in apply(read_columns(lay["train"], columns_of(prep)), prep))
    n = len(y)
    if n < batch:
        sys.exit(f"the train split has {n} rows, fewer than one batch ({batch})")
    gen = torch.Generator().manual_seed(args.seed)  # the same permutation on every rank

    def batches():
        while True:
            perm = torch.randperm(n, generator=gen)
            for i in range(n // batch):
                idx = perm[i * batch + lo:i * batch + hi]
                yield num[idx], cat[idx], y[idx]

    it = batches()

    def run(count, first_steady):
        """count steps; per-step wait, compute and all-reduce seconds; wall clock from first_steady."""
        waits, computes, reduces, losses = [], [], [], []
        steady0 = time.perf_counter()
        for step in range(count):
            if step == first_steady:
                steady0 = time.perf_counter()
            t0 = time.perf_counter()
            b_num, b_cat, b_y = next(it)
            t1 = time.perf_counter()
            losses.append(train_step(ddp, opt, sched, cfg, b_num, b_cat, b_y))
            t2 = time.perf_counter()
            waits.append(t1 - t0)
            computes.append(t2 - t1)
            reduces.append(union_seconds(hook.intervals))
            hook.intervals.clear()
        return waits, computes, reduces, losses, time.perf_counter() - steady0

    dist.barrier()
    t_setup = time.perf_counter()
    k = min(args.warmup, steps - 1)
    waits, computes, reduces, losses, steady_wall = run(steps, k)
    loop_s = time.perf_counter() - t_setup
    loop_weights = {name: t.detach().clone() for name, t in model.state_dict().items()}

    nosync = None
    if args.nosync_steps > 0:
        dist.barrier()
        with ddp.no_sync():
            nw, nc, nr, _, _ = run(args.nosync_steps, 0)
        if any(nr):
            sys.exit("an all-reduce ran under no_sync()")
        nosync = {"steps": args.nosync_steps, "step_time_s": (sum(nw) + sum(nc)) / args.nosync_steps}
        dist.barrier()
    model.load_state_dict(loop_weights)

    def block(w, c, r, wall):
        busy = sum(w) + sum(c)
        return {"steps": len(w), "samples_per_s": batch * len(w) / busy if busy else None,
                "samples_per_s_wall": batch * len(w) / wall if wall else None,
                "data_wait_fraction": sum(w) / busy if busy else None,
                "step_time_s": busy / len(w) if w else None,
                "compute_s_per_step": statistics.fmean(c) if c else None,
                "allreduce_s_per_step": sum(r) / len(r) if r and timed else None,
                "allreduce_fraction": sum(r) / busy if busy and timed else None}

    mine = {"rank": rank, "all": block(waits, computes, reduces, loop_s),
            "steady": block(waits[k:], computes[k:], reduces[k:], steady_wall), "nosync": nosync}
    if nosync:
        mine["allreduce_cost_fraction"] = 1 - nosync["step_time_s"] / mine["steady"]["step_time_s"]
    ranks = [None] * world
    dist.all_gather_object(ranks, mine)
    if rank == 0:
        val = score_val(model, prep, lay)
        out = {
            "world_size": world, "backend": dist.get_backend(), "threads": args.threads,
            "global_batch": batch, "local_batch": local, "steps": steps, "warmup_steps_excluded": k,
            "all": mine["all"], "steady": mine["steady"], "nosync": nosync,
            "allreduce_cost_fraction": mine.get("allreduce_cost_fraction"), "ranks": ranks,
            "ddp": {"bucket_cap_mb": 25, "broadcast_buffers": True,
                    "comm_hook": "timed: all_reduce(bucket.buffer(), async_op=True), then divided by the world "
                    "size, in Python" if timed else "default: DDP's built-in allreduce hook"},
            "fit_s": t_fit - t_start, "setup_s": t_setup - t_fit, "loop_s": loop_s,
            "final_loss": statistics.fmean(losses[-10:]), "losses": [round(x, 6) for x in losses], "val": val,
            "parameters": sum(q.numel() for q in model.parameters()),
            "features": {"numeric": [f["name"] for f in prep["numeric"]],
                         "categorical": [f["name"] for f in prep["categorical"]]},
        }
        with open(args.out, "w") as f:
            json.dump(out, f)
        print(json.dumps({"ok": True, "samples_per_s": out["steady"]["samples_per_s"]}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
