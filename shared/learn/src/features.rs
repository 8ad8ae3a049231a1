//! Which columns feed the model, and the preprocessing fitted on the train split: numeric
//! columns standardized with the train mean and deviation (nulls take the mean), plus a
//! missing-indicator input for each numeric column that had nulls in train, string columns
//! mapped through a train vocabulary with index 0 as the unknown bucket. The fitted
//! `Preprocess` is stored inside the weights file, so every later scoring applies the same.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use runfn_data::label::{Label, LabelValues, Positive, labels};
use runfn_data::types::{Column, ColumnType};
use serde::{Deserialize, Serialize};

use crate::config::FeatureLists;
use crate::shard_reader::ShardReader;

/// The columns the data spec reserves: never features by default.
#[derive(Debug, Clone, Default)]
pub struct Reserved {
    pub label: String,
    /// The label value that means positive (`manifest.data.label_positive`); none: 0/1.
    pub label_positive: Option<Positive>,
    pub others: Vec<String>,
}

/// Chooses feature columns from the shard schema: the explicit lists when given (each checked
/// against the schema), else every numeric or boolean column and every string column that is not
/// reserved. Dates and timestamps are never features (they identify when, not what).
pub fn choose(
    columns: &[Column],
    reserved: &Reserved,
    explicit: Option<&FeatureLists>,
) -> Result<FeatureLists> {
    let type_of = |name: &str| {
        columns
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.column_type)
    };
    match type_of(&reserved.label) {
        None => bail!(
            "label `{}`: not a column of the shards (columns: {})",
            reserved.label,
            names(columns)
        ),
        // Text is read by manifest.data.label_positive; fitting says what to write without one.
        Some(ColumnType::Int64 | ColumnType::Bool | ColumnType::Float64 | ColumnType::String) => {}
        Some(other) => bail!(
            "label `{}`: is a {other:?} column; a binary label must be 0/1, boolean, or values \
             with the positive one named by manifest.data.label_positive",
            reserved.label
        ),
    }
    if let Some(lists) = explicit {
        for name in &lists.numeric {
            match type_of(name) {
                Some(ColumnType::Int64 | ColumnType::Float64 | ColumnType::Bool) => {}
                Some(other) => bail!(
                    "manifest.config.features.numeric: `{name}` is a {other:?} column, not numeric"
                ),
                None => bail!(
                    "manifest.config.features.numeric: `{name}` is not a column of the shards ({})",
                    names(columns)
                ),
            }
        }
        for name in &lists.categorical {
            match type_of(name) {
                Some(ColumnType::String) => {}
                // Category codes stored as numbers: the snapshot has to be read with the column
                // as text, or profiling, splitting and the shards would all see a number.
                Some(other) => bail!(
                    "manifest.config.features.categorical: `{name}` holds {} values in the \
                     shards; to use its values as categories, list it in \
                     manifest.data.categorical (data: {{categorical: [{name}]}}) and run shardify \
                     again, so every tool reads it as text",
                    other.name()
                ),
                None => bail!(
                    "manifest.config.features.categorical: `{name}` is not a column of the shards ({})",
                    names(columns)
                ),
            }
        }
        for name in lists.numeric.iter().chain(&lists.categorical) {
            if *name == reserved.label {
                bail!("manifest.config.features: `{name}` is the label and cannot be a feature");
            }
        }
        if lists.numeric.is_empty() && lists.categorical.is_empty() {
            bail!("manifest.config.features: lists no feature");
        }
        return Ok(lists.clone());
    }
    let mut lists = FeatureLists {
        numeric: Vec::new(),
        categorical: Vec::new(),
    };
    for column in columns {
        if column.name == reserved.label || reserved.others.contains(&column.name) {
            continue;
        }
        match column.column_type {
            ColumnType::Int64 | ColumnType::Float64 | ColumnType::Bool => {
                lists.numeric.push(column.name.clone())
            }
            ColumnType::String => lists.categorical.push(column.name.clone()),
            ColumnType::Date | ColumnType::Timestamp => {}
        }
    }
    if lists.numeric.is_empty() && lists.categorical.is_empty() {
        bail!(
            "no feature columns: every column is reserved (label, entity, time, text or as-of); columns: {}",
            names(columns)
        );
    }
    Ok(lists)
}

