//! "Did you mean" for misspelt names: the one implementation, in runfn-schema.

pub use runfn_schema::suggest::{closest, hint};
