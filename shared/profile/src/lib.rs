//! Data profiles: computed per file in parallel (or on many machines), merged, compared.

pub mod column;
pub mod compare;
pub mod profile;
pub mod scope;
pub mod settings;

pub use compare::{Check, Comparison, Explanation, compare};
pub use profile::{PROFILE_FORMAT, Profile, profile_snapshot};
pub use scope::Roles;
pub use settings::{FailOn, SettingsError, Thresholds};
