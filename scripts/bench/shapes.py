"""The shape sweep of shardify's benchmark: seeded CSV tables of the shapes users bring.

    shapes.py list                 the shapes, one JSON object per line (name, rows, split, what varies)
    shapes.py make NAME OUT_DIR    write shape NAME as CSV parts of at most 1M rows under OUT_DIR and a
                                   spec (rows, bytes, columns, command) on stdout

Each round's benchmark used to measure the shapes it was tuned on, so a shape it had never seen
could still be slower than the peers. The sweep spans what varies between real tables: row width
(40-400 bytes), quoted text with commas, doubled quotes and newlines (0-50% of the bytes), nulls
(0-30%), 5-60 columns, numbers written with and without decimals, date, hash and range splits, and
1M-10.5M rows. `customers` is the held-out table described to us (10.5M rows, 1.0 GB, a hash split
on its id): an integer id, a date, three low-cardinality categoricals, integers, floats with 2%
nulls and a short note, 30% null, quoted with commas inside.

Every value is a function of the row number through DuckDB's hash(), so the bytes do not depend
on threads or on the order parts are written; `seed` enters every hash. DuckDB's CSV writer quotes
a field holding a comma, a quote or a newline and doubles its quotes, as the RFC says.
"""
import json
import os
import sys

SEED = 7
PART_ROWS = 1_000_000


def h(k):
    """A uniform 64-bit draw for column salt k (a row's id is i)."""
    return f"hash(i * {2 * k + 1} + {SEED * 1_000_003 + k})"


def pick(k, values):
    items = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"[{items}][1 + CAST({h(k)} % {len(values)} AS INTEGER)]"


def nulls(k, percent, expr):
    return expr if not percent else f"CASE WHEN {h(k)} % 1000 < {int(percent * 10)} THEN NULL ELSE {expr} END"


def integer(k, modulus, offset=0):
    return f"CAST({h(k)} % {modulus} AS BIGINT) + {offset}"


def decimal(k, modulus, places):
    return f"round(CAST({h(k)} % {modulus} AS DOUBLE) / {10 ** places}, {places})"


def mixed_number(k):
    """A number written bare where it is whole (`42`) and with decimals where not (`41.75`)."""
    return (f"CASE WHEN {h(k)} % 3 = 0 THEN CAST({h(k + 1)} % 100000 AS VARCHAR) "
            f"ELSE CAST(round(CAST({h(k + 1)} % 10000000 AS DOUBLE) / 100, 2) AS VARCHAR) END")


def day(k, start="2025-01-01", days=365):
    return f"DATE '{start}' + CAST({h(k)} % {days} AS INTEGER)"


def stamp(k, start="2025-01-01", days=365):
    return f"TIMESTAMP '{start}' + to_seconds(CAST({h(k)} % {days * 86400} AS BIGINT))"


WORDS = ["order", "late", "refund", "parcel", "size", "blue", "north", "account", "call", "again",
         "missing", "driver", "weekend", "price", "store", "email", "box", "open", "damaged", "return"]
# Pieces a CSV writer must quote: commas, doubled quotes, line breaks.
QUOTED = ["said \"no\", twice", "a, b, c", "line one\nline two", "\"quoted\"", "x, \"y\"\nz",
          "10\" screen, cracked", "kept, then\nsent back"]


def words(k, n):
    return " || ' ' || ".join(pick(k + j, WORDS) for j in range(n))


def quoted_text(k, n_words, quoted_share):
    """Free text of n_words plain words where about quoted_share of the rows carry a quoted piece."""
    plain = words(k, n_words)
    if not quoted_share:
        return plain
    return (f"CASE WHEN {h(k + 50)} % 100 < {int(quoted_share * 100)} "
            f"THEN {pick(k + 51, QUOTED)} || ' ' || {plain} ELSE {plain} END")


def columns_wide(n):
    """n mixed columns for the wide shape: ints, decimals, codes, a few nullable."""
    cols = []
    for c in range(n):
        kind = c % 4
        if kind == 0:
            cols.append((f"n{c}", integer(100 + c, 100000)))
        elif kind == 1:
            cols.append((f"x{c}", decimal(100 + c, 10000000, 3)))
        elif kind == 2:
            cols.append((f"code{c}", pick(100 + c, ["AA", "BB", "CC", "DD", "EE", "FF", "GG"])))
        else:
            cols.append((f"m{c}", nulls(300 + c, 10, integer(100 + c, 1000))))
    return cols


