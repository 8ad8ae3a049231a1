//! The promotion gate: a candidate's evaluation against its baseline's, overall and per slice.

pub mod evaluation;
pub mod policy;
pub mod decide;

pub use decide::{Check, Decision, decide};
pub use evaluation::Evaluation;
pub use policy::Policy;