fn names(columns: &[Column]) -> String {
    columns
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumericFeature {
    pub name: String,
    pub mean: f64,
    pub std: f64,
    /// Train rows where the value was null (imputed with the mean).
    pub nulls: u64,
    /// The model also gets an input that is 1 where the value is null and 0 elsewhere: a
    /// mean-filled value alone looks like an average row, so when missingness carries signal
    /// (a feature absent for new accounts, which churn differently) the model could not see it.
    /// Left out of the file when false, so a model without indicators keeps the bytes (and the
    /// blake3) it had before indicators existed, and older files still load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub indicator: bool,
    /// The column was true/false in training (read as 1/0). Rows served with true/false where
    /// training saw numbers are another type, refused rather than scored as 1/0. Left out of the
    /// file when false, as `indicator` is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub boolean: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategoricalFeature {
    pub name: String,
    /// Index i+1 is `vocab[i]`; index 0 is every value not in the vocabulary, and null.
    pub vocab: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preprocess {
    pub label: String,
    /// The label value the model learned as positive; none: a 0/1 or true/false label. Left out
    /// of the file when none, so such a model keeps the bytes it had before this existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_positive: Option<Positive>,
    pub numeric: Vec<NumericFeature>,
    pub categorical: Vec<CategoricalFeature>,
    pub train_rows: u64,
}

/// Preprocessed rows, row-major.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeatureBlock {
    pub rows: usize,
    pub numeric: Vec<f32>,
    pub categorical: Vec<i64>,
    pub labels: Vec<f32>,
}

impl FeatureBlock {
    /// Rows `order[i]` of self, in that order.
    pub fn gather(&self, order: &[u32], n_num: usize, n_cat: usize) -> FeatureBlock {
        let mut out = FeatureBlock {
            rows: order.len(),
            numeric: Vec::with_capacity(order.len() * n_num),
            categorical: Vec::with_capacity(order.len() * n_cat),
            labels: Vec::with_capacity(order.len()),
        };
        for &i in order {
            let i = i as usize;
            out.numeric
                .extend_from_slice(&self.numeric[i * n_num..(i + 1) * n_num]);
            out.categorical
                .extend_from_slice(&self.categorical[i * n_cat..(i + 1) * n_cat]);
            out.labels.push(self.labels[i]);
        }
        out
    }

    pub fn append(&mut self, other: &FeatureBlock) {
        self.rows += other.rows;
        self.numeric.extend_from_slice(&other.numeric);
        self.categorical.extend_from_slice(&other.categorical);
        self.labels.extend_from_slice(&other.labels);
    }
}

impl Preprocess {
    /// Fits the preprocessing on the train shards: Welford mean and deviation per numeric
    /// column (and, with `missing_indicators`, an indicator for each one with a null), the
    /// `max_vocab` most frequent values per string column (ties by value, so the vocabulary does
    /// not depend on row order).
    pub fn fit(
        shards: &[impl AsRef<Path>],
        lists: &FeatureLists,
        label: &str,
        label_positive: Option<&Positive>,
        max_vocab: usize,
        missing_indicators: bool,
    ) -> Result<Preprocess> {
        let mut stats = vec![Welford::default(); lists.numeric.len()];
        let mut nulls = vec![0u64; lists.numeric.len()];
        let mut boolean = vec![false; lists.numeric.len()];
        let mut counts: Vec<HashMap<String, u64>> = vec![HashMap::new(); lists.categorical.len()];
        let mut rows = 0u64;
        // The label's values, for an error that says what to write.
        let (mut label_values, mut label_type, mut positives) = (LabelValues::default(), None, 0);
        let mut wanted: Vec<&str> = vec![label];
        wanted.extend(lists.numeric.iter().map(String::as_str));
        wanted.extend(lists.categorical.iter().map(String::as_str));
        for shard in shards {
            let shard = shard.as_ref();
            let mut reader = ShardReader::open(shard, &wanted)?;
            while let Some((batch, first_row)) = reader.next_batch()? {
                let array = column(&batch, label, shard).context("reading the label")?;
                label_values.add(array);
                let column_type = ColumnType::from_data_type(array.data_type());
                label_type = label_type.or(column_type);
                let read = labels(array, label_positive);
                positives += read.iter().filter(|l| **l == Label::Positive).count() as u64;
                if let Err(err) = targets(array, &read, label, label_positive, shard, first_row) {
                    // A text label with no positive value named (or one of another type) is
                    // better told as what to write than as the first row it fails on.
                    if let Some(column_type) = column_type {
                        runfn_data::label::check_type(
                            label,
                            column_type,
                            label_positive,
                            &label_values,
                        )?;
                    }
                    return Err(err);
                }
                for (i, name) in lists.numeric.iter().enumerate() {
                    boolean[i] = column(&batch, name, shard)?.data_type() == &DataType::Boolean;
                }
                let columns = lists
                    .numeric
                    .iter()
                    .map(|name| numeric_values(&batch, name, shard, first_row))
                    .collect::<Result<Vec<_>>>()?;
                // Row by row across the columns: each column's values still arrive in row order
                // (the same sums, bit for bit), but the columns' running means no longer wait on
                // each other's divisions, which the processor then overlaps.
                for row in 0..batch.num_rows() {
                    for (i, values) in columns.iter().enumerate() {
                        match values[row] {
                            Some(v) => stats[i].push(v),
                            None => nulls[i] += 1,
                        }
                    }
                }
                for (i, name) in lists.categorical.iter().enumerate() {
                    let column = string_column(&batch, name, shard)?;
                    let strings = column.as_string::<i32>();
                    let counts = &mut counts[i];
                    for v in strings.iter().flatten() {
                        // A value seen before is counted without allocating its text again.
                        match counts.get_mut(v) {
                            Some(n) => *n += 1,
                            None => {
                                counts.insert(v.to_string(), 1);
                            }
                        }
                    }
                }
                rows += batch.num_rows() as u64;
            }
        }
        if rows == 0 {
            bail!("the train split has no rows: nothing to fit the preprocessing on");
        }
        if let Some(label_type) = label_type {
            runfn_data::label::check(label, label_type, label_positive, &label_values, positives)?;
        }
        let numeric = lists
            .numeric
            .iter()
            .zip(stats.iter().zip(&nulls).zip(&boolean))
            .map(|(name, ((w, &nulls), &boolean))| NumericFeature {
                name: name.clone(),
                mean: w.mean(),
                std: w.std(),
                nulls,
                indicator: missing_indicators && nulls > 0,
                boolean,
            })
            .collect();
        let categorical = lists
            .categorical
            .iter()
            .zip(counts)
            .map(|(name, counts)| {
                let mut by_count: Vec<(String, u64)> = counts.into_iter().collect();
                by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                by_count.truncate(max_vocab);
                CategoricalFeature {
                    name: name.clone(),
                    vocab: by_count.into_iter().map(|(v, _)| v).collect(),
                }
            })
            .collect();
        Ok(Preprocess {
            label: label.to_string(),
            label_positive: label_positive.cloned(),
            numeric,
            categorical,
            train_rows: rows,
        })
    }

    /// The columns a shard must have for this preprocessing.
    pub fn columns(&self) -> Vec<&str> {
        let mut names = vec![self.label.as_str()];
        names.extend(self.numeric.iter().map(|f| f.name.as_str()));
        names.extend(self.categorical.iter().map(|f| f.name.as_str()));
        names
    }

    /// The width of the numeric input: one value per numeric feature, then one indicator per
    /// feature that has one.
    pub fn numeric_inputs(&self) -> usize {
        self.numeric.len() + self.numeric.iter().filter(|f| f.indicator).count()
    }

    /// The numeric features that have a missing-indicator input, in input order.
    pub fn indicator_names(&self) -> Vec<&str> {
        self.numeric
            .iter()
            .filter(|f| f.indicator)
            .map(|f| f.name.as_str())
            .collect()
    }

    /// The vocabulary sizes including the unknown bucket.
    pub fn cardinalities(&self) -> Vec<i64> {
        self.categorical
            .iter()
            .map(|c| c.vocab.len() as i64 + 1)
            .collect()
    }

    pub fn lookup(&self) -> Lookup {
        Lookup {
            maps: self
                .categorical
                .iter()
                .map(|c| {
                    c.vocab
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (v.clone(), i as i64 + 1))
                        .collect()
                })
                .collect(),
        }
    }

    /// Applies the preprocessing to one batch read from `origin`; `first_row` is the 1-based
    /// row number of the batch's first row in that file, for errors.
    pub fn apply(
        &self,
        lookup: &Lookup,
        batch: &RecordBatch,
        origin: &Path,
        first_row: u64,
    ) -> Result<FeatureBlock> {
        let mut block = self.inputs(lookup, batch, origin, first_row)?;
        block.labels = labels_of(
            batch,
            &self.label,
            self.label_positive.as_ref(),
            origin,
            first_row,
        )?;
        Ok(block)
    }

    /// [`Preprocess::apply`] without the label: the model's inputs for rows to score that have
    /// none yet (`predict`). `labels` stays empty.
    pub fn inputs(
        &self,
        lookup: &Lookup,
        batch: &RecordBatch,
        origin: &Path,
        first_row: u64,
    ) -> Result<FeatureBlock> {
        let rows = batch.num_rows();
        let (n_num, n_cat) = (self.numeric_inputs(), self.categorical.len());
        let mut block = FeatureBlock {
            rows,
            numeric: vec![0.0; rows * n_num],
            categorical: vec![0; rows * n_cat],
            labels: Vec::new(),
        };
        let mut indicator_column = self.numeric.len();
        for (j, feature) in self.numeric.iter().enumerate() {
            let served = column(batch, &feature.name, origin)?.data_type();
            if served == &DataType::Boolean && !feature.boolean {
                bail!(
                    "{}: column `{}` is true/false, but the model was trained on it as numbers (schema mismatch): \
                     booleans are not scored as 1/0 behind your back",
                    origin.display(),
                    feature.name
                );
            }
            let values = numeric_values(batch, &feature.name, origin, first_row)?;
            for (i, v) in values.iter().enumerate() {
                block.numeric[i * n_num + j] = match v {
                    Some(v) => {
                        let scaled = ((v - feature.mean) / feature.std) as f32;
                        // 1e308 is a finite number, but scaled to the model's 32-bit inputs it
                        // is infinite, and the score NaN: the row is at fault, not the weights.
                        if !scaled.is_finite() {
                            bail!(
                                "{}: row {}: feature `{}` is {v:e}, beyond what the model takes \
                                 ({:.1e} standard deviations from its training mean overflows its \
                                 32-bit inputs)",
                                origin.display(),
                                first_row + i as u64,
                                feature.name,
                                (v - feature.mean) / feature.std
                            );
                        }
                        scaled
                    }
                    None => 0.0,
                };
            }
            if feature.indicator {
                for (i, v) in values.iter().enumerate() {
                    block.numeric[i * n_num + indicator_column] =
                        if v.is_none() { 1.0 } else { 0.0 };
                }
                indicator_column += 1;
            }
        }
        for (j, feature) in self.categorical.iter().enumerate() {
            let column = string_column(batch, &feature.name, origin)?;
            let strings = column.as_string::<i32>();
            for (i, v) in strings.iter().enumerate() {
                block.categorical[i * n_cat + j] =
                    v.and_then(|v| lookup.maps[j].get(v).copied()).unwrap_or(0);
            }
        }
        Ok(block)
    }
}