SHAPES = {
    # 5 integer columns, ~40 bytes a row, no text, no nulls; a hash split.
    "narrow-ints": {
        "rows": 10_000_000, "split": ["train=hash(id) < 0.8", "test=hash(id) >= 0.8"], "time": None,
        "varies": "5 columns of integers, ~40 bytes a row, no quotes, no nulls, hash split",
        "columns": lambda: [("id", "i"), ("a", integer(1, 100_000_000)), ("b", integer(2, 1_000_000)),
                            ("c", integer(3, 10_000_000_000)), ("d", integer(4, 10_000))]},
    # The held-out table as it was described to us.
    "customers": {
        "rows": 10_500_000, "split": ["train=hash(customer_id) < 0.8", "test=hash(customer_id) >= 0.8"],
        "time": None,
        "varies": "the held-out shape: 12 columns, ~100 bytes, floats 2% null, a 30%-null note quoted "
                  "with commas, hash split on the id",
        "columns": lambda: [
            ("customer_id", "i + 100000"), ("signup_date", day(1, "2019-01-01", 2000)),
            ("region", pick(2, ["north", "south", "east", "west", "central"])),
            ("plan", pick(3, ["free", "basic", "pro", "team"])),
            ("channel", pick(4, ["web", "store", "phone", "partner", "app", "mail"])),
            ("visits", integer(5, 200)), ("orders", integer(6, 40)), ("age", integer(7, 70, 18)),
            ("spend", nulls(8, 2, decimal(9, 100000, 2))), ("discount", nulls(10, 2, decimal(11, 5000, 2))),
            ("score", nulls(12, 2, decimal(13, 100000000, 6))),
            ("note", nulls(14, 30, f"{words(15, 3)} || ', ' || {words(18, 3)}"))]},
    # Half the bytes are quoted text with commas, doubled quotes and line breaks; a date split.
    "quoted-text": {
        "rows": 2_000_000, "newlines": True, "split": ["train=created < 2025-10-01", "test=created >= 2025-10-01"],
        "time": "created",
        "varies": "~200 bytes a row, about half of them quoted text with commas, doubled quotes and "
                  "newlines, date split",
        "columns": lambda: [("ticket", "i"), ("created", day(1)), ("queue", pick(2, ["a", "b", "c", "d"])),
                            ("minutes", integer(3, 5000)), ("cost", decimal(4, 1000000, 2)),
                            ("body", quoted_text(10, 12, 0.7)), ("reply", nulls(5, 20, quoted_text(30, 6, 0.4)))]},
    # 30% nulls in every column but the keys; a range split on a number.
    "sparse-nulls": {
        "rows": 3_000_000, "split": ["train=amount < 800", "test=amount >= 800"], "time": None,
        "varies": "20 columns, 30% nulls in 18 of them, ~90 bytes, range split on a number",
        "columns": lambda: [("id", "i"), ("amount", decimal(1, 100000, 2))] + [
            (f"f{c}", nulls(40 + c, 30, integer(60 + c, 10000) if c % 3 else decimal(60 + c, 100000, 1)))
            for c in range(12)] + [
            (f"g{c}", nulls(80 + c, 30, pick(90 + c, ["red", "green", "blue", "grey"]))) for c in range(6)]},
    # 60 columns, ~330 bytes a row.
    "wide-60": {
        "rows": 1_000_000, "split": ["train=day < 2025-11-01", "test=day >= 2025-11-01"], "time": "day",
        "varies": "60 columns (ints, decimals, codes, 10%-null ints), ~330 bytes a row, date split",
        "columns": lambda: [("id", "i"), ("day", day(1))] + columns_wide(58)},
    # Numbers written bare where whole and with decimals where not, in the same column.
    "mixed-numbers": {
        "rows": 5_000_000, "split": ["train=hash(id) < 0.7", "test=hash(id) >= 0.7"], "time": None,
        "varies": "10 columns of numbers written with and without decimals (42 / 41.75), ~75 bytes, "
                  "hash split",
        "columns": lambda: [("id", "i")] + [(f"v{c}", mixed_number(10 * c + 1)) for c in range(9)]},
    # Long plain text, no quoting needed: ~400 bytes a row.
    "long-text": {
        "rows": 1_500_000, "split": ["train=posted < 2025-09-01", "test=posted >= 2025-09-01"],
        "time": "posted",
        "varies": "~400 bytes a row, a 60-word unquoted text, date split",
        "columns": lambda: [("id", "i"), ("posted", day(1)), ("user", integer(2, 50000)),
                            ("text", words(10, 60))]},
    # Timestamps with seconds, short categorical rows; a range split on an integer.
    "timestamps": {
        "rows": 6_000_000, "split": ["train=sensor < 800", "test=sensor >= 800"], "time": "at",
        "varies": "8 columns with a timestamp to the second, ~70 bytes, range split on an integer",
        "columns": lambda: [("at", stamp(1)), ("sensor", integer(2, 1000)),
                            ("kind", pick(3, ["temp", "hum", "pres"])), ("value", decimal(4, 100000, 3)),
                            ("ok", pick(5, ["true", "false"])), ("batch", integer(6, 100)),
                            ("seq", "i"), ("unit", pick(7, ["C", "pct", "hPa"]))]},
    # A few nullable text columns with mixed quoting at 5% nulls: 150 bytes, 20% quoted bytes.
    "mixed-text": {
        "rows": 3_000_000, "newlines": True, "split": ["train=opened < 2025-08-01", "test=opened >= 2025-08-01"],
        "time": "opened",
        "varies": "9 columns, ~150 bytes, about a fifth of the bytes quoted text, 5% nulls, date split",
        "columns": lambda: [("id", "i"), ("opened", day(1)), ("state", pick(2, ["open", "closed", "hold"])),
                            ("owner", nulls(3, 5, words(4, 2))), ("title", nulls(5, 5, quoted_text(6, 5, 0.3))),
                            ("hours", nulls(7, 5, decimal(8, 100000, 1))), ("priority", integer(9, 5)),
                            ("tags", nulls(10, 5, words(11, 3))), ("votes", integer(12, 1000))]},
}


