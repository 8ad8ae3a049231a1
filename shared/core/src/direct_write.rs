//! Large files written at the disk's speed. A buffered write copies every byte into the page
//! cache and leaves the kernel to write it back; for a file of a gigabyte the `fsync` after it
//! then took 2-4 times as long as writing the same bytes with `O_DIRECT` (and the file pushed a
//! gigabyte of other pages, the training data among them, out of the cache). Here the bytes go
//! through a few aligned staging buffers, filled on the caller's thread while a second thread
//! writes the previous one to a descriptor opened with `O_DIRECT`, so copying and the device
//! overlap. The caller sees every byte once, in order, as it is staged (to hash it there).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::mpsc;

/// The alignment `O_DIRECT` asks of buffers, lengths and offsets on every common device
/// (512-byte sectors need less; 4096 covers both).
pub const ALIGN: usize = 4096;

/// Bytes per write: large enough that each write streams at the device's speed.
const CHUNK: usize = 8 << 20;

/// Staging buffers: one being filled, one being written, one spare for jitter.
const BUFFERS: usize = 3;

/// A heap block aligned for `O_DIRECT`.
struct Aligned {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the block is owned by exactly one `Aligned`, which hands it from thread to thread.
unsafe impl Send for Aligned {}

impl Aligned {
    fn new(len: usize) -> io::Result<Aligned> {
        let layout = Layout::from_size_align(len, ALIGN).map_err(io::Error::other)?;
        // SAFETY: a non-zero size with a valid power-of-two alignment.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(Aligned { ptr, len })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` initialised bytes (zeroed at allocation), owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.len, ALIGN),
            )
        }
    }
}

