//! The promotion gate: a candidate's evaluation against its baseline's, overall and per slice.

pub mod check;
pub mod evaluation;
pub mod noise_input;
pub mod paired;
pub mod pairing;
pub mod point;
pub mod policy;
pub mod spilled_delong;
pub mod spilled_pairing;
pub mod stability;

pub use check::{Check, Decision, PairedTest};
pub use evaluation::Evaluation;
pub use noise_input::check_noise_floor;
pub use paired::{PairedScores, Settings, SliceValues, TrainingNoise, decide_paired};
pub use point::decide;
pub use policy::Policy;
pub use stability::{add_stability, gated_resolutions, stability_checks};
