//! Numerical pieces the tools share, free of I/O.

pub mod checkpoint;
pub mod noise;
