//! `manifest.validate` (defined and checked in runfn-schema, so that mf-hash lints it with the
//! same code before any data is read).

pub use runfn_schema::validate::*;
