//! Numerical pieces the tools share, free of I/O.

pub mod auc;
pub mod checkpoint;
pub mod drift;
pub mod minhash;
mod mix;
pub mod noise;
pub mod sketch;
