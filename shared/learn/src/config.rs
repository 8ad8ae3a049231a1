//! Training settings from `manifest.config` (defined and checked in runfn-schema, so that
//! mf-hash lints them with the same code before any data is read).

pub use runfn_schema::train::*;
