//! Data profiles: computed per file in parallel (or on many machines), merged, compared.

pub mod column;
pub mod compare;
pub mod profile;

pub use compare::{Check, Comparison, Explanation, Thresholds, compare};
pub use profile::{PROFILE_FORMAT, Profile, profile_snapshot};
