//! Data profiles: computed per file in parallel (or on many machines), merged, compared.

pub mod check;
pub mod column;
pub mod compare;
pub mod explain;
pub mod history;
pub mod parts;
pub mod profile;
pub mod scope;
pub mod settings;

pub use check::Check;
pub use compare::{Comparison, compare};
pub use explain::{EXPLANATION_FORM, Explanation};
pub use profile::{PROFILE_FORMAT, Profile, profile_snapshot};
pub use scope::Roles;
pub use settings::{FailOn, SettingsError, Thresholds};
