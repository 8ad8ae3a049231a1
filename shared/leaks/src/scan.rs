//! The one pass over the data: per file, what each check needs; then merged in file order.

use arrow::array::{Array, AsArray};
use runfn_data::label::{Label, LabelValues, Positive, labels};
use runfn_data::partitioned::{Partitioned, SplitBatch};
use runfn_data::values::{numeric_values, text_array};
use runfn_data::{ColumnType, DataError};
use runfn_stats::minhash::normalize_text;
use serde::{Deserialize, Serialize};

use crate::categories::FileCategories;
use crate::config::LeakConfig;
use crate::keys::{FileKeyCounts, FileKeys, KeySink, Keys, hash128};
use crate::location::Loc;
use crate::near_twins::{ColumnSearch, FileTexts};
use crate::proxies::{CategoryProxy, NumericProxy, ProxySink};

/// Column positions by role, resolved once against the schema.
#[derive(Debug)]
pub struct Layout {
    pub entity: Option<usize>,
    pub time: Option<usize>,
    pub label: Option<usize>,
    pub label_positive: Option<Positive>,
    pub label_time: Option<usize>,
    pub train: Option<u8>,
    /// Text columns (name, index) for near-duplicates.
    pub text: Vec<(String, usize)>,
    /// (feature, as_of column index).
    pub as_of: Vec<(String, usize)>,
    /// Columns compared for exact duplicates.
    pub features: Vec<usize>,
    /// Candidate label proxies: (name, index, categorical).
    pub proxies: Vec<(String, usize, bool)>,
    /// Categorical features (text columns that are not free text): (name, index).
    pub categories: Vec<(String, usize)>,
    /// Keep every row's feature hash and place, to list every exact-twin pair.
    pub collect_pairs: bool,
}

impl Layout {
    pub fn new(data: &Partitioned, config: &LeakConfig) -> Result<Layout, DataError> {
        let columns = &data.snapshot.columns;
        let find = |name: &Option<String>, role: &str| -> Result<Option<usize>, DataError> {
            match name {
                None => Ok(None),
                Some(name) => columns
                    .iter()
                    .position(|c| &c.name == name)
                    .map(Some)
                    .ok_or_else(|| {
                        DataError::column(
                            name,
                            format!(
                                "is named as manifest.data.{role} but the data has no such column"
                            ),
                        )
                    }),
            }
        };
        let text = config
            .text
            .iter()
            .map(|name| {
                Ok((
                    name.clone(),
                    find(&Some(name.clone()), "text")?.unwrap_or_default(),
                ))
            })
            .collect::<Result<Vec<_>, DataError>>()?;
        let mut as_of = Vec::new();
        for (feature, column) in &config.as_of {
            find(&Some(feature.clone()), "as_of")?;
            as_of.push((
                feature.clone(),
                find(&Some(column.clone()), "as_of")?.unwrap_or_default(),
            ));
        }
        let features: Vec<usize> = (0..columns.len())
            .filter(|&i| !config.is_non_feature(&columns[i].name))
            .collect();
        let proxies = features
            .iter()
            .filter(|&&i| {
                !columns[i].column_type.is_temporal() && !config.text.contains(&columns[i].name)
            })
            .map(|&i| {
                (
                    columns[i].name.clone(),
                    i,
                    columns[i].column_type == ColumnType::String,
                )
            })
            .collect();
        let categories = features
            .iter()
            .filter(|&&i| {
                columns[i].column_type == ColumnType::String
                    && !config.text.contains(&columns[i].name)
                    && config
                        .model_features
                        .as_ref()
                        .is_none_or(|f| f.contains(&columns[i].name))
            })
            .map(|&i| (columns[i].name.clone(), i))
            .collect();
        Ok(Layout {
            entity: find(&config.entity, "entity")?,
            time: find(&config.time, "time")?,
            label: find(&config.label, "label")?,
            label_positive: config.label_positive.clone(),
            label_time: find(&config.label_time_column().map(String::from), "label_time")?,
            train: data
                .split_names
                .iter()
                .position(|s| *s == config.train_split)
                .map(|i| i as u8),
            text,
            as_of,
            features,
            proxies,
            categories,
            collect_pairs: config.collect_pairs,
        })
    }
}

/// A feature timestamp later than its label time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Future {
    pub feature: String,
    pub loc: Loc,
    pub as_of: f64,
    pub label_time: f64,
}

/// What one file gives each check.
#[derive(Debug, Default)]
pub struct FileScan {
    pub entities: FileKeys,
    pub rows: FileKeys,
    /// Per text column.
    pub texts: Vec<FileTexts>,
    /// Per categorical column.
    pub categories: Vec<FileCategories>,
    pub tallies: Tallies,
}

