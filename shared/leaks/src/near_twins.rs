//! Near twins of a text column in bounded memory: the search `NearDuplicateIndex` does, with
//! its index on disk.
//!
//! While the files are read, each text goes to its file's store (a temporary file) and its
//! band keys, one record per band with where the text is, to a sorter that spills past its
//! budget. Read back sorted by (band, key), the records come in buckets. A first pass counts
//! each bucket's cross-split pairs and writes the buckets that have some, and are not too
//! large, to a file; the bucket cap follows from those counts exactly as in the index. A second
//! pass reads that file and sorts the candidate pairs, and the pairs are verified in runs,
//! their texts read back from the stores and shingled again. Only a bucket, a run of
//! candidates and the sorters' buffers are in memory at once, whatever the rows.
//!
//! Candidates, cap, skipped buckets and Jaccard values are those of the in-memory index, bit
//! for bit (`the_search_on_disk_finds_what_the_index_in_memory_finds`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use runfn_stats::minhash::{Sketcher, bucket_cap, jaccard};

use runfn_data::sorted_runs::RunFile;
use runfn_data::spill_sort::{Record, SharedSorter, Sorted, SpillSorter, u16_at, u32_at, u64_at};

/// Where a text is: its split, its id (file << 40 | 0-based row) and its bytes in its file's
/// store. Ordered by split, then id: the order the in-memory index adds texts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TextRef {
    pub split: u16,
    pub id: u64,
    offset: u64,
    len: u32,
}

impl TextRef {
    const BYTES: usize = 22;

    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.split.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    fn read_from(bytes: &[u8]) -> TextRef {
        TextRef {
            split: u16_at(bytes, 0),
            id: u64_at(bytes, 2),
            offset: u64_at(bytes, 10),
            len: u32_at(bytes, 18),
        }
    }

    fn file(&self) -> usize {
        (self.id >> 40) as usize
    }
}

/// One band key of one text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct BandEntry {
    band: u16,
    key: u64,
    text: TextRef,
}

impl Record for BandEntry {
    const BYTES: usize = 10 + TextRef::BYTES;

    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.band.to_le_bytes());
        out.extend_from_slice(&self.key.to_le_bytes());
        self.text.write_to(out);
    }

    fn read_from(bytes: &[u8]) -> BandEntry {
        BandEntry {
            band: u16_at(bytes, 0),
            key: u64_at(bytes, 2),
            text: TextRef::read_from(&bytes[10..]),
        }
    }
}

/// Two texts of different splits sharing a bucket, the lower first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    a: TextRef,
    b: TextRef,
}

impl Record for Candidate {
    const BYTES: usize = 2 * TextRef::BYTES;

    fn write_to(&self, out: &mut Vec<u8>) {
        self.a.write_to(out);
        self.b.write_to(out);
    }

    fn read_from(bytes: &[u8]) -> Candidate {
        Candidate {
            a: TextRef::read_from(bytes),
            b: TextRef::read_from(&bytes[TextRef::BYTES..]),
        }
    }
}

/// A verified pair: `a` before `b` by (split, id).
#[derive(Debug, Clone, PartialEq)]
pub struct NearTwin {
    pub a: TextRef,
    pub b: TextRef,
    pub jaccard: f64,
}

/// What the search found in one column.
#[derive(Debug, Default)]
pub struct Found {
    /// Sorted by (a, b); the tests' `search` keeps them, `search_each` hands them over.
    #[cfg(test)]
    pub pairs: Vec<NearTwin>,
    /// Distinct cross-split candidate pairs verified.
    pub candidates: usize,
    /// Buckets skipped as too large.
    pub skipped_buckets: usize,
}

/// One text column's search, shared by the threads reading the files.
pub struct ColumnSearch {
    sketcher: Sketcher,
    root: PathBuf,
    budget: u64,
    sorter: SharedSorter<BandEntry>,
}

/// Band entries a file's reader gathers before taking the shared sorter's lock.
const LOCAL_ENTRIES: usize = 1 << 14;

