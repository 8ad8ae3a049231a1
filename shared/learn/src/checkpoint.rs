//! Checkpoints that resume exactly: `step-NNNNNNNNNN.safetensors` (weights and optimizer
//! moments) written first, then `step-NNNNNNNNNN.json` (every counter and the tensors' blake3),
//! each atomically. The JSON is the commit mark: a tensors file without one is an interrupted
//! save and is removed; a JSON whose tensors do not match its checksum is skipped with a warning
//! and the previous checkpoint is used. With `keep_best` (and early stopping, which implies it) the
//! checkpoint of the best val AUC is kept beside the newest ones, and every later checkpoint names
//! it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use runfn_core::atomic::write_bytes_atomic;
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::model::Architecture;
use crate::schedule::Schedule;
pub use crate::tensor_file::Hashing;
use crate::tensor_file::{self, Buffer};

pub const FORMAT: &str = "runfn-checkpoint-v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointState {
    pub format: String,
    pub manifest_hash: String,
    pub seed: u64,
    /// Optimizer steps completed.
    pub step: u64,
    /// The epoch the next batch comes from, and how many of its batches were consumed.
    pub epoch: u64,
    pub position: u64,
    pub world_size: u64,
    /// libtorch intra-op threads: reductions split by thread, so the last bits depend on it.
    pub threads: i32,
    pub optimizer: OptimizerState,
    pub schedule: Schedule,
    pub rng: RngState,
    /// Samples seen so far, over all ranks.
    pub samples: u64,
    /// The preprocessing fitted at the start of the run, reused on resume.
    pub preprocess: crate::features::Preprocess,
    pub tensors: TensorsRef,
    /// Every rank's place in the data, gathered from the ranks when the checkpoint was taken.
    #[serde(default)]
    pub ranks: Vec<RankState>,
    /// The model's shape, so that one checkpoint can be scored on its own.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// With `keep_best` (or early stopping): the best checkpoint so far, carried so a resumed run
    /// knows what to beat and pruning knows what to keep.
    #[serde(default)]
    pub best: Option<Best>,
    /// With early stopping: the val evaluations since the best one that did not beat it, so a
    /// resumed run stops where an uninterrupted one does (at `patience` it has stopped).
    #[serde(default)]
    pub evaluations_since_best: u64,
}

/// The checkpoint with the highest val AUC so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Best {
    pub step: u64,
    pub val_auc: f64,
}

/// One rank's place in the data at a checkpoint: the epoch and batch position it resumes at
/// (the same on every rank) and its slice `rows` (start, end) of every global batch. Its random
/// state is the run's streams at (seed, epoch, position) cut to `rows`, so these numbers restore
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankState {
    pub rank: usize,
    pub epoch: u64,
    pub position: u64,
    pub rows: [u64; 2],
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptimizerState {
    pub kind: String,
    pub step: u64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// Every random stream in use. Each is derived from the seed and a position rather than
/// carried, so the seed with `epoch` and `position` is the complete state: the order of an epoch
/// comes from (seed, epoch), the dropout masks of a batch from (seed, epoch, position), the
/// initial weights from (seed). libtorch's own generator is not used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RngState {
    pub seed: u64,
    pub streams: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorsRef {
    pub file: String,
    pub bytes: u64,
    pub blake3: String,
}

#[derive(Debug)]
pub struct Loaded {
    pub path: PathBuf,
    pub state: CheckpointState,
    pub tensors: Vec<(String, Tensor)>,
}

fn stem(step: u64) -> String {
    format!("step-{step:010}")
}

/// The JSON (commit mark) of the checkpoint of `step` in `dir`.
pub fn json_path(dir: &Path, step: u64) -> PathBuf {
    dir.join(format!("{}.json", stem(step)))
}

/// Fails early, with the folder named, when checkpoints cannot be written there.
pub fn ensure_writable(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("checkpoint folder {}: cannot create", dir.display()))?;
    tempfile::tempfile_in(dir)
        .with_context(|| format!("checkpoint folder {}: not writable", dir.display()))?;
    Ok(())
}

/// What a checkpoint's tensors file is written from.
#[derive(Debug, Clone, Copy)]
pub enum Tensors<'a> {
    /// The tensors themselves, hashed as [`Hashing`] says.
    Live(&'a [(String, &'a Tensor)], Hashing),
    /// An image of the file they make (a background checkpoint's copy).
    Image(&'a tensor_file::FileImage),
}

