//! Checkpoints written off the training loop: one background thread copies the loop's state
//! into host memory (a [`Snapshot`]) and saves it with [`checkpoint::save`], so the files are
//! the ones a blocking save writes. The copy too is off the loop: the next step's forward and
//! backward only read the weights and moments, so they run beside it, and the loop waits for
//! it ([`Writer::wait_copied`]) only before the optimizer changes them. On a state of a
//! gigabyte the copy on the loop was a fifth of what a blocking save costs. At most one write is in flight: a new one
//! waits for the last. Dropping the [`Writer`] waits as well, so no way out of the loop leaves a
//! write half done, and a failed write is returned to the loop, never lost on its thread. A
//! thread that ends the process while the loop is stuck (the stall watchdog) waits on [`Idle`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use tch::{Device, Tensor};

use crate::checkpoint::{self, CheckpointState, Hashing, Tensors};
use crate::tensor_file::FileImage;

/// A checkpoint's state and tensors, copied so that training can go on changing its own.
#[derive(Debug)]
pub struct Snapshot {
    state: CheckpointState,
    tensors: Vec<(String, Tensor)>,
}

impl Snapshot {
    /// Copies `tensors` into new host tensors.
    pub fn take(state: CheckpointState, tensors: &[(String, &Tensor)]) -> Snapshot {
        let _guard = tch::no_grad_guard();
        let tensors = tensors
            .iter()
            .map(|(name, t)| {
                let t = t.detach();
                let copy = if t.device() == Device::Cpu {
                    t.copy()
                } else {
                    t.to_device(Device::Cpu)
                };
                (name.clone(), copy)
            })
            .collect();
        Snapshot { state, tensors }
    }
}

/// A finished write: the checkpoint's step, its JSON and the seconds the save took.
#[derive(Debug)]
pub struct Written {
    pub step: u64,
    pub path: PathBuf,
    pub seconds: f64,
}

/// The writer thread hands back the file image it wrote from with its result, for the next
/// checkpoint to copy into.
type InFlight = JoinHandle<(Result<Written>, Option<FileImage>)>;

/// What the writer thread starts from: a snapshot already taken, or the loop's own tensors
/// (detached handles on their memory) to copy into the image of their file first, the last
/// write's when it fits.
enum Job {
    Taken(Snapshot),
    Copy {
        state: CheckpointState,
        sources: Vec<(String, Tensor)>,
        spare: Option<FileImage>,
    },
}

/// A boolean that other threads wait on.
#[derive(Debug, Clone, Default)]
struct Flag(Arc<(Mutex<bool>, Condvar)>);

impl Flag {
    fn set(&self, value: bool) {
        let (flag, changed) = &*self.0;
        if let Ok(mut flag) = flag.lock() {
            *flag = value;
        }
        changed.notify_all();
    }

    /// Waits while the flag is `value`, for at most `limit`; false if it still is.
    fn wait_while(&self, value: bool, limit: Duration) -> bool {
        let (flag, changed) = &*self.0;
        let Ok(guard) = flag.lock() else {
            return false;
        };
        changed
            .wait_timeout_while(guard, limit, |flag| *flag == value)
            .is_ok_and(|(flag, _)| *flag != value)
    }
}

/// Set to `value` when dropped: when the writer thread ends or passes a point, by returning or
/// by a panic, so no thread waits on it for ever.
struct SetOnDrop(Flag, bool);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set(self.1);
    }
}

/// Whether a write is in flight, for a thread that must not end the process in the middle of one.
#[derive(Debug, Clone, Default)]
pub struct Idle(Flag);

impl Idle {
    /// Waits until no write is in flight, for at most `limit`; false if one still is.
    pub fn wait(&self, limit: Duration) -> bool {
        self.0.wait_while(true, limit)
    }
}

/// The one background writer of a checkpoint folder.
#[derive(Debug)]
pub struct Writer {
    dir: PathBuf,
    keep: usize,
    in_flight: Option<InFlight>,
    idle: Idle,
    delay: Duration,
    store: Option<runfn_storage::Remote>,
    /// The file image of the last finished write, copied into by the next checkpoint.
    spare: Option<FileImage>,
    /// Set once the write in flight no longer reads the loop's tensors; kept until the loop
    /// has seen it.
    copying: Option<Flag>,
}

impl Writer {
    pub fn new(dir: &Path, keep: usize) -> Writer {
        Writer {
            dir: dir.to_path_buf(),
            keep,
            in_flight: None,
            idle: Idle::default(),
            delay: Duration::ZERO,
            store: None,
            spare: None,
            copying: None,
        }
    }

