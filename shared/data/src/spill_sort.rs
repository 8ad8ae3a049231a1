//! Sorting more records than the memory budget holds: sorted runs spilled to files in a folder
//! of the sorter's own (removed with it), merged as they are read back. The records are fixed
//! size, so a budget in bytes is a number of records.

use std::cmp::Ordering;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

pub use crate::record::{Record, u16_at, u32_at, u64_at};
use crate::sorted_runs::{Merge, RunFile};
use extsort::{ExternalSorter, PushExternalSorter, Sortable, SortedIterator};

/// A run's spill folder, `.<tool>-spill*` in the parent, held by a lock on a file inside
/// it for as long as the run lives: the kernel drops the lock when the process ends, however
/// it ends, so a folder whose lock can be taken was left by a killed run (gigabytes, maybe)
/// and is removed by the next one. Removed with this value.
#[derive(Debug)]
pub struct SpillRoot {
    dir: tempfile::TempDir,
    _lock: File,
}

const LOCK_NAME: &str = "lock";

impl SpillRoot {
    /// A folder `.<tool>-spill*` in `parent`; `tool`'s killed runs' folders there go first.
    pub fn create(parent: &Path, tool: &str) -> io::Result<SpillRoot> {
        let prefix = format!(".{tool}-spill");
        remove_abandoned(parent, &prefix);
        let dir = tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir_in(parent)?;
        let lock = File::create(dir.path().join(LOCK_NAME))?;
        lock.lock()?;
        Ok(SpillRoot { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the spill folders in `parent` whose lock nobody holds. Best effort: one that cannot
/// be read or removed stays, as it would have; one without its lock file yet (a run between
/// making its folder and locking it) is left alone.
fn remove_abandoned(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let is_spill = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(prefix));
        if !is_spill || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(lock) = File::open(entry.path().join(LOCK_NAME)) else {
            continue;
        };
        if lock.try_lock().is_ok() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The record as extsort stores it.
pub struct Stored<T>(pub T);

impl<T: Record> Sortable for Stored<T> {
    fn encode<W: Write>(&self, writer: &mut W) -> io::Result<()> {
        let mut bytes = Vec::with_capacity(T::BYTES);
        self.0.write_to(&mut bytes);
        writer.write_all(&bytes)
    }

    fn decode<R: Read>(reader: &mut R) -> io::Result<Self> {
        let mut bytes = vec![0; T::BYTES];
        reader.read_exact(&mut bytes)?;
        Ok(Stored(T::read_from(&bytes)))
    }
}

type Compare<T> = fn(&Stored<T>, &Stored<T>) -> Ordering;

fn compare<T: Record>(a: &Stored<T>, b: &Stored<T>) -> Ordering {
    a.0.cmp(&b.0)
}

/// The runs' folder and the sorter writing runs there.
type Spilled<T> = (tempfile::TempDir, PushExternalSorter<Stored<T>, Compare<T>>);

/// Records pushed in any order, read back sorted. While they fit in the budget they stay in
/// memory and are sorted there on all cores. Past it they go to extsort, which sorts runs of
/// half that on all cores, writes them under a folder of its own and merges them as they are
/// read.
pub struct SpillSorter<T: Record> {
    root: PathBuf,
    /// Records held in memory before the first spill (the buffer doubles as it grows, so up
    /// to the budget); extsort's runs are half of it.
    run: usize,
    buffer: Vec<T>,
    spilled: Option<Spilled<T>>,
    /// Runs other processes sorted (parts of the work), merged with these records.
    runs: Vec<RunFile>,
}

impl<T: Record> SpillSorter<T> {
    /// A sorter holding about `budget` bytes of records at most, spilling under `root` (for
    /// the moment the records move from the buffer to extsort, half as much again).
    pub fn new(root: &Path, budget: u64) -> io::Result<SpillSorter<T>> {
        let record = std::mem::size_of::<Stored<T>>().max(1) as u64;
        Ok(SpillSorter {
            root: root.to_path_buf(),
            run: (budget / (2 * record)).max(2048) as usize,
            buffer: Vec::new(),
            spilled: None,
            runs: Vec::new(),
        })
    }

    pub fn push(&mut self, record: T) -> io::Result<()> {
        match &mut self.spilled {
            Some((_, sorter)) => sorter.push(Stored(record)),
            None => {
                self.buffer.push(record);
                if self.buffer.len() >= self.run {
                    self.spill()?;
                }
                Ok(())
            }
        }
    }

    pub fn extend(&mut self, records: impl IntoIterator<Item = T>) -> io::Result<()> {
        for record in records {
            self.push(record)?;
        }
        Ok(())
    }

    /// Hands the buffer to extsort (freeing it); from now on records go there directly.
    fn spill(&mut self) -> io::Result<()> {
        let dir = tempfile::Builder::new()
            .prefix("sort")
            .tempdir_in(&self.root)?;
        let mut sorter = ExternalSorter::new()
            .with_segment_size(self.run / 2)
            .with_sort_dir(dir.path().to_path_buf())
            .with_parallel_sort()
            .pushed_by(compare::<T> as Compare<T>);
        sorter.push_iter(std::mem::take(&mut self.buffer).into_iter().map(Stored))?;
        self.spilled = Some((dir, sorter));
        Ok(())
    }

    /// Adds a run another process sorted: read back merged with the records pushed here.
    pub fn add_run(&mut self, run: RunFile) {
        self.runs.push(run);
    }

    /// Every record pushed, and every run added, in order.
    pub fn sorted(mut self) -> io::Result<Sorted<T>> {
        let runs = std::mem::take(&mut self.runs);
        if !runs.is_empty() {
            let own = self.sorted()?;
            return Ok(Sorted::Merged(Box::new(Merge::of_runs(&runs, own)?)));
        }
        if self.spilled.is_none() {
            use rayon::slice::ParallelSliceMut;
            self.buffer.par_sort_unstable();
            return Ok(Sorted::Memory(self.buffer.into_iter()));
        }
        let (dir, sorter) = self.spilled.take().expect("spilled: looked at above");
        Ok(Sorted::Disk {
            _dir: dir,
            records: sorter.done()?,
        })
    }
}

/// A sorter the threads reading the files share: each gathers its records and hands them over
/// in bulk, so the lock is taken once per gathering.
pub struct SharedSorter<T: Record>(std::sync::Mutex<SpillSorter<T>>);

impl<T: Record> SharedSorter<T> {
    pub fn new(root: &Path, budget: u64) -> io::Result<SharedSorter<T>> {
        Ok(SharedSorter(std::sync::Mutex::new(SpillSorter::new(
            root, budget,
        )?)))
    }

    /// Moves `gathered` into the sorter, leaving it empty.
    pub fn hand_over(&self, gathered: &mut Vec<T>) -> io::Result<()> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("a reading thread panicked"))?
            .extend(gathered.drain(..))
    }

    /// Adds a run another process sorted ([`SpillSorter::add_run`]).
    pub fn add_run(&self, run: RunFile) -> io::Result<()> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("a reading thread panicked"))?
            .add_run(run);
        Ok(())
    }

