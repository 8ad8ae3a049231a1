//! Which columns of a split are written without a dictionary: those whose dictionary would
//! overflow in every row group, judged from a sample of the split's rows.
//!
//! The Parquet writer starts every column chunk with a dictionary and falls back to plain
//! encoding once the dictionary passes its size limit. For a near-unique column (an id, a free
//! text) that is the worst of both: each row group hashes and interns values until the
//! dictionary is full, writes a dictionary page that nothing reuses, then writes the rest plain.
//! On the 1 GiB churn CSV that attempt was 3-6% of a shardify run and its files 1.6% larger.
//! Writers that look at the values first (DuckDB's, for one) write such columns plain from the
//! start; this does the same from a sample.
//!
//! The sample is the rows whose shuffle key has its low bits zero: keys depend only on the seed
//! and each row's place in the snapshot, so the sample (and the decision) is the same whatever
//! `--memory`, the thread count or the order the files were read in.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use std::hash::{DefaultHasher, Hash, Hasher};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
};

/// Sampled rows aimed at across the snapshot (between half this and this, by the row estimate).
const SAMPLE_ROWS: u64 = 32 << 10;
/// The Parquet writer's dictionary page limit (parquet's default), in bytes.
const DICTIONARY_LIMIT: f64 = (1 << 20) as f64;
/// A column goes plain only when a row group's dictionary is predicted to pass the limit by
/// this much. The prediction's own error is a few percent once the sample holds a few hundred
/// values; the margin covers it, and a wrong guess the other way costs only what every run paid
/// before. (It was 2.0, which kept the dictionary attempt of a unique 8-byte id at 250k-row
/// groups, 2 MB exactly: the attempt that always overflows was a tenth of a run on integer rows.)
const MARGIN: f64 = 1.2;
/// Below this many sampled values a column keeps its dictionary (a small table's dictionary
/// attempt costs nothing worth the guess).
const MIN_SAMPLED_VALUES: u64 = 256;

