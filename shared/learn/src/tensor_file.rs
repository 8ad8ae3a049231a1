//! safetensors files with one JSON metadata entry (`runfn`). One key keeps the bytes
//! deterministic (safetensors stores its metadata map unordered), so the same tensors and
//! metadata always give the same file and the same blake3.

use crate::torch_failure::torch;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use safetensors::tensor::{Dtype, SafeTensors, View};
use tch::{Kind, Tensor};

const META_KEY: &str = "runfn";

/// A tensor's bytes where they lie: a contiguous CPU tensor (the tensor itself when it is one).
struct TensorBytes {
    tensor: Tensor,
    dtype: Dtype,
    shape: Vec<usize>,
    len: usize,
}

impl TensorBytes {
    fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: a contiguous CPU tensor of `len` bytes, alive as long as `self`. Files are
        // written between training steps or from a snapshot only the writer thread holds, so
        // nothing writes to it while the slice is read.
        unsafe { std::slice::from_raw_parts(self.tensor.data_ptr().cast::<u8>(), self.len) }
    }
}

impl View for &TensorBytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.as_slice())
    }
    fn data_len(&self) -> usize {
        self.len
    }
}

/// A tensor's dtype and shape with no data: safetensors then serializes the header alone.
struct HeaderOnly<'a>(&'a TensorBytes);

impl View for HeaderOnly<'_> {
    fn dtype(&self) -> Dtype {
        self.0.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.0.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&[])
    }
    fn data_len(&self) -> usize {
        self.0.len
    }
}

fn view_of(tensor: &Tensor) -> Result<TensorBytes> {
    let tensor = tensor.detach().to_device(tch::Device::Cpu).contiguous();
    let (dtype, width) = match tensor.kind() {
        Kind::Float => (Dtype::F32, 4),
        Kind::Double => (Dtype::F64, 8),
        Kind::Int64 => (Dtype::I64, 8),
        other => bail!("cannot store a {other:?} tensor"),
    };
    Ok(TensorBytes {
        dtype,
        shape: tensor.size().iter().map(|&d| d as usize).collect(),
        len: tensor.numel() * width,
        tensor,
    })
}

fn views_of(tensors: &[(String, &Tensor)]) -> Result<Vec<(String, TensorBytes)>> {
    tensors
        .iter()
        .map(|(name, t)| Ok((name.clone(), view_of(t)?)))
        .collect()
}

fn meta_map(metadata: &serde_json::Value) -> Option<HashMap<String, String>> {
    Some(HashMap::from([(
        META_KEY.to_string(),
        metadata.to_string(),
    )]))
}

/// The file's bytes for `tensors` and `metadata`.
pub fn encode(tensors: &[(String, &Tensor)], metadata: &serde_json::Value) -> Result<Vec<u8>> {
    let views = views_of(tensors)?;
    safetensors::tensor::serialize(
        views.iter().map(|(n, v)| (n.as_str(), v)),
        &meta_map(metadata),
    )
    .map_err(|e| anyhow!("encoding safetensors: {e:?}"))
}

/// Where [`write`] hashes a file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hashing {
    /// On a thread of its own, beside the write and the fsync, which mostly wait on the kernel
    /// and the disk: a save the caller waits for then takes about as long as the write alone.
    Beside,
    /// On the writing thread: for a save in the background, where a second busy thread would
    /// only take a core from the training beside it.
    Inline,
}

