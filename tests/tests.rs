//! The one integration-test binary: every tool, run as a real process.

mod util;