/// The metadata of every checkpoint's tensors file.
pub fn tensors_metadata() -> serde_json::Value {
    serde_json::json!({"format": FORMAT})
}

/// Writes a checkpoint and keeps the newest `keep` and the best ones they name. Returns its JSON path and the seconds the
/// save took.
pub fn save(
    dir: &Path,
    state: CheckpointState,
    tensors: &[(String, &Tensor)],
    keep: usize,
    hashing: Hashing,
) -> Result<(PathBuf, f64)> {
    save_from(dir, state, Tensors::Live(tensors, hashing), keep)
}

/// [`save`] from either source; the files are the same.
pub fn save_from(
    dir: &Path,
    mut state: CheckpointState,
    tensors: Tensors<'_>,
    keep: usize,
) -> Result<(PathBuf, f64)> {
    let start = Instant::now();
    let name = stem(state.step);
    let tensor_path = dir.join(format!("{name}.safetensors"));
    let (bytes, blake3) = match tensors {
        Tensors::Live(tensors, hashing) => {
            tensor_file::write(&tensor_path, tensors, &tensors_metadata(), hashing)?
        }
        Tensors::Image(image) => image.write(&tensor_path)?,
    };
    state.tensors = TensorsRef {
        file: format!("{name}.safetensors"),
        bytes,
        blake3: blake3.to_hex().to_string(),
    };
    let json_path = dir.join(format!("{name}.json"));
    let mut text = serde_json::to_string_pretty(&state)?;
    text.push('\n');
    write_bytes_atomic(&json_path, text.as_bytes())?;
    prune(dir, keep)?;
    Ok((json_path, start.elapsed().as_secs_f64()))
}

/// Steps that have a JSON (committed), newest first.
fn committed_steps(dir: &Path) -> Result<Vec<u64>> {
    let mut steps = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(steps),
        Err(e) => return Err(e).with_context(|| format!("{}", dir.display())),
    };
    for entry in entries {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(step) = name
            .strip_prefix("step-")
            .and_then(|s| s.strip_suffix(".json"))
            .and_then(|s| s.parse::<u64>().ok())
        {
            steps.push(step);
        }
    }
    steps.sort_unstable_by(|a, b| b.cmp(a));
    Ok(steps)
}

/// Removes all but the newest `keep` checkpoints and the best checkpoints they name (each
/// kept one's, so a fallback past a corrupt newest still finds its best), and tensors files
/// with no JSON.
fn prune(dir: &Path, keep: usize) -> Result<()> {
    let steps = committed_steps(dir)?;
    let kept = &steps[..keep.min(steps.len())];
    let best: Vec<u64> = kept
        .iter()
        .filter_map(|&step| read_state(&json_path(dir, step)).ok()?.best)
        .map(|b| b.step)
        .collect();
    for &step in steps.iter().skip(keep).filter(|s| !best.contains(s)) {
        let name = stem(step);
        remove_if_present(&dir.join(format!("{name}.json")))?;
        remove_if_present(&dir.join(format!("{name}.safetensors")))?;
    }
    remove_orphans(dir, &steps)
}

