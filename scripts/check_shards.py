"""Reads a shardify output folder with pyarrow and compares it with the source CSV snapshot.

Usage: check_shards.py SHARD_DIR SNAPSHOT_DIR
Prints one JSON object: rows per split, whether the schema matches index.json, and whether the
rows (all splits together) equal the source rows, compared column by column after sorting by the
first column. Exits 1 when something does not match.
"""

import glob
import json
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

ARROW_TYPES = {
    "bool": pa.bool_(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "string": pa.string(),
}


def main(shard_dir, snapshot_dir):
    with open(os.path.join(shard_dir, "index.json")) as f:
        index = json.load(f)
    expected = pa.schema([pa.field(c["name"], ARROW_TYPES[c["type"]]) for c in index["columns"]])
    tables, rows = [], {}
    schema_match = True
    for split, entry in index["splits"].items():
        count = 0
        for shard in entry["shards"]:
            table = pq.read_table(os.path.join(shard_dir, shard["path"]))
            schema_match &= table.schema.remove_metadata().equals(expected)
            count += table.num_rows
            tables.append(table)
        rows[split] = {"index": entry["rows"], "read": count}
    shards = pa.concat_tables(tables)
    key = expected.names[0]
    convert = pacsv.ConvertOptions(column_types={f.name: f.type for f in expected}, strings_can_be_null=True)
    source = pa.concat_tables(
        pacsv.read_csv(path, convert_options=convert) for path in sorted(glob.glob(os.path.join(snapshot_dir, "*.csv")))
    )
    source = source.select(expected.names)
    shards = shards.sort_by(key)
    source = source.sort_by(key)
    rows_match = shards.num_rows == source.num_rows and all(
        pc.all(pc.equal(pc.is_null(shards[name]), pc.is_null(source[name]))).as_py()
        and pc.all(pc.equal(shards[name], source[name])).as_py() in (True, None)
        for name in expected.names
    )
    report = {
        "rows": rows,
        "total_rows": shards.num_rows,
        "source_rows": source.num_rows,
        "schema_match": schema_match,
        "rows_match": rows_match and all(r["index"] == r["read"] for r in rows.values()),
    }
    print(json.dumps(report))
    return 0 if report["schema_match"] and report["rows_match"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
