//! A reader that hashes the bytes it passes on: a file read for its rows is digested in the
//! same pass (see `runfn_manifest::digest::Listing`). Hashing the snapshot first, on its own,
//! read every byte twice and took a tenth of a shardify run on a 1 GiB CSV, most of it with
//! the second core idle while the mapped windows faulted in.

use std::io::Read;
use std::sync::{Arc, OnceLock};

use runfn_manifest::digest::KnownHash;

/// Where a file's hash and length appear once its reader has read it to the end; empty if the
/// reader stopped before (the digest then hashes the file itself).
pub type ReadHash = Arc<OnceLock<KnownHash>>;

#[derive(Debug)]
pub struct HashingReader<R> {
    inner: R,
    hasher: blake3::Hasher,
    done: ReadHash,
}

impl<R> HashingReader<R> {
    pub fn new(inner: R, done: ReadHash) -> HashingReader<R> {
        HashingReader {
            inner,
            hasher: blake3::Hasher::new(),
            done,
        }
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        if read == 0 && !buf.is_empty() {
            // The end of the file; a second end changes nothing.
            let _ = self.done.set((self.hasher.finalize(), self.hasher.count()));
        } else {
            self.hasher.update(&buf[..read]);
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash appears at the end only, and is the hash of every byte passed on, however
    /// the reads were cut.
    #[test]
    fn the_hash_covers_every_byte_read_and_appears_at_the_end() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let done = ReadHash::default();
        let mut reader = HashingReader::new(bytes.as_slice(), done.clone());
        let mut buf = [0u8; 4099];
        let mut seen = Vec::new();
        loop {
            let read = reader.read(&mut buf[..(seen.len() % 4096) + 3]).unwrap();
            if read == 0 {
                break;
            }
            assert!(done.get().is_none());
            seen.extend_from_slice(&buf[..read]);
        }
        assert_eq!(seen, bytes);
        assert_eq!(
            done.get(),
            Some(&(blake3::hash(&bytes), bytes.len() as u64))
        );
    }
}
