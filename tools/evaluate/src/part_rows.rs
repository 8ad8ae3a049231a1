//! A part's scored rows, as the merge reads them back: a private file between one evaluate and
//! another, so it is laid out for the two of them rather than for anyone else (the row scores
//! file is the one people read). Parquet cost the parts a fifth of their time in dictionary
//! building and compression and the merge its decoding; this is a run of blocks, one per scored
//! batch, each compressed alone by zstd (level 1; a stream encoder spent twice as long finding
//! matches across its window's wrap):
//!
//! ```text
//! block:      bytes: u32 | compressed bytes: u32 | the compressed block
//! a block:    rows: u32 | scores: rows × f64 | labels: rows × u8 (0 or 1)
//!             then for each column: lengths: rows × u32 | the values' UTF-8 bytes
//! ```
//!
//! all little-endian, and a block of 0 bytes at the end, so a file cut at a block's edge is
//! still found short. The partial names the file's blake3, checked before it is read.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use runfn_core::InputError;
use runfn_learn::score::Scored;

/// zstd's fastest level: the file is read once, by the merge, and never kept.
const LEVEL: i32 = 1;

/// No batch a part scores comes near this; a larger length is a file no part wrote, refused
/// before anything that size is allocated.
const MAX_BLOCK: usize = 1 << 30;

/// Writes scored batches to a part's rows file.
pub struct PartRowsWriter<W: Write> {
    out: BufWriter<W>,
    compressor: zstd::bulk::Compressor<'static>,
    columns: usize,
    block: Vec<u8>,
}

impl<W: Write> PartRowsWriter<W> {
    pub fn new(inner: W, columns: usize) -> std::io::Result<PartRowsWriter<W>> {
        Ok(PartRowsWriter {
            out: BufWriter::new(inner),
            compressor: zstd::bulk::Compressor::new(LEVEL)?,
            columns,
            block: Vec::new(),
        })
    }

    /// One batch's rows, with its columns in the order the writer was made for.
    pub fn push(&mut self, batch: &Scored) -> std::io::Result<()> {
        let rows = batch.scores.len();
        if batch.slices.len() != self.columns {
            return Err(std::io::Error::other(format!(
                "a batch of {} columns, not {}",
                batch.slices.len(),
                self.columns
            )));
        }
        let count = u32::try_from(rows)
            .map_err(|_| std::io::Error::other(format!("a batch of {rows} rows")))?;
        if count == 0 {
            return Ok(());
        }
        let block = &mut self.block;
        block.clear();
        block.extend_from_slice(&count.to_le_bytes());
        for score in &batch.scores {
            block.extend_from_slice(&score.to_le_bytes());
        }
        block.extend(batch.labels.iter().map(|&label| u8::from(label)));
        for (_, values) in &batch.slices {
            for value in values {
                let length = u32::try_from(value.len())
                    .map_err(|_| std::io::Error::other("a value over 4 GiB"))?;
                block.extend_from_slice(&length.to_le_bytes());
            }
            for value in values {
                block.extend_from_slice(value.as_bytes());
            }
        }
        let compressed = self.compressor.compress(block)?;
        let length = |n: usize| {
            u32::try_from(n)
                .map(u32::to_le_bytes)
                .map_err(|_| std::io::Error::other(format!("a block of {n} bytes")))
        };
        self.out.write_all(&length(block.len())?)?;
        self.out.write_all(&length(compressed.len())?)?;
        self.out.write_all(&compressed)
    }