/// What a file gives the checks that merge by adding up, the same for one file and for all (or
/// for a part's files: what a part keeps of them).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Tallies {
    /// Per split: (min, max) of the time column, microseconds.
    pub time_ranges: Vec<Option<(f64, f64)>>,
    pub future: Vec<Future>,
    pub future_count: u64,
    /// Per proxy column, on the train split: numbers with their labels, or category counts.
    pub proxy_numeric: Vec<NumericProxy>,
    /// Per proxy column once merged: the numbers' AUC and rows.
    #[serde(skip)]
    pub proxy_numeric_auc: Vec<(Result<f64, runfn_stats::auc::AucError>, usize)>,
    pub proxy_categories: Vec<CategoryProxy>,
    pub invalid_labels: u64,
    pub positive_labels: u64,
    /// The label's distinct values, to say what to write when they cannot be read as labels.
    pub label_values: LabelValues,
    /// Rows per split.
    pub split_rows: Vec<u64>,
    /// Rows whose feature time and label time were both present.
    pub future_checked: u64,
}

impl Tallies {
    pub fn new(layout: &Layout) -> Tallies {
        Tallies {
            proxy_numeric: (0..layout.proxies.len())
                .map(|_| NumericProxy::default())
                .collect(),
            proxy_categories: (0..layout.proxies.len())
                .map(|_| CategoryProxy::default())
                .collect(),
            ..Tallies::default()
        }
    }

    /// Adds the tallies of a later file.
    pub fn absorb(&mut self, file: Tallies, proxies: &[ProxySink]) -> Result<(), DataError> {
        for (split, range) in file.time_ranges.into_iter().enumerate() {
            if self.time_ranges.len() <= split {
                self.time_ranges.resize(split + 1, None);
            }
            if let Some((low, high)) = range {
                let target = self.time_ranges[split].get_or_insert((low, high));
                target.0 = target.0.min(low);
                target.1 = target.1.max(high);
            }
        }
        self.future.extend(file.future);
        self.future_count += file.future_count;
        for ((target, values), sink) in self
            .proxy_numeric
            .iter_mut()
            .zip(file.proxy_numeric)
            .zip(proxies)
        {
            target
                .absorb(values, sink)
                .map_err(|source| spilled(sink.root(), source))?;
        }
        for (target, values) in self.proxy_categories.iter_mut().zip(file.proxy_categories) {
            target.absorb(values);
        }
        self.invalid_labels += file.invalid_labels;
        self.positive_labels += file.positive_labels;
        self.label_values.merge(&file.label_values);
        for (split, rows) in file.split_rows.into_iter().enumerate() {
            if self.split_rows.len() <= split {
                self.split_rows.resize(split + 1, 0);
            }
            self.split_rows[split] += rows;
        }
        self.future_checked += file.future_checked;
        Ok(())
    }
}

/// Where the reading threads send what does not stay with each file: key occurrences and
/// texts, to sorters that spill past their share of the budget.
pub struct Sinks {
    pub entities: KeySink,
    pub rows: KeySink,
    /// One per text column.
    pub texts: Vec<ColumnSearch>,
    /// One per label-proxy candidate (used by the numeric ones).
    pub proxies: Vec<ProxySink>,
    /// The run's spill folder (categories spill their train values there).
    pub root: std::path::PathBuf,
}

impl FileScan {
    pub fn new(layout: &Layout) -> FileScan {
        FileScan {
            entities: FileKeys::default(),
            rows: FileKeys::default(),
            texts: (0..layout.text.len())
                .map(|_| FileTexts::default())
                .collect(),
            categories: (0..layout.categories.len())
                .map(|_| FileCategories::default())
                .collect(),
            tallies: Tallies::new(layout),
        }
    }

