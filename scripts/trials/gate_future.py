#!/usr/bin/env python3
"""Were the gate's blocks right? For nights that gate_nights.py blocked, the blocked candidate
(its three seeds) and the model that served that night, gated again on the rows of the two weeks
after that night's test window: a block borne out there was a right call; one the next weeks do
not bear out was the test window's own.

    BIN=target/release TABLE=covid scripts/trials/venv.sh scripts/trials/gate_future.py WORK NIGHT...

WORK is the folder gate_nights.py wrote (its registry and night folders); prints a JSON line a
night.
"""
import json
import os
import shutil
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gate_nights as g  # noqa: E402
from gate_nights import tool  # noqa: E402


def main():
    work, nights = os.path.abspath(sys.argv[1]), [int(n) for n in sys.argv[2:]]
    load, slices, test_span, train_span, window, step, first_cut = g.TABLES[g.TABLE]
    table, numeric, categorical = load()
    table = table.sort_values("when", kind="stable")
    days = table["when"].dt.normalize()
    test_days = int(test_span.split()[0]) * 7
    span_days = test_days + int(train_span.split()[0]) * 7
    start = days.min() + pd.Timedelta(days=first_cut)
    for night in nights:
        # The night whose test window is the blocked night's next one.
        cut = start + pd.Timedelta(days=step * night + test_days)
        rows = table[(days < cut) & (days >= cut - pd.Timedelta(days=span_days))]
        folder = os.path.join(work, f"future-{night:02d}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.join(folder, "snapshot"))
        columns = list(dict.fromkeys(["when", "y", *numeric, *categorical, *slices]))
        rows[columns].to_csv(os.path.join(folder, "snapshot", "rows.csv"), index=False)
        with open(os.path.join(folder, "m.yaml"), "w") as f:
            f.write(g.MANIFEST.format(table=g.TABLE, night=f"future-{night}", test=test_span, train=train_span,
                                      window=window, numeric=json.dumps(numeric),
                                      categorical=json.dumps(categorical), slices=json.dumps(slices)))
        hashed = tool("mf-hash", ["m.yaml", "--data-digest", "snapshot"], cwd=folder).stdout
        shards = tool("shardify", ["--out", "shards"], hashed, cwd=folder).stdout
        night_dir = os.path.join(work, f"night-{night:02d}")
        blocked = json.load(open(os.path.join(night_dir, "gated.json")))
        serving = blocked["baseline"]["registered_as"]
        evaluated = [tool("evaluate", ["--model", os.path.join(night_dir, f"train-{seed}"), "--row-scores",
                                       f"scores-{seed}.parquet"], shards, cwd=folder).stdout for seed in g.SEEDS]
        noise = tool("noise-floor", ["--metric", "evaluate.overall.auc"], "".join(evaluated), cwd=folder).stdout
        baseline = tool("evaluate", ["--as", "baseline", "--model", serving, "--registry",
                                     os.path.join(work, "registry"), "--row-scores", "scores-serving.parquet"],
                        noise, cwd=folder).stdout
        later = json.loads(tool("gate", [], baseline, cwd=folder, ok=(0, 1)).stdout)["gate"]
        overall = [c for c in later["checks"] if c["name"] == "auc_min_delta"]
        print(json.dumps({"night": night, "serving": serving, "blocked_for": blocked["gate"]["reasons"][:1],
                          "next_window_until": str(cut.date()), "borne_out": not later["passed"],
                          "next_window_reasons": later["reasons"][:2],
                          "next_window_overall_delta": overall[0].get("delta") if overall else None,
                          "next_window_overall_interval": overall[0].get("interval") if overall else None}),
              flush=True)


if __name__ == "__main__":
    main()