impl Preprocess {
    /// Per categorical feature, how many rows of `batch` hold a value (not null) outside its
    /// vocabulary: rows the model scores as "unknown" because it never learned that value.
    pub fn count_unseen(
        &self,
        lookup: &Lookup,
        batch: &RecordBatch,
        origin: &Path,
    ) -> Result<Vec<u64>> {
        let mut counts = Vec::with_capacity(self.categorical.len());
        for (j, feature) in self.categorical.iter().enumerate() {
            let column = string_column(batch, &feature.name, origin)?;
            let strings = column.as_string::<i32>();
            counts.push(
                strings
                    .iter()
                    .flatten()
                    .filter(|v| !lookup.maps[j].contains_key(*v))
                    .count() as u64,
            );
        }
        Ok(counts)
    }
}

/// Category → index maps, built once per process.
#[derive(Debug, Clone)]
pub struct Lookup {
    maps: Vec<HashMap<String, i64>>,
}

/// Welford's running mean and deviation, on values divided by a power-of-two `scale` at least
/// as large as any value seen: the squares of values near 1e300 overflowed `m2` to infinity, the
/// deviation became infinite (written as `null`) and every later stage read a broken model.
/// Powers of two rescale exactly, so ordinary columns (scale 1) get the same bits as before.
#[derive(Debug, Clone, Copy)]
struct Welford {
    n: u64,
    mean: f64,
    m2: f64,
    scale: f64,
    /// 1 / scale, exact: scale is a power of two, so multiplying by it rounds as dividing does.
    inverse: f64,
}

