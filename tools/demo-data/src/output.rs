//! Writing the snapshot: rows split evenly over `part-NNNNN.csv` or `.jsonl` files, each written
//! atomically, in a folder that may already hold the same part files (they are replaced).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use runfn_core::InputError;
use runfn_core::atomic::write_atomic;

use crate::generate::{REGIONS, Row, Spend, TIERS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
        }
    }
}

/// The columns in file order; `account_closed` only with the label-proxy trap.
pub fn columns(label_proxy: bool) -> Vec<&'static str> {
    let mut columns = vec![
        "customer_id",
        "signup_date",
        "region",
        "tier",
        "tenure_days",
        "tenure_bucket",
        "monthly_spend",
        "support_tickets",
        "logins_30d",
        "tickets_this_month",
        "tickets_as_of",
        "support_note",
        "label_date",
        "churned",
    ];
    if label_proxy {
        columns.push("account_closed");
    }
    columns
}

/// Writes `rows` into `dir` (created if missing) as `parts` files and returns their paths. Refuses
/// a folder holding other `part-*` files of either format, which a reader of the folder would mix
/// in with this snapshot.
pub fn write_parts(
    dir: &Path,
    rows: &[Row],
    parts: usize,
    format: Format,
    label_proxy: bool,
) -> Result<Vec<PathBuf>, InputError> {
    let names: Vec<String> = (0..parts)
        .map(|part| format!("part-{part:05}.{}", format.extension()))
        .collect();
    prepare_dir(dir, &names)?;
    let columns = columns(label_proxy);
    let mut paths = Vec::with_capacity(parts);
    for (part, name) in names.iter().enumerate() {
        let (start, end) = (part * rows.len() / parts, (part + 1) * rows.len() / parts);
        let path = dir.join(name);
        write_atomic(&path, |out| match format {
            Format::Csv => write_csv(out, &columns, &rows[start..end]),
            Format::Jsonl => write_jsonl(out, &columns, &rows[start..end]),
        })?;
        paths.push(path);
    }
    Ok(paths)
}

fn prepare_dir(dir: &Path, names: &[String]) -> Result<(), InputError> {
    let io_error = |source| InputError::Io {
        path: dir.to_path_buf(),
        source,
    };
    runfn_core::paths::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir).map_err(io_error)? {
        let name = entry.map_err(io_error)?.file_name();
        let name = name.to_string_lossy();
        let is_part =
            name.starts_with("part-") && (name.ends_with(".csv") || name.ends_with(".jsonl"));
        if is_part && !names.iter().any(|own| *own == name) {
            return Err(InputError::field(
                format!("--out {}", dir.display()),
                format!(
                    "holds {name}, which this run would not replace (another --parts or \
                     --format); remove the old part files or choose another folder"
                ),
            ));
        }
    }
    Ok(())
}

/// The row's values as text, in `columns(true)` order.
fn values(row: &Row) -> [String; 15] {
    [
        row.customer_id_text(),
        row.signup_date.to_string(),
        REGIONS[row.region].to_string(),
        TIERS[row.tier].to_string(),
        row.tenure_days.to_string(),
        row.tenure_bucket().to_string(),
        row.monthly_spend.text(),
        row.support_tickets.to_string(),
        if row.logins_missing {
            String::new()
        } else {
            row.logins_30d.to_string()
        },
        row.tickets_this_month.to_string(),
        row.tickets_as_of.to_string(),
        row.support_note.clone(),
        row.label_date().to_string(),
        u8::from(row.churned).to_string(),
        u8::from(row.account_closed).to_string(),
    ]
}

fn write_csv(out: &mut dyn Write, columns: &[&str], rows: &[Row]) -> std::io::Result<()> {
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(columns).map_err(os_error)?;
    for row in rows {
        writer
            .write_record(&values(row)[..columns.len()])
            .map_err(os_error)?;
    }
    writer.flush()
}

/// The I/O error inside a CSV writer's error: csv's own conversion wraps it as kind Other,
/// which hides a full disk (the environment's, exit 4) as if it were bad input.
fn os_error(error: csv::Error) -> std::io::Error {
    let text = error.to_string();
    match error.into_kind() {
        csv::ErrorKind::Io(io) => io,
        _ => std::io::Error::other(text),
    }
}

