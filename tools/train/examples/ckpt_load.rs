//! Times `checkpoint::load_latest` on a folder of checkpoints, in one process, as torch.load is
//! timed in a loop: the newest checkpoint read, blake3-verified and decoded, `N` times. For
//! scripts/bench/train_ckpt_side_by_side.py.
//!
//!   cargo run --release -p train --example ckpt_load -- OUT/checkpoints 10 [--cold]
//!
//! With `--cold` the tensors file's pages are dropped from the page cache before each load
//! (`posix_fadvise(DONTNEED)`; it needs no privilege), so each load reads the disk, as a resume
//! on a fresh machine does.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use runfn_learn::checkpoint;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().context("usage: ckpt_load DIR [N]")?);
    let n: usize = args.next().map_or(Ok(10), |n| n.parse())?;
    let cold = args.next().is_some_and(|a| a == "--cold");
    let newest = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .max()
        .context("no checkpoint JSON")?;
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&newest)?)?;
    let hash = state["manifest_hash"].as_str().context("manifest_hash")?;
    let seed = state["seed"].as_u64().context("seed")?;
    let tensors = dir.join(state["tensors"]["file"].as_str().context("tensors.file")?);
    let mut seconds = Vec::with_capacity(n);
    for _ in 0..n {
        if cold {
            drop_cached_pages(&tensors)?;
        }
        let mut warnings = Vec::new();
        let start = Instant::now();
        let loaded = checkpoint::load_latest(&dir, hash, seed, &mut warnings)?;
        seconds.push(start.elapsed().as_secs_f64());
        anyhow::ensure!(loaded.is_some() && warnings.is_empty(), "{warnings:?}");
    }
    println!("{}", serde_json::json!({ "load_s": seconds }));
    Ok(())
}

/// Drops the file's pages from the page cache (they are clean: the file was fsynced).
fn drop_cached_pages(path: &std::path::Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)?;
    // SAFETY: a plain system call on a descriptor this function owns.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    anyhow::ensure!(
        rc == 0,
        "posix_fadvise: {}",
        std::io::Error::from_raw_os_error(rc)
    );
    Ok(())
}