impl ColumnSearch {
    /// A search spilling under `root`, its sorter and its runs of candidates within `budget`.
    pub fn new(sketcher: Sketcher, root: &Path, budget: u64) -> io::Result<ColumnSearch> {
        Ok(ColumnSearch {
            sketcher,
            root: root.to_path_buf(),
            budget,
            sorter: SharedSorter::new(root, budget)?,
        })
    }

    /// The folder the search spills to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The memory the search may use.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Every band entry handed over, sorted: what a part writes as its run.
    pub(crate) fn into_sorted(self) -> io::Result<Sorted<BandEntry>> {
        self.sorter.sorted()
    }

    /// Adds a part's run, merged with what is handed over here.
    pub fn add_run(&self, run: RunFile) -> io::Result<()> {
        self.sorter.add_run(run)
    }

    /// Texts whose pairs verify at Jaccard ≥ `threshold`, read back from `stores` (by file),
    /// all of them in memory: for tests, which compare them with the in-memory index.
    #[cfg(test)]
    pub fn search(self, stores: &[Option<File>], threshold: f64) -> io::Result<Found> {
        let mut pairs = Vec::new();
        let mut found = self.search_each(stores, threshold, |pair| {
            pairs.push(pair.clone());
            Ok(())
        })?;
        found.pairs = pairs;
        Ok(found)
    }

    /// Texts whose pairs verify at Jaccard ≥ `threshold`, read back from `stores` (by file),
    /// each handed to `on_pair` in (a, b) order as its run is verified, so that however many
    /// pairs verify, only a run's are held; the `Found` returned has the counts and no pairs.
    pub fn search_each(
        self,
        stores: &[Option<File>],
        threshold: f64,
        mut on_pair: impl FnMut(&NearTwin) -> io::Result<()>,
    ) -> io::Result<Found> {
        let ColumnSearch {
            sketcher,
            root,
            budget,
            sorter,
        } = self;
        let params = *sketcher.params();
        let sorted = sorter.sorted()?;
        let buckets_file = tempfile::tempfile_in(&root)?;
        let mut buckets = BufWriter::new(buckets_file);
        let mut tally = BucketTally::default();
        let mut bucket = Bucket::new(params.max_bucket_pairs + 1);
        for entry in sorted {
            let entry = entry?;
            if bucket.cell != Some((entry.band, entry.key)) {
                bucket.close(params.max_bucket_pairs, &mut buckets, &mut tally)?;
                bucket.open((entry.band, entry.key));
            }
            bucket.add(entry.text);
        }
        bucket.close(params.max_bucket_pairs, &mut buckets, &mut tally)?;
        let BucketTally { sizes, over, total } = tally;
        let cap = if total <= params.max_candidates {
            params.max_bucket_pairs
        } else {
            bucket_cap(&params, sizes.clone())
        };
        let skipped_buckets = over
            + sizes
                .iter()
                .filter(|(pairs, _)| **pairs > cap)
                .map(|(_, buckets)| buckets)
                .sum::<usize>();

        let mut candidates = SpillSorter::<Candidate>::new(&root, budget)?;
        let mut file = buckets.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        let mut reader = BufReader::new(file);
        while let Some((pairs, members)) = read_bucket(&mut reader)? {
            if pairs > cap as u64 {
                continue;
            }
            for (i, a) in members.iter().enumerate() {
                for b in &members[i + 1..] {
                    if a.split != b.split {
                        candidates.push(Candidate { a: *a, b: *b })?;
                    }
                }
            }
        }

        // Runs of candidates whose texts add up to the index's run size, or less in a small
        // budget (about 8 bytes of shingles a character are held while a run is verified).
        let run_bytes = (params.verify_text_bytes as u64)
            .min(budget / 32)
            .max(1 << 16);
        let mut found = Found {
            skipped_buckets,
            ..Found::default()
        };
        let (mut run, mut bytes, mut last) = (Vec::new(), 0u64, None);
        for candidate in candidates.sorted()? {
            let candidate = candidate?;
            if last == Some(candidate) {
                continue;
            }
            last = Some(candidate);
            found.candidates += 1;
            if run.last().is_none_or(|c: &Candidate| c.a != candidate.a) {
                bytes += u64::from(candidate.a.len);
            }
            bytes += u64::from(candidate.b.len);
            run.push(candidate);
            if bytes >= run_bytes {
                for pair in verified(&sketcher, &run, stores, threshold)? {
                    on_pair(&pair)?;
                }
                (run, bytes) = (Vec::new(), 0);
            }
        }
        for pair in verified(&sketcher, &run, stores, threshold)? {
            on_pair(&pair)?;
        }
        Ok(found)
    }
}