    /// Each checkpoint, once on disk, is also published to `store` (see
    /// [`checkpoint::publish`]); its seconds include the upload.
    pub fn with_store(mut self, store: Option<runfn_storage::Remote>) -> Writer {
        self.store = store;
        self
    }

    /// Every write starts `delay` late, as on a slow disk (the tests' hook).
    pub fn with_delay(mut self, delay: Duration) -> Writer {
        self.delay = delay;
        self
    }

    /// What a thread that ends the process waits on first.
    pub fn idle(&self) -> Idle {
        self.idle.clone()
    }

    /// Waits for the write in flight (returned) and starts the next: the writer thread copies
    /// `tensors` into host memory, reusing that write's copies, then writes them. The caller
    /// must not change `tensors` until [`Writer::wait_copied`] has returned.
    pub fn checkpoint(
        &mut self,
        state: CheckpointState,
        tensors: &[(String, &Tensor)],
    ) -> Result<Option<Written>> {
        let previous = self.wait()?;
        // New handles on the same memory: the writer thread never touches the loop's own
        // tensors (their gradients and autograd state), only their bytes.
        let sources = tensors
            .iter()
            .map(|(name, t)| (name.clone(), t.detach()))
            .collect();
        let spare = std::mem::take(&mut self.spare);
        self.spawn(Job::Copy {
            state,
            sources,
            spare,
        })?;
        Ok(previous)
    }

    /// Starts writing `snapshot`, after waiting for the write in flight, which it returns.
    pub fn start(&mut self, snapshot: Snapshot) -> Result<Option<Written>> {
        let previous = self.wait()?;
        self.spawn(Job::Taken(snapshot))?;
        Ok(previous)
    }

    /// Waits until the write in flight has copied the tensors it was given, so that they may
    /// change: the loop calls it before every optimizer update. Usually it has long finished.
    /// True when there was a copy to wait for.
    pub fn wait_copied(&mut self) -> bool {
        match self.copying.take() {
            Some(copying) => {
                copying.wait_while(false, Duration::from_secs(u64::from(u32::MAX)));
                true
            }
            None => false,
        }
    }

    fn spawn(&mut self, job: Job) -> Result<()> {
        let (dir, keep, delay) = (self.dir.clone(), self.keep, self.delay);
        let store = self.store.clone();
        let step = match &job {
            Job::Taken(snapshot) => snapshot.state.step,
            Job::Copy { state, .. } => state.step,
        };
        self.idle.0.set(true);
        let done = SetOnDrop(self.idle.0.clone(), false);
        let copied = Flag::default();
        self.copying = Some(copied.clone());
        let handle = std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn(move || {
                let _done = done;
                let copied = SetOnDrop(copied, true);
                let written = |saved: Result<(PathBuf, f64)>| {
                    saved.map(|(path, seconds)| Written {
                        step,
                        path,
                        seconds,
                    })
                };
                // Pruning runs inside the save, after the new checkpoint's JSON is renamed into
                // place, so the checkpoint a resume would load is never the one removed.
                match job {
                    Job::Taken(Snapshot { state, tensors }) => {
                        drop(copied);
                        std::thread::sleep(delay);
                        let named: Vec<(String, &Tensor)> =
                            tensors.iter().map(|(n, t)| (n.clone(), t)).collect();
                        let saved = checkpoint::save_and_publish(
                            &dir,
                            store.as_ref(),
                            state,
                            Tensors::Live(&named, Hashing::Inline),
                            keep,
                        );
                        (written(saved), None)
                    }
                    Job::Copy {
                        state,
                        sources,
                        spare,
                    } => {
                        let named: Vec<(String, &Tensor)> =
                            sources.iter().map(|(n, t)| (n.clone(), t)).collect();
                        let metadata = checkpoint::tensors_metadata();
                        let image = match spare {
                            Some(image) if image.fits(&named, &metadata) => Ok(image),
                            _ => FileImage::new(&named, &metadata),
                        }
                        .and_then(|mut image| image.fill(&named).map(|()| image));
                        // The loop's tensors are not read again: it may change them.
                        drop(named);
                        drop(sources);
                        drop(copied);
                        std::thread::sleep(delay);
                        match image {
                            Ok(image) => {
                                let saved = checkpoint::save_and_publish(
                                    &dir,
                                    store.as_ref(),
                                    state,
                                    Tensors::Image(&image),
                                    keep,
                                );
                                (written(saved), Some(image))
                            }
                            Err(e) => (
                                Err(e.context(format!("copying the checkpoint of step {step}"))),
                                None,
                            ),
                        }
                    }
                }
            })
            .context("starting the checkpoint writer thread")?;
        self.in_flight = Some(handle);
        Ok(())
    }

