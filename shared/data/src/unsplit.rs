//! How many rows may fall in no split before a run stops: `manifest.data.max_unsplit_fraction`.
//!
//! Rows in no split are left out of training and testing. A few (a null time) are expected; many
//! mean the splits no longer cover the data (fixed dates on a snapshot that grew), and a run that
//! silently retrains on yesterday's rows is the failure this limit catches.

use runfn_core::{InputError, Record};
use serde_json::Value;

/// The default share of a snapshot's rows that may fall in no split.
pub const DEFAULT_MAX_UNSPLIT_FRACTION: f64 = 0.01;

/// `manifest.data.max_unsplit_fraction`, a share in [0, 1] (default 0.01).
pub fn max_unsplit_fraction(record: &Record) -> Result<f64, InputError> {
    const FIELD: &str = "manifest.data.max_unsplit_fraction";
    match record.get_path(FIELD) {
        None | Some(Value::Null) => Ok(DEFAULT_MAX_UNSPLIT_FRACTION),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|v| (0.0..=1.0).contains(v))
            .ok_or_else(|| InputError::field(FIELD, format!("{n} is not a share between 0 and 1"))),
        Some(other) => Err(InputError::field(
            FIELD,
            format!("must be a share between 0 and 1, found {other}"),
        )),
    }
}

/// The outcome for a run: rows left out, their share, and whether that is within `limit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unsplit {
    pub rows: u64,
    pub total: u64,
    pub limit: f64,
}

impl Unsplit {
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.rows as f64 / self.total as f64
        }
    }

    pub fn passed(&self) -> bool {
        self.fraction() <= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runfn_core::record::RecordInput;

    fn record(text: &str) -> Record {
        Record::parse(text, "test", RecordInput::Required).unwrap()
    }

    #[test]
    fn the_limit_defaults_and_is_checked() {
        assert_eq!(max_unsplit_fraction(&record("{}")).unwrap(), 0.01);
        let set = record(r#"{"manifest": {"data": {"max_unsplit_fraction": 0.2}}}"#);
        assert_eq!(max_unsplit_fraction(&set).unwrap(), 0.2);
        for bad in ["1.5", "-0.1", "\"a lot\""] {
            let text = format!(r#"{{"manifest": {{"data": {{"max_unsplit_fraction": {bad}}}}}}}"#);
            let err = max_unsplit_fraction(&record(&text))
                .unwrap_err()
                .to_string();
            assert!(err.contains("manifest.data.max_unsplit_fraction"), "{err}");
        }
    }

    #[test]
    fn the_share_is_of_every_row_read() {
        let unsplit = Unsplit {
            rows: 3,
            total: 200,
            limit: 0.01,
        };
        assert_eq!(unsplit.fraction(), 0.015);
        assert!(!unsplit.passed());
        assert!(Unsplit { rows: 2, ..unsplit }.passed());
        assert!(
            Unsplit {
                rows: 0,
                total: 0,
                limit: 0.0
            }
            .passed()
        );
    }
}