/// One JSON object per line; numbers as JSON numbers except a bad spend, which is a string, and
/// a missing one, which is null.
fn write_jsonl(out: &mut dyn Write, columns: &[&str], rows: &[Row]) -> std::io::Result<()> {
    const NUMERIC: [bool; 15] = [
        false, false, false, false, true, false, true, true, true, true, false, false, false, true,
        true,
    ];
    let mut line = String::new();
    for row in rows {
        line.clear();
        line.push('{');
        let values = values(row);
        for (index, column) in columns.iter().enumerate() {
            if index > 0 {
                line.push(',');
            }
            line.push('"');
            line.push_str(column);
            line.push_str("\":");
            let bare = NUMERIC[index] && !matches!(row.monthly_spend, Spend::Bad(_) if index == 6);
            if bare && values[index].is_empty() {
                line.push_str("null");
            } else if bare {
                line.push_str(&values[index]);
            } else {
                line.push_str(&serde_json::to_string(&values[index])?);
            }
        }
        line.push_str("}\n");
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests::sample;

    fn read_dir_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    }

    #[test]
    fn csv_parts_split_rows_evenly_with_a_header_each() {
        let dir = tempfile::tempdir().unwrap();
        let rows = &sample()[..1003];
        let paths = write_parts(dir.path(), rows, 4, Format::Csv, false).unwrap();
        assert_eq!(paths.len(), 4);
        let mut total = 0;
        for (part, path) in paths.iter().enumerate() {
            assert_eq!(
                path.file_name().unwrap().to_string_lossy(),
                format!("part-0000{part}.csv")
            );
            let mut reader = csv::Reader::from_path(path).unwrap();
            assert_eq!(
                reader.headers().unwrap().iter().collect::<Vec<_>>(),
                columns(false)
            );
            let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
            assert!((250..=251).contains(&records.len()));
            for record in &records {
                assert_eq!(record.len(), 14);
                assert!(record[6].parse::<f64>().is_ok());
                assert_eq!(record[6].split('.').nth(1).map(str::len), Some(2));
            }
            total += records.len();
        }
        assert_eq!(total, 1003);
        let mut first = csv::Reader::from_path(&paths[0]).unwrap();
        let record = first.records().next().unwrap().unwrap();
        assert_eq!(&record[0], rows[0].customer_id_text());
        assert_eq!(&record[11], rows[0].support_note);
    }

    #[test]
    fn jsonl_lines_are_objects_with_typed_values() {
        let dir = tempfile::tempdir().unwrap();
        let mut rows = sample()[..10].to_vec();
        rows[3].monthly_spend = Spend::Bad("n/a".into());
        let paths = write_parts(dir.path(), &rows, 1, Format::Jsonl, true).unwrap();
        let text = std::fs::read_to_string(&paths[0]).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 10);
        let keys: Vec<&str> = lines[0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, columns(true));
        assert!(lines[0]["tenure_days"].is_u64());
        assert!(lines[0]["monthly_spend"].is_f64() || lines[0]["monthly_spend"].is_u64());
        assert_eq!(lines[3]["monthly_spend"], "n/a");
        assert!(lines[0]["churned"] == 0 || lines[0]["churned"] == 1);
        assert_eq!(lines[0]["support_note"], rows[0].support_note.as_str());
    }

    #[test]
    fn rewriting_replaces_parts_but_refuses_stale_ones() {
        let dir = tempfile::tempdir().unwrap();
        let rows = &sample()[..100];
        write_parts(dir.path(), rows, 3, Format::Csv, false).unwrap();
        write_parts(dir.path(), rows, 3, Format::Csv, false).unwrap();
        std::fs::write(dir.path().join("README"), "kept").unwrap();
        write_parts(dir.path(), rows, 3, Format::Csv, false).unwrap();
        let err = write_parts(dir.path(), rows, 2, Format::Csv, false).unwrap_err();
        assert!(err.to_string().contains("holds part-00002.csv"), "{err}");
        let err = write_parts(dir.path(), rows, 3, Format::Jsonl, false).unwrap_err();
        assert!(err.to_string().contains("holds part-0000"), "{err}");
        assert_eq!(read_dir_bytes(dir.path()).len(), 4);
    }

    #[test]
    fn same_rows_give_byte_identical_files() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for dir in [&a, &b] {
            write_parts(dir.path(), &sample()[..2000], 4, Format::Csv, true).unwrap();
        }
        assert_eq!(read_dir_bytes(a.path()), read_dir_bytes(b.path()));
    }
}
