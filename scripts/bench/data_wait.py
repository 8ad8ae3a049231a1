"""Where train's data wait falls in a run, for one or more train binaries side by side (alternating
runs), from each run's metrics.jsonl: the whole run, "steady" (after step 20, as bench-train.sh
reports it), steps 20-150 (while the second shard decodes beside the first batches) and after 150,
and the first window's wait per step (the first shard's decode before step 1). Also prints each
run's weights blake3, so binaries that should train the same model can be compared.

  python scripts/bench/data_wait.py RECORD THREADS RUNS NAME=TRAIN_BINARY [NAME=TRAIN_BINARY ...]

RECORD: a record train reads (shards.json of a pipeline, or common.bench_record's output); e.g. the
8M-row data of scripts/bench/train-setup.sh with the bench's MLP, batch 1024, 2000 steps, log_every
10. Output folders go under $TMPDIR.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile


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
            "steady": weighted([line for line in lines if line["step"] > 20]),
            "steps_20_150": weighted([line for line in lines if 20 < line["step"] <= 150]),
            "after_150": weighted([line for line in lines if line["step"] > 150]),
            "first_window_wait_per_step_s": round(lines[0]["data_wait_fraction"] * lines[0]["step_time_s"], 4),
            "weights_sha256": weights}


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    record, threads, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    binaries = dict(arg.split("=", 1) for arg in sys.argv[4:])
    with tempfile.TemporaryDirectory() as work:
        for _ in range(runs):
            for name, binary in binaries.items():
                figures = run(binary, record, threads, os.path.join(work, name))
                print(json.dumps({"binary": name, "threads": threads} | figures), flush=True)


if __name__ == "__main__":
    main()