    /// Adds a batch; its keys and texts go to `sinks`.
    pub fn add(
        &mut self,
        layout: &Layout,
        sinks: &Sinks,
        batch: &SplitBatch,
    ) -> Result<(), DataError> {
        let file = batch.file_index as u32;
        let rows = batch.batch.num_rows();
        let loc = |row: usize| Loc {
            file,
            row: batch.first_row + row as u64 + 1,
        };
        let columns = batch.batch.columns();
        for split in batch.splits.iter().flatten() {
            let split = *split as usize;
            if self.tallies.split_rows.len() <= split {
                self.tallies.split_rows.resize(split + 1, 0);
            }
            self.tallies.split_rows[split] += 1;
        }

        if let Some(entity) = layout.entity {
            let values = text_array(&columns[entity]);
            for row in 0..rows {
                let (Some(split), true) = (batch.splits[row], values.is_valid(row)) else {
                    continue;
                };
                let value = values.value(row);
                self.entities
                    .add(&sinks.entities, hash128(value.as_bytes()), split, loc(row))
                    .map_err(|source| spilled(sinks.entities.root(), source))?;
            }
        }

        if let Some(time) = layout.time {
            for (row, value) in numeric_values(&columns[time]).into_iter().enumerate() {
                let (Some(split), Some(value)) = (batch.splits[row], value) else {
                    continue;
                };
                let split = split as usize;
                if self.tallies.time_ranges.len() <= split {
                    self.tallies.time_ranges.resize(split + 1, None);
                }
                let range = self.tallies.time_ranges[split].get_or_insert((value, value));
                range.0 = range.0.min(value);
                range.1 = range.1.max(value);
            }
        }

        self.add_row_hashes(layout, &sinks.rows, batch, &loc)
            .map_err(|source| spilled(sinks.rows.root(), source))?;

        if let Some(train) = layout.train {
            for (slot, (_, column)) in layout.categories.iter().enumerate() {
                self.categories[slot]
                    .add(batch, *column, train, &sinks.root)
                    .map_err(|source| spilled(&sinks.root, source))?;
            }
        }

        for (slot, (_, column)) in layout.text.iter().enumerate() {
            let values = text_array(&columns[*column]);
            let texts: Vec<(u16, u64, &str)> = (0..rows)
                .filter_map(|row| match (batch.splits[row], values.is_valid(row)) {
                    (Some(split), true) => Some((
                        split as u16,
                        (file as u64) << 40 | (batch.first_row + row as u64),
                        values.value(row),
                    )),
                    _ => None,
                })
                .collect();
            self.texts[slot]
                .add(&sinks.texts[slot], &texts)
                .map_err(|source| spilled(sinks.texts[slot].root(), source))?;
        }

        if let Some(label_time) = layout.label_time {
            let label_times = numeric_values(&columns[label_time]);
            for (feature, as_of) in &layout.as_of {
                for (row, as_of) in numeric_values(&columns[*as_of]).into_iter().enumerate() {
                    let (Some(as_of), Some(label_time), Some(_)) =
                        (as_of, label_times[row], batch.splits[row])
                    else {
                        continue;
                    };
                    self.tallies.future_checked += 1;
                    if as_of > label_time {
                        self.tallies.future_count += 1;
                        if self.tallies.future.len() < 5 {
                            self.tallies.future.push(Future {
                                feature: feature.clone(),
                                loc: loc(row),
                                as_of,
                                label_time,
                            });
                        }
                    }
                }
            }
        }

        let read_labels = layout.label.map(|label| {
            self.tallies.label_values.add(&columns[label]);
            labels(&columns[label], layout.label_positive.as_ref())
        });
        if let Some(labels) = &read_labels {
            self.tallies.invalid_labels +=
                labels.iter().filter(|l| **l == Label::Invalid).count() as u64;
            self.tallies.positive_labels +=
                labels.iter().filter(|l| **l == Label::Positive).count() as u64;
        }
        if let (Some(labels), Some(train)) = (read_labels, layout.train) {
            for (slot, (_, column, categorical)) in layout.proxies.iter().enumerate() {
                if *categorical {
                    let values = text_array(&columns[*column]);
                    for row in 0..rows {
                        if let (Some(label), true) = (
                            train_label(batch, row, train, &labels),
                            values.is_valid(row),
                        ) {
                            self.tallies.proxy_categories[slot].add(values.value(row), label);
                        }
                    }
                } else {
                    for (row, value) in numeric_values(&columns[*column]).into_iter().enumerate() {
                        if let (Some(label), Some(value)) =
                            (train_label(batch, row, train, &labels), value)
                            && !value.is_nan()
                        {
                            let sink = &sinks.proxies[slot];
                            self.tallies.proxy_numeric[slot]
                                .add(value, label, sink)
                                .map_err(|source| spilled(sink.root(), source))?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Hash of a row's feature values, text normalized for case and white space.
    fn add_row_hashes(
        &mut self,
        layout: &Layout,
        sink: &KeySink,
        batch: &SplitBatch,
        loc: &dyn Fn(usize) -> Loc,
    ) -> std::io::Result<()> {
        if layout.features.is_empty() {
            return Ok(());
        }
        let texts: Vec<_> = layout
            .features
            .iter()
            .map(|&c| text_array(&batch.batch.columns()[c]))
            .collect();
        let is_string: Vec<bool> = layout
            .features
            .iter()
            .map(|&c| {
                batch.batch.column(c).data_type().is_null()
                    || batch.batch.column(c).as_string_opt::<i32>().is_some()
            })
            .collect();
        let mut buffer = Vec::new();
        for row in 0..batch.batch.num_rows() {
            let Some(split) = batch.splits[row] else {
                continue;
            };
            buffer.clear();
            for (text, string) in texts.iter().zip(&is_string) {
                if text.is_valid(row) {
                    let value = text.value(row);
                    if *string {
                        buffer.extend_from_slice(normalize_text(value).as_bytes());
                    } else {
                        buffer.extend_from_slice(value.as_bytes());
                    }
                } else {
                    buffer.push(0);
                }
                buffer.push(0x1f);
            }
            self.rows.add(sink, hash128(&buffer), split, loc(row))?;
        }
        Ok(())
    }
}

fn train_label(batch: &SplitBatch, row: usize, train: u8, labels: &[Label]) -> Option<bool> {
    if batch.splits[row] != Some(train) {
        return None;
    }
    match labels[row] {
        Label::Positive => Some(true),
        Label::Negative => Some(false),
        Label::Missing | Label::Invalid => None,
    }
}

/// Every file's scan merged, in file order.
#[derive(Debug, Default)]
pub struct Merged {
    pub entities: Keys,
    pub rows: Keys,
    /// Per text column, per file: the file's texts, to read the examples' and candidates' back.
    pub texts: Vec<Vec<Option<std::fs::File>>>,
    /// Per categorical column, every file's in file order.
    pub categories: Vec<FileCategories>,
    pub tallies: Tallies,
}

impl Merged {
    /// Merges the files' scans; `rank` orders the splits in time.
    /// Returns the text columns' searches, every file's texts handed over.
    pub fn new(
        files: Vec<FileScan>,
        layout: &Layout,
        sinks: Sinks,
        rank: &[usize],
        examples: usize,
        reduced: Option<(Keys, Keys)>,
    ) -> Result<(Merged, Vec<ColumnSearch>), DataError> {
        let Sinks {
            entities: entity_sink,
            rows: row_sink,
            texts: searches,
            proxies,
            root: _,
        } = sinks;
        let mut texts: Vec<Vec<Option<std::fs::File>>> =
            (0..layout.text.len()).map(|_| Vec::new()).collect();
        let mut tallies = Tallies::new(layout);
        let mut entities: Vec<FileKeyCounts> = Vec::with_capacity(files.len());
        let mut rows: Vec<FileKeyCounts> = Vec::with_capacity(files.len());
        let mut categories: Vec<FileCategories> = (0..layout.categories.len())
            .map(|_| FileCategories::default())
            .collect();
        for file in files {
            for (target, column) in categories.iter_mut().zip(file.categories) {
                target
                    .absorb(column)
                    .map_err(|source| spilled(entity_sink.root(), source))?;
            }
            entities.push(
                file.entities
                    .finish(&entity_sink)
                    .map_err(|source| spilled(entity_sink.root(), source))?,
            );
            rows.push(
                file.rows
                    .finish(&row_sink)
                    .map_err(|source| spilled(row_sink.root(), source))?,
            );
            for ((target, file_texts), search) in texts.iter_mut().zip(file.texts).zip(&searches) {
                target.push(
                    file_texts
                        .finish(search)
                        .map_err(|source| spilled(search.root(), source))?,
                );
            }
            tallies.absorb(file.tallies, &proxies)?;
        }
        for column in &mut categories {
            column
                .seal()
                .map_err(|source| spilled(entity_sink.root(), source))?;
        }
        tallies.proxy_numeric_auc = std::mem::take(&mut tallies.proxy_numeric)
            .into_iter()
            .zip(proxies)
            .map(|(proxy, sink)| {
                let root = sink.root().to_path_buf();
                proxy.auc(sink).map_err(|source| spilled(&root, source))
            })
            .collect::<Result<_, _>>()?;
        let entity_root = entity_sink.root().to_path_buf();
        let row_root = row_sink.root().to_path_buf();
        // The keys grouped by reducers (each a range of hashes), or here.
        let (entities, rows) = match reduced {
            Some(keys) => keys,
            None => (
                Keys::group(entity_sink, &entities, rank, examples, false)
                    .map_err(|source| spilled(&entity_root, source))?,
                Keys::group(row_sink, &rows, rank, examples, layout.collect_pairs)
                    .map_err(|source| spilled(&row_root, source))?,
            ),
        };
        let merged = Merged {
            entities,
            rows,
            texts,
            categories,
            tallies,
        };
        Ok((merged, searches))
    }
}

/// A failure to write or read what was spilled, named by the folder it spills to.
pub fn spilled(root: &std::path::Path, source: std::io::Error) -> DataError {
    DataError::Io {
        path: root.to_path_buf(),
        source,
    }
}