/// Opens `path` a second time with `O_DIRECT` and checks with one aligned block that the file
/// system takes direct writes (tmpfs and some network file systems refuse them with `EINVAL`,
/// at the open or at the first write). `None` when it does not.
fn open_direct(path: &Path) -> io::Result<Option<File>> {
    let refused = |e: &io::Error| e.raw_os_error() == Some(libc::EINVAL);
    let file = match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if refused(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut probe = Aligned::new(ALIGN)?;
    match file.write_all_at(probe.bytes(), 0) {
        Ok(()) => Ok(Some(file)),
        Err(e) if refused(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `pieces` back to back into `file` (new and empty; `path` is where it lies), calling
/// `inspect` on every byte in order. With `O_DIRECT` where the file system takes it, buffered
/// writes otherwise; either way the caller still syncs the file. The file ends at exactly the
/// pieces' length.
pub fn write_pieces(
    file: &mut File,
    path: &Path,
    pieces: &[&[u8]],
    inspect: &mut dyn FnMut(&[u8]),
) -> io::Result<()> {
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let direct = if total >= CHUNK {
        open_direct(path)?
    } else {
        None // a small file gains nothing and would pay the probe
    };
    match direct {
        Some(direct) => write_staged(&direct, pieces, inspect)?,
        None => {
            let mut out = io::BufWriter::with_capacity(1 << 20, &mut *file);
            for piece in pieces {
                io::Write::write_all(&mut out, piece)?;
                inspect(piece);
            }
            io::Write::flush(&mut out)?;
        }
    }
    // A direct write ends on a whole block: cut the zeros past the last piece (and the probe's
    // block when there were no pieces at all).
    file.set_len(total as u64)
}

/// Writes the first `len` bytes of `image` into `file` (new and empty; `path` is where it lies),
/// calling `inspect` on them in order, straight from `image` with `O_DIRECT` when it starts on
/// an [`ALIGN`] boundary and runs on past `len` to the next one (bytes that are written, then
/// cut off): no staging copy. Otherwise, or where the file system refuses direct writes, as
/// [`write_pieces`] does.
pub fn write_image(
    file: &mut File,
    path: &Path,
    image: &[u8],
    len: usize,
    inspect: &mut dyn FnMut(&[u8]),
) -> io::Result<()> {
    let whole = len.next_multiple_of(ALIGN);
    let aligned = (image.as_ptr() as usize).is_multiple_of(ALIGN) && image.len() >= whole;
    let direct = match aligned && len >= CHUNK {
        true => open_direct(path)?,
        false => None,
    };
    let Some(direct) = direct else {
        return write_pieces(file, path, &[&image[..len.min(image.len())]], inspect);
    };
    let (to_writer, ranges) = mpsc::sync_channel::<(usize, usize)>(BUFFERS);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> io::Result<()> {
            for (start, end) in ranges {
                direct.write_all_at(&image[start..end], start as u64)?;
            }
            Ok(())
        });
        let mut produced = Ok(());
        for start in (0..len).step_by(CHUNK) {
            let end = (start + CHUNK).min(len);
            inspect(&image[start..end]);
            if to_writer
                .send((start, end.next_multiple_of(ALIGN)))
                .is_err()
            {
                produced = Err(io::Error::other("the direct writer stopped"));
                break;
            }
        }
        drop(to_writer);
        let wrote = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the direct writer thread panicked")));
        wrote.and(produced)
    })?;
    file.set_len(len as u64)
}

/// The staged pipeline: this thread fills a buffer and inspects it, the writer thread writes
/// the one before. A buffer goes back to the pool once written.
fn write_staged(direct: &File, pieces: &[&[u8]], inspect: &mut dyn FnMut(&[u8])) -> io::Result<()> {
    let (to_writer, staged) = mpsc::sync_channel::<(Aligned, usize, u64)>(BUFFERS);
    let (give_back, written) = mpsc::channel::<Aligned>();
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> io::Result<()> {
            for (mut buffer, filled, offset) in staged {
                let whole = filled.next_multiple_of(ALIGN);
                buffer.bytes()[filled..whole].fill(0);
                direct.write_all_at(&buffer.bytes()[..whole], offset)?;
                if give_back.send(buffer).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let produced = produce(pieces, inspect, &to_writer, &written);
        drop(to_writer);
        let wrote = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the direct writer thread panicked")));
        // The writer's own error explains a producer that stopped because the writer did.
        wrote.and(produced)
    })
}

fn produce(
    pieces: &[&[u8]],
    inspect: &mut dyn FnMut(&[u8]),
    to_writer: &mpsc::SyncSender<(Aligned, usize, u64)>,
    written: &mpsc::Receiver<Aligned>,
) -> io::Result<()> {
    let stopped = || io::Error::other("the direct writer stopped");
    let mut fresh = BUFFERS;
    let mut next_buffer = || -> io::Result<Aligned> {
        if fresh > 0 {
            fresh -= 1;
            Aligned::new(CHUNK)
        } else {
            written.recv().map_err(|_| stopped())
        }
    };
    let mut buffer = next_buffer()?;
    let (mut filled, mut offset) = (0usize, 0u64);
    for piece in pieces {
        let mut rest = *piece;
        while !rest.is_empty() {
            let take = rest.len().min(CHUNK - filled);
            buffer.bytes()[filled..filled + take].copy_from_slice(&rest[..take]);
            inspect(&rest[..take]);
            filled += take;
            rest = &rest[take..];
            if filled == CHUNK {
                to_writer
                    .send((buffer, filled, offset))
                    .map_err(|_| stopped())?;
                offset += CHUNK as u64;
                buffer = next_buffer()?;
                filled = 0;
            }
        }
    }
    if filled > 0 {
        to_writer
            .send((buffer, filled, offset))
            .map_err(|_| stopped())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces_of(sizes: &[usize]) -> Vec<Vec<u8>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        sizes
            .iter()
            .map(|&n| {
                (0..n)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect()
            })
            .collect()
    }

    fn written(sizes: &[usize]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = File::create(&path).unwrap();
        let pieces = pieces_of(sizes);
        let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let mut seen = Vec::new();
        write_pieces(&mut file, &path, &slices, &mut |b| {
            seen.extend_from_slice(b)
        })
        .unwrap();
        file.sync_all().unwrap();
        (std::fs::read(&path).unwrap(), pieces.concat(), seen)
    }

    #[test]
    fn the_file_and_the_inspected_bytes_are_the_pieces_whatever_their_sizes() {
        for sizes in [
            &[][..],
            &[0, 1, 0][..],
            &[100, 4095, 1][..],
            &[CHUNK][..],
            &[CHUNK - 1, 2, 3 * CHUNK + 17][..],
            &[5 * CHUNK + ALIGN, 0, 777][..],
        ] {
            let (file, expected, seen) = written(sizes);
            assert_eq!(file.len(), expected.len(), "{sizes:?}");
            assert!(file == expected, "{sizes:?}: the file differs");
            assert!(seen == expected, "{sizes:?}: the inspected bytes differ");
        }
    }

    #[test]
    fn a_large_file_goes_through_o_direct_where_the_file_system_takes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        File::create(&path).unwrap();
        // The project's folders are on disks that take direct writes; tmpfs may not, and then
        // the buffered path is what the other test covers.
        if open_direct(&path).unwrap().is_none() {
            eprintln!("this file system refuses O_DIRECT; the buffered path is tested alone");
            return;
        }
        let pieces = pieces_of(&[3 * CHUNK + 5]);
        let mut file = OpenOptions::new().write(true).open(&path).unwrap();
        write_pieces(&mut file, &path, &[&pieces[0]], &mut |_| {}).unwrap();
        let cached_before_sync = resident_pages(&path);
        assert_eq!(
            cached_before_sync, 0,
            "a direct write leaves nothing in the page cache"
        );
        assert!(std::fs::read(&path).unwrap() == pieces[0]);
    }

    #[test]
    fn an_aligned_image_is_written_as_it_lies_and_cut_at_its_length() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0, 5, CHUNK, 2 * CHUNK + 4097, 3 * CHUNK - 1] {
            let mut block = Aligned::new((len + 1).next_multiple_of(ALIGN)).unwrap();
            let bytes = pieces_of(&[block.len]).remove(0);
            block.bytes().copy_from_slice(&bytes);
            let path = dir.path().join(format!("image-{len}"));
            let mut file = File::create(&path).unwrap();
            let mut seen = Vec::new();
            write_image(&mut file, &path, block.bytes(), len, &mut |b| {
                seen.extend_from_slice(b)
            })
            .unwrap();
            let written = std::fs::read(&path).unwrap();
            assert!(written == bytes[..len], "{len}: the file");
            assert!(seen == bytes[..len], "{len}: the inspected bytes");
        }
        // Not aligned: the staged path, the same bytes.
        let bytes = pieces_of(&[CHUNK + 3 * ALIGN]).remove(0);
        let path = dir.path().join("unaligned");
        let mut file = File::create(&path).unwrap();
        write_image(&mut file, &path, &bytes[1..], CHUNK + 5, &mut |_| {}).unwrap();
        assert!(std::fs::read(&path).unwrap() == bytes[1..CHUNK + 6]);
    }

    /// Pages of the file in the page cache (mincore over a mapping of it).
    fn resident_pages(path: &Path) -> usize {
        use std::os::fd::AsRawFd;
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        let page = 4096;
        let pages = len.div_ceil(page);
        let mut vec = vec![0u8; pages];
        // SAFETY: a read-only shared mapping of an open file, unmapped before returning.
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(map, libc::MAP_FAILED);
            assert_eq!(libc::mincore(map, len, vec.as_mut_ptr()), 0);
            libc::munmap(map, len);
        }
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }
}
