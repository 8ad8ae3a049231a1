//! DeLong's paired AUC test for rows that do not fit in memory: the rows streamed once into
//! external sorts, every group of a grouping (all rows, or each value of a slice column) at once.
//! The numbers are `runfn_stats::delong::paired_auc`'s on the rows held in memory, bit for bit:
//! the same midranks (ties by `==` in `total_cmp` order), the same placements, and the same sums
//! taken in the same order (each class's rows in row order, from -0.0, as `Iterator::sum` does),
//! the variance in two passes as `sample_variance` takes it.
//!
//! 1. Each model's rows are sorted by (group, score); walking them, a tie group's rows get their
//!    midrank among all the group's rows and among their class, hence their placement.
//! 2. Each model's placements are sorted back by (group, row) and the two streams walked side by
//!    side: per group, the AUCs' sums, and the placements' differences written to a file.
//! 3. The file read twice per group's mean and squared deviations: DeLong's variance.
//!
//! Memory: the sorters' budget, a tie group's first rows (past that they wait in a file), and
//! a few numbers per group.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

use runfn_data::spill_sort::{
    Record, SpillSorter, f64_from_order_key as from_order_key, f64_order_key as order_key, u32_at,
    u64_at,
};
use runfn_stats::auc::AucError;
use runfn_stats::delong::PairedAuc;

/// A row by its group and score, sorted so: each group's rows in `total_cmp` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ByScore {
    group: u32,
    score: u64,
    row: u64,
    label: bool,
}

impl Record for ByScore {
    const BYTES: usize = 21;
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.group.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
        out.push(u8::from(self.label));
    }
    fn read_from(bytes: &[u8]) -> ByScore {
        ByScore {
            group: u32_at(bytes, 0),
            score: u64_at(bytes, 4),
            row: u64_at(bytes, 12),
            label: bytes[20] == 1,
        }
    }
}

/// A row's placement (its share of the other class below or above it), by group and row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Placement {
    group: u32,
    row: u64,
    value: u64,
    label: bool,
}

impl Record for Placement {
    const BYTES: usize = 21;
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.group.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
        out.extend_from_slice(&self.value.to_le_bytes());
        out.push(u8::from(self.label));
    }
    fn read_from(bytes: &[u8]) -> Placement {
        Placement {
            group: u32_at(bytes, 0),
            row: u64_at(bytes, 4),
            value: u64_at(bytes, 12),
            label: bytes[20] == 1,
        }
    }
}

/// A group's positives, negatives and paired test.
pub type GroupTest = (u64, u64, Result<PairedAuc, AucError>);

/// A tie group's first rows stay in memory; past this many they wait in a file.
const TIE_ROWS_HELD: usize = 1 << 16;

/// The rows of one grouping, both models' scores, on their way to the test.
#[derive(Debug)]
pub struct SpilledGrouping<'a> {
    root: &'a Path,
    budget: u64,
    sorters: [SpillSorter<ByScore>; 2],
    /// Per group: positives and negatives.
    counts: Vec<(u64, u64)>,
}