/// The pairs of `run` at Jaccard ≥ `threshold`, in the run's order.
fn verified(
    sketcher: &Sketcher,
    run: &[Candidate],
    stores: &[Option<File>],
    threshold: f64,
) -> io::Result<Vec<NearTwin>> {
    let mut texts: Vec<TextRef> = run.iter().flat_map(|c| [c.a, c.b]).collect();
    texts.par_sort_unstable();
    texts.dedup();
    let shingled: Vec<(TextRef, Vec<u64>)> = texts
        .into_par_iter()
        .map(|text| Ok((text, sketcher.shingles(&read_text(stores, &text)?))))
        .collect::<io::Result<_>>()?;
    let shingles_of = |text: &TextRef| -> &[u64] {
        let at = shingled
            .binary_search_by_key(text, |(t, _)| *t)
            .expect("every candidate text was shingled");
        &shingled[at].1
    };
    Ok(run
        .par_iter()
        .filter_map(|c| {
            let (a, b) = (shingles_of(&c.a), shingles_of(&c.b));
            // Jaccard ≤ min/max of the set sizes: skip the merge when that already fails.
            if (a.len().min(b.len()) as f64) < threshold * a.len().max(b.len()) as f64 {
                return None;
            }
            let similarity = jaccard(a, b);
            (similarity >= threshold).then_some(NearTwin {
                a: c.a,
                b: c.b,
                jaccard: similarity,
            })
        })
        .collect())
}

/// The text `text` points at, from its file's store.
pub fn read_text(stores: &[Option<File>], text: &TextRef) -> io::Result<String> {
    let store = stores
        .get(text.file())
        .and_then(Option::as_ref)
        .ok_or_else(|| io::Error::other("a text's store is missing"))?;
    let mut bytes = vec![0; text.len as usize];
    store.read_exact_at(&mut bytes, text.offset)?;
    String::from_utf8(bytes).map_err(io::Error::other)
}

/// The buckets counted so far: how many of each size (cross-split pairs) within the cap, how
/// many over it, and their pairs in all.
#[derive(Default)]
struct BucketTally {
    sizes: HashMap<usize, usize>,
    over: usize,
    total: usize,
}

/// The bucket being read: its cell (band, key), its texts while they could still be searched,
/// and its texts per split.
struct Bucket {
    cell: Option<(u16, u64)>,
    members: Vec<TextRef>,
    /// Past this many texts in two splits a bucket has more pairs than `max_bucket_pairs`.
    keep: usize,
    per_split: Vec<(u16, usize)>,
    texts: usize,
}

impl Bucket {
    fn new(keep: usize) -> Bucket {
        Bucket {
            cell: None,
            members: Vec::new(),
            keep,
            per_split: Vec::new(),
            texts: 0,
        }
    }

    fn open(&mut self, cell: (u16, u64)) {
        self.cell = Some(cell);
        self.members.clear();
        self.per_split.clear();
        self.texts = 0;
    }

    fn add(&mut self, text: TextRef) {
        self.texts += 1;
        if self.members.len() < self.keep {
            self.members.push(text);
        }
        match self.per_split.iter_mut().find(|(s, _)| *s == text.split) {
            Some((_, n)) => *n += 1,
            None => self.per_split.push((text.split, 1)),
        }
    }

    /// (n² − Σ n_s²) / 2 for n texts with n_s in split s.
    fn cross_pairs(&self) -> u128 {
        let n = self.texts as u128;
        let same: u128 = self
            .per_split
            .iter()
            .map(|(_, c)| (*c as u128).pow(2))
            .sum();
        (n * n - same) / 2
    }