    /// Every record handed over, in order.
    pub fn sorted(self) -> io::Result<Sorted<T>> {
        self.0
            .into_inner()
            .map_err(|_| io::Error::other("a reading thread panicked"))?
            .sorted()
    }
}

/// The sorted records; spilled runs go when this is dropped.
pub enum Sorted<T: Record> {
    Memory(std::vec::IntoIter<T>),
    Disk {
        _dir: tempfile::TempDir,
        records: SortedIterator<Stored<T>, Compare<T>>,
    },
    /// With runs of other processes.
    Merged(Box<Merge<T>>),
}

impl<T: Record> Iterator for Sorted<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        match self {
            Sorted::Memory(records) => records.next().map(Ok),
            Sorted::Disk { records, .. } => records.next().map(|r| r.map(|stored| stored.0)),
            Sorted::Merged(merge) => merge.next(),
        }
    }
}

// The sorters hold records and extsort's state, neither worth printing: say what they hold.
impl<T: Record> std::fmt::Debug for Stored<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stored")
    }
}

impl<T: Record> std::fmt::Debug for SpillSorter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillSorter")
            .field("buffered", &self.buffer.len())
            .field("spilled", &self.spilled.is_some())
            .finish()
    }
}

impl<T: Record> std::fmt::Debug for SharedSorter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedSorter")
    }
}

impl<T: Record> std::fmt::Debug for Sorted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sorted::Memory(_) => "Sorted::Memory",
            Sorted::Disk { .. } => "Sorted::Disk",
            Sorted::Merged(_) => "Sorted::Merged",
        })
    }
}

