//! Content-addressed blobs: `blobs/ab/<64 hex>`, written atomically, then made read-only.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{RegistryError, Result};

#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
}

/// The blobs of one entry, by role.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Blobs {
    pub weights: String,
    pub record: String,
    pub manifest: String,
    pub evaluation: Option<String>,
    pub profile: Option<String>,
}

impl Blobs {
    pub fn all(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![
            ("weights", self.weights.as_str()),
            ("record", self.record.as_str()),
            ("manifest", self.manifest.as_str()),
        ];
        if let Some(h) = &self.evaluation {
            out.push(("evaluation", h));
        }
        if let Some(h) = &self.profile {
            out.push(("profile", h));
        }
        out
    }
}

impl BlobStore {
    pub fn new(dir: PathBuf) -> BlobStore {
        BlobStore { dir }
    }

    pub fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(&hash[..2.min(hash.len())]).join(hash)
    }

    /// Stores `bytes` and returns their blake3. An existing blob with the right content is kept;
    /// a damaged one is replaced.
    pub fn put(&self, bytes: &[u8]) -> Result<String> {
        let hash = blake3::hash(bytes).to_hex().to_string();
        let path = self.path(&hash);
        if self.check(&hash).is_ok() {
            return Ok(hash);
        }
        let parent = path.parent().expect("blob paths have a folder");
        std::fs::create_dir_all(parent).map_err(|source| RegistryError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
        if path.exists() {
            make_writable(&path)?;
        }
        runfn_core::atomic::write_bytes_atomic(&path, bytes)
            .map_err(|e| RegistryError::Invalid(e.to_string()))?;
        make_read_only(&path)?;
        Ok(hash)
    }

    /// Stores a file's bytes.
    pub fn put_file(&self, path: &Path) -> Result<String> {
        let bytes = std::fs::read(path).map_err(|source| RegistryError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.put(&bytes)
    }

    /// The blob's bytes, refused when they no longer hash to its name.
    pub fn read(&self, hash: &str) -> Result<Vec<u8>> {
        let path = self.path(hash);
        let bytes = std::fs::read(&path).map_err(|source| RegistryError::Io {
            path: path.clone(),
            source,
        })?;
        let actual = blake3::hash(&bytes).to_hex().to_string();
        if actual != hash {
            return Err(RegistryError::Invalid(format!(
                "{}: content hashes to {actual} (corrupt or altered)",
                path.display()
            )));
        }
        Ok(bytes)
    }

    /// Ok when the blob exists and its bytes hash to its name.
    pub fn check(&self, hash: &str) -> std::result::Result<(), String> {
        let path = self.path(hash);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let actual = blake3::hash(&bytes).to_hex().to_string();
        if actual == hash {
            Ok(())
        } else {
            Err(format!(
                "{}: content hashes to {actual} (corrupt or altered)",
                path.display()
            ))
        }
    }
}

fn make_read_only(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).map_err(|source| {
        RegistryError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

fn make_writable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).map_err(|source| {
        RegistryError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}
