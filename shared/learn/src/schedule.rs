//! The learning-rate schedule (defined with the settings it comes from, in runfn-schema).

pub use runfn_schema::schedule::Schedule;
