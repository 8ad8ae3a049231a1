//! Sorted runs that outlive the process that sorted them: a part of a tool's work (a Slurm array
//! task, a Kubernetes Indexed Job) writes what one of its sorters holds as a run file, and the
//! merge reads every part's runs back in the order one process's sorter gives them, by a k-way
//! merge. Records are unique in their order (they carry where they come from), or equal records
//! are indistinguishable, so the merged order is the one a single sort gives.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::record::Record;

/// Bytes of records hashed and written, or read and hashed, at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// A run file as its writer left it: the merge refuses one that is shorter or longer, or whose
/// bytes hash otherwise (a file changed after its part wrote it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFile {
    pub path: PathBuf,
    pub records: u64,
    pub blake3: String,
}

/// Writes `records` (already sorted) to `path`.
pub fn write_run<T: Record>(
    records: impl Iterator<Item = io::Result<T>>,
    path: &Path,
) -> io::Result<RunFile> {
    let mut out = File::create(path)?;
    let mut hasher = blake3::Hasher::new();
    // Hashed and written a megabyte at a time: blake3 over one record's bytes at a time took
    // more CPU than the records' sorting.
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + T::BYTES);
    let mut count = 0u64;
    for record in records {
        record?.write_to(&mut chunk);
        count += 1;
        if chunk.len() >= CHUNK_BYTES {
            hasher.update(&chunk);
            out.write_all(&chunk)?;
            chunk.clear();
        }
    }
    hasher.update(&chunk);
    out.write_all(&chunk)?;
    out.sync_all()?;
    Ok(RunFile {
        path: path.to_path_buf(),
        records: count,
        blake3: hasher.finalize().to_hex().to_string(),
    })
}

fn changed(run: &RunFile, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} {what} since its part wrote it: run that part again",
            run.path.display()
        ),
    )
}

/// A run's records in order, read and hashed a chunk at a time, its hash checked as the last
/// chunk is read.
pub struct RunReader<T: Record> {
    run: RunFile,
    file: File,
    /// Records not yet read from the file.
    left: u64,
    hasher: blake3::Hasher,
    chunk: Vec<u8>,
    /// Where the next record starts in `chunk`.
    at: usize,
    _records: std::marker::PhantomData<T>,
}

impl<T: Record> RunReader<T> {
    /// Opens `run`, refusing a file of another length at once.
    pub fn open(run: &RunFile) -> io::Result<RunReader<T>> {
        let file = File::open(&run.path)?;
        if file.metadata()?.len() != run.records * T::BYTES as u64 {
            return Err(changed(run, "has another length"));
        }
        Ok(RunReader {
            run: run.clone(),
            file,
            left: run.records,
            hasher: blake3::Hasher::new(),
            chunk: Vec::new(),
            at: 0,
            _records: std::marker::PhantomData,
        })
    }

    /// Reads and hashes the next chunk of whole records; at the last, checks the hash.
    fn refill(&mut self) -> io::Result<()> {
        let records = (CHUNK_BYTES / T::BYTES).max(1) as u64;
        let take = records.min(self.left);
        self.chunk.resize(take as usize * T::BYTES, 0);
        self.file.read_exact(&mut self.chunk)?;
        self.hasher.update(&self.chunk);
        self.left -= take;
        self.at = 0;
        if self.left == 0 && self.hasher.finalize().to_hex().as_str() != self.run.blake3 {
            return Err(changed(&self.run, "changed"));
        }
        Ok(())
    }
}

impl<T: Record> Iterator for RunReader<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.at == self.chunk.len() {
            if self.left == 0 {
                return None;
            }
            if let Err(e) = self.refill() {
                self.left = 0;
                self.chunk.clear();
                self.at = 0;
                return Some(Err(e));
            }
        }
        let record = T::read_from(&self.chunk[self.at..self.at + T::BYTES]);
        self.at += T::BYTES;
        Some(Ok(record))
    }
}

