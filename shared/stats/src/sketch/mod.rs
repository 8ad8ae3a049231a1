//! Mergeable sketches: summaries computed per file, possibly on many machines, stored in a
//! JSON profile and merged later. Each one serializes its whole state, so a merge of stored
//! profiles equals (or, for the approximate ones, approximates) a sketch of all the data.

pub mod frequencies;
mod hex;
pub mod hll;
pub mod quantiles;

pub use hex::HexError;
