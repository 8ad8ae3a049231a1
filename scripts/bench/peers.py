"""The peer implementations, each run by the harness as its own child process (so its wall time
and peak RSS are measured like the Rust tool's, interpreter start-up and imports included).

    peers.py pyarrow-parquet  CSV_DIR OUT.parquet   pyarrow.csv.read_csv per part, concat, write_table zstd
    peers.py duckdb-parquet   CSV_DIR OUT.parquet   COPY (SELECT * FROM read_csv_auto('DIR/*.csv')) TO ... zstd
    peers.py duckdb-summarize CSV_DIR OUT.csv       SUMMARIZE SELECT * FROM read_csv_auto('DIR/*.csv')
    peers.py pandas-describe  CSV_DIR OUT.csv       pandas.read_csv per part, concat, describe(include='all')
    peers.py duckdb-summarize-parquet DIR OUT.csv   SUMMARIZE SELECT * FROM read_parquet('DIR/*.parquet')
    peers.py make-events      DIR ROWS             the short-row Parquet table (DIR/events.parquet)
    peers.py make-events-csv  DIR ROWS             the same rows as CSV, one part per 1M rows (DIR/part-NNNNN.csv)
    peers.py datasketch-lsh   DOCS.csv OUT.json     MinHashLSH(threshold=0.8, num_perm=120) cross-split pairs
    peers.py datasketch-lsh-20x6 DOCS.csv OUT.json  the same with params=(20, 6), leak-check's banding
    peers.py versions                               one JSON line of the peers' versions
"""
import glob
import json
import os
import sys


def parts(csv_dir):
    files = sorted(glob.glob(os.path.join(csv_dir, "*.csv")))
    if not files:
        sys.exit(f"no *.csv in {csv_dir}")
    return files


def pyarrow_parquet(csv_dir, out):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    tables = [pacsv.read_csv(f) for f in parts(csv_dir)]
    table = pa.concat_tables(tables, promote_options="default")
    pq.write_table(table, out, compression="zstd")
    print(json.dumps({"rows": table.num_rows}))


def _duckdb():
    import duckdb

    return duckdb.connect()


def _glob(csv_dir):
    return os.path.join(csv_dir, "*.csv").replace("'", "''")


def duckdb_parquet(csv_dir, out):
    con = _duckdb()
    out_sql = out.replace("'", "''")
    con.execute(f"COPY (SELECT * FROM read_csv_auto('{_glob(csv_dir)}')) TO '{out_sql}' "
                f"(FORMAT parquet, COMPRESSION zstd)")
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{out_sql}')").fetchone()[0]
    print(json.dumps({"rows": rows}))


def duckdb_summarize(csv_dir, out):
    con = _duckdb()
    df = con.execute(f"SUMMARIZE SELECT * FROM read_csv_auto('{_glob(csv_dir)}')").df()
    df.to_csv(out, index=False)
    print(json.dumps({"columns": len(df), "rows": int(df["count"].iloc[0])}))


def duckdb_summarize_parquet(pq_dir, out):
    con = _duckdb()
    pattern = os.path.join(pq_dir, "*.parquet").replace("'", "''")
    df = con.execute(f"SUMMARIZE SELECT * FROM read_parquet('{pattern}')").df()
    df.to_csv(out, index=False)
    print(json.dumps({"columns": len(df), "rows": int(df["count"].iloc[0])}))


# A table of many short rows, as event logs are: an id, a date, two categories, two numbers, a
# short note and a 0/1 label; one file of 250k-row groups. The same rows on every run (hash(i)).
EVENTS_SQL = """
SELECT
  'U' || lpad(CAST(i AS VARCHAR), 9, '0') AS user_id,
  DATE '2024-01-01' + CAST(hash(i) % 700 AS INTEGER) AS event_date,
  ['web','ios','android','email'][1 + CAST(hash(i*3) % 4 AS INTEGER)] AS channel,
  ['de','fr','us','uk','jp','br','in'][1 + CAST(hash(i*5) % 7 AS INTEGER)] AS country,
  CAST(hash(i*7) % 1000 AS BIGINT) AS items,
  round((hash(i*11) % 100000) / 100.0, 2) AS amount,
  ['ok','late','refund','lost parcel','wrong size'][1 + CAST(hash(i*13) % 5 AS INTEGER)]
    || ' #' || CAST(hash(i*17) % 100 AS VARCHAR) AS note,
  CAST(hash(i*19) % 2 AS BIGINT) AS label
FROM range({rows}) t(i)
"""