impl Default for Welford {
    fn default() -> Self {
        Welford {
            n: 0,
            mean: 0.0,
            m2: 0.0,
            scale: 1.0,
            inverse: 1.0,
        }
    }
}

impl Welford {
    fn push(&mut self, x: f64) {
        if x.abs() > self.scale {
            // The next power of two at or above |x| (|x| is finite, so at most 2^1024 is never
            // needed: f64::MAX < 2^1024 and the exponent search stops at 2^1023).
            let mut scale = self.scale;
            while scale < x.abs() && scale < f64::MAX / 2.0 {
                scale *= 2.0;
            }
            let shrink = self.scale / scale;
            self.mean *= shrink;
            self.m2 *= shrink * shrink;
            self.scale = scale;
            self.inverse = 1.0 / scale;
        }
        let x = x * self.inverse;
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.mean * self.scale
        }
    }

    /// The population deviation; 1 for a constant column so scaling never divides by zero.
    fn std(&self) -> f64 {
        if self.n == 0 {
            return 1.0;
        }
        let std = (self.m2 / self.n as f64).sqrt() * self.scale;
        if std > 1e-12 && std.is_finite() {
            std
        } else {
            1.0
        }
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &str, origin: &Path) -> Result<&'a ArrayRef> {
    batch.column_by_name(name).ok_or_else(|| {
        anyhow!(
            "{}: has no column `{name}`, which the model's preprocessing needs (schema mismatch)",
            origin.display()
        )
    })
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str, origin: &Path) -> Result<&'a ArrayRef> {
    let array = column(batch, name, origin)?;
    if array.data_type() != &DataType::Utf8 {
        bail!(
            "{}: column `{name}` is {}, but the model's preprocessing treats it as a string column (schema mismatch); \
             if its values are category codes, list it in manifest.data.categorical so the snapshot is read with it as text",
            origin.display(),
            array.data_type()
        );
    }
    Ok(array)
}

