//! Content-addressed blobs: `blobs/ab/<64 hex>`, written atomically, then made read-only.
//!
//! With a store behind it (`RUNFN_REGISTRY_BLOBS=s3://bucket/prefix`, remembered in the
//! registry's `blob-store` file), every blob is also uploaded to `<prefix>/ab/<64 hex>` and the
//! local folder is a cache: a blob missing here is downloaded and checked against its name. A
//! blob's object appears whole (one PUT, or a completed multipart upload) before the SQLite
//! index, which stays a local file, refers to it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::io::Read;

use runfn_core::side_file::MODEL_LIMIT;

use crate::{RegistryError, Result};

#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
    store: Option<runfn_storage::Remote>,
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
    /// An outside program's scores file the entry was evaluated and gated on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<String>,
    /// How to read the weights blob when it is not runfn's safetensors model: an outside
    /// trainer's artifact (`external_train.format`: pickle, onnx, xgboost-json, torchscript).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_format: Option<String>,
    /// What trained that artifact (`external_train.framework`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
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
        if let Some(h) = &self.scores {
            out.push(("scores", h));
        }
        out
    }
}

impl BlobStore {
    pub fn new(dir: PathBuf) -> BlobStore {
        BlobStore { dir, store: None }
    }

    /// Blobs kept in `store` too, with `dir` as their local cache.
    pub fn with_store(dir: PathBuf, store: runfn_storage::Remote) -> BlobStore {
        BlobStore {
            dir,
            store: Some(store),
        }
    }

    /// The store URL behind the blobs, if any.
    pub fn store_url(&self) -> Option<String> {
        self.store.as_ref().map(runfn_storage::Remote::url)
    }

    fn relative(hash: &str) -> String {
        format!("{}/{hash}", &hash[..2.min(hash.len())])
    }

    /// Where the blob named `hash` lives. A name that is not a content address (64 lowercase
    /// hex digits) gets a path that cannot exist, so an index edited to name `../../etc/passwd`
    /// never reads outside the blobs folder: the checks then say the name is no blake3.
    pub fn path(&self, hash: &str) -> PathBuf {
        if !is_content_address(hash) {
            return self.dir.join("not-a-content-address");
        }
        self.dir.join(&hash[..2]).join(hash)
    }

    /// Where a reader finds the blob: its store URL when there is a store, else its path.
    pub fn location(&self, hash: &str) -> String {
        match &self.store {
            Some(store) => store.join(&Self::relative(hash)).url(),
            None => self.path(hash).display().to_string(),
        }
    }

    /// The blob as a local file, downloaded from the store when this machine lacks it (or its
    /// copy no longer hashes to its name). Without a store the path is returned as it is: the
    /// reader checks what it reads.
    pub fn fetch(&self, hash: &str) -> Result<PathBuf> {
        if !is_content_address(hash) {
            return Err(RegistryError::Invalid(not_a_content_address(hash)));
        }
        let path = self.path(hash);
        let Some(store) = &self.store else {
            return Ok(path);
        };
        if self.check_local(hash).is_ok() {
            return Ok(path);
        }
        if path.exists() {
            make_writable(&path)?;
        }
        store.join(&Self::relative(hash)).download(&path)?;
        make_read_only(&path)?;
        self.check_local(hash).map_err(RegistryError::Invalid)?;
        Ok(path)
    }

    /// Uploads the local blob to the store unless an object of its size is already there
    /// (content-addressed: the same name is the same bytes).
    fn publish(&self, hash: &str) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let object = store.join(&Self::relative(hash));
        let path = self.path(hash);
        let size = std::fs::metadata(&path)
            .map_err(|source| RegistryError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        if object.head()?.is_some_and(|e| e.size == size) {
            return Ok(());
        }
        object.upload_file(&path)?;
        Ok(())
    }