/// Writes the bytes [`encode`] would give to `path` atomically, in one pass from the tensors'
/// own memory (no copy of the file in memory) through [`runfn_core::direct_write`], at the
/// disk's speed, hashing them on the way. Returns the file's length and blake3.
pub fn write(
    path: &Path,
    tensors: &[(String, &Tensor)],
    metadata: &serde_json::Value,
    hashing: Hashing,
) -> Result<(u64, blake3::Hash)> {
    let views = views_of(tensors)?;
    let header = safetensors::tensor::serialize(
        views.iter().map(|(n, v)| (n.as_str(), HeaderOnly(v))),
        &meta_map(metadata),
    )
    .map_err(|e| anyhow!("encoding safetensors: {e:?}"))?;
    // The order safetensors lays the data out in: by dtype, widest first, then by name.
    let mut order: Vec<&(String, TensorBytes)> = views.iter().collect();
    order.sort_by(|(a, x), (b, y)| y.dtype.cmp(&x.dtype).then(a.cmp(b)));
    let pieces: Vec<&[u8]> = std::iter::once(header.as_slice())
        .chain(order.iter().map(|(_, view)| view.as_slice()))
        .collect();
    let len = pieces.iter().map(|p| p.len() as u64).sum();
    let write_all = |inspect: &mut dyn FnMut(&[u8])| {
        runfn_core::atomic::write_atomic_file(path, |file, temp_path| {
            runfn_core::direct_write::write_pieces(file, temp_path, &pieces, inspect)
        })
    };
    let (written, hash) = match hashing {
        Hashing::Beside => std::thread::scope(|scope| {
            let hasher = scope.spawn(|| {
                let mut hasher = blake3::Hasher::new();
                for piece in &pieces {
                    hasher.update(piece);
                }
                hasher.finalize()
            });
            let written = write_all(&mut |_| {});
            (
                written,
                hasher
                    .join()
                    .expect("hashing a tensors file does not panic"),
            )
        }),
        Hashing::Inline => {
            let mut hasher = blake3::Hasher::new();
            let written = write_all(&mut |bytes| {
                hasher.update(bytes);
            });
            (written, hasher.finalize())
        }
    };
    written?;
    Ok((len, hash))
}

/// A tensors file's bytes in memory, laid out as [`write`] lays them out on disk, in a block
/// aligned for `O_DIRECT`: a background checkpoint copies the loop's tensors straight into their
/// places and the file is written from it as it lies, with no staging copy (on a state of a
/// gigabyte, each copy is a gigabyte read and written beside the training steps). Reused from one
/// checkpoint to the next while the tensors keep their names, shapes and kinds.
#[derive(Debug)]
pub struct FileImage {
    /// The aligned block: the file's bytes, then zeros up to the next alignment boundary.
    block: Tensor,
    len: usize,
    header: Vec<u8>,
    /// Each tensor's name, kind, shape and byte range in the file.
    places: Vec<(String, Kind, Vec<i64>, std::ops::Range<usize>)>,
}

/// The header and data layout of the file `write` makes of `tensors` and `metadata`.
type Layout = (
    Vec<u8>,
    Vec<(String, Kind, Vec<i64>, std::ops::Range<usize>)>,
);

fn layout_of(tensors: &[(String, &Tensor)], metadata: &serde_json::Value) -> Result<Layout> {
    let described = tensors
        .iter()
        .map(|(name, t)| {
            let (dtype, width) = match t.kind() {
                Kind::Float => (Dtype::F32, 4),
                Kind::Double => (Dtype::F64, 8),
                Kind::Int64 => (Dtype::I64, 8),
                other => bail!("cannot store a {other:?} tensor"),
            };
            let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
            let len = shape.iter().product::<usize>() * width;
            Ok((name.clone(), t.kind(), dtype, shape, len))
        })
        .collect::<Result<Vec<_>>>()?;
    let header = safetensors::tensor::serialize(
        described
            .iter()
            .map(|(n, _, dtype, shape, len)| (n.as_str(), Described(*dtype, shape, *len))),
        &meta_map(metadata),
    )
    .map_err(|e| anyhow!("encoding safetensors: {e:?}"))?;
    // The order safetensors lays the data out in: by dtype, widest first, then by name.
    let mut order: Vec<_> = described.iter().collect();
    order.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let mut at = header.len();
    let places = order
        .into_iter()
        .map(|(name, kind, _, shape, len)| {
            let range = at..at + len;
            at += len;
            let shape = shape.iter().map(|&d| d as i64).collect();
            (name.clone(), *kind, shape, range)
        })
        .collect();
    Ok((header, places))
}

/// A tensor's dtype, shape and length with no data: safetensors then serializes the header.
struct Described<'a>(Dtype, &'a [usize], usize);

