//! Keys seen across splits (entity ids, row hashes), in bounded memory.
//!
//! While the files are read, each occurrence of a key (its 128-bit hash, split and place) goes
//! to a sorter that spills sorted runs past its budget. Read back sorted by key, the rows with the same key come
//! together, and each key is counted as it passes; only the example keys are kept whole. A hash
//! map holding a record per key took about a kilobyte a row and ran out of memory on ten
//! million rows; a vector of occurrences sorted in memory, 48 bytes a row, still grew with the
//! rows.

use std::collections::{BTreeMap, BinaryHeap};
use std::io;
use std::path::{Path, PathBuf};

use crate::location::Loc;
use runfn_data::sorted_runs::RunFile;
use runfn_data::spill_sort::{Record, SharedSorter, Sorted, u32_at, u64_at};

/// A key's 128-bit hash.
pub fn hash128(bytes: &[u8]) -> u128 {
    let mut first = [0u8; 16];
    first.copy_from_slice(&blake3::hash(bytes).as_bytes()[..16]);
    u128::from_le_bytes(first)
}

/// One occurrence of a key. Field order is sort order: by key, then where it is (a place holds
/// one occurrence, so the order is total).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Occurrence {
    hash: [u64; 2],
    file: u32,
    row: u64,
    split: u8,
    /// Occurrences of the same split before this one in its file: with the counts of the
    /// files before, its rank among its split's rows in file order.
    ordinal: u64,
}

impl Occurrence {
    fn loc(&self) -> Loc {
        Loc {
            file: self.file,
            row: self.row,
        }
    }
}

/// An occurrence's first 64 bits of hash, from its bytes: what reducers cut the key space by.
pub(crate) fn hash_head(bytes: &[u8]) -> u64 {
    u64_at(bytes, 0)
}

impl Record for Occurrence {
    const BYTES: usize = 37;

    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash[0].to_le_bytes());
        out.extend_from_slice(&self.hash[1].to_le_bytes());
        out.extend_from_slice(&self.file.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
        out.push(self.split);
        out.extend_from_slice(&self.ordinal.to_le_bytes());
    }

    fn read_from(bytes: &[u8]) -> Occurrence {
        Occurrence {
            hash: [u64_at(bytes, 0), u64_at(bytes, 8)],
            file: u32_at(bytes, 16),
            row: u64_at(bytes, 20),
            split: bytes[28],
            ordinal: u64_at(bytes, 29),
        }
    }
}

/// Where one kind of key goes while the files are read, shared by the reading threads.
pub struct KeySink {
    sorter: SharedSorter<Occurrence>,
    root: PathBuf,
}

/// Occurrences a file's reader gathers before taking the shared sorter's lock.
const LOCAL_OCCURRENCES: usize = 1 << 13;

