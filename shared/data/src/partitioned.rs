//! A snapshot seen through its splits: from the raw snapshot and the split rules, or from shards
//! whose folder already says which split each row is in. The checkers fold over it in parallel,
//! one accumulator per file, merged in file order so results never depend on thread timing.

use std::path::Path;

use arrow::array::RecordBatch;
use rayon::prelude::*;

use crate::error::DataError;
use crate::read::{BadValues, Snapshot};
use crate::shards::ShardIndex;
use crate::source::{FileFormat, SourceFile};
use crate::split::Splits;
use crate::types::arrow_schema;

#[derive(Debug, Clone)]
pub struct Partitioned {
    pub snapshot: Snapshot,
    pub split_names: Vec<String>,
    how: How,
}

#[derive(Debug, Clone)]
enum How {
    Rules(Splits),
    /// The split of each file (shards).
    FileSplits(Vec<u8>),
}

/// One batch with the split of each of its rows.
#[derive(Debug)]
pub struct SplitBatch<'a> {
    pub batch: &'a RecordBatch,
    pub splits: &'a [Option<u8>],
    pub file: &'a Path,
    /// Index of `file` in the snapshot's files.
    pub file_index: usize,
    /// 0-based row of the batch's first row within its file.
    pub first_row: u64,
}

impl Partitioned {
    pub fn from_rules(snapshot: Snapshot, splits: Splits) -> Partitioned {
        let split_names = splits.names().map(String::from).collect();
        Partitioned {
            snapshot,
            split_names,
            how: How::Rules(splits),
        }
    }

    /// How rows are assigned to splits, as text: parts of one run must agree on it.
    pub fn splitting(&self) -> String {
        format!("{:?} {:?}", self.split_names, self.how)
    }

    /// Why the snapshot cannot be split as its rules say, given each split's rows: a rolling
    /// window that selects nothing (shards hold no rules: nothing to say).
    pub fn empty_window(&self, rows: &[u64]) -> Option<String> {
        match &self.how {
            How::Rules(splits) => splits.empty_window(rows),
            How::FileSplits(_) => None,
        }
    }

    /// Reads the shard folder `dir` (verifying every shard against its index).
    pub fn from_shards(dir: &Path) -> Result<Partitioned, DataError> {
        let index = ShardIndex::load(dir, true)?;
        let mut files = Vec::new();
        let mut file_splits = Vec::new();
        let split_names: Vec<String> = index.splits.keys().cloned().collect();
        for (split_index, (_, split)) in index.splits.iter().enumerate() {
            for shard in &split.shards {
                files.push(SourceFile {
                    path: dir.join(&shard.path),
                    format: FileFormat::Parquet,
                    bytes: shard.bytes,
                });
                file_splits.push(split_index as u8);
            }
        }
        let schema = arrow_schema(&index.columns);
        let snapshot = Snapshot {
            root: dir.to_path_buf(),
            files,
            columns: index.columns.clone(),
            schema,
            file_columns: None,
            batch_rows: crate::read::BATCH_ROWS,
        };
        Ok(Partitioned {
            snapshot,
            split_names,
            how: How::FileSplits(file_splits),
        })
    }

    /// Folds every batch into a per-file accumulator, files in parallel. Returns the accumulators
    /// in file order and the bad values met.
    pub fn fold<A, I, F>(&self, init: I, step: F) -> Result<(Vec<A>, BadValues), DataError>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, &SplitBatch) -> Result<(), DataError> + Sync,
    {
        let all: Vec<usize> = (0..self.snapshot.files.len()).collect();
        self.fold_files(&all, init, step)
    }

    /// [`Partitioned::fold`] over the files `files` (indices, in order) only: a part of the work.
    /// Batches keep their file's index in the whole snapshot.
    pub fn fold_files<A, I, F>(
        &self,
        files: &[usize],
        init: I,
        step: F,
    ) -> Result<(Vec<A>, BadValues), DataError>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, &SplitBatch) -> Result<(), DataError> + Sync,
    {
        let results: Vec<(A, BadValues)> = files
            .par_iter()
            .map(|&file| {
                let path = &self.snapshot.files[file].path;
                let mut acc = init();
                let mut bad = BadValues::default();
                for typed in self.snapshot.read_file(file)? {
                    let typed = typed?;
                    bad.merge(&typed.bad_values);
                    let splits = match &self.how {
                        How::Rules(rules) => rules.assign(&typed.batch).map_err(|o| {
                            DataError::file(
                                path,
                                format!(
                                    "row {} falls in both splits `{}` and `{}`",
                                    typed.first_row + o.row as u64 + 1,
                                    o.first,
                                    o.second
                                ),
                            )
                        })?,
                        How::FileSplits(splits) => vec![Some(splits[file]); typed.batch.num_rows()],
                    };
                    step(
                        &mut acc,
                        &SplitBatch {
                            batch: &typed.batch,
                            splits: &splits,
                            file: path,
                            file_index: file,
                            first_row: typed.first_row,
                        },
                    )?;
                }
                Ok((acc, bad))
            })
            .collect::<Vec<Result<_, DataError>>>()
            // The first failing file in file order, so the error is the same on every run.
            .into_iter()
            .collect::<Result<_, DataError>>()?;
        let mut bad = BadValues::default();
        let mut accs = Vec::with_capacity(results.len());
        for (acc, file_bad) in results {
            bad.merge(&file_bad);
            accs.push(acc);
        }
        Ok((accs, bad))
    }
}
