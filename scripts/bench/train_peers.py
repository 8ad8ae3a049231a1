"""The PyTorch peers of scripts/bench-train.sh, each run by the harness as its own child process.

    train_peers.py train-dataloader RECORD OUT.json [--threads N] [--warmup W] [--workers K]
    train_peers.py train-inmemory   RECORD OUT.json [--threads N] [--warmup W]
    train_peers.py ckpt             RECORD OUT.json --dir DIR [--threads N] [--saves N] [--cold]
    train_peers.py versions                          one JSON line: python, torch, pyarrow, numpy

RECORD is the same run record `train` reads (manifest.config, manifest.data, shards.dir), so both
sides train the same model on the same data with the same settings, and the peers apply the same
defaults as runfn_learn::config::TrainConfig and the same feature choice and preprocessing as
runfn_learn::features: numeric and boolean columns standardized with the train mean and population
deviation (null -> 0, a constant column divided by 1), string columns through a train vocabulary of
the max_vocab most frequent values (ties by value), index 0 the unknown bucket and null; the entity,
time, label-time, text and as-of columns are never features. Model: [numeric, embedding per string
column] -> (Linear -> ReLU -> Dropout) per hidden width -> Linear(1); BCE-with-logits mean; AdamW
(0.9, 0.999, eps 1e-8) with weight decay on the Linear weights only; linear warmup then cosine decay
to lr * min_lr_ratio (LambdaLR); global gradient-norm clipping.

train-dataloader: the idiomatic input pipeline. A torch IterableDataset reads the train Parquet
shards with pyarrow every epoch (only the columns needed), preprocesses, shuffles and yields whole
batches; DataLoader(batch_size=None, num_workers=K, persistent_workers=True). Work is split between
the workers by (shard, row group); with fewer row groups than workers every worker reads them all
and keeps its own contiguous share of the rows.

train-inmemory: the train split read and preprocessed once into tensors before the loop; each step
gathers its batch by a slice of a per-epoch torch.randperm.

Timing, both: per step, `wait` = time to obtain the next batch, `compute` = forward, backward,
loss.item(), clip, optimizer and scheduler step. Throughput = samples / sum(wait + compute) and data
wait fraction = sum(wait) / sum(wait + compute), over all steps and over the steps after the first
W ("steady"); the loop's wall clock is reported too. Preprocessing fit, model set-up and the final
val scoring are outside the loop and reported apart.

ckpt: the checkpoint state of the run's model (weights + AdamW moments after two steps), saved and
loaded N times each: torch.save to a file; torch.save + flush + fsync + rename + fsync of the folder
(as durable as runfn's checkpoints); torch.load(weights_only=True); torch.load + load_state_dict.
With --cold, both loads again with the file's pages dropped from the page cache before each
(posix_fadvise DONTNEED): a load that reads the disk.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True  # keep scripts/bench free of __pycache__

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset, get_worker_info  # noqa: E402

NUMERIC_TYPES = ("int64", "float64", "bool")


# --- settings and features, as runfn_learn reads them ------------------------------------------------
def config_of(record):
    c = dict(record.get("manifest", {}).get("config") or {})
    max_steps = int(c.get("max_steps", 2000))
    return {
        "hidden": [int(h) for h in c.get("hidden", [64, 32])],
        "dropout": float(c.get("dropout", 0.1)),
        "lr": float(c.get("lr", 1e-3)),
        "weight_decay": float(c.get("weight_decay", 0.01)),
        "global_batch": int(c.get("global_batch", 512)),
        "max_steps": max_steps,
        "warmup_steps": int(c.get("warmup_steps", min(max_steps // 20, 200))),
        "min_lr_ratio": float(c.get("min_lr_ratio", 0.05)),
        "grad_clip": float(c.get("grad_clip", 1.0)),
        "embedding_dim": int(c.get("embedding_dim", 8)),
        "max_vocab": int(c.get("max_vocab", 1000)),
        "features": c.get("features"),
    }


def lr_factor(cfg):
    """The multiplier of lr at 0-based step `step` (runfn_learn::schedule::Schedule::lr_at / lr)."""
    warmup, total, floor = cfg["warmup_steps"], cfg["max_steps"], cfg["min_lr_ratio"]

    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        decay = max(total - warmup, 1)
        progress = min((step - warmup) / decay, 1.0)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def layout(record):
    """Shard paths per split, the label, and the feature lists (runfn_learn::features::choose)."""
    shards_dir = record["shards"]["dir"]
    with open(os.path.join(shards_dir, "index.json")) as f:
        index = json.load(f)
    data = record["manifest"]["data"]
    label = data["label"]
    reserved = {data.get("entity"), data.get("time"), data.get("label_time")}
    text = data.get("text") or []
    reserved.update([text] if isinstance(text, str) else text)
    reserved.update((data.get("as_of") or {}).values())
    reserved.discard(None)
    explicit = config_of(record)["features"]
    if explicit:
        numeric, categorical = list(explicit.get("numeric", [])), list(explicit.get("categorical", []))
    else:
        numeric, categorical = [], []
        for col in index["columns"]:
            if col["name"] == label or col["name"] in reserved:
                continue
            if col["type"] in NUMERIC_TYPES:
                numeric.append(col["name"])
            elif col["type"] == "string":
                categorical.append(col["name"])

    def paths(split):
        entry = index["splits"].get(split)
        return [os.path.join(shards_dir, s["path"]) for s in entry["shards"]] if entry else []

    return {"train": paths("train"), "val": paths("val"), "label": label,
            "numeric": numeric, "categorical": categorical}


def read_columns(paths, columns):
    return pa.concat_tables([pq.read_table(p, columns=columns) for p in paths])


def fit(paths, lay, max_vocab):
    """Train mean / population deviation per numeric column and the vocabulary per string column."""

    table = read_columns(paths, [lay["label"], *lay["numeric"], *lay["categorical"]])
    numeric = []
    for name in lay["numeric"]:
        values = pc.cast(table[name], pa.float64()).drop_null().to_numpy()
        if len(values):
            mean, std = float(values.mean()), float(values.std())
        else:
            mean, std = 0.0, 1.0
        numeric.append({"name": name, "mean": mean, "std": std if std > 1e-12 else 1.0})
    categorical = []
    for name in lay["categorical"]:
        counts = pc.value_counts(table[name].drop_null()).to_pylist()
        counts.sort(key=lambda vc: (-vc["counts"], vc["values"]))
        categorical.append({"name": name, "vocab": [vc["values"] for vc in counts[:max_vocab]]})
    return {"label": lay["label"], "numeric": numeric, "categorical": categorical, "train_rows": table.num_rows}


def columns_of(prep):
    return [prep["label"], *(f["name"] for f in prep["numeric"]), *(f["name"] for f in prep["categorical"])]


def apply(table, prep):
    """(numeric float32 [n, k], categorical int64 [n, c], labels float32 [n]) as numpy arrays."""

    n = table.num_rows
    num = np.zeros((n, len(prep["numeric"])), dtype=np.float32)
    for j, f in enumerate(prep["numeric"]):
        x = pc.cast(table[f["name"]], pa.float64()).fill_null(f["mean"]).to_numpy()
        num[:, j] = (x - f["mean"]) / f["std"]
    cat = np.zeros((n, len(prep["categorical"])), dtype=np.int64)
    for j, f in enumerate(prep["categorical"]):
        idx = pc.index_in(table[f["name"]], value_set=pa.array(f["vocab"], pa.string()))
        cat[:, j] = pc.add(pc.fill_null(idx, -1), 1).to_numpy()
    y = pc.cast(table[prep["label"]], pa.float64())
    if y.null_count:
        sys.exit(f"label `{prep['label']}` has nulls")
    y = y.to_numpy()
    if not np.isin(y, (0.0, 1.0)).all():
        sys.exit(f"label `{prep['label']}` is not 0/1")
    return num, cat, y.astype(np.float32)


# --- the model ---------------------------------------------------------------------------------------
class Mlp(nn.Module):
    """[numeric, one embedding per string column] -> (Linear, ReLU, Dropout) per hidden width -> Linear(1)."""

    def __init__(self, prep, cfg):
        super().__init__()
        self.n_num = len(prep["numeric"])
        self.embeddings = nn.ModuleList(nn.Embedding(len(f["vocab"]) + 1, cfg["embedding_dim"])
                                        for f in prep["categorical"])
        width = self.n_num + cfg["embedding_dim"] * len(prep["categorical"])
        layers = []
        for h in cfg["hidden"]:
            layers += [nn.Linear(width, h), nn.ReLU()]
            if cfg["dropout"] > 0:
                layers.append(nn.Dropout(cfg["dropout"]))
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, num, cat):
        parts = [num] if self.n_num else []
        parts += [emb(cat[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.mlp(torch.cat(parts, 1)).squeeze(1)


def build(prep, cfg):
    """The model, AdamW with weight decay on the Linear weights only, and the warmup-cosine schedule."""
    model = Mlp(prep, cfg)
    decay = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    decay_ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in decay_ids]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(cfg))
    return model, opt, sched


def train_step(model, opt, sched, cfg, num, cat, y):
    logits = model(num, cat)
    loss = F.binary_cross_entropy_with_logits(logits, y)
    opt.zero_grad()
    loss.backward()
    value = loss.item()
    if not math.isfinite(value):
        sys.exit(f"the loss became {value}")
    if cfg["grad_clip"] > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
    opt.step()
    sched.step()
    return value


def auc(scores, labels):
    """Area under the ROC curve (Mann-Whitney U, mid-ranks for ties); None with one class only."""
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat(first + (counts - 1) / 2 + 1, counts)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def score_val(model, prep, lay):
    if not lay["val"]:
        return None
    num, cat, y = apply(read_columns(lay["val"], columns_of(prep)), prep)
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(num), torch.from_numpy(cat))
        logloss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(y)).item()
    model.train()
    return {"auc": auc(logits.numpy().astype(np.float64), y), "logloss": logloss, "rows": int(len(y))}


# --- training -----------------------------------------------------------------------------------------
class ParquetBatches(IterableDataset):
    """Whole shuffled batches read from the train Parquet shards with pyarrow, one pass per epoch.
    Work is split between DataLoader workers by (shard, row group); with fewer row groups than
    workers, every worker reads them all and keeps its own contiguous share of the rows. Within a
    worker the units come in a shuffled order, the rows of each unit shuffled, the stream cut into
    batches (the short tail of the epoch dropped, as runfn's loader does)."""

    def __init__(self, paths, prep, batch, seed):
        self.prep, self.batch, self.seed = prep, batch, seed
        self.columns = columns_of(prep)
        self.units = [(p, g) for p in paths for g in range(pq.ParquetFile(p).num_row_groups)]
        self.epoch = 0  # each worker's copy counts its own passes (persistent workers)

    def __iter__(self):
        info = get_worker_info()
        wid, workers = (info.id, info.num_workers) if info else (0, 1)
        rng = np.random.default_rng([self.seed, self.epoch, wid])
        self.epoch += 1
        split_rows = len(self.units) < workers
        mine = self.units if split_rows else self.units[wid::workers]
        batch, carry = self.batch, None
        for k in rng.permutation(len(mine)):
            path, group = mine[k]
            table = pq.ParquetFile(path).read_row_group(group, columns=self.columns)
            if split_rows:
                n = table.num_rows
                lo, hi = wid * n // workers, (wid + 1) * n // workers
                table = table.slice(lo, hi - lo)
            num, cat, y = apply(table, self.prep)
            perm = rng.permutation(len(y))
            num, cat, y = num[perm], cat[perm], y[perm]
            if carry is not None:
                num, cat, y = (np.concatenate([a, b]) for a, b in zip(carry, (num, cat, y)))
            full = len(y) // batch * batch
            for i in range(0, full, batch):
                yield (torch.from_numpy(num[i:i + batch]), torch.from_numpy(cat[i:i + batch]),
                       torch.from_numpy(y[i:i + batch]))
            carry = (num[full:], cat[full:], y[full:])


def prepare(args):
    """Threads, seed, the record's config and layout, and the preprocessing fitted on train."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.record) as f:
        record = json.load(f)
    cfg = config_of(record)
    lay = layout(record)
    return cfg, lay, fit(lay["train"], lay, cfg["max_vocab"])


def run_train(mode, args):
    t_start = time.perf_counter()
    cfg, lay, prep = prepare(args)
    t_fit = time.perf_counter()
    model, opt, sched = build(prep, cfg)
    model.train()
    batch, steps = cfg["global_batch"], cfg["max_steps"]

    if mode == "dataloader":
        loader = DataLoader(ParquetBatches(lay["train"], prep, batch, args.seed), batch_size=None,
                            num_workers=args.workers, persistent_workers=args.workers > 0)

        def batches():
            while True:
                got = False
                for b in loader:
                    got = True
                    yield b
                if not got:
                    sys.exit(f"the train split has fewer rows per worker than one batch ({batch})")
    else:
        num, cat, y = (torch.from_numpy(a) for a in apply(read_columns(lay["train"], columns_of(prep)), prep))
        n = len(y)
        if n < batch:
            sys.exit(f"the train split has {n} rows, fewer than one batch ({batch})")
        gen = torch.Generator().manual_seed(args.seed)

        def batches():
            while True:
                perm = torch.randperm(n, generator=gen)
                for i in range(n // batch):
                    idx = perm[i * batch:(i + 1) * batch]
                    yield num[idx], cat[idx], y[idx]
    t_setup = time.perf_counter()

    k = min(args.warmup, steps - 1)  # steps left out of the steady-state numbers
    waits, computes, losses = [], [], []
    it = batches()
    loop0 = time.perf_counter()
    steady0 = loop0
    for step in range(steps):
        if step == k:
            steady0 = time.perf_counter()
        t0 = time.perf_counter()
        b_num, b_cat, b_y = next(it)
        t1 = time.perf_counter()
        losses.append(train_step(model, opt, sched, cfg, b_num, b_cat, b_y))
        t2 = time.perf_counter()
        waits.append(t1 - t0)
        computes.append(t2 - t1)
    loop_end = time.perf_counter()
    it.close()
    if mode == "dataloader":
        del loader  # stops the persistent workers
    val = score_val(model, prep, lay)

    def block(w, c, wall):
        busy = sum(w) + sum(c)
        return {"steps": len(w), "samples_per_s": batch * len(w) / busy if busy else None,
                "samples_per_s_wall": batch * len(w) / wall if wall else None,
                "data_wait_fraction": sum(w) / busy if busy else None,
                "step_time_s": statistics.fmean(c) if c else None,
                "wait_per_step_s": statistics.fmean(w) if w else None}

    out = {
        "mode": mode, "threads": args.threads, "workers": args.workers if mode == "dataloader" else 0,
        "global_batch": batch, "steps": steps, "warmup_steps_excluded": k,
        "all": block(waits, computes, loop_end - loop0),
        "steady": block(waits[k:], computes[k:], loop_end - steady0),
        "fit_s": t_fit - t_start, "setup_s": t_setup - t_fit, "loop_s": loop_end - loop0,
        "final_loss": statistics.fmean(losses[-10:]), "losses": [round(x, 6) for x in losses], "val": val,
        "parameters": sum(p.numel() for p in model.parameters()),
        "features": {"numeric": [f["name"] for f in prep["numeric"]],
                     "categorical": [f["name"] for f in prep["categorical"]]},
    }
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(json.dumps({"ok": True, "samples_per_s": out["steady"]["samples_per_s"]}))


# --- checkpoints --------------------------------------------------------------------------------------
def run_ckpt(args):
    cfg, lay, prep = prepare(args)
    model, opt, sched = build(prep, cfg)
    model.train()
    num, cat, y = (torch.from_numpy(a[:cfg["global_batch"]])
                   for a in apply(read_columns(lay["train"], columns_of(prep)), prep))
    for _ in range(2):  # AdamW holds its moments only after a step
        train_step(model, opt, sched, cfg, num, cat, y)

    def state():
        return {"model": model.state_dict(), "optimizer": opt.state_dict()}

    os.makedirs(args.dir, exist_ok=True)
    plain, durable = os.path.join(args.dir, "plain.pt"), os.path.join(args.dir, "durable.pt")

    def save_plain():
        torch.save(state(), plain)

    def save_durable():
        tmp = durable + ".tmp"
        with open(tmp, "wb") as f:
            torch.save(state(), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, durable)
        fd = os.open(args.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def load():
        return torch.load(plain, map_location="cpu", weights_only=True)

    def load_apply():
        sd = torch.load(plain, map_location="cpu", weights_only=True)
        model.load_state_dict(sd["model"])
        opt.load_state_dict(sd["optimizer"])

    def evicted(fn):
        """fn with the saved file's pages dropped from the page cache first (a cold read)."""
        def cold():
            fd = os.open(plain, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            return fn()
        return cold

    def times(fn, untimed=None):
        out = []
        for _ in range(args.saves):
            if untimed:
                untimed()
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    result = {"save_s": times(save_plain), "save_durable_s": times(save_durable),
              "load_s": times(load), "load_apply_s": times(load_apply)}
    if args.cold:
        os.sync()  # torch.save does not fsync: pages still dirty are not dropped
        result.update({"load_cold_s": times(load, evicted(lambda: None)),
                       "load_apply_cold_s": times(load_apply, evicted(lambda: None))})
    tensors = list(model.state_dict().values())
    for s in opt.state.values():
        tensors += [s["exp_avg"], s["exp_avg_sq"]]
    result.update({
        "file_bytes": os.path.getsize(plain),
        "tensor_bytes": sum(t.numel() * t.element_size() for t in tensors),
        "parameters": sum(p.numel() for p in model.parameters()),
        "hidden": cfg["hidden"],
    })
    for p in (plain, durable):
        os.remove(p)
    with open(args.out, "w") as f:
        json.dump(result, f)
    print(json.dumps({"ok": True, "save_median_s": statistics.median(result["save_s"])}))


def versions():
    import importlib.metadata as md
    import platform

    out = {"python": platform.python_version()}
    for name in ("torch", "pyarrow", "numpy"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    print(json.dumps(out))


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "versions":
        return versions()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["train-dataloader", "train-inmemory", "ckpt"])
    p.add_argument("record")
    p.add_argument("out")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--saves", type=int, default=10)
    p.add_argument("--dir")
    p.add_argument("--cold", action="store_true", help="ckpt: also time loads from a cold page cache")
    args = p.parse_args()
    if args.command == "ckpt":
        if not args.dir:
            p.error("ckpt needs --dir")
        return run_ckpt(args)
    return run_train(args.command.removeprefix("train-"), args)


if __name__ == "__main__":
    main()