/// `x`'s bits made to sort, as unsigned numbers, as [`f64::total_cmp`] sorts `x`: a score in a
/// record sorted by score.
pub fn f64_order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The number [`f64_order_key`] made `key` of.
pub fn f64_from_order_key(key: u64) -> f64 {
    if key >> 63 == 1 {
        f64::from_bits(key & !(1 << 63))
    } else {
        f64::from_bits(!key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keys_sort_as_total_cmp_and_come_back() {
        let mut values = [
            f64::NEG_INFINITY,
            -1.5,
            -0.0,
            0.0,
            1e-300,
            0.25,
            1.0,
            f64::INFINITY,
        ];
        let keys: Vec<u64> = values.iter().map(|&v| f64_order_key(v)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for v in &mut values {
            assert_eq!(f64_from_order_key(f64_order_key(*v)).to_bits(), v.to_bits());
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    struct Pair(u64, u32);

    impl Record for Pair {
        const BYTES: usize = 12;
        fn write_to(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(&self.0.to_le_bytes());
            out.extend_from_slice(&self.1.to_le_bytes());
        }
        fn read_from(bytes: &[u8]) -> Self {
            Pair(u64_at(bytes, 0), u32_at(bytes, 8))
        }
    }

    /// Spilled in many runs or held whole, the records come back the same, in order, and the
    /// runs' folder goes with the sorter.
    #[test]
    fn spilled_runs_merge_to_the_sorted_records() {
        let root = tempfile::tempdir().unwrap();
        let records: Vec<Pair> = (0..50_000u64)
            .map(|i| Pair(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1000, i as u32))
            .collect();
        let mut expected = records.clone();
        expected.sort();
        for budget in [1 << 10, 1 << 30] {
            let mut sorter = SpillSorter::new(root.path(), budget).unwrap();
            sorter.extend(records.iter().copied()).unwrap();
            let sorted: Vec<Pair> = sorter.sorted().unwrap().map(Result::unwrap).collect();
            assert_eq!(sorted, expected, "budget {budget}");
        }
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }

    /// A killed run's spill folder (its lock free) goes with the next run; a live run's (its
    /// lock held) stays, and so does the next run's own.
    #[test]
    fn a_killed_runs_spill_goes_and_a_live_runs_stays() {
        let parent = tempfile::tempdir().unwrap();
        let killed = parent.path().join(".leak-check-spill-killed");
        std::fs::create_dir(&killed).unwrap();
        File::create(killed.join(LOCK_NAME)).unwrap();
        std::fs::write(killed.join("run-0"), vec![0u8; 1024]).unwrap();
        let live = SpillRoot::create(parent.path(), "leak-check").unwrap();
        assert!(!killed.exists());
        let next = SpillRoot::create(parent.path(), "leak-check").unwrap();
        assert!(live.path().exists() && next.path().exists());
        let (live_path, next_path) = (live.path().to_path_buf(), next.path().to_path_buf());
        drop((live, next));
        assert!(!live_path.exists() && !next_path.exists());
    }

    fn sorted(records: &[Pair], root: &Path, budget: u64) -> Vec<Pair> {
        let mut sorter = SpillSorter::new(root, budget).unwrap();
        sorter.extend(records.iter().copied()).unwrap();
        sorter.sorted().unwrap().map(Result::unwrap).collect()
    }

    /// Records cut in three, each third sorted and written as a run, merged with a fourth
    /// still in a sorter: the order one sorter of them all gives. A run changed after it was
    /// written, or cut short, is refused.
    #[test]
    fn runs_merge_to_what_one_sorter_gives_and_a_changed_run_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let records: Vec<Pair> = (0..40_000u64)
            .map(|i| Pair(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 997, i as u32))
            .collect();
        let whole = sorted(&records, root.path(), 1 << 30);
        let mut runs = Vec::new();
        for (k, third) in records[..30_000].chunks(10_000).enumerate() {
            let mut sorter = SpillSorter::new(root.path(), 1 << 10).unwrap();
            sorter.extend(third.iter().copied()).unwrap();
            let path = root.path().join(format!("run-{k}"));
            runs.push(crate::sorted_runs::write_run(sorter.sorted().unwrap(), &path).unwrap());
        }
        let mut rest = SpillSorter::new(root.path(), 1 << 30).unwrap();
        rest.extend(records[30_000..].iter().copied()).unwrap();
        let merged: Vec<Pair> = crate::sorted_runs::Merge::of_runs(&runs, rest.sorted().unwrap())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(merged, whole);

        let mut bytes = std::fs::read(&runs[1].path).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&runs[1].path, &bytes).unwrap();
        let failed = crate::sorted_runs::Merge::<Pair>::of_runs(&runs, std::iter::empty())
            .unwrap()
            .find_map(Result::err)
            .expect("a changed run is refused");
        assert_eq!(failed.kind(), io::ErrorKind::InvalidData);
        assert!(failed.to_string().contains("run-1 changed"), "{failed}");

        // A run read in ranges of its first field: the ranges one after another are the run.
        let reread: Vec<Pair> = (0..4u64)
            .flat_map(|k| {
                let to = (k < 3).then_some((k + 1) * 250);
                crate::sorted_runs::read_range::<Pair>(&runs[0], |b| u64_at(b, 0), k * 250, to)
                    .unwrap()
                    .map(Result::unwrap)
            })
            .collect();
        let whole_run: Vec<Pair> = crate::sorted_runs::RunReader::<Pair>::open(&runs[0])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(reread, whole_run);
        let middle: Vec<Pair> =
            crate::sorted_runs::read_range::<Pair>(&runs[0], |b| u64_at(b, 0), 300, Some(301))
                .unwrap()
                .map(Result::unwrap)
                .collect();
        assert!(
            !middle.is_empty() && middle.iter().all(|p| p.0 == 300),
            "{middle:?}"
        );

        std::fs::write(&runs[2].path, &bytes[..bytes.len() - 12]).unwrap();
        let short = crate::sorted_runs::Merge::<Pair>::of_runs(&runs, std::iter::empty())
            .expect_err("a short run is refused");
        assert!(short.to_string().contains("another length"), "{short}");
    }
}
