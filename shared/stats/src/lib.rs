//! Numerical pieces the tools share, free of I/O.

pub mod auc;
pub mod binomial;
pub mod bootstrap;
pub mod checkpoint;
pub mod control_chart;
pub mod delong;
pub mod drift;
pub mod holm;
pub mod minhash;
mod mix;
pub mod noise;
pub mod normal;
pub mod percentile;
pub mod sampling;
pub mod sketch;
pub mod transport;
pub mod variance_ratio;
