//! safetensors files with one JSON metadata entry (`runfn`). One key keeps the bytes
//! deterministic (safetensors stores its metadata map unordered), so the same tensors and
//! metadata always give the same file and the same blake3.

use std::borrow::Cow;
use std::collections::HashMap;

use anyhow::{Result, anyhow, bail};
use safetensors::tensor::{Dtype, SafeTensors, View};
use tch::{Kind, Tensor};

const META_KEY: &str = "runfn";

struct OwnedView {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &OwnedView {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn view_of(tensor: &Tensor) -> Result<OwnedView> {
    let tensor = tensor.detach().to_device(tch::Device::Cpu).contiguous();
    let (dtype, width) = match tensor.kind() {
        Kind::Float => (Dtype::F32, 4),
        Kind::Double => (Dtype::F64, 8),
        Kind::Int64 => (Dtype::I64, 8),
        other => bail!("cannot store a {other:?} tensor"),
    };
    let numel = tensor.numel();
    let mut data = vec![0u8; numel * width];
    tensor.copy_data_u8(&mut data, numel);
    Ok(OwnedView {
        dtype,
        shape: tensor.size().iter().map(|&d| d as usize).collect(),
        data,
    })
}

/// The file's bytes for `tensors` and `metadata`.
pub fn encode(tensors: &[(String, &Tensor)], metadata: &serde_json::Value) -> Result<Vec<u8>> {
    let views: Vec<(String, OwnedView)> = tensors
        .iter()
        .map(|(name, t)| Ok((name.clone(), view_of(t)?)))
        .collect::<Result<_>>()?;
    let meta = HashMap::from([(META_KEY.to_string(), metadata.to_string())]);
    safetensors::tensor::serialize(views.iter().map(|(n, v)| (n.as_str(), v)), &Some(meta))
        .map_err(|e| anyhow!("encoding safetensors: {e:?}"))
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
        hasher.update(&(view.data.len() as u64).to_le_bytes());
        hasher.update(&view.data);
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// Tensors (sorted by name) and the metadata of a file's bytes; `origin` names it in errors.
pub fn decode(bytes: &[u8], origin: &str) -> Result<(Vec<(String, Tensor)>, serde_json::Value)> {
    let (_, header) = SafeTensors::read_metadata(bytes)
        .map_err(|e| anyhow!("{origin}: not a safetensors file: {e:?}"))?;
    let meta = header
        .metadata()
        .as_ref()
        .and_then(|m| m.get(META_KEY))
        .ok_or_else(|| anyhow!("{origin}: has no runfn metadata (not written by runfn)"))?;
    let meta: serde_json::Value = serde_json::from_str(meta)
        .map_err(|e| anyhow!("{origin}: runfn metadata is not JSON: {e}"))?;
    let file = SafeTensors::deserialize(bytes)
        .map_err(|e| anyhow!("{origin}: not a safetensors file: {e:?}"))?;
    let mut tensors = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let t =
                Tensor::try_from(view).map_err(|e| anyhow!("{origin}: tensor `{name}`: {e}"))?;
            Ok((name, t))
        })
        .collect::<Result<Vec<_>>>()?;
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((tensors, meta))
}