/// A numeric or boolean column as f64, nulls as None. NaN and infinities are errors naming the
/// row: a silently propagated NaN would poison every weight.
fn numeric_values(
    batch: &RecordBatch,
    name: &str,
    origin: &Path,
    first_row: u64,
) -> Result<Vec<Option<f64>>> {
    let array = column(batch, name, origin)?;
    // A CSV column empty in every row comes as text (no value to tell its type by): say so,
    // rather than call it a text column. A feature missing from every row is an outage of its
    // feed, not a batch to impute whole.
    if !array.is_empty() && array.null_count() == array.len() && as_f64(array).is_none() {
        bail!(
            "{}: column `{name}` is empty in every row, but the model's preprocessing needs its \
             numbers (a feed that sent nothing?)",
            origin.display()
        );
    }
    let values = as_f64(array).ok_or_else(|| {
        anyhow!(
            "{}: column `{name}` is {}, but the model's preprocessing treats it as numeric (schema mismatch)",
            origin.display(),
            array.data_type()
        )
    })?;
    if let Some(i) = values
        .iter()
        .position(|v| v.is_some_and(|v| !v.is_finite()))
    {
        bail!(
            "{}: row {}: feature `{name}` is {} (features must be finite numbers or null)",
            origin.display(),
            first_row + i as u64,
            values[i].unwrap_or(f64::NAN)
        );
    }
    Ok(values)
}