    /// Counts the bucket and writes it to `out` when it has pairs to search.
    fn close(
        &mut self,
        max_pairs: usize,
        out: &mut impl Write,
        tally: &mut BucketTally,
    ) -> io::Result<()> {
        if self.texts < 2 {
            return Ok(());
        }
        let pairs = self.cross_pairs();
        if pairs > max_pairs as u128 {
            tally.over += 1;
            return Ok(());
        }
        if pairs == 0 {
            return Ok(());
        }
        let pairs = pairs as usize;
        *tally.sizes.entry(pairs).or_insert(0) += 1;
        tally.total = tally.total.saturating_add(pairs);
        let mut bytes = Vec::with_capacity(12 + self.members.len() * TextRef::BYTES);
        bytes.extend_from_slice(&(pairs as u64).to_le_bytes());
        bytes.extend_from_slice(&(self.members.len() as u32).to_le_bytes());
        for member in &self.members {
            member.write_to(&mut bytes);
        }
        out.write_all(&bytes)
    }
}

/// The next bucket written by `Bucket::close`: its pairs and texts.
fn read_bucket(reader: &mut impl Read) -> io::Result<Option<(u64, Vec<TextRef>)>> {
    let mut head = [0u8; 12];
    match reader.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let pairs = u64_at(&head, 0);
    let members = u32_at(&head, 8) as usize;
    let mut bytes = vec![0; members * TextRef::BYTES];
    reader.read_exact(&mut bytes)?;
    Ok(Some((
        pairs,
        bytes
            .chunks_exact(TextRef::BYTES)
            .map(TextRef::read_from)
            .collect(),
    )))
}

/// One file's texts of one column: written to the file's store as they are read, their band
/// keys gathered and handed to the column's search.
#[derive(Debug, Default)]
pub struct FileTexts {
    store: Option<BufWriter<File>>,
    written: u64,
    entries: Vec<BandEntry>,
}

impl FileTexts {
    /// A file a part read: its texts in `store` (`written` bytes), its band entries already in
    /// the part's run.
    pub fn restored(store: File, written: u64) -> FileTexts {
        FileTexts {
            store: Some(BufWriter::new(store)),
            written,
            entries: Vec::new(),
        }
    }

    /// Adds a batch's texts (split, id, text), sketched in parallel.
    pub fn add(&mut self, search: &ColumnSearch, texts: &[(u16, u64, &str)]) -> io::Result<()> {
        let keys: Vec<Option<Vec<u64>>> = texts
            .par_iter()
            .map(|(_, _, text)| search.sketcher.band_keys(text))
            .collect();
        for (&(split, id, text), keys) in texts.iter().zip(keys) {
            // A text with no shingles has nothing to compare.
            let Some(keys) = keys else { continue };
            let store = match &mut self.store {
                Some(store) => store,
                None => self
                    .store
                    .insert(BufWriter::new(tempfile::tempfile_in(&search.root)?)),
            };
            store.write_all(text.as_bytes())?;
            let text = TextRef {
                split,
                id,
                offset: self.written,
                len: text.len() as u32,
            };
            self.written += u64::from(text.len);
            self.entries
                .extend(keys.into_iter().enumerate().map(|(band, key)| BandEntry {
                    band: band as u16,
                    key,
                    text,
                }));
        }
        if self.entries.len() >= LOCAL_ENTRIES {
            search.sorter.hand_over(&mut self.entries)?;
        }
        Ok(())
    }