impl<'a> SpilledGrouping<'a> {
    /// Sorters spilling under `root`, holding about `budget` bytes between them.
    pub fn new(root: &'a Path, budget: u64) -> io::Result<SpilledGrouping<'a>> {
        Ok(SpilledGrouping {
            root,
            budget,
            sorters: [
                SpillSorter::new(root, budget / 2)?,
                SpillSorter::new(root, budget / 2)?,
            ],
            counts: Vec::new(),
        })
    }

    /// Row `row` of group `group`, scored `score` by `model` (0 the candidate, 1 the baseline);
    /// each row once per model, and its label the same for both.
    pub fn push(
        &mut self,
        model: usize,
        group: u32,
        row: u64,
        score: f64,
        label: bool,
    ) -> io::Result<()> {
        if model == 0 {
            let at = group as usize;
            if self.counts.len() <= at {
                self.counts.resize(at + 1, (0, 0));
            }
            if label {
                self.counts[at].0 += 1;
            } else {
                self.counts[at].1 += 1;
            }
        }
        self.sorters[model].push(ByScore {
            group,
            score: order_key(score),
            row,
            label,
        })
    }

    /// Each group's positives, negatives and test, by group number.
    pub fn finish(self) -> io::Result<Vec<GroupTest>> {
        let SpilledGrouping {
            root,
            budget,
            sorters,
            counts,
        } = self;
        let mut placed = Vec::with_capacity(2);
        for sorter in sorters {
            let mut out = SpillSorter::new(root, budget / 2)?;
            place(sorter, &counts, root, &mut out)?;
            placed.push(out.sorted()?);
        }
        let (mut b_placed, mut a_placed) = (placed.pop().expect("two"), placed.pop().expect("two"));
        // Per group: Σ a10, Σ b10, Σ d10, Σ d01; the differences go to `diffs` in (group, row)
        // order for the variance's second pass.
        let mut sums = vec![[-0.0f64; 4]; counts.len()];
        let mut diffs = BufWriter::new(tempfile::tempfile_in(root)?);
        loop {
            let (a, b) = match (a_placed.next(), b_placed.next()) {
                (Some(a), Some(b)) => (a?, b?),
                (None, None) => break,
                _ => return Err(io::Error::other("the models' placements differ in length")),
            };
            if (a.group, a.row) != (b.group, b.row) {
                return Err(io::Error::other("the models' placements are of other rows"));
            }
            let (va, vb) = (f64::from_bits(a.value), f64::from_bits(b.value));
            let sum = &mut sums[a.group as usize];
            let d = va - vb;
            if a.label {
                sum[0] += va;
                sum[1] += vb;
                sum[2] += d;
            } else {
                sum[3] += d;
            }
            diffs.write_all(&a.group.to_le_bytes())?;
            diffs.write_all(&[u8::from(a.label)])?;
            diffs.write_all(&d.to_bits().to_le_bytes())?;
        }
        let mut file = diffs.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        let means: Vec<(f64, f64)> = sums
            .iter()
            .zip(&counts)
            .map(|(sum, &(m, n))| (sum[2] / m as f64, sum[3] / n as f64))
            .collect();
        let mut squares = vec![[-0.0f64; 2]; counts.len()];
        let mut reader = BufReader::new(file);
        let mut record = [0u8; 13];
        loop {
            match reader.read_exact(&mut record) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            }
            let group = u32_at(&record, 0) as usize;
            let d = f64::from_bits(u64_at(&record, 5));
            let (mu10, mu01) = means[group];
            if record[4] == 1 {
                squares[group][0] += (d - mu10).powi(2);
            } else {
                squares[group][1] += (d - mu01).powi(2);
            }
        }
        Ok(counts
            .iter()
            .zip(sums.iter().zip(&squares))
            .map(|(&(m, n), (sum, square))| (m, n, test(m, n, sum, square)))
            .collect())
    }
}

/// A group's test from its class counts, sums and squared deviations.
fn test(m: u64, n: u64, sum: &[f64; 4], square: &[f64; 2]) -> Result<PairedAuc, AucError> {
    let (positives, negatives) = (m as usize, n as usize);
    if positives < 2 || negatives < 2 {
        return Err(AucError::OneClass {
            positives,
            negatives,
        });
    }
    let (mf, nf) = (positives as f64, negatives as f64);
    let variance =
        square[0] / (positives - 1) as f64 / mf + square[1] / (negatives - 1) as f64 / nf;
    Ok(PairedAuc {
        a: sum[0] / mf,
        b: sum[1] / mf,
        variance: variance.max(0.0),
        positives,
        negatives,
    })
}

/// Walks one model's rows in (group, score) order and pushes each row's placement: a
/// positive's share of its group's negatives below it (ties half), a negative's share of the
/// positives above it, from midranks as `delong::midranks` gives them.
fn place(
    sorter: SpillSorter<ByScore>,
    counts: &[(u64, u64)],
    root: &Path,
    out: &mut SpillSorter<Placement>,
) -> io::Result<()> {
    let mut ties = Ties::new(root);
    // Rows, positives and negatives of the current group before the current tie group.
    let mut before = (0u64, 0u64, 0u64);
    let mut current: Option<(u32, f64)> = None;
    for record in sorter.sorted()? {
        let record = record?;
        let score = from_order_key(record.score);
        match current {
            Some((group, at)) if group == record.group && at == score => {}
            Some((group, _)) => {
                let (rows, positives, negatives) = ties.close(group, counts, before, out)?;
                before = if group == record.group {
                    (before.0 + rows, before.1 + positives, before.2 + negatives)
                } else {
                    (0, 0, 0)
                };
                current = Some((record.group, score));
            }
            None => current = Some((record.group, score)),
        }
        ties.push(record.row, record.label)?;
    }
    if let Some((group, _)) = current {
        ties.close(group, counts, before, out)?;
    }
    Ok(())
}

/// The rows of one tie group, in memory up to `TIE_ROWS_HELD`, then in a file.
struct Ties<'a> {
    root: &'a Path,
    held: Vec<(u64, bool)>,
    file: Option<BufWriter<File>>,
    positives: u64,
    negatives: u64,
}