    /// Ends the file (the empty block) and gives the inner writer back.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(&[0u8; 8])?;
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

/// Reads the rows file at `path` (`columns` named as the partial names them) a block at a
/// time: `each` gets every block as a scored batch. Returns the rows read. A file that ends
/// early or holds what no writer wrote is refused, naming it.
pub fn read_each(
    path: &Path,
    columns: &[String],
    each: &mut dyn FnMut(&Scored) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let file = std::fs::File::open(path).map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |message: &str| InputError::field(path.display().to_string(), message.to_string());
    // A file that ends early is a bad file; any other read error is the disk's, kept whole so
    // that its cause (an I/O error of the device: the environment's) decides the exit code.
    let short = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => bad("ends early or is not a part's rows file"),
        _ => InputError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    };
    let mut input = BufReader::new(file);
    let mut decompressor =
        zstd::bulk::Decompressor::new().map_err(|e| anyhow::anyhow!("zstd: {e}"))?;
    let mut rows = 0u64;
    loop {
        let mut head = [0u8; 8];
        input.read_exact(&mut head).map_err(short)?;
        let raw = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let packed = u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) as usize;
        if raw == 0 {
            return Ok(rows);
        }
        if raw > MAX_BLOCK || packed > MAX_BLOCK {
            return Err(bad("holds a block larger than any batch a part writes").into());
        }
        let mut compressed = vec![0u8; packed];
        input.read_exact(&mut compressed).map_err(short)?;
        let block = decompressor
            .decompress(&compressed, raw)
            .ok()
            .filter(|block| block.len() == raw)
            .ok_or_else(|| bad("holds a block that is not zstd or not its stated size"))?;
        let mut block = block.as_slice();
        let mut read = |bytes: &mut [u8]| {
            block
                .read_exact(bytes)
                .map_err(|_| bad("holds a block shorter than its rows"))
        };
        let mut head = [0u8; 4];
        read(&mut head)?;
        let count = u32::from_le_bytes(head) as usize;
        let mut fixed = vec![0u8; count * 9];
        read(&mut fixed)?;
        let (scores, labels) = fixed.split_at(count * 8);
        let scores: Vec<f64> = scores
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        let labels = labels
            .iter()
            .map(|&b| match b {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(bad("holds a label that is neither 0 nor 1")),
            })
            .collect::<Result<Vec<bool>, InputError>>()?;
        let mut slices = Vec::with_capacity(columns.len());
        for column in columns {
            let mut lengths = vec![0u8; count * 4];
            read(&mut lengths)?;
            let lengths: Vec<usize> = lengths
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                .collect();
            let mut text = vec![0u8; lengths.iter().sum()];
            read(&mut text)?;
            let mut values = Vec::with_capacity(count);
            let mut at = 0;
            for length in lengths {
                let value = std::str::from_utf8(&text[at..at + length])
                    .map_err(|_| bad("holds a value that is not UTF-8"))?;
                values.push(value.to_string());
                at += length;
            }
            slices.push((column.clone(), values));
        }
        rows += count as u64;
        each(&Scored {
            scores,
            labels,
            slices,
            unseen: Vec::new(),
        })?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(scores: &[f64], labels: &[bool], region: &[&str], key: &[&str]) -> Scored {
        let text = |values: &[&str]| values.iter().map(|v| v.to_string()).collect();
        Scored {
            scores: scores.to_vec(),
            labels: labels.to_vec(),
            slices: vec![("region".into(), text(region)), ("key".into(), text(key))],
            unseen: Vec::new(),
        }
    }

    fn written(batches: &[Scored]) -> Vec<u8> {
        let mut writer = PartRowsWriter::new(Vec::new(), 2).unwrap();
        for b in batches {
            writer.push(b).unwrap();
        }
        writer.finish().unwrap()
    }

    #[test]
    fn batches_come_back_as_they_went_in() {
        let batches = [
            batch(
                &[0.25, f64::MIN_POSITIVE],
                &[true, false],
                &["north", ""],
                &["a", "é"],
            ),
            batch(&[], &[], &[], &[]),
            batch(&[1.0], &[true], &["south"], &["c"]),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        std::fs::write(&path, written(&batches)).unwrap();
        let columns = ["region".to_string(), "key".to_string()];
        let mut back = Vec::new();
        let rows = read_each(&path, &columns, &mut |b| {
            back.push((b.scores.clone(), b.labels.clone(), b.slices.clone()));
            Ok(())
        })
        .unwrap();
        assert_eq!(rows, 3);
        let sent: Vec<_> = batches
            .iter()
            .filter(|b| !b.scores.is_empty())
            .map(|b| (b.scores.clone(), b.labels.clone(), b.slices.clone()))
            .collect();
        assert_eq!(back, sent);
    }

    #[test]
    fn a_cut_or_foreign_file_is_named() {
        let bytes = written(&[batch(&[0.5; 300], &[true; 300], &["x"; 300], &["k"; 300])]);
        let dir = tempfile::tempdir().unwrap();
        let columns = ["region".to_string(), "key".to_string()];
        for (name, bytes) in [
            ("cut", bytes[..bytes.len() - 6].to_vec()),
            ("foreign", b"PAR1 not ours".to_vec()),
            ("empty", Vec::new()),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let err = read_each(&path, &columns, &mut |_| Ok(())).unwrap_err();
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
    }

    /// A read that fails for another reason than the file's end keeps its I/O error, so that
    /// its cause (a device's error: the environment's) decides the exit, not "a bad file".
    #[test]
    fn a_read_error_that_is_not_the_end_stays_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        // Opening a folder succeeds; reading it fails with EISDIR.
        let err = read_each(dir.path(), &[], &mut |_| Ok(())).unwrap_err();
        assert!(
            matches!(
                err.downcast_ref::<InputError>(),
                Some(InputError::Io { .. })
            ),
            "{err:?}"
        );
    }
}