impl View for Described<'_> {
    fn dtype(&self) -> Dtype {
        self.0
    }
    fn shape(&self) -> &[usize] {
        self.1
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&[])
    }
    fn data_len(&self) -> usize {
        self.2
    }
}

impl FileImage {
    /// An image for `tensors` and `metadata`: the header in place, the data not yet copied.
    pub fn new(tensors: &[(String, &Tensor)], metadata: &serde_json::Value) -> Result<FileImage> {
        use runfn_core::direct_write::ALIGN;
        let (header, places) = layout_of(tensors, metadata)?;
        let len = places.last().map_or(header.len(), |p| p.3.end);
        let whole = len.next_multiple_of(ALIGN);
        let raw = Tensor::empty([(whole + ALIGN) as i64], (Kind::Uint8, tch::Device::Cpu));
        let skip = (ALIGN - raw.data_ptr() as usize % ALIGN) % ALIGN;
        let block = raw.narrow(0, skip as i64, whole as i64);
        // SAFETY: a new contiguous CPU byte tensor of `whole` bytes, not yet shared.
        let bytes = unsafe { std::slice::from_raw_parts_mut(block.data_ptr().cast::<u8>(), whole) };
        bytes[..header.len()].copy_from_slice(&header);
        bytes[len..].fill(0);
        Ok(FileImage {
            block,
            len,
            header,
            places,
        })
    }

    /// Whether `tensors` with `metadata` make a file of this image's layout.
    pub fn fits(&self, tensors: &[(String, &Tensor)], metadata: &serde_json::Value) -> bool {
        layout_of(tensors, metadata)
            .is_ok_and(|(header, places)| header == self.header && places == self.places)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the block is a live, contiguous CPU byte tensor owned by this image; it is
        // written only by `new` and `fill`, which take it whole.
        unsafe {
            std::slice::from_raw_parts(self.block.data_ptr().cast::<u8>(), self.block.numel())
        }
    }

    /// Copies `tensors` (the ones the image was made for, on any device) into their places.
    pub fn fill(&mut self, tensors: &[(String, &Tensor)]) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for (name, kind, shape, range) in &self.places {
            let source = tensors
                .iter()
                .find(|(n, _)| n == name)
                .ok_or_else(|| anyhow!("tensor `{name}` is not in the checkpoint's tensors"))?
                .1;
            let mut place = self
                .block
                .f_narrow(0, range.start as i64, range.len() as i64)
                .map_err(torch)?
                .f_view_dtype(*kind)
                .map_err(torch)?
                .f_view(shape.as_slice())
                .map_err(torch)?;
            place.f_copy_(source).map_err(torch)?;
        }
        Ok(())
    }

    /// Writes the image to `path` atomically at the disk's speed, hashing it on the way.
    /// Returns the file's length and blake3: the bytes [`write`] gives for the same tensors.
    pub fn write(&self, path: &Path) -> Result<(u64, blake3::Hash)> {
        let mut hasher = blake3::Hasher::new();
        runfn_core::atomic::write_atomic_file(path, |file, temp_path| {
            runfn_core::direct_write::write_image(
                file,
                temp_path,
                self.bytes(),
                self.len,
                &mut |b| {
                    hasher.update(b);
                },
            )
        })?;
        Ok((self.len as u64, hasher.finalize()))
    }

    /// Where the block starts (to see that it is reused).
    pub fn address(&self) -> usize {
        self.block.data_ptr() as usize
    }
}

