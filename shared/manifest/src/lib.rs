//! Run manifests: the declared inputs of a training run, and their identity.

pub mod digest;
pub mod eval_settings;
pub mod gates;
pub mod git;
pub mod hash;
pub mod leaks;
pub mod lint;
pub mod parse;
pub mod pin;
pub mod snapshot;
pub mod suggest;
pub mod tags;
mod yaml_events;

pub use hash::{FORMAT_TAG, manifest_hash, verify_record};
pub use lint::{Pinning, Problem, lint, lint_as, lint_drift_only};
pub use parse::{Format, parse_manifest};
