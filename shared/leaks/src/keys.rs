//! Keys seen across splits (entity ids, row hashes), in little memory.
//!
//! While the files are read, each occurrence of a key is kept as 32 bytes (its 128-bit hash,
//! split and place); at the end every file's occurrences are sorted once by key, so the rows
//! with the same key sit together and only keys found in several splits are kept in full.
//! A hash map holding a record per key, with its small vectors on the heap, took about a
//! kilobyte a row and ran out of memory on ten million rows.

use std::collections::{BTreeMap, HashMap};

use rayon::slice::ParallelSliceMut;

use crate::scan::Loc;

/// A key's 128-bit hash.
pub fn hash128(bytes: &[u8]) -> u128 {
    let mut first = [0u8; 16];
    first.copy_from_slice(&blake3::hash(bytes).as_bytes()[..16]);
    u128::from_le_bytes(first)
}

/// One occurrence of a key. Field order is sort order: by key, then where it is; the hash is
/// two words so the struct stays 32 bytes (a u128 would align it to 48).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Occurrence {
    hash: [u64; 2],
    file: u32,
    row: u64,
    split: u8,
}

impl Occurrence {
    fn hash(&self) -> u128 {
        (self.hash[0] as u128) << 64 | self.hash[1] as u128
    }

    fn loc(&self) -> Loc {
        Loc {
            file: self.file,
            row: self.row,
        }
    }
}

/// One file's key occurrences, with the keys' text where it is wanted in examples.
#[derive(Debug, Default)]
pub struct FileKeys {
    occurrences: Vec<Occurrence>,
    /// Every key's text, one after another, and where each data row's text ends (a row not
    /// counted adds an empty one), so the text of a row is found from its place alone.
    values: Option<(String, Vec<u64>)>,
}

impl FileKeys {
    /// Keys whose text is kept (entity ids, shown in examples).
    pub fn with_values() -> FileKeys {
        FileKeys {
            occurrences: Vec::new(),
            values: Some((String::new(), Vec::new())),
        }
    }

    /// Counts `hash` in `split` at `loc`; `value` is the key's text.
    pub fn add(&mut self, hash: u128, value: &str, split: u8, loc: Loc) {
        self.occurrences.push(Occurrence {
            hash: [(hash >> 64) as u64, hash as u64],
            file: loc.file,
            row: loc.row,
            split,
        });
        if let Some((text, ends)) = &mut self.values {
            // Rows before this one that were not counted (no split, a missing key).
            ends.resize((loc.row - 1) as usize, text.len() as u64);
            text.push_str(value);
            ends.push(text.len() as u64);
        }
    }

    /// The text kept for the key at `row` (1-based) of this file.
    fn value(&self, row: u64) -> String {
        let Some((text, ends)) = &self.values else {
            return String::new();
        };
        let index = (row - 1) as usize;
        let start = if index == 0 { 0 } else { ends[index - 1] };
        text[start as usize..ends[index] as usize].to_string()
    }

    pub fn len(&self) -> usize {
        self.occurrences.len()
    }
}

/// A key found in several splits: where it first appears in each and how often.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Bit i set: seen in split i.
    pub splits: u64,
    /// First occurrence in each split, in the order the splits were first met.
    pub first: Vec<(u8, Loc)>,
    /// Occurrences per split.
    pub counts: Vec<(u8, u64)>,
    pub value: String,
}

impl Seen {
    fn new(value: String) -> Seen {
        Seen {
            splits: 0,
            first: Vec::new(),
            counts: Vec::new(),
            value,
        }
    }

    /// Occurrences must come in file order.
    fn add(&mut self, split: u8, loc: Loc) {
        if self.splits & (1 << split) == 0 {
            self.splits |= 1 << split;
            self.first.push((split, loc));
        }
        match self.counts.iter_mut().find(|(s, _)| *s == split) {
            Some((_, count)) => *count += 1,
            None => self.counts.push((split, 1)),
        }
    }
}

