//! The promotion gate: a candidate's evaluation against its baseline's, overall and per slice.

pub mod decide;
pub mod evaluation;
pub mod paired;
pub mod pairing;
pub mod policy;

pub use decide::{Check, Decision, decide};
pub use evaluation::Evaluation;
pub use paired::{PairedScores, Settings, TrainingNoise, decide_paired};
pub use policy::Policy;
