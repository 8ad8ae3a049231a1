//! Sorting more records than the memory budget holds: sorted runs spilled to files in a folder
//! of the sorter's own (removed with it), merged as they are read back. The records are fixed
//! size, so a budget in bytes is a number of records.

use std::cmp::Ordering;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use extsort::{ExternalSorter, PushExternalSorter, Sortable, SortedIterator};

/// A record written as fixed-size little-endian bytes.
pub trait Record: Ord + Send + Sized {
    const BYTES: usize;
    fn write_to(&self, out: &mut Vec<u8>);
    fn read_from(bytes: &[u8]) -> Self;
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

/// Records pushed in any order, read back sorted. While they fit in a run they stay in memory
/// and are sorted there on all cores; past it the runs go to extsort, which sorts each on all
/// cores, writes it under a folder of its own and merges the runs as they are read.
pub struct SpillSorter<T: Record> {
    root: PathBuf,
    run: usize,
    buffer: Vec<T>,
    spilled: Option<Spilled<T>>,
}

impl<T: Record> SpillSorter<T> {
    /// A sorter holding about `budget` bytes of records at most, spilling under `root`: a run
    /// here and one in extsort's buffer, each a quarter (buffers double as they grow).
    pub fn new(root: &Path, budget: u64) -> io::Result<SpillSorter<T>> {
        let record = std::mem::size_of::<Stored<T>>().max(1) as u64;
        Ok(SpillSorter {
            root: root.to_path_buf(),
            run: (budget / (4 * record)).max(1024) as usize,
            buffer: Vec::new(),
            spilled: None,
        })
    }

    pub fn push(&mut self, record: T) -> io::Result<()> {
        self.buffer.push(record);
        if self.buffer.len() >= self.run {
            self.spill()?;
        }
        Ok(())
    }

    pub fn extend(&mut self, records: impl IntoIterator<Item = T>) -> io::Result<()> {
        for record in records {
            self.push(record)?;
        }
        Ok(())
    }

    /// Hands the buffer to extsort, which writes a sorted run whenever its own fills.
    fn spill(&mut self) -> io::Result<()> {
        let (_, sorter) = match &mut self.spilled {
            Some(spilled) => spilled,
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("sort")
                    .tempdir_in(&self.root)?;
                let sorter = ExternalSorter::new()
                    .with_segment_size(self.run)
                    .with_sort_dir(dir.path().to_path_buf())
                    .with_parallel_sort()
                    .pushed_by(compare::<T> as Compare<T>);
                self.spilled.insert((dir, sorter))
            }
        };
        sorter.push_iter(self.buffer.drain(..).map(Stored))
    }

    /// Every record pushed, in order.
    pub fn sorted(mut self) -> io::Result<Sorted<T>> {
        if self.spilled.is_none() {
            use rayon::slice::ParallelSliceMut;
            self.buffer.par_sort_unstable();
            return Ok(Sorted::Memory(self.buffer.into_iter()));
        }
        self.spill()?;
        let (dir, sorter) = self.spilled.take().expect("spilled above");
        Ok(Sorted::Disk {
            _dir: dir,
            records: sorter.done()?,
        })
    }
}

/// The sorted records; spilled runs go when this is dropped.
pub enum Sorted<T: Record> {
    Memory(std::vec::IntoIter<T>),
    Disk {
        _dir: tempfile::TempDir,
        records: SortedIterator<Stored<T>, Compare<T>>,
    },
}

impl<T: Record> Iterator for Sorted<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        match self {
            Sorted::Memory(records) => records.next().map(Ok),
            Sorted::Disk { records, .. } => records.next().map(|r| r.map(|stored| stored.0)),
        }
    }
}

/// Little-endian field readers for `Record::read_from`.
pub fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

pub fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

pub fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
