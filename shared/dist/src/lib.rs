//! Data-parallel training over libtorch's c10d, the runtime `torch.distributed` itself uses.
//!
//! - [`launch`]: the environment contract of torchrun, Slurm wrappers and Kubernetes operators
//!   (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`).
//! - [`group`]: a process group (TCPStore rendezvous, then Gloo or NCCL) through a small C++ shim;
//!   every C++ exception comes back as an error.
//! - [`affinity`]: each local rank pinned to its own share of the CPUs.
//! - [`buckets`]: gradient averaging over a flat buffer cut into buckets, one collective each.
//! - [`local`]: `--nproc-per-node N`: start N local ranks, forward signals, stop all when one fails.
//! - [`store`]: the rendezvous store a launcher hosts for its ranks, as torchrun's agent does.

pub mod affinity;
pub mod buckets;
pub mod group;
pub mod launch;
pub mod local;
pub mod store;

pub use group::{Backend, ProcessGroup};
pub use launch::Launch;