/// Adds to `repeated` (per split) the occurrences of one key in each split where it appears
/// more than once.
/// Adds a key's rows to their blocks, and to the blocks' twins where the same split holds the
/// key in another block too.
fn count_blocks(group: &[Occurrence], block_of: &impl Fn(&Occurrence) -> usize, keys: &mut Keys) {
    let mut per_split: Vec<(u8, [u64; BLOCKS])> = Vec::new();
    for occurrence in group {
        let block = block_of(occurrence);
        match per_split.iter_mut().find(|(s, _)| *s == occurrence.split) {
            Some((_, counts)) => counts[block] += 1,
            None => {
                let mut counts = [0; BLOCKS];
                counts[block] = 1;
                per_split.push((occurrence.split, counts));
            }
        }
    }
    for (split, counts) in per_split {
        let split = split as usize;
        if keys.block_rows.len() <= split {
            keys.block_rows.resize(split + 1, [0; BLOCKS]);
            keys.block_twins.resize(split + 1, [0; BLOCKS]);
        }
        let total: u64 = counts.iter().sum();
        for (block, n) in counts.iter().enumerate() {
            keys.block_rows[split][block] += n;
            if total > *n {
                keys.block_twins[split][block] += n;
            }
        }
    }
}

fn count_repeats(group: &[Occurrence], repeated: &mut Vec<u64>) {
    let mut counts: Vec<(u8, u64)> = Vec::new();
    for occurrence in group {
        match counts.iter_mut().find(|(s, _)| *s == occurrence.split) {
            Some((_, n)) => *n += 1,
            None => counts.push((occurrence.split, 1)),
        }
    }
    for (split, n) in counts.into_iter().filter(|(_, n)| *n > 1) {
        if repeated.len() <= split as usize {
            repeated.resize(split as usize + 1, 0);
        }
        repeated[split as usize] += n;
    }
}

/// Every file's keys grouped.
#[derive(Debug, Default)]
pub struct Keys {
    /// The keys found in several splits.
    pub shared: HashMap<u128, Seen>,
    /// Distinct keys by the set of splits they were found in (bit i: split i).
    pub by_splits: BTreeMap<u64, u64>,
    /// With `keep_occurrences`: every occurrence of a shared key (hash, split, place), in file
    /// order.
    pub shared_occurrences: Vec<(u128, u8, Loc)>,
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

impl Keys {
    /// Groups the occurrences of `files` (one entry per file, in file order) by key.
    pub fn group(files: Vec<FileKeys>, keep_occurrences: bool) -> Keys {
        let total = files.iter().map(FileKeys::len).sum();
        let mut occurrences = Vec::with_capacity(total);
        let mut values = Vec::with_capacity(files.len());
        for mut file in files {
            occurrences.append(&mut file.occurrences);
            file.occurrences.shrink_to_fit();
            values.push(file);
        }
        // Each occurrence's block: its rank among its split's rows in file order.
        let mut by_place: Vec<(u8, u32, u64)> = occurrences
            .iter()
            .map(|o| (o.split, o.file, o.row))
            .collect();
        by_place.par_sort_unstable();
        let split_rows = |split: u8| {
            let start = by_place.partition_point(|p| p.0 < split);
            let end = by_place.partition_point(|p| p.0 <= split);
            (start, end - start)
        };
        let block_of = |o: &Occurrence| {
            let (start, rows) = split_rows(o.split);
            let rank =
                by_place[start..start + rows].partition_point(|p| (p.1, p.2) < (o.file, o.row));
            rank * BLOCKS / rows.max(1)
        };
        occurrences.par_sort_unstable();
        let value_at = |loc: Loc| {
            values
                .get(loc.file as usize)
                .map_or_else(String::new, |file| file.value(loc.row))
        };

        let mut keys = Keys::default();
        let mut start = 0;
        while start < occurrences.len() {
            let hash = occurrences[start].hash;
            let end = start
                + occurrences[start..]
                    .iter()
                    .take_while(|o| o.hash == hash)
                    .count();
            let group = &occurrences[start..end];
            if group.len() > 1 {
                count_repeats(group, &mut keys.repeated_within);
            }
            count_blocks(group, &block_of, &mut keys);
            let splits = group.iter().fold(0u64, |bits, o| bits | 1 << o.split);
            *keys.by_splits.entry(splits).or_default() += 1;
            if splits.count_ones() > 1 {
                let mut seen = Seen::new(value_at(group[0].loc()));
                for occurrence in group {
                    seen.add(occurrence.split, occurrence.loc());
                }
                if keep_occurrences {
                    keys.shared_occurrences
                        .extend(group.iter().map(|o| (o.hash(), o.split, o.loc())));
                }
                keys.shared.insert(group[0].hash(), seen);
            }
            start = end;
        }
        keys.shared_occurrences.sort_by_key(|(_, _, loc)| *loc);
        keys
    }

