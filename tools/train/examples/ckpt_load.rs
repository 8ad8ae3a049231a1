//! Times `checkpoint::load_latest` on a folder of checkpoints, in one process, as torch.load is
//! timed in a loop: the newest checkpoint read, blake3-verified and decoded, `N` times. For
//! scripts/bench/train_ckpt_side_by_side.py.
//!
//!   cargo run --release -p train --example ckpt_load -- OUT/checkpoints 10

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use runfn_learn::checkpoint;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().context("usage: ckpt_load DIR [N]")?);
    let n: usize = args.next().map_or(Ok(10), |n| n.parse())?;
    let newest = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .max()
        .context("no checkpoint JSON")?;
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&newest)?)?;
    let hash = state["manifest_hash"].as_str().context("manifest_hash")?;
    let seed = state["seed"].as_u64().context("seed")?;
    let mut seconds = Vec::with_capacity(n);
    for _ in 0..n {
        let mut warnings = Vec::new();
        let start = Instant::now();
        let loaded = checkpoint::load_latest(&dir, hash, seed, &mut warnings)?;
        seconds.push(start.elapsed().as_secs_f64());
        anyhow::ensure!(loaded.is_some() && warnings.is_empty(), "{warnings:?}");
    }
    println!("{}", serde_json::json!({ "load_s": seconds }));
    Ok(())
}
