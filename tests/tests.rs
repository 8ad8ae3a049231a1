//! The one integration-test binary: every tool, run as a real process on files under testdata/.

mod ckpt_interval;
mod gate;
mod mf_hash;
mod noise_floor;
mod schema;
mod util;
