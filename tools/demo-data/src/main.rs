//! demo-data: a seeded, churn-like customer snapshot with optional planted problems.

mod date;
mod generate;
mod output;
mod text;
mod traps;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::{Exit, InputError, Record};
use runfn_schema::record::DemoData;

use crate::generate::{Base, MAX_ROWS};
use crate::output::Format;
use crate::traps::{Planted, Traps};

const AFTER_HELP: &str = "\
Examples:
  demo-data --out runs/demo/snapshot
  demo-data --out /tmp/churn --rows 20000 --seed 3 --parts 2 --format jsonl
  demo-data --out /tmp/leaky --trap-future-feature 500 --trap-label-proxy --trap-entity-overlap 300
  demo-data --out /tmp/dups --trap-duplicate-notes 200 --trap-exact-duplicates 200 --bad-rows 50
  demo-data --out /tmp/drifted --drift --seed 8
  demo-data --out /tmp/new --rows 8000 --trap-missing-new-accounts 1600

Files: DIR/part-00000.csv ... (rows split evenly, a header in each), or .jsonl with one object per
line. Columns: customer_id (C + 7 digits), signup_date (2025-03-01..2026-09-30, growing), region,
tier, tenure_days, tenure_bucket (<30d, 30-90d, 90-365d, >365d), monthly_spend (2 decimals),
support_tickets, logins_30d, tickets_this_month, tickets_as_of, support_note (3+ sentences, up to
40 words), label_date (signup_date + 90 days), churned (0/1, about 20%) [, account_closed].
The same flags give byte-identical files; a run replaces the part files it writes and refuses a
folder holding other part-* files. Each trap claims its own rows, so a row carries at most one
trap. \"Late\" rows (signup in 2026-08 or 2026-09) copy or reuse \"early\" ones (signup before
2026-07-01):
  --trap-future-feature N    N rows with tickets_as_of 1-30 days after label_date (churners'
                             tickets_this_month inflated)
  --trap-label-proxy         an account_closed column equal to churned but for ~0.2% of rows
  --trap-entity-overlap N    N late rows reuse the customer_id of an early row
  --trap-duplicate-notes N   N late rows with an early row's note restyled (first word
                             upper-cased, a space doubled), N more with an early 28+ word note
                             with one word swapped
  --trap-exact-duplicates N  N late rows with every feature of an early row (own id, dates, label)
  --drift                    spend x1.35, central region share doubled, label rate +5 points
  --bad-rows N               N rows whose monthly_spend is \"n/a\" or has a decimal comma (\"12,50\")
  --trap-missing-new-accounts N
                             N rows become accounts in their first 30 days (tenure_days 0-29,
                             tenure_bucket <30d); about half were never activated, so their
                             logins_30d is empty (null), and those churn more (+1.5 log-odds):
                             a signal that filling the null with the mean hides

