#!/usr/bin/env python3
"""The PyTorch peer of scripts/bench-predict.sh: scores a CSV snapshot with a runfn model file
the way a team would serve it in Python, as fast as we could make it. pyarrow's streaming CSV
reader (one thread), the model's preprocessing vectorized with pyarrow.compute and numpy (the
standardization, null indicators and vocabularies in the file's metadata, as
scripts/score-reference.py reads them), the same weights in torch under inference_mode, and a
zstd Parquet file of row, key and score written a batch at a time.

    predict_peer.py MODEL.safetensors SNAPSHOT_DIR OUT.parquet KEY THREADS

Prints {"rows", "loop_s"} (the time after imports) on stdout.
"""
import json
import pathlib
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def load(path):
    """safetensors by hand (the format is an 8-byte header length, a JSON header, the data)."""
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = memoryview(raw)[8 + n:]
    meta = json.loads(header.pop("__metadata__")["runfn"])
    tensors = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return meta, tensors


def main():
    model, snapshot, out, key, threads = sys.argv[1:6]
    threads = int(threads)
    torch.set_num_threads(threads)
    pa.set_cpu_count(threads)
    pa.set_io_thread_count(threads)
    start = time.perf_counter()
    meta, tensors = load(model)
    pre = meta["preprocess"]
    numeric = pre["numeric"]
    categorical = pre["categorical"]
    vocabs = [pa.array(f["vocab"], pa.string()) for f in categorical]
    layers = [f"hidden.{k}" for k in range(len(meta["architecture"]["hidden"]))] + ["output"]
    types = {f["name"]: pa.string() for f in categorical}
    types.update({f["name"]: pa.float64() for f in numeric})
    types[key] = pa.string()
    schema = pa.schema([("row", pa.uint64()), (key, pa.string()), ("score", pa.float64())])
    writer = pq.ParquetWriter(out, schema, compression="zstd")
    row = 0
    files = sorted(p for p in pathlib.Path(snapshot).iterdir() if p.suffix == ".csv")
    with torch.inference_mode():
        for path in files:
            reader = pacsv.open_csv(
                path,
                read_options=pacsv.ReadOptions(use_threads=threads > 1, block_size=4 << 20),
                convert_options=pacsv.ConvertOptions(
                    column_types=types, include_columns=list(types)),
            )
            for batch in reader:
                parts = []
                indicators = []
                for f in numeric:
                    values = batch.column(f["name"]).to_numpy(zero_copy_only=False)
                    missing = np.isnan(values)
                    parts.append(np.where(missing, 0.0, (values - f["mean"]) / f["std"]).astype(np.float32))
                    if f.get("indicator", False):
                        indicators.append(missing.astype(np.float32))
                x = [torch.from_numpy(np.stack(parts + indicators, axis=1))] if parts or indicators else []
                for i, (f, vocab) in enumerate(zip(categorical, vocabs)):
                    index = pc.fill_null(pc.add(pc.index_in(batch.column(f["name"]), value_set=vocab), 1), 0)
                    x.append(torch.nn.functional.embedding(
                        torch.from_numpy(index.to_numpy().astype(np.int64)), tensors[f"embedding.{i}"]))
                h = torch.cat(x, dim=1)
                for name in layers:
                    h = torch.nn.functional.linear(h, tensors[f"{name}.weight"], tensors[f"{name}.bias"])
                    if name != "output":
                        h = torch.relu(h)
                scores = torch.sigmoid(h[:, 0]).double().numpy()
                n = len(scores)
                writer.write_table(pa.table({
                    "row": pa.array(np.arange(row, row + n, dtype=np.uint64)),
                    key: batch.column(key),
                    "score": pa.array(scores),
                }, schema=schema))
                row += n
    writer.close()
    print(json.dumps({"rows": row, "loop_s": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