def make_events(pq_dir, rows):
    con = _duckdb()
    os.makedirs(pq_dir, exist_ok=True)
    out = os.path.join(pq_dir, "events.parquet")
    tmp = out + ".tmp"
    con.execute(f"COPY ({EVENTS_SQL.format(rows=int(rows))}) TO '{tmp}' "
                "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 250000)")
    os.replace(tmp, out)
    print(json.dumps({"rows": int(rows), "file": out, "bytes": os.path.getsize(out)}))


def make_events_csv(csv_dir, rows):
    con = _duckdb()
    rows = int(rows)
    os.makedirs(csv_dir, exist_ok=True)
    per_part = 1_000_000
    for part, start in enumerate(range(0, rows, per_part)):
        sql = EVENTS_SQL.format(rows=f"{start}, {min(rows, start + per_part)}")
        out = os.path.join(csv_dir, f"part-{part:05d}.csv")
        tmp = out + ".tmp"
        con.execute(f"COPY ({sql}) TO '{tmp}' (FORMAT csv, HEADER, DATEFORMAT '%Y-%m-%d')")
        os.replace(tmp, out)
    print(json.dumps({"rows": rows, "dir": csv_dir, "bytes": sum(os.path.getsize(f) for f in parts(csv_dir))}))


def pandas_describe(csv_dir, out):
    import pandas as pd

    df = pd.concat([pd.read_csv(f) for f in parts(csv_dir)], ignore_index=True)
    desc = df.describe(include="all")
    desc.to_csv(out)
    print(json.dumps({"columns": desc.shape[1], "rows": len(df)}))


def datasketch_lsh(docs_csv, out, params=None):
    """Cross-split near-duplicates as leak-check defines them: split a = hash(doc_id) < 0.5 (blake3
    rule), shingles = character 5-grams of the lowercased, white-space-collapsed text; split a is
    inserted into the LSH, every split-b document queries it, candidates are kept when their exact
    Jaccard is >= 0.8. Everything from reading the CSV to the verified pair list is in the timing."""
    import csv

    from blake3 import blake3
    from datasketch import MinHash, MinHashLSH

    width, threshold, num_perm = 5, 0.8, 120

    def shingles(text):
        n = " ".join(text.lower().split())
        if not n:
            return set()
        if len(n) <= width:
            return {n}
        return {n[i:i + width] for i in range(len(n) - width + 1)}

    def in_a(doc_id):
        return (int.from_bytes(blake3(doc_id.encode()).digest()[:8], "little") >> 11) / 2 ** 53 < 0.5

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, params=params)
    sets, side_b = {}, []
    with open(docs_csv, newline="") as f, lsh.insertion_session() as session:
        rows = csv.reader(f)
        next(rows)  # header doc_id,note
        for doc_id, note in rows:
            s = shingles(note)
            sets[doc_id] = s
            m = MinHash(num_perm=num_perm)
            m.update_batch([x.encode() for x in s])
            if in_a(doc_id):
                session.insert(doc_id, m)
            else:
                side_b.append((doc_id, m))
    pairs, candidates = [], 0
    for doc_id, m in side_b:
        for other in lsh.query(m):
            candidates += 1
            a, b = sets[other], sets[doc_id]
            j = len(a & b) / len(a | b) if (a or b) else 0.0
            if j >= threshold:
                pairs.append([other, doc_id, round(j, 6)])
    with open(out, "w") as f:
        json.dump({"pairs": pairs, "candidates": candidates, "bands": lsh.b, "rows_per_band": lsh.r,
                   "docs_a": len(sets) - len(side_b), "docs_b": len(side_b)}, f)
    print(json.dumps({"pairs": len(pairs), "candidates": candidates}))


def versions():
    import importlib.metadata as md

    print(json.dumps({name: md.version(name) for name in ("pyarrow", "duckdb", "pandas", "datasketch", "blake3")}))


COMMANDS = {"pyarrow-parquet": pyarrow_parquet, "duckdb-parquet": duckdb_parquet,
            "duckdb-summarize": duckdb_summarize, "pandas-describe": pandas_describe,
            "duckdb-summarize-parquet": duckdb_summarize_parquet, "make-events": make_events,
            "make-events-csv": make_events_csv,
            "datasketch-lsh": datasketch_lsh,
            "datasketch-lsh-20x6": lambda docs, out: datasketch_lsh(docs, out, params=(20, 6))}

if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "versions":
        versions()
    elif len(sys.argv) == 4 and sys.argv[1] in COMMANDS:
        COMMANDS[sys.argv[1]](sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
