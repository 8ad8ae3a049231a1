//! The typed settings of a run manifest that more than one tool reads, checked the same way
//! wherever they are read: by `mf-hash` when it lints the manifest (before any data is read) and
//! by the tool that uses them. Unknown keys are errors that name the field and suggest the
//! close name. And the run record's sections (`record`), which every tool writes and reads
//! through these types.

pub mod record;
pub mod schedule;
pub mod suggest;
pub mod train;
pub mod validate;