impl KeySink {
    pub fn new(root: &Path, budget: u64) -> io::Result<KeySink> {
        Ok(KeySink {
            sorter: SharedSorter::new(root, budget)?,
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every occurrence handed over, sorted: what a part writes as its run.
    pub(crate) fn into_sorted(self) -> io::Result<Sorted<Occurrence>> {
        self.sorter.sorted()
    }

    /// Adds a part's run, merged with what is handed over here.
    pub fn add_run(&self, run: RunFile) -> io::Result<()> {
        self.sorter.add_run(run)
    }
}

/// One file's key occurrences on their way to the sink.
#[derive(Debug, Default)]
pub struct FileKeys {
    local: Vec<Occurrence>,
    /// Occurrences per split so far.
    per_split: Vec<u64>,
}

/// What a file's keys leave once read: its occurrences per split.
#[derive(Debug)]
pub struct FileKeyCounts {
    per_split: Vec<u64>,
}

impl FileKeyCounts {
    /// A file a part read, by its occurrences per split.
    pub fn restored(per_split: Vec<u64>) -> FileKeyCounts {
        FileKeyCounts { per_split }
    }

    /// Occurrences per split, what a part keeps of each of its files.
    pub fn per_split(&self) -> &[u64] {
        &self.per_split
    }
}

impl FileKeys {
    /// A file a part read: its occurrences already in the part's run, its counts per split.
    pub fn restored(per_split: Vec<u64>) -> FileKeys {
        FileKeys {
            local: Vec::new(),
            per_split,
        }
    }

    /// Counts `hash` in `split` at `loc`.
    pub fn add(&mut self, sink: &KeySink, hash: u128, split: u8, loc: Loc) -> io::Result<()> {
        let split_index = split as usize;
        if self.per_split.len() <= split_index {
            self.per_split.resize(split_index + 1, 0);
        }
        let ordinal = self.per_split[split_index];
        self.per_split[split_index] += 1;
        self.local.push(Occurrence {
            hash: [(hash >> 64) as u64, hash as u64],
            file: loc.file,
            row: loc.row,
            split,
            ordinal,
        });
        if self.local.len() >= LOCAL_OCCURRENCES {
            sink.sorter.hand_over(&mut self.local)?;
        }
        Ok(())
    }

    pub fn finish(mut self, sink: &KeySink) -> io::Result<FileKeyCounts> {
        sink.sorter.hand_over(&mut self.local)?;
        Ok(FileKeyCounts {
            per_split: self.per_split,
        })
    }
}

/// A key found in several splits: where it first appears in each and how often.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Seen {
    /// First occurrence in each split, in the order the splits were first met.
    pub first: Vec<(u8, Loc)>,
    /// Occurrences per split.
    pub counts: Vec<(u8, u64)>,
}

impl Seen {
    fn place(&self) -> Loc {
        self.first[0].1
    }
}

/// An example key ordered by where it first appears, for the heap of the earliest ones.
struct Example(Seen);

impl PartialEq for Example {
    fn eq(&self, other: &Self) -> bool {
        self.0.place() == other.0.place()
    }
}
impl Eq for Example {}
impl PartialOrd for Example {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Example {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.place().cmp(&other.0.place())
    }
}

/// Every file's keys, counted (a reducer's range of them: they add up, [`Keys::absorb`]).
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Keys {
    /// Keys found in several splits.
    pub shared: u64,
    /// The first such keys by where they first appear, at most the examples asked for.
    pub examples: Vec<Seen>,
    /// Per split: its rows whose key is also in a split ranked before it.
    pub later: Vec<u64>,
    /// Distinct keys by the set of splits they were found in (bit i: split i).
    pub by_splits: BTreeMap<u64, u64>,
    /// With `keep_pairs`: each row of a shared key paired with the key's first row in every
    /// split ranked before its own, (earlier, later), by the later row's place.
    pub pairs: Vec<((u8, Loc), (u8, Loc))>,
    /// Per split (by index): its rows whose key appears again in the same split, that is the
    /// rows with a twin among that split's other rows. The rate chance alone gives.
    pub repeated_within: Vec<u64>,
    /// Per split, its rows cut into [`BLOCKS`] runs in file order (time order, for a snapshot
    /// written as it grew): each block's rows, and those with a twin in another block of the
    /// split. How much the twin rate moves from one stretch of the data to another, beyond
    /// sampling: what a later split's rate may differ by without a leak.
    pub block_rows: Vec<[u64; BLOCKS]>,
    pub block_twins: Vec<[u64; BLOCKS]>,
}

/// Runs of rows per split for [`Keys::block_twins`].
pub const BLOCKS: usize = 10;

/// One key's occurrences as they pass: per split (in the order the splits were first met) its
/// first place, its count and its count per block. Reused from key to key, so a key that is in
/// one split only allocates nothing.
#[derive(Default)]
struct Group {
    hash: Option<[u64; 2]>,
    per_split: Vec<(u8, Loc, u64, [u64; BLOCKS])>,
    /// With pairs kept: the key's occurrences (split, place).
    occurrences: Vec<(u8, Loc)>,
}

impl Keys {
    /// Counts the keys `sink` received; `files` in file order; `rank` orders the splits in time;
    /// keeps `examples` example keys and, with `keep_pairs`, every twin pair.
    pub fn group(
        sink: KeySink,
        files: &[FileKeyCounts],
        rank: &[usize],
        examples: usize,
        keep_pairs: bool,
    ) -> io::Result<Keys> {
        Keys::group_sorted(sink.sorter.sorted()?, files, rank, examples, keep_pairs)
    }

    /// [`Keys::group`] over occurrences already sorted (a reducer's range of the parts' runs).
    pub(crate) fn group_sorted(
        sorted: impl Iterator<Item = io::Result<Occurrence>>,
        files: &[FileKeyCounts],
        rank: &[usize],
        examples: usize,
        keep_pairs: bool,
    ) -> io::Result<Keys> {
        let splits = files.iter().map(|f| f.per_split.len()).max().unwrap_or(0);
        // offsets[split][file]: the split's rows in the files before.
        let mut offsets = vec![Vec::with_capacity(files.len()); splits];
        let mut totals = vec![0u64; splits];
        for file in files {
            for split in 0..splits {
                offsets[split].push(totals[split]);
                totals[split] += file.per_split.get(split).copied().unwrap_or(0);
            }
        }
        let block_of = |o: &Occurrence| {
            let split = o.split as usize;
            let rank = offsets[split][o.file as usize] + o.ordinal;
            (rank as u128 * BLOCKS as u128 / totals[split].max(1) as u128) as usize
        };
        let mut keys = Keys::default();
        let mut heap: BinaryHeap<Example> = BinaryHeap::new();
        let mut group = Group::default();
        for occurrence in sorted {
            let occurrence = occurrence?;
            if group.hash != Some(occurrence.hash) {
                keys.close(&mut group, rank, examples, &mut heap);
                group.hash = Some(occurrence.hash);
            }
            let block = block_of(&occurrence).min(BLOCKS - 1);
            match group
                .per_split
                .iter_mut()
                .find(|(s, _, _, _)| *s == occurrence.split)
            {
                Some((_, _, n, blocks)) => {
                    *n += 1;
                    blocks[block] += 1;
                }
                None => {
                    let mut blocks = [0; BLOCKS];
                    blocks[block] = 1;
                    group
                        .per_split
                        .push((occurrence.split, occurrence.loc(), 1, blocks));
                }
            }
            if keep_pairs {
                group.occurrences.push((occurrence.split, occurrence.loc()));
            }
        }
        keys.close(&mut group, rank, examples, &mut heap);
        keys.pairs.sort_by_key(|(_, later)| later.1);
        keys.examples = heap.into_sorted_vec().into_iter().map(|e| e.0).collect();
        Ok(keys)
    }

    /// Adds the keys of another range of hashes (a reducer's): every count adds up, since a
    /// key is in one range only. Call [`Keys::finish_absorbing`] once all are in.
    pub fn absorb(&mut self, other: Keys) {
        fn add(target: &mut Vec<u64>, more: &[u64]) {
            if target.len() < more.len() {
                target.resize(more.len(), 0);
            }
            for (t, m) in target.iter_mut().zip(more) {
                *t += m;
            }
        }
        fn add_blocks(target: &mut Vec<[u64; BLOCKS]>, more: &[[u64; BLOCKS]]) {
            if target.len() < more.len() {
                target.resize(more.len(), [0; BLOCKS]);
            }
            for (t, m) in target.iter_mut().zip(more) {
                for (a, b) in t.iter_mut().zip(m) {
                    *a += b;
                }
            }
        }
        self.shared += other.shared;
        self.examples.extend(other.examples);
        add(&mut self.later, &other.later);
        for (splits, n) in other.by_splits {
            *self.by_splits.entry(splits).or_default() += n;
        }
        self.pairs.extend(other.pairs);
        add(&mut self.repeated_within, &other.repeated_within);
        add_blocks(&mut self.block_rows, &other.block_rows);
        add_blocks(&mut self.block_twins, &other.block_twins);
    }

    /// After [`Keys::absorb`]: the `examples` earliest examples, and the pairs by the later
    /// row's place, as one grouping of every key orders them (the sort is stable, and the pairs
    /// of one later row are one key's, so from one range, in their order).
    pub fn finish_absorbing(&mut self, examples: usize) {
        self.examples.sort_by_key(Seen::place);
        self.examples.truncate(examples);
        self.pairs.sort_by_key(|(_, later)| later.1);
    }

    /// Counts the key that just passed and starts afresh.
    fn close(
        &mut self,
        group: &mut Group,
        rank: &[usize],
        examples: usize,
        heap: &mut BinaryHeap<Example>,
    ) {
        if group.per_split.is_empty() {
            return;
        }
        let mut splits = 0u64;
        for &(split, _, n, blocks) in &group.per_split {
            let index = split as usize;
            splits |= 1 << split;
            if self.block_rows.len() <= index {
                self.block_rows.resize(index + 1, [0; BLOCKS]);
                self.block_twins.resize(index + 1, [0; BLOCKS]);
            }
            for (block, count) in blocks.iter().enumerate() {
                self.block_rows[index][block] += count;
                if n > *count {
                    self.block_twins[index][block] += count;
                }
            }
            if n > 1 {
                if self.repeated_within.len() <= index {
                    self.repeated_within.resize(index + 1, 0);
                }
                self.repeated_within[index] += n;
            }
        }
        *self.by_splits.entry(splits).or_default() += 1;
        if splits.count_ones() > 1 {
            self.shared += 1;
            let seen = Seen {
                first: group
                    .per_split
                    .iter()
                    .map(|&(s, at, _, _)| (s, at))
                    .collect(),
                counts: group.per_split.iter().map(|&(s, _, n, _)| (s, n)).collect(),
            };
            let earliest = seen.first.iter().map(|(s, _)| rank[*s as usize]).min();
            for &(split, n) in &seen.counts {
                if Some(rank[split as usize]) != earliest {
                    if self.later.len() <= split as usize {
                        self.later.resize(split as usize + 1, 0);
                    }
                    self.later[split as usize] += n;
                }
            }
            for &(split, loc) in &group.occurrences {
                for &(other, first) in &seen.first {
                    if rank[other as usize] < rank[split as usize] {
                        self.pairs.push(((other, first), (split, loc)));
                    }
                }
            }
            if examples > 0 {
                heap.push(Example(seen));
                if heap.len() > examples {
                    heap.pop();
                }
            }
        }
        group.per_split.clear();
        group.occurrences.clear();
    }

    /// Distinct keys found in a split other than `first`.
    pub fn outside(&self, first: Option<u8>) -> u64 {
        let first_bit = first.map_or(0, |split| 1u64 << split);
        self.by_splits
            .iter()
            .filter(|(splits, _)| **splits & !first_bit != 0)
            .map(|(_, count)| count)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(file: u32, row: u64) -> Loc {
        Loc { file, row }
    }

    fn grouped(files: Vec<Vec<(&str, u8, Loc)>>, budget: u64, keep_pairs: bool) -> Keys {
        let root = tempfile::tempdir().unwrap();
        let sink = KeySink::new(root.path(), budget).unwrap();
        let counts: Vec<FileKeyCounts> = files
            .into_iter()
            .map(|rows| {
                let mut file = FileKeys::default();
                for (key, split, at) in rows {
                    file.add(&sink, hash128(key.as_bytes()), split, at).unwrap();
                }
                file.finish(&sink).unwrap()
            })
            .collect();
        Keys::group(sink, &counts, &[0, 1, 2], 5, keep_pairs).unwrap()
    }

    /// 100 rows of one split in ten blocks of ten: a key repeated inside one block has no twin
    /// in another block; a key in blocks 0 and 9 has one in each.
    #[test]
    fn twins_are_counted_by_block_in_file_order() {
        let keys: Vec<String> = (1..=100u64)
            .map(|row| match row {
                1 | 2 => "inside block 0".to_string(),
                5 | 95 => "blocks 0 and 9".to_string(),
                _ => format!("row {row}"),
            })
            .collect();
        let rows = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), 0, loc(0, i as u64 + 1)))
            .collect();
        let keys = grouped(vec![rows], 1 << 20, false);
        assert_eq!(keys.block_rows[0], [10; BLOCKS]);
        let mut twins = [0; BLOCKS];
        (twins[0], twins[9]) = (1, 1);
        assert_eq!(keys.block_twins[0], twins);
        assert_eq!(keys.repeated_within, [4]);
    }