    /// Hands the last entries over; the store, written, to read the texts back from.
    pub fn finish(mut self, search: &ColumnSearch) -> io::Result<Option<File>> {
        search.sorter.hand_over(&mut self.entries)?;
        self.store
            .take()
            .map(|store| store.into_inner().map_err(|e| e.into_error()))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use runfn_stats::minhash::{MinHashParams, NearDuplicateIndex};

    use super::*;

    /// Texts in three splits over six files: near copies across splits, boilerplate in large
    /// buckets, empty texts.
    fn texts() -> Vec<(u16, u64, String)> {
        let mut state = 11u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 17
        };
        let words: Vec<String> = (0..300).map(|i| format!("w{i}x")).collect();
        let mut out = Vec::new();
        for row in 0..3000u64 {
            let file = row % 6;
            let split = (next() % 3) as u16;
            let text = match row % 10 {
                0 => "the same boilerplate notice for every customer".to_string(),
                1 => String::new(),
                2..=4 => {
                    // A near copy of an earlier row's text.
                    let base = row / 7;
                    let mut t: Vec<String> = (0..12)
                        .map(|i| words[((base * 31 + i) % 300) as usize].clone())
                        .collect();
                    t[(next() % 12) as usize] = words[(next() % 300) as usize].clone();
                    t.join(" ")
                }
                _ => (0..10)
                    .map(|_| words[(next() % 300) as usize].clone())
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            out.push((split, file << 40 | row, text));
        }
        out
    }

    fn on_disk(params: MinHashParams, budget: u64, texts: &[(u16, u64, String)]) -> Found {
        let root = tempfile::tempdir().unwrap();
        let search =
            ColumnSearch::new(Sketcher::new(params).unwrap(), root.path(), budget).unwrap();
        let mut files: Vec<FileTexts> = (0..6).map(|_| FileTexts::default()).collect();
        for chunk in texts.chunks(100) {
            for (file, texts) in files.iter_mut().enumerate() {
                let mine: Vec<(u16, u64, &str)> = chunk
                    .iter()
                    .filter(|(_, id, _)| (id >> 40) as usize == file)
                    .map(|(s, id, t)| (*s, *id, t.as_str()))
                    .collect();
                texts.add(&search, &mine).unwrap();
            }
        }
        let stores: Vec<Option<File>> = files
            .into_iter()
            .map(|f| f.finish(&search).unwrap())
            .collect();
        search.search(&stores, 0.8).unwrap()
    }

    fn in_memory(
        params: MinHashParams,
        texts: &[(u16, u64, String)],
    ) -> Vec<(u16, u64, u16, u64, u64)> {
        let mut index = NearDuplicateIndex::new(params).unwrap();
        let mut sorted: Vec<&(u16, u64, String)> = texts.iter().collect();
        sorted.sort_by_key(|(s, id, _)| (*s, *id));
        for (split, id, text) in sorted {
            index.add(*split, *id, text);
        }
        let found = index.cross_group_pairs(0.8);
        let _ = (found.candidates, found.skipped_buckets);
        found
            .pairs
            .iter()
            .map(|p| (p.group_a, p.id_a, p.group_b, p.id_b, p.jaccard.to_bits()))
            .collect()
    }

    /// Whether it holds everything or spills at every turn, and with the candidate budget
    /// forcing a lower bucket cap, the search on disk gives the index's pairs, Jaccard values
    /// (bit for bit), candidates and skipped buckets.
    #[test]
    fn the_search_on_disk_finds_what_the_index_in_memory_finds() {
        let texts = texts();
        let tight = MinHashParams {
            max_bucket_pairs: 400,
            max_candidates: 3000,
            ..MinHashParams::default()
        };
        for params in [MinHashParams::default(), tight] {
            let mut index = NearDuplicateIndex::new(params).unwrap();
            let mut sorted: Vec<&(u16, u64, String)> = texts.iter().collect();
            sorted.sort_by_key(|(s, id, _)| (*s, *id));
            for (split, id, text) in &sorted {
                index.add(*split, *id, text);
            }
            let expected = index.cross_group_pairs(0.8);
            assert!(expected.pairs.len() > 50, "{}", expected.pairs.len());
            for budget in [1 << 12, 1 << 30] {
                let found = on_disk(params, budget, &texts);
                let pairs: Vec<(u16, u64, u16, u64, u64)> = found
                    .pairs
                    .iter()
                    .map(|p| (p.a.split, p.a.id, p.b.split, p.b.id, p.jaccard.to_bits()))
                    .collect();
                assert_eq!(pairs, in_memory(params, &texts), "budget {budget}");
                assert_eq!(found.candidates, expected.candidates, "budget {budget}");
                assert_eq!(
                    found.skipped_buckets, expected.skipped_buckets,
                    "budget {budget}"
                );
            }
            if params == tight {
                assert!(expected.skipped_buckets > 0);
            }
        }
    }
}