/// An integer, float or boolean column as f64 (booleans as 0/1), nulls as None; None for any
/// other type.
fn as_f64(array: &ArrayRef) -> Option<Vec<Option<f64>>> {
    Some(match array.data_type() {
        DataType::Int64 => array
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|v| v as f64))
            .collect(),
        DataType::Float64 => array.as_primitive::<Float64Type>().iter().collect(),
        DataType::Boolean => array
            .as_boolean()
            .iter()
            .map(|v| v.map(|b| if b { 1.0 } else { 0.0 }))
            .collect(),
        _ => return None,
    })
}

/// The label as 0/1, read by `positive` when the manifest names one; null, NaN or a value that is
/// no label is an error naming the row.
fn labels_of(
    batch: &RecordBatch,
    name: &str,
    positive: Option<&Positive>,
    origin: &Path,
    first_row: u64,
) -> Result<Vec<f32>> {
    let array = column(batch, name, origin).context("reading the label")?;
    targets(
        array,
        &labels(array, positive),
        name,
        positive,
        origin,
        first_row,
    )
}

/// `read`, the labels of `array`, as 0/1 targets, or the error naming the first row that is none.
pub(crate) fn targets(
    array: &ArrayRef,
    read: &[Label],
    name: &str,
    positive: Option<&Positive>,
    origin: &Path,
    first_row: u64,
) -> Result<Vec<f32>> {
    read.iter()
        .enumerate()
        .map(|(i, label)| match label {
            Label::Positive => Ok(1.0),
            Label::Negative => Ok(0.0),
            Label::Missing => bail!(
                "{}: row {}: label `{name}` is null",
                origin.display(),
                first_row + i as u64
            ),
            Label::Invalid => {
                let value = arrow::compute::cast(&array.slice(i, 1), &DataType::Utf8)
                    .ok()
                    .and_then(|v| {
                        v.as_string::<i32>()
                            .iter()
                            .next()
                            .flatten()
                            .map(String::from)
                    })
                    .unwrap_or_default();
                let rule = match positive {
                    None => "a binary label must be 0/1 or boolean, or name the value that means \
                             positive with manifest.data.label_positive"
                        .to_string(),
                    Some(positive) => format!(
                        "manifest.data.label_positive is {}, which it cannot be compared with",
                        positive.yaml()
                    ),
                };
                bail!(
                    "{}: row {}: label `{name}` is {value} ({}); {rule}",
                    origin.display(),
                    first_row + i as u64,
                    array.data_type()
                )
            }
        })
        .collect()
}