    /// Stores `bytes` and returns their blake3. An existing blob with the right content is kept;
    /// a damaged one is replaced.
    pub fn put(&self, bytes: &[u8]) -> Result<String> {
        let hash = blake3::hash(bytes).to_hex().to_string();
        let path = self.path(&hash);
        if self.check_local(&hash).is_ok() {
            self.publish(&hash)?;
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
        runfn_core::atomic::write_bytes_atomic(&path, bytes).map_err(from_input)?;
        make_read_only(&path)?;
        self.publish(&hash)?;
        Ok(hash)
    }

    /// Stores a file's bytes, streamed (a model of many gigabytes is never held in memory). Only
    /// a regular file of at most [`MODEL_LIMIT`] bytes is read: a FIFO would block for ever and
    /// `/dev/zero` would never end. A file that changes while it is copied is refused.
    pub fn put_file(&self, source: &Path) -> Result<String> {
        let hash =
            runfn_core::side_file::blake3_bounded(source, MODEL_LIMIT).map_err(from_input)?;
        if self.check_local(&hash).is_ok() {
            self.publish(&hash)?;
            return Ok(hash);
        }
        let path = self.path(&hash);
        let parent = path.parent().expect("blob paths have a folder");
        std::fs::create_dir_all(parent).map_err(|source| RegistryError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
        // A registration killed while it copied a model left a full-size hidden temp file here;
        // the folder holds only blobs and their temps.
        runfn_core::atomic::remove_stale_temps(parent, ".");
        if path.exists() {
            make_writable(&path)?;
        }
        let io = |e: std::io::Error| RegistryError::Io {
            path: source.to_path_buf(),
            source: e,
        };
        let mut file = std::fs::File::open(source).map_err(io)?;
        runfn_core::atomic::write_atomic(&path, |out| {
            std::io::copy(&mut (&mut file).take(MODEL_LIMIT + 1), out).map(drop)
        })
        .map_err(from_input)?;
        // A file its owner kept private (0600) stays private in the registry: the blob keeps the
        // read bits the source had, and loses every write bit.
        let readable = {
            use std::os::unix::fs::PermissionsExt;
            file.metadata().map_err(io)?.permissions().mode() & 0o444
        };
        set_mode(&path, readable | 0o400)?;
        if let Err(problem) = self.check_local(&hash) {
            let _ = make_writable(&path).and_then(|()| {
                std::fs::remove_file(&path).map_err(|source| RegistryError::Io {
                    path: path.clone(),
                    source,
                })
            });
            return Err(RegistryError::Invalid(format!(
                "{}: changed while it was copied into the registry ({problem})",
                source.display()
            )));
        }
        self.publish(&hash)?;
        Ok(hash)
    }

    /// The blob's bytes, refused when they no longer hash to its name.
    pub fn read(&self, hash: &str) -> Result<Vec<u8>> {
        let path = self.fetch(hash)?;
        let bytes = runfn_core::side_file::read_bounded(&path, MODEL_LIMIT).map_err(from_input)?;
        let actual = blake3::hash(&bytes).to_hex().to_string();
        if actual != hash {
            return Err(RegistryError::Invalid(format!(
                "{}: content hashes to {actual} (corrupt or altered)",
                path.display()
            )));
        }
        Ok(bytes)
    }

    /// `Ok(Ok(()))` when the blob exists and its bytes hash to its name; with a store, the
    /// store's copy must exist too (with the local copy's size), and a blob only the store has
    /// is downloaded and checked. `Ok(Err(problem))` says what is wrong with the blob. A store
    /// that cannot be reached, or a disk that fails while reading, is the `Err`: the
    /// environment failed and the blob was not judged (exit 4, not a broken blob).
    pub fn check(&self, hash: &str) -> Result<std::result::Result<(), String>> {
        let Some(store) = &self.store else {
            return judged(self.check_local_typed(hash));
        };
        let object = store.join(&Self::relative(hash));
        let entry = match object.head() {
            Ok(entry) => entry,
            Err(err) => return judged(Err(RegistryError::Store(err))),
        };
        let Some(entry) = entry else {
            return Ok(Err(format!("{}: missing from the store", object.url())));
        };
        if let Err(problem) = judged(self.fetch(hash))? {
            return Ok(Err(problem));
        }
        let local = std::fs::metadata(self.path(hash)).map_or(0, |m| m.len());
        if local != entry.size {
            return Ok(Err(format!(
                "{}: {} bytes in the store, {local} here",
                object.url(),
                entry.size
            )));
        }
        Ok(Ok(()))
    }

    /// `check_local`, with a read's own error kept whole, so that an I/O error of the device
    /// stays the environment's.
    fn check_local_typed(&self, hash: &str) -> Result<()> {
        if !is_content_address(hash) {
            return Err(RegistryError::Invalid(not_a_content_address(hash)));
        }
        let path = self.path(hash);
        let actual =
            runfn_core::side_file::blake3_bounded(&path, MODEL_LIMIT).map_err(from_input)?;
        if actual == hash {
            Ok(())
        } else {
            Err(RegistryError::Invalid(format!(
                "{}: content hashes to {actual} (corrupt or altered)",
                path.display()
            )))
        }
    }

    fn check_local(&self, hash: &str) -> std::result::Result<(), String> {
        self.check_local_typed(hash).map_err(|e| e.to_string())
    }
}

/// A check's outcome: the environment's failure stays the error; any other is the blob's
/// problem, in words.
fn judged<T>(outcome: Result<T>) -> Result<std::result::Result<T, String>> {
    match outcome {
        Ok(value) => Ok(Ok(value)),
        Err(err) if runfn_core::retryable::cause_in_chain(&err).is_some() => Err(err),
        Err(err) => Ok(Err(err.to_string())),
    }
}

/// A blob's name: the 64 lowercase hex digits of its blake3.
pub fn is_content_address(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn not_a_content_address(name: &str) -> String {
    format!(
        "`{}` is not a content address (64 lowercase hex digits of a blake3)",
        runfn_core::error::shown(&name.escape_debug().to_string())
    )
}

/// A bounded read's error as the registry's: an I/O failure stays one (its kind decides the
/// exit code), and so does every other, kept whole (a refused file is bad input, exit 2; a
/// store's failure inside it may be the environment's).
fn from_input(error: runfn_core::InputError) -> RegistryError {
    match error {
        runfn_core::InputError::Io { path, source } => RegistryError::Io { path, source },
        other => RegistryError::Input(other),
    }
}

fn make_read_only(path: &Path) -> Result<()> {
    set_mode(path, 0o444)
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
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