    #[test]
    fn keys_in_several_splits_are_counted_with_their_first_places_and_counts() {
        let a = vec![
            ("x", 0, loc(0, 1)),
            ("y", 0, loc(0, 3)),
            ("x", 1, loc(0, 4)),
        ];
        let b = vec![
            ("x", 1, loc(1, 2)),
            ("z", 1, loc(1, 5)),
            ("y", 2, loc(1, 6)),
        ];
        // Held in memory, and spilled a record at a time.
        for budget in [1 << 20, 1] {
            let keys = grouped(vec![a.clone(), b.clone()], budget, true);
            assert_eq!(keys.shared, 2);
            let x = &keys.examples[0];
            assert_eq!(x.first, [(0, loc(0, 1)), (1, loc(0, 4))]);
            assert_eq!(x.counts, [(0, 1), (1, 2)]);
            let y = &keys.examples[1];
            assert_eq!(y.first, [(0, loc(0, 3)), (2, loc(1, 6))]);
            // x in {0,1}, y in {0,2}, z in {1}.
            assert_eq!(
                keys.by_splits,
                BTreeMap::from([(0b10, 1), (0b11, 1), (0b101, 1)])
            );
            assert_eq!(keys.outside(Some(0)), 3);
            assert_eq!(keys.outside(Some(1)), 2);
            // x twice in split 1 (once in file a, once in b): two rows with a twin there.
            assert_eq!(keys.repeated_within, [0, 2]);
            // Rows whose key is in an earlier split: x twice in split 1, y once in split 2.
            assert_eq!(keys.later, [0, 2, 1]);
            let later: Vec<Loc> = keys.pairs.iter().map(|p| p.1.1).collect();
            assert_eq!(later, [loc(0, 4), loc(1, 2), loc(1, 6)]);
            assert_eq!(keys.pairs[0].0, (0, loc(0, 1)));
        }
    }

    #[test]
    fn an_occurrence_is_37_bytes_on_disk() {
        let o = Occurrence {
            hash: [1, 2],
            file: 3,
            row: 4,
            split: 5,
            ordinal: 6,
        };
        let mut bytes = Vec::new();
        o.write_to(&mut bytes);
        assert_eq!(bytes.len(), Occurrence::BYTES);
        assert_eq!(Occurrence::read_from(&bytes), o);
    }
}