    /// Shared keys sorted by where they first appear, so examples are stable.
    pub fn shared_in_order(&self) -> Vec<&Seen> {
        let mut shared: Vec<&Seen> = self.shared.values().collect();
        shared.sort_by_key(|s| s.first.iter().map(|(_, loc)| *loc).min());
        shared
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

    /// 100 rows of one split in ten blocks of ten: a key repeated inside one block has no twin
    /// in another block; a key in blocks 0 and 9 has one in each.
    #[test]
    fn twins_are_counted_by_block_in_file_order() {
        let mut file = FileKeys::default();
        for row in 1..=100u64 {
            let key = match row {
                1 | 2 => "inside block 0".to_string(),
                5 | 95 => "blocks 0 and 9".to_string(),
                _ => format!("row {row}"),
            };
            file.add(hash128(key.as_bytes()), "", 0, loc(0, row));
        }
        let keys = Keys::group(vec![file], false);
        assert_eq!(keys.block_rows[0], [10; BLOCKS]);
        let mut twins = [0; BLOCKS];
        (twins[0], twins[9]) = (1, 1);
        assert_eq!(keys.block_twins[0], twins);
        assert_eq!(keys.repeated_within, [4]);
    }

    #[test]
    fn an_occurrence_takes_32_bytes() {
        assert_eq!(std::mem::size_of::<Occurrence>(), 32);
    }

    #[test]
    fn keys_in_several_splits_are_kept_with_their_first_places_and_counts() {
        let mut a = FileKeys::with_values();
        a.add(hash128(b"x"), "x", 0, loc(0, 1));
        a.add(hash128(b"y"), "y", 0, loc(0, 3));
        a.add(hash128(b"x"), "x", 1, loc(0, 4));
        let mut b = FileKeys::with_values();
        b.add(hash128(b"x"), "x", 1, loc(1, 2));
        b.add(hash128(b"z"), "z", 1, loc(1, 5));
        b.add(hash128(b"y"), "y", 2, loc(1, 6));
        let keys = Keys::group(vec![a, b], true);

        let x = &keys.shared[&hash128(b"x")];
        assert_eq!(x.value, "x");
        assert_eq!(x.first, [(0, loc(0, 1)), (1, loc(0, 4))]);
        assert_eq!(x.counts, [(0, 1), (1, 2)]);
        let y = &keys.shared[&hash128(b"y")];
        assert_eq!(y.value, "y");
        assert_eq!(y.first, [(0, loc(0, 3)), (2, loc(1, 6))]);
        assert!(!keys.shared.contains_key(&hash128(b"z")));

        let order: Vec<&str> = keys
            .shared_in_order()
            .iter()
            .map(|s| s.value.as_str())
            .collect();
        assert_eq!(order, ["x", "y"]);
        // x in {0,1}, y in {0,2}, z in {1}.
        assert_eq!(
            keys.by_splits,
            BTreeMap::from([(0b10, 1), (0b11, 1), (0b101, 1)])
        );
        assert_eq!(keys.outside(Some(0)), 3);
        assert_eq!(keys.outside(Some(1)), 2);
        // x twice in split 1 (once in file a, once in b): two rows with a twin there.
        assert_eq!(keys.repeated_within, [0, 2]);
        let places: Vec<Loc> = keys.shared_occurrences.iter().map(|o| o.2).collect();
        assert_eq!(
            places,
            [loc(0, 1), loc(0, 3), loc(0, 4), loc(1, 2), loc(1, 6)]
        );
    }

    #[test]
    fn a_key_without_kept_text_has_none() {
        let mut a = FileKeys::default();
        a.add(hash128(b"x"), "x", 0, loc(0, 1));
        a.add(hash128(b"x"), "x", 1, loc(0, 2));
        let keys = Keys::group(vec![a], false);
        assert_eq!(keys.shared[&hash128(b"x")].value, "");
        assert!(keys.shared_occurrences.is_empty());
    }
}