/// A digest of what a file means rather than of its bytes: the canonical JSON of `metadata`, then
/// every tensor in name order with its name, dtype, shape and data. A file can carry it in its
/// own metadata (a file cannot hold the hash of its own bytes), so a lone file is checked too.
pub fn content_blake3(
    tensors: &[(String, &Tensor)],
    metadata: &serde_json::Value,
) -> Result<String> {
    let canonical = runfn_core::canonical::to_canonical_string(metadata)
        .map_err(|e| anyhow!("metadata cannot be hashed: {e}"))?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(canonical.as_bytes());
    let mut sorted: Vec<&(String, &Tensor)> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, tensor) in sorted {
        let view = view_of(tensor)?;
        hasher.update(&(name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update(format!("{:?}{:?}", view.dtype, view.shape).as_bytes());
        hasher.update(&(view.len as u64).to_le_bytes());
        hasher.update(view.as_slice());
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// Tensors (sorted by name) and the metadata of a file's bytes; `origin` names it in errors.
pub fn decode(bytes: &[u8], origin: &str) -> Result<(Vec<(String, Tensor)>, serde_json::Value)> {
    let (entries, meta) = parse(bytes, origin)?;
    let tensors = entries
        .into_iter()
        .map(|e| {
            let data = &bytes[e.start..e.end];
            let t = Tensor::f_from_data_size(data, &e.shape, e.kind)
                .map_err(|err| anyhow!("{origin}: tensor `{}`: {err}", e.name))?;
            Ok((e.name, t))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((tensors, meta))
}

/// A file's bytes in one libtorch byte buffer. The tensors decoded from it are views of that
/// buffer (libtorch counts their references to it), so loading never copies a tensor.
#[derive(Debug)]
pub struct Buffer {
    bytes: Tensor,
    len: usize,
}

/// Below this a file is hashed on one thread: splitting it costs more than it saves.
const PARALLEL_HASH_BYTES: usize = 4 << 20;

/// Bytes read and hashed at a time when a file is copied: the hash reads each piece while it
/// is still in cache.
const PIECE: usize = 1 << 20;

impl Buffer {
    /// The file at `path` and its blake3. The file is mapped, privately and read-only in
    /// effect, by libtorch's own allocator, so its pages come straight from the page cache:
    /// reading it into a new buffer cost a copy and a fault and a zeroing per page, about half
    /// of a load. libtorch checks the size against the file it opened, so a file replaced by a
    /// shorter one between the stat and the map is an error, not a fault. Checkpoint files are
    /// only ever replaced by a rename, never rewritten in place, so the mapping stays valid.
    pub fn read(path: &Path) -> std::io::Result<(Buffer, blake3::Hash)> {
        let len = usize::try_from(std::fs::metadata(path)?.len()).map_err(std::io::Error::other)?;
        let mapped = match path.to_str() {
            Some(name) if len > 0 => {
                Tensor::f_from_file(name, false, len as i64, (Kind::Uint8, tch::Device::Cpu)).ok()
            }
            _ => None,
        };
        let Some(bytes) = mapped else {
            return Self::read_copy(path);
        };
        let buffer = Buffer { bytes, len };
        let mut hasher = blake3::Hasher::new();
        if len >= PARALLEL_HASH_BYTES {
            hasher.update_rayon(buffer.as_slice());
        } else {
            hasher.update(buffer.as_slice());
        }
        Ok((buffer, hasher.finalize()))
    }

    /// [`Buffer::read`] by copying the file into a new buffer: for an empty file, a path that
    /// is not UTF-8 (libtorch takes a string) or a file system that cannot be mapped.
    fn read_copy(path: &Path) -> std::io::Result<(Buffer, blake3::Hash)> {
        let mut file = std::fs::File::open(path)?;
        let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
        let bytes = Tensor::empty([len as i64], (Kind::Uint8, tch::Device::Cpu));
        let mut hasher = blake3::Hasher::new();
        if len > 0 {
            // SAFETY: a new contiguous CPU tensor of `len` bytes, owned here and not yet shared.
            let slice =
                unsafe { std::slice::from_raw_parts_mut(bytes.data_ptr().cast::<u8>(), len) };
            for piece in slice.chunks_mut(PIECE) {
                file.read_exact(piece)?;
                hasher.update(piece);
            }
        }
        Ok((Buffer { bytes, len }, hasher.finalize()))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the buffer is alive as long as `self`; nothing writes to it after `read`
        // (the views `decode` hands out are read by their callers, never written).
        unsafe { std::slice::from_raw_parts(self.bytes.data_ptr().cast::<u8>(), self.len) }
    }

    /// [`decode`], each tensor a view of the buffer rather than a copy (a copy only where a
    /// foreign file's data is not aligned for its dtype).
    pub fn decode(&self, origin: &str) -> Result<(Vec<(String, Tensor)>, serde_json::Value)> {
        let bytes = self.as_slice();
        let (entries, meta) = parse(bytes, origin)?;
        let tensors = entries
            .into_iter()
            .map(|e| {
                let view = self
                    .bytes
                    .narrow(0, e.start as i64, (e.end - e.start) as i64)
                    .f_view_dtype(e.kind)
                    .and_then(|t| t.f_reshape(&e.shape));
                let t = match view {
                    Ok(t) => t,
                    Err(_) => Tensor::f_from_data_size(&bytes[e.start..e.end], &e.shape, e.kind)
                        .map_err(|err| anyhow!("{origin}: tensor `{}`: {err}", e.name))?,
                };
                Ok((e.name, t))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((tensors, meta))
    }
}

/// One tensor of a file: where its data lies in the file's bytes.
struct Entry {
    name: String,
    kind: Kind,
    shape: Vec<i64>,
    start: usize,
    end: usize,
}

/// The tensors (sorted by name) and the runfn metadata of a file's header, checked by
/// safetensors against the length of `bytes`.
fn parse(bytes: &[u8], origin: &str) -> Result<(Vec<Entry>, serde_json::Value)> {
    let (header_len, header) = SafeTensors::read_metadata(bytes)
        .map_err(|e| anyhow!("{origin}: not a safetensors file: {e:?}"))?;
    let meta = header
        .metadata()
        .as_ref()
        .and_then(|m| m.get(META_KEY))
        .ok_or_else(|| anyhow!("{origin}: has no runfn metadata (not written by runfn)"))?;
    let meta: serde_json::Value = serde_json::from_str(meta)
        .map_err(|e| anyhow!("{origin}: runfn metadata is not JSON: {e}"))?;
    let data_start = 8 + header_len;
    let mut entries = header
        .tensors()
        .into_iter()
        .map(|(name, info)| {
            let kind = match info.dtype {
                Dtype::F32 => Kind::Float,
                Dtype::F64 => Kind::Double,
                Dtype::I64 => Kind::Int64,
                other => bail!("{origin}: tensor `{name}`: unsupported dtype {other:?}"),
            };
            let (start, end) = info.data_offsets;
            Ok(Entry {
                shape: info.shape.iter().map(|&d| d as i64).collect(),
                name,
                kind,
                start: data_start + start,
                end: data_start + end,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((entries, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_decodes_to_views_with_the_values_a_copy_has() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let a = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 4.0, 5.0, 6.0]).view([2, 3]);
        let b = Tensor::from_slice(&[7i64, 8, 9]);
        let c = Tensor::from_slice(&[0.1f64]);
        let meta = serde_json::json!({"k": 1});
        let bytes = encode(
            &[("a".into(), &a), ("b".into(), &b), ("c".into(), &c)],
            &meta,
        )
        .unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let (buffer, hash) = Buffer::read(&path).unwrap();
        assert_eq!(buffer.len(), bytes.len());
        assert_eq!(hash, blake3::hash(&bytes));
        let (views, back) = buffer.decode("t").unwrap();
        let (copies, _) = decode(&bytes, "t").unwrap();
        assert_eq!(back, meta);
        for ((vn, v), (cn, c)) in views.iter().zip(&copies) {
            assert_eq!(vn, cn);
            assert_eq!((v.kind(), v.size()), (c.kind(), c.size()));
            assert!(v.equal(c), "{vn}");
        }
        assert_eq!(
            views[0].1.data_ptr() as usize,
            buffer.bytes.data_ptr() as usize + views_offset(&bytes, "a"),
            "a view of the buffer, not a copy"
        );
        drop(buffer);
        assert!(
            views[1].1.equal(&b),
            "a view outlives the buffer it was cut from"
        );
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let err = Buffer::read(&path)
            .unwrap()
            .0
            .decode("t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a safetensors file"), "{err}");
    }

    #[test]
    fn a_mapped_read_equals_a_copied_one_and_a_short_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.safetensors");
        // Past the size that is hashed in parallel, so both hashes are exercised.
        let big = Tensor::arange(3 << 20, (Kind::Float, tch::Device::Cpu));
        let (len, hash) = write(
            &path,
            &[("w".into(), &big)],
            &serde_json::json!({}),
            Hashing::Beside,
        )
        .unwrap();
        assert!(len as usize > PARALLEL_HASH_BYTES);
        let (mapped, mapped_hash) = Buffer::read(&path).unwrap();
        let (copied, copied_hash) = Buffer::read_copy(&path).unwrap();
        assert_eq!((mapped_hash, copied_hash), (hash, hash));
        assert_eq!(mapped.as_slice(), copied.as_slice());
        let (tensors, _) = mapped.decode("big").unwrap();
        drop(mapped);
        std::fs::remove_file(&path).unwrap();
        assert!(
            tensors[0].1.equal(&big),
            "views outlive the buffer and the file's name"
        );
        // libtorch checks the size against the file it opened: an error, never a fault.
        std::fs::write(&path, b"short").unwrap();
        let short = Tensor::f_from_file(
            path.to_str().unwrap(),
            false,
            1 << 20,
            (Kind::Uint8, tch::Device::Cpu),
        );
        assert!(short.is_err(), "a mapping past the end of the file");
    }

    /// Tensors of every stored kind, one strided, named out of their file order, and `more`.
    fn mixed(more: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
        let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).view([2, 2]);
        let mut tensors = vec![
            ("a.t".to_string(), w.transpose(0, 1)),
            ("w".to_string(), w),
            ("b.steps".to_string(), Tensor::from_slice(&[3i64, 1])),
            ("z".to_string(), Tensor::from_slice(&[0.5f64])),
        ];
        tensors.extend(more);
        tensors
    }

    fn named(tensors: &[(String, Tensor)]) -> Vec<(String, &Tensor)> {
        tensors.iter().map(|(n, t)| (n.clone(), t)).collect()
    }

    #[test]
    fn write_streams_the_bytes_encode_gives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let owned = mixed(Vec::new());
        let tensors = named(&owned);
        let meta = serde_json::json!({"format": "x"});
        let (len, hash) = write(&path, &tensors, &meta, Hashing::Inline).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes, encode(&tensors, &meta).unwrap());
        assert_eq!((len, hash), (bytes.len() as u64, blake3::hash(&bytes)));
        let (back, _) = decode(&bytes, "t").unwrap();
        assert_eq!(back[0].0, "a.t");
        assert!(
            back[0].1.equal(&owned[0].1.contiguous()),
            "a strided tensor is stored in order"
        );
    }

    #[test]
    fn an_image_writes_the_bytes_encode_gives_and_is_refilled_in_place() {
        let dir = tempfile::tempdir().unwrap();
        // Past one direct-write chunk, so the image goes out through O_DIRECT where it can.
        let big = Tensor::arange(3 << 20, (Kind::Float, tch::Device::Cpu));
        let owned = mixed(vec![("big".to_string(), big.shallow_clone())]);
        let tensors = named(&owned);
        let meta = serde_json::json!({"format": "x"});
        let mut image = FileImage::new(&tensors, &meta).unwrap();
        assert_eq!(image.address() % runfn_core::direct_write::ALIGN, 0);
        for round in 0..2 {
            image.fill(&tensors).unwrap();
            let path = dir.path().join(format!("image-{round}.safetensors"));
            let (len, hash) = image.write(&path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let expected = encode(&tensors, &meta).unwrap();
            assert!(
                bytes == expected,
                "round {round}: the file differs from encode's"
            );
            assert_eq!((len, hash), (bytes.len() as u64, blake3::hash(&bytes)));
            let _ = big.shallow_clone().g_add_scalar_(1.0);
        }
        assert!(image.fits(&tensors, &meta));
        let other = [("w".to_string(), &owned[2].1)];
        assert!(!image.fits(&other, &meta), "another kind is another layout");
    }

    fn views_offset(bytes: &[u8], name: &str) -> usize {
        let (entries, _) = parse(bytes, "t").unwrap();
        entries.iter().find(|e| e.name == name).unwrap().start
    }
}