fn remove_orphans(dir: &Path, committed: &[u64]) -> Result<()> {
    // A checkpoint whose write was killed (preempted mid-save) leaves its hidden temp file.
    runfn_core::atomic::remove_stale_temps(dir, ".step-");
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let step = name.as_deref().and_then(|n| {
            n.strip_prefix("step-")
                .and_then(|s| s.strip_suffix(".safetensors"))
                .and_then(|s| s.parse::<u64>().ok())
        });
        if let Some(step) = step
            && !committed.contains(&step)
        {
            remove_if_present(&path)?;
        }
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// A checkpoint's JSON is its commit mark, in a store as on disk.
fn is_commit_mark(relative: &str) -> bool {
    relative.ends_with(".json")
}

/// Publishes the checkpoint folder to its copy in a store: new tensors first, then their JSON;
/// pruned checkpoints lose their JSON before their tensors. A reader of the store sees the same
/// whole checkpoints as one of the folder.
pub fn publish(dir: &Path, store: &runfn_storage::Remote) -> Result<()> {
    runfn_storage::push(dir, store, &is_commit_mark)?;
    Ok(())
}

/// Writes a checkpoint (see [`save`]) and, when the run's output is in a store, publishes the
/// folder (see [`publish`]). Returns its JSON path and the seconds both took: the cost of a
/// checkpoint is what it takes to be safe where a resume will look for it.
pub fn save_and_publish(
    dir: &Path,
    store: Option<&runfn_storage::Remote>,
    state: CheckpointState,
    tensors: Tensors<'_>,
    keep: usize,
) -> Result<(PathBuf, f64)> {
    let started = Instant::now();
    let step = state.step;
    let (path, _) = save_from(dir, state, tensors, keep)
        .with_context(|| format!("writing the checkpoint of step {step} in {}", dir.display()))?;
    if let Some(store) = store {
        publish(dir, store).with_context(|| {
            format!(
                "publishing the checkpoint of step {step} to {}",
                store.url()
            )
        })?;
    }
    Ok((path, started.elapsed().as_secs_f64()))
}

/// Makes the folder hold the store's checkpoints (before a resume): what the store lacks is
/// removed, what it has is downloaded unless the folder already has that object.
pub fn fetch(store: &runfn_storage::Remote, dir: &Path) -> Result<()> {
    runfn_storage::pull(store, dir, &is_commit_mark)?;
    Ok(())
}

/// Removes every checkpoint in `dir` (for `--fresh`).
pub fn clear(dir: &Path) -> Result<()> {
    for step in committed_steps(dir)? {
        let name = stem(step);
        remove_if_present(&dir.join(format!("{name}.json")))?;
        remove_if_present(&dir.join(format!("{name}.safetensors")))?;
    }
    if dir.exists() {
        remove_orphans(dir, &[])?;
    }
    Ok(())
}

/// The newest valid checkpoint of this manifest and seed. A checkpoint of another manifest or
/// seed is an error (the caller offers `--fresh`); an unreadable or corrupt one is reported in
/// `warnings` and the next older one is tried.
pub fn load_latest(
    dir: &Path,
    manifest_hash: &str,
    seed: u64,
    warnings: &mut Vec<String>,
) -> Result<Option<Loaded>> {
    for step in committed_steps(dir)? {
        let json_path = json_path(dir, step);
        let state = match read_state(&json_path) {
            Ok(state) => state,
            Err(e) => {
                warnings.push(format!(
                    "checkpoint {} is unreadable ({e}); trying the previous one",
                    json_path.display()
                ));
                continue;
            }
        };
        if state.manifest_hash != manifest_hash {
            bail!(
                "checkpoint {} belongs to manifest {}, but this run's manifest is {manifest_hash}; \
                 rerun with --fresh to discard it, or use another --out",
                json_path.display(),
                state.manifest_hash
            );
        }
        if state.seed != seed {
            bail!(
                "checkpoint {} was trained with seed {}, this run uses seed {seed}; \
                 rerun with --fresh to discard it, or use another --out",
                json_path.display(),
                state.seed
            );
        }
        let tensor_path = dir.join(&state.tensors.file);
        let buffer = match verified(&tensor_path, &state.tensors) {
            Ok(buffer) => buffer,
            Err(e) => {
                warnings.push(format!("{e}; trying the previous one"));
                continue;
            }
        };
        let (tensors, _) = buffer.decode(&tensor_path.display().to_string())?;
        return Ok(Some(Loaded {
            path: json_path,
            state,
            tensors,
        }));
    }
    Ok(None)
}

/// One checkpoint by the path of its JSON, its tensors checked against the blake3 it names.
pub fn load_file(json_path: &Path) -> Result<Loaded> {
    let state = read_state(json_path)?;
    if state.format != FORMAT {
        bail!(
            "{}: format `{}`, expected `{FORMAT}`",
            json_path.display(),
            state.format
        );
    }
    let dir = json_path.parent().unwrap_or(Path::new("."));
    let tensor_path = dir.join(&state.tensors.file);
    let buffer = verified(&tensor_path, &state.tensors).map_err(anyhow::Error::msg)?;
    let (tensors, _) = buffer.decode(&tensor_path.display().to_string())?;
    Ok(Loaded {
        path: json_path.to_path_buf(),
        state,
        tensors,
    })
}

fn read_state(json_path: &Path) -> Result<CheckpointState> {
    let text = std::fs::read_to_string(json_path)
        .with_context(|| format!("checkpoint {}", json_path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("checkpoint {}: not a runfn checkpoint", json_path.display()))
}

/// A tensors file read once, or why its bytes are not the ones `expected` names.
fn verified(path: &Path, expected: &TensorsRef) -> std::result::Result<Buffer, String> {
    let (buffer, blake3) =
        Buffer::read(path).map_err(|e| format!("checkpoint {}: {e}", path.display()))?;
    if buffer.len() as u64 != expected.bytes || blake3.to_hex().as_str() != expected.blake3 {
        return Err(format!(
            "checkpoint {} is truncated or corrupt ({} bytes, expected {}; checksum mismatch)",
            path.display(),
            buffer.len(),
            expected.bytes
        ));
    }
    Ok(buffer)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::features::Preprocess;

    pub(crate) fn state(step: u64) -> CheckpointState {
        CheckpointState {
            format: FORMAT.into(),
            manifest_hash: "blake3:m".into(),
            seed: 1,
            step,
            epoch: 0,
            position: step,
            world_size: 1,
            threads: 1,
            optimizer: OptimizerState {
                kind: "adamw".into(),
                step,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.0,
            },
            schedule: Schedule {
                lr: 0.1,
                warmup_steps: 0,
                total_steps: 10,
                min_lr_ratio: 0.0,
            },
            rng: RngState {
                seed: 1,
                streams: vec![],
            },
            samples: 0,
            preprocess: Preprocess {
                label: "y".into(),
                label_positive: None,
                numeric: vec![],
                categorical: vec![],
                train_rows: 1,
            },
            tensors: TensorsRef {
                file: String::new(),
                bytes: 0,
                blake3: String::new(),
            },
            ranks: vec![],
            architecture: None,
            best: None,
            evaluations_since_best: 0,
        }
    }

    /// A save killed halfway (preempted) left its hidden temp file; the next save's pruning
    /// removes it once nobody has written it for the stale age.
    #[test]
    fn a_killed_saves_temp_file_goes_with_the_next_prune() {
        let dir = tempfile::tempdir().unwrap();
        let temp = dir.path().join(".step-0000000238.safetensors.tmpAbCdEf");
        std::fs::write(&temp, b"half a checkpoint").unwrap();
        prune(dir.path(), 2).unwrap();
        assert!(temp.exists(), "a temp still being written was removed");
        std::fs::File::options()
            .write(true)
            .open(&temp)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
            .unwrap();
        prune(dir.path(), 2).unwrap();
        assert!(!temp.exists());
    }

    #[test]
    fn keeps_the_newest_and_falls_back_past_a_corrupt_one() {
        let dir = tempfile::tempdir().unwrap();
        for step in [1, 2, 3] {
            let t = Tensor::from_slice(&[step as f32; 4]);
            save(
                dir.path(),
                state(step),
                &[("w".into(), &t)],
                2,
                Hashing::Beside,
            )
            .unwrap();
        }
        assert_eq!(committed_steps(dir.path()).unwrap(), vec![3, 2]);
        assert!(!dir.path().join("step-0000000001.safetensors").exists());
        // An interrupted save leaves tensors without a JSON: ignored, then removed.
        std::fs::write(dir.path().join("step-0000000004.safetensors"), b"partial").unwrap();
        let mut warnings = Vec::new();
        let loaded = load_latest(dir.path(), "blake3:m", 1, &mut warnings)
            .unwrap()
            .unwrap();
        assert_eq!(loaded.state.step, 3);
        assert!(warnings.is_empty());
        // Corrupt the newest: the previous one is used, with a warning.
        std::fs::write(dir.path().join("step-0000000003.safetensors"), b"x").unwrap();
        let loaded = load_latest(dir.path(), "blake3:m", 1, &mut warnings)
            .unwrap()
            .unwrap();
        assert_eq!(loaded.state.step, 2);
        assert_eq!(
            Vec::<f32>::try_from(&loaded.tensors[0].1).unwrap(),
            vec![2.0; 4]
        );
        assert_eq!(warnings.len(), 1);
        // Another manifest or seed is refused.
        let err = load_latest(dir.path(), "blake3:other", 1, &mut warnings).unwrap_err();
        assert!(err.to_string().contains("--fresh"), "{err}");
        let err = load_latest(dir.path(), "blake3:m", 9, &mut warnings).unwrap_err();
        assert!(err.to_string().contains("seed"), "{err}");
        clear(dir.path()).unwrap();
        assert!(
            load_latest(dir.path(), "blake3:m", 1, &mut warnings)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_best_checkpoint_outlives_pruning_until_a_better_one_comes() {
        let dir = tempfile::tempdir().unwrap();
        let best = |step, val_auc| Some(Best { step, val_auc });
        let bests = [
            None,
            best(2, 0.7),
            best(2, 0.7),
            best(2, 0.7),
            best(5, 0.8),
            best(5, 0.8),
        ];
        for (step, best) in (1..).zip(bests) {
            let t = Tensor::from_slice(&[step as f32; 4]);
            let mut s = state(step);
            s.best = best;
            save(dir.path(), s, &[("w".into(), &t)], 2, Hashing::Inline).unwrap();
            if step == 4 {
                assert_eq!(committed_steps(dir.path()).unwrap(), vec![4, 3, 2]);
            }
        }
        assert_eq!(committed_steps(dir.path()).unwrap(), vec![6, 5]);
        let loaded = load_file(&json_path(dir.path(), 5)).unwrap();
        assert_eq!(loaded.state.best, best(5, 0.8));
        assert_eq!(
            Vec::<f32>::try_from(&loaded.tensors[0].1).unwrap(),
            vec![5.0; 4]
        );
        std::fs::write(dir.path().join("step-0000000005.safetensors"), b"x").unwrap();
        let err = load_file(&json_path(dir.path(), 5))
            .unwrap_err()
            .to_string();
        assert!(err.contains("checksum mismatch"), "{err}");
    }

    #[test]
    fn the_same_tensors_give_the_same_bytes() {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        let meta = serde_json::json!({"a": 1, "b": [2, 3]});
        let a = crate::tensor_file::encode(&[("x".into(), &t), ("y".into(), &t)], &meta).unwrap();
        let b = crate::tensor_file::encode(&[("y".into(), &t), ("x".into(), &t)], &meta).unwrap();
        assert_eq!(a, b);
        let (tensors, back) = crate::tensor_file::decode(&a, "test").unwrap();
        assert_eq!(back, meta);
        assert_eq!(tensors[0].0, "x");
    }
}
