#!/usr/bin/env python3
"""Scores rows with a runfn model file, outside runfn: numpy, pyarrow and safetensors only.

    scripts/score-reference.py model.safetensors rows.parquet [more.parquet ...] > scores.txt

Prints one probability per row, in file then row order (17 significant digits). The model file
is safetensors: the tensors `embedding.{i}` [vocab+1, dim] and `hidden.{k}.weight`/`.bias`,
`output.weight`/`.bias`, and in the metadata key `runfn` a JSON object whose `preprocess` says how
a row becomes the model's input (README: "Scoring outside runfn"). This script is that
description as code; the tests check it gives evaluate's scores to 1e-6.
"""
import json
import sys

import numpy as np
import pyarrow.parquet as pq
from safetensors import safe_open


def load(path):
    with safe_open(path, "np") as f:
        meta = json.loads(f.metadata()["runfn"])
        return meta, {name: f.get_tensor(name) for name in f.keys()}


def inputs(pre, table):
    """The numeric block (standardized values, 0 for null, then the null indicators) and the
    category indices (1 + position in the vocabulary; 0 for an unseen value or null)."""
    numeric, indicators = [], []
    for f in pre["numeric"]:
        col = table.column(f["name"]).to_pylist()
        values = np.array([np.nan if v is None else float(v) for v in col], dtype=np.float64)
        missing = np.isnan(values)
        numeric.append(np.where(missing, 0.0, (values - f["mean"]) / f["std"]).astype(np.float32))
        if f.get("indicator", False):
            indicators.append(missing.astype(np.float32))
    categories = []
    for f in pre["categorical"]:
        index = {value: i + 1 for i, value in enumerate(f["vocab"])}
        categories.append([index.get(v, 0) for v in table.column(f["name"]).to_pylist()])
    return numeric + indicators, categories


def score(meta, tensors, table):
    numeric, categories = inputs(meta["preprocess"], table)
    parts = [np.stack(numeric, axis=1)] if numeric else []
    for i, index in enumerate(categories):
        parts.append(tensors[f"embedding.{i}"][np.array(index, dtype=np.int64)])
    x = np.concatenate(parts, axis=1).astype(np.float32)
    hidden = len(meta["architecture"]["hidden"])
    for name in [f"hidden.{k}" for k in range(hidden)] + ["output"]:
        x = x @ tensors[f"{name}.weight"].T + tensors[f"{name}.bias"]
        if name != "output":
            x = np.maximum(x, 0)
    logits = x[:, 0].astype(np.float32)
    return (1.0 / (1.0 + np.exp(-logits))).astype(np.float64)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    meta, tensors = load(sys.argv[1])
    for path in sys.argv[2:]:
        for p in score(meta, tensors, pq.read_table(path)):
            print(f"{p:.17g}")


if __name__ == "__main__":
    main()