/// Every split's sampled values, per column: distinct value hashes and the dictionary bytes
/// of the values sampled. Serialized in a part's partial of a parted shardify; the merge's
/// union is the one process's sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistinctSample {
    mask: u64,
    splits: Vec<SplitSample>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct SplitSample {
    rows: u64,
    sampled_rows: u64,
    columns: Vec<ColumnSample>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct ColumnSample {
    #[serde(with = "sorted")]
    distinct: HashSet<u64>,
    values: u64,
    /// Bytes the sampled values take in a dictionary (a byte array's length prefix included).
    bytes: u64,
}

impl DistinctSample {
    /// A sample of about `SAMPLE_ROWS` of a snapshot of about `estimated_rows` rows, for
    /// `splits` splits of `columns` columns.
    pub fn new(estimated_rows: u64, splits: usize, columns: usize) -> DistinctSample {
        let ratio = (estimated_rows / SAMPLE_ROWS).max(1);
        let shift = 64 - ratio.leading_zeros() - u32::from(ratio.is_power_of_two());
        DistinctSample {
            mask: (1u64 << shift) - 1,
            splits: (0..splits)
                .map(|_| SplitSample {
                    columns: vec![ColumnSample::default(); columns],
                    ..SplitSample::default()
                })
                .collect(),
        }
    }

    /// Counts `batch`'s rows per split and samples those whose key has the low bits zero.
    pub fn observe(&mut self, batch: &RecordBatch, keys: &[u64], assignment: &[Option<u8>]) {
        let mut sampled: Vec<Vec<usize>> = vec![Vec::new(); self.splits.len()];
        for (row, (key, split)) in keys.iter().zip(assignment).enumerate() {
            if let Some(split) = split {
                self.splits[*split as usize].rows += 1;
                if key & self.mask == 0 {
                    sampled[*split as usize].push(row);
                }
            }
        }
        for (split, rows) in self.splits.iter_mut().zip(&sampled) {
            split.sampled_rows += rows.len() as u64;
            for (column, array) in split.columns.iter_mut().zip(batch.columns()) {
                column.observe(array, rows);
            }
        }
    }

    /// Adds `other`'s rows and values (the same sample rate): the union, in any order, is the
    /// same.
    pub fn merge(&mut self, other: DistinctSample) {
        for (mine, theirs) in self.splits.iter_mut().zip(other.splits) {
            mine.rows += theirs.rows;
            mine.sampled_rows += theirs.sampled_rows;
            for (column, other) in mine.columns.iter_mut().zip(theirs.columns) {
                column.distinct.extend(other.distinct);
                column.values += other.values;
                column.bytes += other.bytes;
            }
        }
    }

    /// For each column of `split`, whether a row group of `group_rows` rows (fewer when the
    /// split has fewer) is predicted to overflow its dictionary.
    pub fn plain_columns(&self, split: usize, group_rows: u64) -> Vec<bool> {
        let sample = &self.splits[split];
        let rows = group_rows.min(sample.rows);
        sample
            .columns
            .iter()
            .map(|column| column.overflows(rows, sample.sampled_rows))
            .collect()
    }
}

/// A set of hashes written in ascending order, so a partial's bytes depend on its rows alone.
mod sorted {
    use std::collections::HashSet;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(set: &HashSet<u64>, serializer: S) -> Result<S::Ok, S::Error> {
        let mut values: Vec<u64> = set.iter().copied().collect();
        values.sort_unstable();
        values.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<HashSet<u64>, D::Error> {
        Ok(Vec::<u64>::deserialize(deserializer)?.into_iter().collect())
    }
}

impl ColumnSample {
    fn observe(&mut self, array: &ArrayRef, rows: &[usize]) {
        let hash = |value: &[u8]| {
            let mut hasher = DefaultHasher::new();
            value.hash(&mut hasher);
            hasher.finish()
        };
        for &row in rows {
            if array.is_null(row) {
                continue;
            }
            let (hashed, bytes) = match array.data_type() {
                DataType::Utf8 => {
                    let value = array.as_string::<i32>().value(row).as_bytes();
                    (hash(value), value.len() as u64 + 4)
                }
                DataType::Int64 => {
                    let value = array.as_primitive::<Int64Type>().value(row);
                    (hash(&value.to_le_bytes()), 8)
                }
                DataType::Float64 => {
                    let value = array.as_primitive::<Float64Type>().value(row);
                    (hash(&value.to_le_bytes()), 8)
                }
                DataType::Date32 => {
                    let value = array.as_primitive::<Date32Type>().value(row);
                    (hash(&value.to_le_bytes()), 4)
                }
                DataType::Timestamp(TimeUnit::Microsecond, _) => {
                    let value = array.as_primitive::<TimestampMicrosecondType>().value(row);
                    (hash(&value.to_le_bytes()), 8)
                }
                // Booleans have no dictionary; other types keep the writer's default.
                _ => return,
            };
            self.distinct.insert(hashed);
            self.values += 1;
            self.bytes += bytes;
        }
    }

    /// Whether `rows` rows of the split, of which the sample saw `sampled_rows`, are predicted
    /// to hold more than `MARGIN` dictionary limits of distinct values.
    ///
    /// The rows of a row group are a uniform draw from the split (they are shuffled), as is
    /// the sample, so the number of distinct values among n rows is predicted with the model
    /// of K equally likely values: K(1 - e^(-n/K)), K solved from the sample's own count.
    fn overflows(&self, rows: u64, sampled_rows: u64) -> bool {
        if self.values < MIN_SAMPLED_VALUES || sampled_rows == 0 {
            return false;
        }
        let sampled = self.values as f64;
        let distinct = self.distinct.len() as f64;
        // The group's non-null values, at the sample's rate of them.
        let values = rows as f64 * sampled / sampled_rows as f64;
        let predicted = match equally_likely_values(distinct, sampled) {
            Some(k) => k * (1.0 - (-values / k).exp()),
            // Every sampled value distinct: as many as there are values.
            None => values,
        };
        predicted * (self.bytes as f64 / sampled) > MARGIN * DICTIONARY_LIMIT
    }
}

/// K such that `draws` draws from K equally likely values give `distinct` distinct ones in
/// expectation, K(1 - e^(-draws/K)) = distinct; `None` when every draw was distinct (K is
/// then past any estimate).
fn equally_likely_values(distinct: f64, draws: f64) -> Option<f64> {
    if distinct >= draws {
        return None;
    }
    let expected = |k: f64| k * (1.0 - (-draws / k).exp());
    // expected(k) grows with k, from 0 towards `draws`.
    let (mut low, mut high) = (distinct.max(1.0), distinct.max(1.0));
    while expected(high) < distinct {
        high *= 2.0;
        if high > 1e18 {
            return None;
        }
    }
    for _ in 0..100 {
        let middle = (low + high) / 2.0;
        if expected(middle) < distinct {
            low = middle;
        } else {
            high = middle;
        }
    }
    Some(high)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    /// 200k rows of a unique id, a unique 200-byte text, a five-value category, a measure with
    /// 20k values and a mostly null text, all in one split.
    fn table(rows: usize) -> (RecordBatch, Vec<u64>, Vec<Option<u8>>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("note", DataType::Utf8, false),
            Field::new("region", DataType::Utf8, false),
            Field::new("spend", DataType::Float64, false),
            Field::new("rare", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows as i64)) as ArrayRef,
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("{i:0>200}")),
                )),
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| ["n", "s", "e", "w", "c"][i % 5]),
                )),
                Arc::new(Float64Array::from_iter_values(
                    (0..rows).map(|i| (i * 7919 % 20_000) as f64 / 100.0),
                )),
                Arc::new(StringArray::from_iter(
                    (0..rows).map(|i| (i % 1000 == 0).then(|| format!("{i:0>200}"))),
                )),
            ],
        )
        .unwrap();
        let keys = (0..rows as u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        (batch, keys, vec![Some(0); rows])
    }

    #[test]
    fn near_unique_columns_go_plain_and_the_others_keep_their_dictionary() {
        let rows = 200_000;
        let (batch, keys, splits) = table(rows);
        let mut sample = DistinctSample::new(rows as u64, 1, 5);
        sample.observe(&batch, &keys, &splits);
        assert_eq!(sample.splits[0].rows, rows as u64);
        assert!(sample.splits[0].sampled_rows > 20_000);
        // A 250k-row group: 200k ids are 1.6 MB of dictionary (past the limit with room to
        // spare); the text is 40 MB; the rest stays small.
        assert_eq!(
            sample.plain_columns(0, 250_000),
            vec![true, true, false, false, false]
        );
        // 120k rows of ids are 0.96 MB: under the limit, they keep their dictionary.
        assert_eq!(
            sample.plain_columns(0, 120_000),
            vec![false, true, false, false, false]
        );
        // Small groups keep every dictionary (4k texts of 204 bytes are 0.8 MB).
        assert_eq!(sample.plain_columns(0, 4_000), vec![false; 5]);
    }

    #[test]
    fn a_sample_read_in_parts_in_any_order_is_the_same_sample() {
        let rows = 100_000;
        let (batch, keys, splits) = table(rows);
        let mut whole = DistinctSample::new(rows as u64, 1, 5);
        whole.observe(&batch, &keys, &splits);
        let part = |range: std::ops::Range<usize>| {
            let mut sample = DistinctSample::new(rows as u64, 1, 5);
            sample.observe(
                &batch.slice(range.start, range.len()),
                &keys[range.clone()],
                &splits[range],
            );
            sample
        };
        let mut parts = part(60_000..100_000);
        parts.merge(part(0..60_000));
        for (a, b) in whole.splits[0].columns.iter().zip(&parts.splits[0].columns) {
            assert_eq!(a.distinct, b.distinct);
            assert_eq!((a.values, a.bytes), (b.values, b.bytes));
        }
        assert_eq!(
            whole.plain_columns(0, 250_000),
            parts.plain_columns(0, 250_000)
        );
    }

    #[test]
    fn the_equally_likely_model_inverts_its_own_expectation() {
        for k in [10.0f64, 1_000.0, 50_000.0] {
            let draws = 20_000.0f64;
            let distinct: f64 = k * (1.0 - (-draws / k).exp());
            let solved = equally_likely_values(distinct, draws).unwrap();
            assert!((solved - k).abs() / k < 1e-6, "{k}: {solved}");
        }
        assert_eq!(equally_likely_values(5.0, 5.0), None);
    }
}