Output: a new record
  {\"demo_data\": {\"dir\", \"format\", \"rows\", \"files\": [paths], \"columns\": [names], \"seed\",
  \"label_rate\", \"traps\": {\"future_feature\", \"label_proxy\" (bool), \"label_proxy_flipped\",
  \"entity_overlap\", \"duplicate_notes_exact\", \"duplicate_notes_near\", \"exact_duplicates\",
  \"bad_rows\", \"missing_new_accounts\", \"missing_logins\", \"drift\" (bool)}}, \"timings\": [...]}

Exit: 0 done, 2 bad usage, too few rows for the traps asked, or a folder that cannot be written.";

/// A seeded, churn-like customer snapshot with optional planted problems, for demos and tests.
#[derive(Debug, Parser)]
#[command(name = "demo-data", version, after_help = AFTER_HELP)]
struct Args {
    /// Folder for the part files (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Number of rows in all.
    #[arg(long, value_name = "N", default_value_t = 200_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_ROWS as u64))]
    rows: u64,
    /// Seed of every random choice.
    #[arg(long, value_name = "S", default_value_t = 7)]
    seed: u64,
    /// Number of part files.
    #[arg(long, value_name = "K", default_value_t = 4,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    parts: u64,
    /// File format.
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    format: Format,
    /// Rows whose ticket count was taken after the label date.
    #[arg(long, value_name = "N", default_value_t = 0)]
    trap_future_feature: usize,
    /// Add an account_closed column that gives the label away.
    #[arg(long)]
    trap_label_proxy: bool,
    /// Customers that reappear in the last two months under the same id.
    #[arg(long, value_name = "N", default_value_t = 0)]
    trap_entity_overlap: usize,
    /// Late rows with a restyled copy of an earlier note, and as many with a near copy.
    #[arg(long, value_name = "N", default_value_t = 0)]
    trap_duplicate_notes: usize,
    /// Late rows that copy every feature of an earlier row.
    #[arg(long, value_name = "N", default_value_t = 0)]
    trap_exact_duplicates: usize,
    /// A drifted snapshot: higher spend, more central region, higher label rate.
    #[arg(long)]
    drift: bool,
    /// Rows with an unparseable monthly_spend.
    #[arg(long, value_name = "N", default_value_t = 0)]
    bad_rows: usize,
    /// New accounts, about half of them with no logins_30d, and those churn more.
    #[arg(long, value_name = "N", default_value_t = 0)]
    trap_missing_new_accounts: usize,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("demo-data", runfn_version::long());
    runfn_core::cli::main("demo-data", args.common.clone(), |tool| run(tool, &args))
}

fn run(tool: &Tool, args: &Args) -> anyhow::Result<Exit> {
    let written = write_snapshot(args)?;
    tool.info(format!(
        "wrote {} rows ({:.1}% churned) in {} files under {}",
        args.rows,
        written.label_rate * 100.0,
        written.files.len(),
        args.out.display()
    ));
    let mut record = Record::new();
    record.set(&DemoData {
        dir: args.out.display().to_string(),
        format: args.format.extension().to_string(),
        rows: args.rows,
        files: written
            .files
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        columns: output::columns(args.trap_label_proxy)
            .into_iter()
            .map(str::to_string)
            .collect(),
        seed: args.seed,
        label_rate: (written.label_rate * 1e6).round() / 1e6,
        traps: written.planted.to_json(args.drift),
    })?;
    tool.finish(record, Exit::Passed)
}

#[derive(Debug)]
struct Written {
    files: Vec<PathBuf>,
    label_rate: f64,
    planted: Planted,
}

fn write_snapshot(args: &Args) -> Result<Written, InputError> {
    let rows = args.rows as usize;
    let parts = args.parts as usize;
    if parts > rows {
        return Err(InputError::field(
            "--parts",
            format!("{parts} files for {rows} rows would leave some empty; use at most --rows"),
        ));
    }
    let base = Base {
        rows,
        seed: args.seed,
        drift: args.drift,
    };
    let traps = Traps {
        future_feature: args.trap_future_feature,
        label_proxy: args.trap_label_proxy,
        entity_overlap: args.trap_entity_overlap,
        duplicate_notes: args.trap_duplicate_notes,
        exact_duplicates: args.trap_exact_duplicates,
        bad_rows: args.bad_rows,
        missing_new_accounts: args.trap_missing_new_accounts,
    };
    let mut rows = generate::rows(&base);
    let planted = traps::plant(&mut rows, &traps, args.seed)?;
    let files = output::write_parts(
        Path::new(&args.out),
        &rows,
        parts,
        args.format,
        args.trap_label_proxy,
    )?;
    let churned = rows.iter().filter(|r| r.churned).count();
    Ok(Written {
        files,
        label_rate: churned as f64 / rows.len() as f64,
        planted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }

    fn args(out: &Path, extra: &[&str]) -> Args {
        let mut argv = vec!["demo-data", "--out", out.to_str().unwrap(), "-q"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).unwrap()
    }

    fn files(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read(e.path()).unwrap())
            })
            .collect();
        files.sort();
        files
    }

    #[test]
    fn same_flags_and_seed_give_byte_identical_files() {
        let (a, b, c) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let flags = [
            "--rows",
            "6000",
            "--seed",
            "11",
            "--parts",
            "3",
            "--trap-future-feature",
            "20",
            "--trap-label-proxy",
            "--trap-entity-overlap",
            "20",
            "--trap-duplicate-notes",
            "20",
            "--trap-exact-duplicates",
            "20",
            "--bad-rows",
            "20",
            "--trap-missing-new-accounts",
            "20",
            "--drift",
        ];
        let first = write_snapshot(&args(a.path(), &flags)).unwrap();
        let second = write_snapshot(&args(b.path(), &flags)).unwrap();
        assert_eq!(files(a.path()), files(b.path()));
        assert_eq!(first.planted, second.planted);
        assert_eq!(first.label_rate, second.label_rate);
        let mut other_seed = flags.to_vec();
        other_seed[3] = "12";
        write_snapshot(&args(c.path(), &other_seed)).unwrap();
        assert_ne!(files(a.path()), files(c.path()));
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let args = args(Path::new("x"), &[]);
        assert_eq!((args.rows, args.seed, args.parts), (200_000, 7, 4));
        assert_eq!(args.format, Format::Csv);
        assert!(!args.trap_label_proxy && !args.drift);
    }

    #[test]
    fn rejects_more_parts_than_rows_and_zero_rows() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_snapshot(&args(dir.path(), &["--rows", "3", "--parts", "4"])).unwrap_err();
        assert!(
            err.to_string().starts_with("--parts: 4 files for 3 rows"),
            "{err}"
        );
        let argv = ["demo-data", "--out", "x", "--rows", "0"];
        assert!(Args::try_parse_from(argv).is_err());
    }
}
