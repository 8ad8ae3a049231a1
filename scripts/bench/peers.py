"""The peer implementations, each run by the harness as its own child process (so its wall time
and peak RSS are measured like the Rust tool's, interpreter start-up and imports included).

    peers.py pyarrow-parquet  CSV_DIR OUT.parquet   pyarrow.csv.read_csv per part, concat, write_table zstd
    peers.py pyarrow-parquet-newlines CSV_DIR OUT   the same with newlines_in_values=True (needed, and
                                                    slower, when a quoted value holds a line break)
    peers.py duckdb-parquet   CSV_DIR OUT.parquet   COPY (SELECT * FROM read_csv_auto('DIR/*.csv')) TO ... zstd
    peers.py duckdb-summarize CSV_DIR OUT.csv       SUMMARIZE SELECT * FROM read_csv_auto('DIR/*.csv')
    peers.py pandas-describe  CSV_DIR OUT.csv       pandas.read_csv per part, concat, describe(include='all')
    peers.py duckdb-summarize-parquet DIR OUT.csv   SUMMARIZE SELECT * FROM read_parquet('DIR/*.parquet')
    peers.py make-events      DIR ROWS             the short-row Parquet table (DIR/events.parquet)
    peers.py make-events-csv  DIR ROWS             the same rows as CSV, one part per 1M rows (DIR/part-NNNNN.csv)
    peers.py datasketch-lsh   DOCS.csv OUT.json     MinHashLSH(threshold=0.8, num_perm=120) cross-split pairs
    peers.py datasketch-lsh-20x6 DOCS.csv OUT.json  the same with params=(20, 6), leak-check's banding
    peers.py duckdb-leaks     CSV_DIR CONFIG.json   leak-check's entity overlap, time order, exact twins and
                                                    label proxies in DuckDB SQL (one JSON line of counts)
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


def pyarrow_parquet(csv_dir, out, newlines=False):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    parse = pacsv.ParseOptions(newlines_in_values=newlines)
    tables = [pacsv.read_csv(f, parse_options=parse) for f in parts(csv_dir)]
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


def _q(name):
    return '"' + name.replace('"', '""') + '"'


def duckdb_leaks(csv_dir, config_path):
    """The checks leak-check runs with --entity/--time/--label and a date split, as an analyst would
    write them in DuckDB: the table loaded once, then one query per check. Features are every column
    but the entity, time and label; text is compared lower-cased with runs of white space made one
    space, as leak-check does. Label proxies: each feature's AUC on the train split (Mann-Whitney over
    tie groups), categories by their label rate when there are at most 1000 of them."""
    with open(config_path) as f:
        cfg = json.load(f)
    con = _duckdb()
    entity, time, label = cfg["entity"], cfg["time"], cfg["label"]
    con.execute(f"CREATE TEMP TABLE t AS SELECT *, CASE WHEN {_q(time)} < {cfg['test_from']} THEN 0 ELSE 1 END "
                f"AS split__, ({cfg['positive_sql']}) AS positive__ FROM read_csv_auto('{_glob(csv_dir)}')")
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE t)").fetchall())
    features = [c for c in types if c not in (entity, time, label, "split__", "positive__")]
    out = {"rows": con.execute("SELECT count(*) FROM t").fetchone()[0]}
    out["entity_overlap"], out["entity_overlap_of"] = con.execute(
        f"SELECT count(*) FILTER (WHERE n > 1), count(*) FILTER (WHERE later) FROM "
        f"(SELECT count(DISTINCT split__) n, bool_or(split__ = 1) later FROM t "
        f"WHERE {_q(entity)} IS NOT NULL GROUP BY {_q(entity)})").fetchone()
    ranges = con.execute(f"SELECT split__, min({_q(time)}), max({_q(time)}) FROM t GROUP BY split__ "
                         f"ORDER BY split__").fetchall()
    out["time_order"] = int(len(ranges) == 2 and ranges[0][2] >= ranges[1][1])

    def norm(c):
        if types[c] == "VARCHAR":
            return f"lower(regexp_replace(trim({_q(c)}), '\\s+', ' ', 'g'))"
        return _q(c)
    keys = ", ".join(norm(c) for c in features)
    out["exact_duplicates"] = con.execute(
        f"SELECT coalesce(sum(later), 0) FROM (SELECT count(*) FILTER (WHERE split__ = 1) later, "
        f"count(DISTINCT split__) n FROM t GROUP BY {keys}) WHERE n > 1").fetchone()[0]
    proxies = {}
    for c in features:
        if types[c] in ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE"):
            continue
        groups = (f"SELECT {_q(c)} v, count(*) FILTER (WHERE positive__) pos, count(*) FILTER (WHERE NOT positive__) neg "
                  f"FROM t WHERE split__ = 0 AND {_q(c)} IS NOT NULL AND positive__ IS NOT NULL GROUP BY {_q(c)}")
        if types[c] == "VARCHAR":
            if con.execute(f"SELECT count(*) FROM ({groups})").fetchone()[0] > 1000:
                continue
            groups = f"SELECT p / (p + n) v, sum(p) pos, sum(n) neg FROM ({groups}) g(c, p, n) GROUP BY v"
        value = con.execute(
            f"SELECT sum(pos * (2 * below + neg)) / (2 * sum(pos) * sum(neg)) FROM "
            f"(SELECT pos, neg, coalesce(sum(neg) OVER (ORDER BY v ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) "
            f"below FROM ({groups}))").fetchone()[0]
        if value is not None:
            proxies[c] = round(float(value), 4)
    out["label_proxy_auc"] = proxies
    out["label_proxy"] = sum(1 for v in proxies.values() if v >= 0.99 or v <= 0.01)
    print(json.dumps(out))


def versions():
    import importlib.metadata as md

    print(json.dumps({name: md.version(name) for name in ("pyarrow", "duckdb", "pandas", "datasketch", "blake3")}))


COMMANDS = {"pyarrow-parquet": pyarrow_parquet, "duckdb-parquet": duckdb_parquet,
            "pyarrow-parquet-newlines": lambda csv_dir, out: pyarrow_parquet(csv_dir, out, newlines=True),
            "duckdb-summarize": duckdb_summarize, "pandas-describe": pandas_describe,
            "duckdb-summarize-parquet": duckdb_summarize_parquet, "make-events": make_events,
            "make-events-csv": make_events_csv, "duckdb-leaks": duckdb_leaks,
            "datasketch-lsh": datasketch_lsh,
            "datasketch-lsh-20x6": lambda docs, out: datasketch_lsh(docs, out, params=(20, 6))}

if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "versions":
        versions()
    elif len(sys.argv) == 4 and sys.argv[1] in COMMANDS:
        COMMANDS[sys.argv[1]](sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