def select(shape, start, stop):
    cols = ", ".join(f"{expr} AS {name}" for name, expr in shape["columns"]())
    return f"SELECT {cols} FROM range({start}, {stop}) t(i)"


def sample_fields(path, rows=20_000):
    """The raw fields of the first rows of a part: (text as written, quoted?) per field."""
    import csv

    fields = []
    with open(path, newline="") as f:
        raw = f.read(64 << 20)
    body = raw[raw.index("\n") + 1:]
    for row in csv.reader(body.splitlines(keepends=True)[: rows * 4]):
        fields.extend(row)
        if len(fields) > rows * 8:
            break
    quoted = sum(len(v) for v in fields if any(c in v for c in ',"\n'))
    return fields, quoted


def quoted_share(path):
    """Share of a part's field bytes that are written quoted (commas, quotes or newlines)."""
    fields, quoted = sample_fields(path)
    return round(quoted / max(1, sum(len(v) for v in fields)), 3)


def null_share(path):
    """Share of a part's fields that are empty (nulls)."""
    fields, _ = sample_fields(path)
    return round(sum(1 for v in fields if v == "") / max(1, len(fields)), 3)


def make(name, out_dir):
    import duckdb

    shape = SHAPES[name]
    rows = shape["rows"]
    con = duckdb.connect()
    os.makedirs(out_dir, exist_ok=True)
    files = []
    for part, start in enumerate(range(0, rows, PART_ROWS)):
        out = os.path.join(out_dir, f"part-{part:05d}.csv")
        tmp = out + ".tmp"
        sql = select(shape, start, min(rows, start + PART_ROWS))
        con.execute(f"COPY ({sql}) TO '{tmp}' (FORMAT csv, HEADER, DATEFORMAT '%Y-%m-%d', "
                    "TIMESTAMPFORMAT '%Y-%m-%d %H:%M:%S')")
        os.replace(tmp, out)
        files.append(out)
    nbytes = sum(os.path.getsize(f) for f in files)
    spec = {"name": name, "rows": rows, "dir": out_dir, "files": len(files), "columns": [c for c, _ in shape["columns"]()],
            "bytes": nbytes, "bytes_per_row": round(nbytes / rows, 1),
            "quoted_bytes_share": quoted_share(files[0]), "null_share": null_share(files[0]),
            "split": shape["split"], "newlines_in_values": bool(shape.get("newlines")),
            "time": shape["time"], "seed": SEED, "generator": f"duckdb {duckdb.__version__}",
            "command": f"python scripts/bench/shapes.py make {name} {out_dir}",
            "description": f"sweep shape {name}: {shape['varies']}"}
    print(json.dumps(spec))


def main(argv):
    if len(argv) == 2 and argv[1] == "list":
        for name, s in SHAPES.items():
            print(json.dumps({"name": name, "rows": s["rows"], "split": s["split"], "time": s["time"],
                              "newlines_in_values": bool(s.get("newlines")), "varies": s["varies"]}))
    elif len(argv) == 4 and argv[1] == "make" and argv[2] in SHAPES:
        make(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
