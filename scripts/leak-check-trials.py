#!/usr/bin/env python3
"""leak-check's error rates over seeded trials: honest tables must pass every check, tables with
planted shared entities, exact twins (case/space variants) and a label proxy must be caught with
the exact counts a brute-force Python count gives.

    python3 scripts/leak-check-trials.py target/release/leak-check 40

One JSON line: trials per kind, honest tables stopped, planted tables missed or miscounted."""
import csv, json, os, random, subprocess, sys, tempfile
LC = sys.argv[1]; TRIALS = int(sys.argv[2])
stats = {"honest": [0, 0], "planted": [0, 0]}  # [trials, wrong]
wrong_detail = []
for t in range(TRIALS):
    rng = random.Random(t)
    planted = t % 2 == 1
    rows = []
    for i in range(20000):
        month = rng.randint(1, 12)
        day = f"2025-{month:02d}-{rng.randint(1, 28):02d}"
        split = "test" if month >= 10 else "train"
        rows.append({"id": f"{split[:2]}{i}", "day": day, "cat": rng.choice("abcd"),
                     "x": f"{rng.random():.6f}", "note": rng.choice(["late parcel", "ok", "refund"]) + f" {i}",
                     "y": str(rng.randint(0, 1))})
    if planted:
        train = [r for r in rows if r["day"] < "2025-10-01"]
        test = [r for r in rows if r["day"] >= "2025-10-01"]
        for r in rng.sample(test, 50):            # shared entities
            r["id"] = rng.choice(train)["id"]
        for r in rng.sample(test, 40):            # exact twins, text varied in case and spaces
            src = rng.choice(train)
            r.update(cat=src["cat"], x=src["x"], note="  " + src["note"].upper().replace(" ", "   ") + " ")
        for r in rows:                            # a proxy: z tracks the label
            r["z"] = str(int(r["y"]) * 10 + rng.randint(0, 3))
    else:
        for r in rows:
            r["z"] = str(rng.randint(0, 13))
    norm = lambda s: " ".join(s.lower().split())
    key = lambda r: (r["cat"], r["x"], norm(r["note"]), r["z"])
    tr = [r for r in rows if r["day"] < "2025-10-01"]; te = [r for r in rows if r["day"] >= "2025-10-01"]
    ids_tr = {r["id"] for r in tr}; keys_tr = {key(r) for r in tr}
    truth = {"entity_overlap": len({r["id"] for r in te} & ids_tr),
             "exact_duplicates": sum(key(r) in keys_tr for r in te),
             "label_proxy": 1 if planted else 0}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "t.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
        out = subprocess.run([LC, "--in", d, "--split", "train=day < 2025-10-01", "--split", "test=day >= 2025-10-01",
                              "--entity", "id", "--time", "day", "--label", "y", "-q"], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True)
    checks = {c["name"]: c["count"] for c in json.loads(out.stdout)["leaks"]["checks"]}
    got = {k: checks[k] for k in truth}
    kind = "planted" if planted else "honest"
    stats[kind][0] += 1
    bad = got != truth or (out.returncode != (1 if planted else 0))
    if bad:
        stats[kind][1] += 1; wrong_detail.append((t, got, truth, out.returncode))
print(json.dumps({"trials": stats, "honest_stopped": stats["honest"][1], "planted_missed_or_miscounted": stats["planted"][1],
                  "wrong": wrong_detail[:5]}))
