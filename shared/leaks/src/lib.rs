//! Leakage across splits, found in one parallel pass over the data.
//!
//! The pass ([`scan`]) gathers, per file, what each check needs; the checks then merge those
//! summaries in file order, so every count and example is the same on every run.

mod checks;
mod config;
mod report;
mod scan;

pub use config::LeakConfig;
pub use report::{LeakCheck, LeakReport};

use runfn_data::DataError;
use runfn_data::partitioned::Partitioned;

/// Runs every leak check over `data`.
pub fn check(data: &Partitioned, config: &LeakConfig) -> Result<LeakReport, DataError> {
    let layout = scan::Layout::new(data, config)?;
    let (files, bad_values) = data.fold(
        || scan::FileScan::new(&layout),
        |scan, batch| scan.add(&layout, batch),
    )?;
    let merged = scan::Merged::merge(files, &layout);
    let checks = vec![
        checks::entity_overlap(&merged, data, config),
        checks::time_order(&merged, data, config),
        checks::exact_duplicates(&merged, data),
        checks::near_duplicates(&merged, data, config),
        checks::future_features(&merged, data, config),
        checks::label_proxies(&merged, &layout, data, config),
    ];
    Ok(LeakReport::new(checks, bad_values.total()))
}