impl<'a> Ties<'a> {
    fn new(root: &'a Path) -> Ties<'a> {
        Ties {
            root,
            held: Vec::new(),
            file: None,
            positives: 0,
            negatives: 0,
        }
    }

    fn push(&mut self, row: u64, label: bool) -> io::Result<()> {
        if label {
            self.positives += 1;
        } else {
            self.negatives += 1;
        }
        if self.held.len() < TIE_ROWS_HELD {
            self.held.push((row, label));
            return Ok(());
        }
        if self.file.is_none() {
            self.file = Some(BufWriter::new(tempfile::tempfile_in(self.root)?));
        }
        let file = self.file.as_mut().expect("made above");
        file.write_all(&row.to_le_bytes())?;
        file.write_all(&[u8::from(label)])
    }

    /// Pushes the tie group's placements (its rows, positives and negatives `before` it in its
    /// group); returns its rows, positives and negatives, and empties it.
    fn close(
        &mut self,
        group: u32,
        counts: &[(u64, u64)],
        before: (u64, u64, u64),
        out: &mut SpillSorter<Placement>,
    ) -> io::Result<(u64, u64, u64)> {
        let (positives, negatives) = (self.positives, self.negatives);
        let rows = positives + negatives;
        let (m, n) = counts[group as usize];
        // 1-based midranks: among the group's rows, among its positives, among its negatives.
        let z = (before.0 + before.0 + rows + 1) as f64 / 2.0;
        let x = (before.1 + before.1 + positives + 1) as f64 / 2.0;
        let y = (before.2 + before.2 + negatives + 1) as f64 / 2.0;
        let (mf, nf) = (m as f64, n as f64);
        let mut emit = |row: u64, label: bool| {
            let value = if label {
                (z - x) / nf
            } else {
                1.0 - (z - y) / mf
            };
            out.push(Placement {
                group,
                row,
                value: value.to_bits(),
                label,
            })
        };
        for &(row, label) in &self.held {
            emit(row, label)?;
        }
        if let Some(file) = self.file.take() {
            let mut file = file.into_inner().map_err(|e| e.into_error())?;
            file.rewind()?;
            let mut reader = BufReader::new(file);
            let mut record = [0u8; 9];
            loop {
                match reader.read_exact(&mut record) {
                    Ok(()) => emit(u64_at(&record, 0), record[8] == 1)?,
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
            }
        }
        self.held.clear();
        self.positives = 0;
        self.negatives = 0;
        Ok((rows, positives, negatives))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runfn_stats::delong::paired_auc;

    /// Seeded rows with heavy ties (scores on a coarse grid, zeros of both signs), grouped, and
    /// the in-memory test of each group: equal to the bit, spilled or not.
    #[test]
    fn the_spilled_test_is_paired_auc_to_the_bit() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let rows = 30_000usize;
        let groups = 5u32;
        let mut data = Vec::with_capacity(rows);
        for row in 0..rows {
            let r = next();
            let group = (r % u64::from(groups)) as u32;
            let label = (r >> 8) % 3 == 0;
            let grid = |v: u64| match v % 50 {
                0 => 0.0,
                1 => -0.0,
                k => (k as f64 / 7.0).sin() + if label { 0.3 } else { 0.0 },
            };
            data.push((group, row as u64, grid(r >> 16), grid(r >> 32), label));
        }
        // One group where every score ties (past the rows a tie group holds in memory), and
        // one with a single positive.
        let last = groups;
        for row in 0..(TIE_ROWS_HELD + 500) {
            data.push((last, (rows + row) as u64, 0.5, 0.25, row % 4 == 0));
        }
        data.push((last + 1, u64::MAX - 2, 0.1, 0.2, true));
        data.push((last + 1, u64::MAX - 1, 0.3, 0.2, false));
        data.push((last + 1, u64::MAX, 0.2, 0.1, false));
        for budget in [1u64 << 12, 1 << 30] {
            let mut grouping = SpilledGrouping::new(dir.path(), budget).unwrap();
            for &(group, row, a, b, label) in &data {
                grouping.push(0, group, row, a, label).unwrap();
                grouping.push(1, group, row, b, label).unwrap();
            }
            let found = grouping.finish().unwrap();
            for group in 0..=last + 1 {
                let rows: Vec<_> = data.iter().filter(|d| d.0 == group).collect();
                let a: Vec<f64> = rows.iter().map(|d| d.2).collect();
                let b: Vec<f64> = rows.iter().map(|d| d.3).collect();
                let labels: Vec<bool> = rows.iter().map(|d| d.4).collect();
                let expected = paired_auc(&a, &b, &labels);
                match (&found[group as usize].2, &expected) {
                    (Ok(f), Ok(e)) => {
                        assert_eq!(f.a.to_bits(), e.a.to_bits(), "group {group}");
                        assert_eq!(f.b.to_bits(), e.b.to_bits(), "group {group}");
                        assert_eq!(f.variance.to_bits(), e.variance.to_bits(), "group {group}");
                        assert_eq!((f.positives, f.negatives), (e.positives, e.negatives));
                    }
                    (Err(f), Err(e)) => assert_eq!(f.to_string(), e.to_string()),
                    (f, e) => panic!("group {group}: {f:?} against {e:?}"),
                }
            }
        }
    }
}