    /// Waits for the write in flight, if there is one.
    pub fn wait(&mut self) -> Result<Option<Written>> {
        self.copying = None;
        let Some(handle) = self.in_flight.take() else {
            return Ok(None);
        };
        let (written, image) = handle
            .join()
            .map_err(|_| anyhow!("the checkpoint writer thread panicked"))?;
        self.spare = image;
        written.map(Some)
    }

    /// The write in flight if it has finished, without waiting.
    pub fn poll(&mut self) -> Result<Option<Written>> {
        match &self.in_flight {
            Some(handle) if handle.is_finished() => self.wait(),
            _ => Ok(None),
        }
    }
}

impl Drop for Writer {
    /// A run that ends on an error still lets the last write finish: it is what a rerun
    /// resumes from. Its own error, if any, is second to the one being returned.
    fn drop(&mut self) {
        if let Some(handle) = self.in_flight.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(step: u64) -> CheckpointState {
        checkpoint::tests::state(step)
    }

    #[test]
    fn writes_the_bytes_a_blocking_save_writes_from_a_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (sync_dir, async_dir) = (dir.path().join("sync"), dir.path().join("async"));
        std::fs::create_dir_all(&sync_dir).unwrap();
        std::fs::create_dir_all(&async_dir).unwrap();
        let mut writer = Writer::new(&async_dir, 2);
        let mut t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        for step in 1..=3 {
            checkpoint::save(
                &sync_dir,
                state(step),
                &[("w".into(), &t)],
                2,
                Hashing::Beside,
            )
            .unwrap();
            writer.checkpoint(state(step), &[("w".into(), &t)]).unwrap();
            // Training changes its tensors in place once they are copied, while they are written.
            writer.wait_copied();
            t += 1.0;
        }
        let last = writer.wait().unwrap().unwrap();
        assert_eq!(last.step, 3);
        assert!(writer.wait().unwrap().is_none());
        for name in ["step-0000000003.json", "step-0000000003.safetensors"] {
            assert_eq!(
                std::fs::read(sync_dir.join(name)).unwrap(),
                std::fs::read(async_dir.join(name)).unwrap(),
                "{name}"
            );
        }
        assert!(!async_dir.join("step-0000000001.json").exists());
    }

    #[test]
    fn the_loop_waits_for_the_copy_not_for_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let delay = Duration::from_secs(2);
        let mut writer = Writer::new(dir.path(), 2).with_delay(delay);
        let big = Tensor::arange(1 << 22, (tch::Kind::Float, Device::Cpu));
        let mut t = big.copy();
        let started = std::time::Instant::now();
        writer.checkpoint(state(1), &[("w".into(), &t)]).unwrap();
        writer.wait_copied();
        let held = started.elapsed();
        assert!(held < delay, "the loop waited for the write: {held:?}");
        t += 1.0;
        let written = writer.wait().unwrap().unwrap();
        assert!(started.elapsed() >= delay);
        let loaded = checkpoint::load_file(&written.path).unwrap();
        assert!(
            loaded.tensors[0].1.equal(&big),
            "the file holds the tensor as it was at the checkpoint"
        );
    }

    #[test]
    fn a_checkpoint_copies_into_the_last_writes_image_when_it_fits() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = Writer::new(dir.path(), 2);
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        writer.checkpoint(state(1), &[("w".into(), &t)]).unwrap();
        writer.wait().unwrap();
        let spare = writer.spare.as_ref().unwrap().address();
        writer.checkpoint(state(2), &[("w".into(), &t)]).unwrap();
        writer.wait().unwrap();
        assert_eq!(
            writer.spare.as_ref().unwrap().address(),
            spare,
            "the image is reused"
        );
        let wider = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
        writer
            .checkpoint(state(3), &[("w".into(), &wider)])
            .unwrap();
        let written = writer.wait().unwrap().unwrap();
        assert_ne!(
            writer.spare.as_ref().unwrap().address(),
            spare,
            "another shape gets a new image"
        );
        let loaded = checkpoint::load_file(&written.path).unwrap();
        assert!(loaded.tensors[0].1.equal(&wider));
    }

    #[test]
    fn a_failed_write_comes_back_to_the_loop_naming_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let mut writer = Writer::new(&gone, 2);
        let t = Tensor::from_slice(&[1.0f32]);
        writer
            .start(Snapshot::take(state(1), &[("w".into(), &t)]))
            .unwrap();
        let err = format!("{:#}", writer.wait().unwrap_err());
        assert!(err.contains("checkpoint of step 1"), "{err}");
        assert!(err.contains(&gone.display().to_string()), "{err}");
    }
}