/// A column of any type as display strings (for slice values); null is `null`.
pub fn display_strings(batch: &RecordBatch, name: &str, origin: &Path) -> Result<Vec<String>> {
    let array = column(batch, name, origin)?;
    let strings = arrow::compute::cast(array, &DataType::Utf8)
        .with_context(|| format!("{}: column `{name}` as text", origin.display()))?;
    Ok(strings
        .as_string::<i32>()
        .iter()
        .map(|v| v.unwrap_or("null").to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::ArrowWriter;

    use super::*;

    /// A shard with `logins` null on rows 1 and 3, `spend` never null.
    fn shard(dir: &Path) -> (std::path::PathBuf, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("logins", DataType::Int64, true),
            Field::new("spend", DataType::Float64, true),
            Field::new("tier", DataType::Utf8, true),
            Field::new("y", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![Some(2), None, Some(4), None])),
                Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0])),
                Arc::new(StringArray::from(vec!["a", "b", "a", "a"])),
                Arc::new(Int64Array::from(vec![0, 1, 0, 1])),
            ],
        )
        .unwrap();
        let path = dir.join("part-0.parquet");
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        (path, batch)
    }

    fn lists() -> FeatureLists {
        FeatureLists {
            numeric: vec!["logins".into(), "spend".into()],
            categorical: vec!["tier".into()],
        }
    }

    /// Values near 1e300 give a finite mean and deviation (their squares overflow f64), and an
    /// ordinary column gets the same bits as the unscaled computation.
    #[test]
    fn huge_values_give_a_finite_deviation() {
        let mut huge = Welford::default();
        for x in [1e300, -1e300, 1e300, -1e300, 0.0, 0.0, 0.0, 0.0] {
            huge.push(x);
        }
        assert_eq!(huge.mean(), 0.0);
        let std = huge.std();
        assert!(
            std.is_finite() && (std / (0.5f64.sqrt() * 1e300) - 1.0).abs() < 1e-12,
            "{std}"
        );
        let mut max = Welford::default();
        for x in [f64::MAX, -f64::MAX, f64::MAX] {
            max.push(x);
        }
        assert!(max.mean().is_finite() && max.std().is_finite());
        let mut small = Welford::default();
        let (mut n, mut mean, mut m2) = (0u64, 0.0f64, 0.0f64);
        for x in [0.3, 900.7, 0.1, 77.7, -3.2] {
            small.push(x);
            n += 1;
            let delta = x - mean;
            mean += delta / n as f64;
            m2 += delta * (x - mean);
        }
        assert_eq!(small.mean().to_bits(), mean.to_bits());
        assert_eq!(small.std().to_bits(), (m2 / n as f64).sqrt().to_bits());
    }

    /// Welford scales by multiplying with 1/scale: for every power-of-two scale it may reach,
    /// that is the division bit for bit, down to results in the subnormal range.
    #[test]
    fn multiplying_by_the_inverse_scale_rounds_as_dividing_does() {
        let xs = [
            1.0,
            -3.7,
            0.1,
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            1.2345678901234567e-300,
            -9.87654321e-310,
            std::f64::consts::PI * 1e200,
            7.0e15 + 1.0,
        ];
        for k in 0..=1023 {
            let scale = 2f64.powi(k);
            let inverse = 1.0 / scale;
            for x in xs {
                assert_eq!(
                    (x * inverse).to_bits(),
                    (x / scale).to_bits(),
                    "{x} / 2^{k}"
                );
            }
        }
    }

    #[test]
    fn a_feature_with_nulls_in_train_gets_an_indicator_after_the_values() {
        let dir = tempfile::tempdir().unwrap();
        let (path, batch) = shard(dir.path());
        let pre = Preprocess::fit(&[&path], &lists(), "y", None, 10, true).unwrap();
        assert_eq!(pre.numeric[0].nulls, 2);
        assert!(pre.numeric[0].indicator);
        assert!(!pre.numeric[1].indicator, "spend has no nulls in train");
        assert_eq!(pre.numeric_inputs(), 3);
        assert_eq!(pre.indicator_names(), vec!["logins"]);
        let block = pre.apply(&pre.lookup(), &batch, &path, 1).unwrap();
        let column = |j: usize| -> Vec<f32> { (0..4).map(|i| block.numeric[i * 3 + j]).collect() };
        // logins: mean 3, deviation 1; nulls take the mean, and the indicator says which.
        assert_eq!(column(0), vec![-1.0, 0.0, 1.0, 0.0]);
        assert_eq!(column(2), vec![0.0, 1.0, 0.0, 1.0]);
        assert_eq!(block.categorical, vec![1, 2, 1, 1]);
    }

    #[test]
    fn indicators_off_mean_fill_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (path, batch) = shard(dir.path());
        let pre = Preprocess::fit(&[&path], &lists(), "y", None, 10, false).unwrap();
        assert_eq!(pre.numeric[0].nulls, 2, "nulls are still counted");
        assert!(pre.numeric.iter().all(|f| !f.indicator));
        assert_eq!(pre.numeric_inputs(), 2);
        let block = pre.apply(&pre.lookup(), &batch, &path, 1).unwrap();
        assert_eq!(block.numeric.len(), 4 * 2);
        let logins: Vec<f32> = (0..4).map(|i| block.numeric[i * 2]).collect();
        assert_eq!(logins, vec![-1.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn a_null_at_scoring_time_without_an_indicator_takes_the_mean() {
        let dir = tempfile::tempdir().unwrap();
        let (path, batch) = shard(dir.path());
        let pre = Preprocess::fit(&[&path], &lists(), "y", None, 10, true).unwrap();
        let mut columns = batch.columns().to_vec();
        columns[1] = Arc::new(Float64Array::from(vec![None, Some(2.5), None, None]));
        let later = RecordBatch::try_new(batch.schema(), columns).unwrap();
        let block = pre.apply(&pre.lookup(), &later, &path, 1).unwrap();
        let spend: Vec<f32> = (0..4).map(|i| block.numeric[i * 3 + 1]).collect();
        assert_eq!(spend, vec![0.0; 4]);
        assert_eq!(
            block.numeric.len(),
            4 * 3,
            "no input appears at scoring time"
        );
    }

    /// A shard of `tier` (text) and a YES/NO label `y`.
    fn yes_no_shard(dir: &Path, labels: Vec<Option<&str>>) -> (std::path::PathBuf, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("tier", DataType::Utf8, true),
            Field::new("y", DataType::Utf8, true),
        ]));
        let tiers: Vec<&str> = (0..labels.len()).map(|i| ["a", "b"][i % 2]).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(tiers)),
                Arc::new(StringArray::from(labels)),
            ],
        )
        .unwrap();
        let path = dir.join("part-0.parquet");
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        (path, batch)
    }

    #[test]
    fn a_text_label_is_read_by_its_positive_value() {
        let dir = tempfile::tempdir().unwrap();
        let (path, batch) = yes_no_shard(dir.path(), vec![Some("YES"), Some("NO"), Some("NO")]);
        let lists = FeatureLists {
            numeric: vec![],
            categorical: vec!["tier".into()],
        };
        let yes = Positive::Text("YES".into());
        let pre = Preprocess::fit(&[&path], &lists, "y", Some(&yes), 10, true).unwrap();
        assert_eq!(pre.label_positive, Some(yes));
        let block = pre.apply(&pre.lookup(), &batch, &path, 1).unwrap();
        assert_eq!(block.labels, vec![1.0, 0.0, 0.0]);
        let stored = serde_json::to_string(&pre).unwrap();
        assert!(
            stored.contains(r#""label":"y","label_positive":"YES","#),
            "{stored}"
        );

        let err = Preprocess::fit(&[&path], &lists, "y", None, 10, true)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "manifest.data.label: `y` holds NO, YES; say which is positive with data.label_positive: \"YES\""
        );
        let lowercase = Positive::Text("yes".into());
        let err = Preprocess::fit(&[&path], &lists, "y", Some(&lowercase), 10, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`yes` is not a value of `y` (values: NO, YES)"),
            "{err}"
        );

        // A null label is still an error naming its row once the values are fine.
        let (path, _) = yes_no_shard(dir.path(), vec![Some("YES"), None]);
        let yes = Positive::Text("YES".into());
        let err = Preprocess::fit(&[&path], &lists, "y", Some(&yes), 10, true)
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("row 2: label `y` is null"), "{err}");
        // A model without a positive value keeps the bytes it had before there was one.
        let mut plain = pre.clone();
        plain.label_positive = None;
        let stored = serde_json::to_string(&plain).unwrap();
        assert!(!stored.contains("label_positive"), "{stored}");
    }

    #[test]
    fn integer_codes_listed_as_categories_say_to_declare_them() {
        let columns = [
            Column {
                name: "precinct".into(),
                column_type: ColumnType::Int64,
            },
            Column {
                name: "y".into(),
                column_type: ColumnType::Int64,
            },
        ];
        let reserved = Reserved {
            label: "y".into(),
            ..Reserved::default()
        };
        let lists = FeatureLists {
            numeric: vec![],
            categorical: vec!["precinct".into()],
        };
        let err = choose(&columns, &reserved, Some(&lists))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "manifest.config.features.categorical: `precinct` holds int64 values in the shards; \
                 to use its values as categories, list it in manifest.data.categorical (data: {categorical: [precinct]})"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_indicator_is_stored_only_where_there_is_one() {
        let mut feature = NumericFeature {
            name: "x".into(),
            mean: 1.0,
            std: 2.0,
            nulls: 0,
            indicator: false,
            boolean: false,
        };
        let text = serde_json::to_string(&feature).unwrap();
        assert_eq!(text, r#"{"name":"x","mean":1.0,"std":2.0,"nulls":0}"#);
        let read: NumericFeature = serde_json::from_str(&text).unwrap();
        assert_eq!(
            read, feature,
            "a file written before indicators reads as none"
        );
        feature.indicator = true;
        let text = serde_json::to_string(&feature).unwrap();
        assert!(text.ends_with(r#""indicator":true}"#), "{text}");
        assert_eq!(
            serde_json::from_str::<NumericFeature>(&text).unwrap(),
            feature
        );
    }
}