/// The records of a run whose key (a function of a record's bytes that its order sorts first
/// by) lies in `from..to` (`to` `None`: to the end): a reducer's share of a part's run, found by
/// a binary search, read with nothing before or after it. Its length is checked, not its hash
/// (a share does not cover the whole run).
pub fn read_range<T: Record>(
    run: &RunFile,
    key: fn(&[u8]) -> u64,
    from: u64,
    to: Option<u64>,
) -> io::Result<RangeReader<T>> {
    use std::io::Seek;
    use std::os::unix::fs::FileExt;
    let file = File::open(&run.path)?;
    if file.metadata()?.len() != run.records * T::BYTES as u64 {
        return Err(changed(run, "has another length"));
    }
    let mut bytes = vec![0; T::BYTES];
    let key_at = |index: u64, bytes: &mut Vec<u8>| -> io::Result<u64> {
        file.read_exact_at(bytes, index * T::BYTES as u64)?;
        Ok(key(bytes))
    };
    // The first record whose key is at least `from`.
    let (mut low, mut high) = (0u64, run.records);
    while low < high {
        let middle = low + (high - low) / 2;
        if key_at(middle, &mut bytes)? < from {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    let mut reader = BufReader::with_capacity(1 << 20, file);
    reader.seek(io::SeekFrom::Start(low * T::BYTES as u64))?;
    Ok(RangeReader {
        reader,
        left: run.records - low,
        key,
        to,
        bytes,
        _records: std::marker::PhantomData,
    })
}

/// A run's records within a range of keys ([`read_range`]).
pub struct RangeReader<T: Record> {
    reader: BufReader<File>,
    left: u64,
    key: fn(&[u8]) -> u64,
    to: Option<u64>,
    bytes: Vec<u8>,
    _records: std::marker::PhantomData<T>,
}

impl<T: Record> Iterator for RangeReader<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.left == 0 {
            return None;
        }
        if let Err(e) = self.reader.read_exact(&mut self.bytes) {
            self.left = 0;
            return Some(Err(e));
        }
        self.left -= 1;
        if self.to.is_some_and(|to| (self.key)(&self.bytes) >= to) {
            self.left = 0;
            return None;
        }
        Some(Ok(T::read_from(&self.bytes)))
    }
}

/// Sorted sources merged into one sorted sequence.
pub struct Merge<T: Record> {
    sources: Vec<Box<dyn Iterator<Item = io::Result<T>>>>,
    heap: BinaryHeap<Reverse<(T, usize)>>,
    started: bool,
}

impl<T: Record + 'static> Merge<T> {
    pub fn new(sources: Vec<Box<dyn Iterator<Item = io::Result<T>>>>) -> Merge<T> {
        Merge {
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            started: false,
        }
    }

    /// The runs' records and `more`'s, merged.
    pub fn of_runs(
        runs: &[RunFile],
        more: impl Iterator<Item = io::Result<T>> + 'static,
    ) -> io::Result<Merge<T>> {
        let mut sources: Vec<Box<dyn Iterator<Item = io::Result<T>>>> = vec![Box::new(more)];
        for run in runs {
            sources.push(Box::new(RunReader::<T>::open(run)?));
        }
        Ok(Merge::new(sources))
    }

    fn pull(&mut self, source: usize) -> io::Result<()> {
        if let Some(record) = self.sources[source].next() {
            self.heap.push(Reverse((record?, source)));
        }
        Ok(())
    }
}

impl<T: Record + 'static> Iterator for Merge<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if !self.started {
            self.started = true;
            for source in 0..self.sources.len() {
                if let Err(e) = self.pull(source) {
                    return Some(Err(e));
                }
            }
        }
        let Reverse((record, source)) = self.heap.pop()?;
        if let Err(e) = self.pull(source) {
            return Some(Err(e));
        }
        Some(Ok(record))
    }
}

// Readers and merges hold file handles and records, not worth printing: say what they are.
impl<T: Record> std::fmt::Debug for RunReader<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunReader")
            .field("run", &self.run.path)
            .field("left", &self.left)
            .field("at", &self.at)
            .finish()
    }
}

impl<T: Record> std::fmt::Debug for RangeReader<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeReader")
            .field("left", &self.left)
            .finish()
    }
}

impl<T: Record> std::fmt::Debug for Merge<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merge")
            .field("sources", &self.sources.len())
            .finish()
    }
}
