//! What an alias such as `churn@prod` points at and how it moved, read from the registry (its
//! entries and its append-only alias history), so a page can say whether a night moved it.

use std::path::{Path, PathBuf};

use runfn_registry::{AliasMove, Entry, ModelRef, Registry, RegistryError};
use serde::Serialize;

/// An alias read from the registry. A registry that is not there is no error (nothing serves
/// yet); one that cannot be read says why in `error`, and the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasLog {
    pub model: String,
    pub alias: String,
    pub registry: PathBuf,
    /// Whether the registry exists (an `index.sqlite` in its folder).
    pub found: bool,
    pub error: Option<String>,
    /// The version it points at now; `None` when it points nowhere.
    pub version: Option<i64>,
    /// Its moves, oldest first.
    pub moves: Vec<AliasMove>,
    /// Every entry of the model, by version.
    #[serde(skip)]
    pub entries: Vec<Entry>,
}

impl AliasLog {
    /// Reads `model@alias` from the registry in `dir`. Only a registry that exists is opened
    /// (opening creates one, and a report must not).
    pub fn read(dir: &Path, model: &str, alias: &str) -> AliasLog {
        let mut log = AliasLog {
            model: model.to_string(),
            alias: alias.to_string(),
            registry: dir.to_path_buf(),
            found: dir.join("index.sqlite").is_file(),
            error: None,
            version: None,
            moves: Vec::new(),
            entries: Vec::new(),
        };
        if !log.found {
            return log;
        }
        if let Err(err) = log.fill(dir) {
            log.error = Some(err.to_string());
        }
        log
    }

    fn fill(&mut self, dir: &Path) -> Result<(), RegistryError> {
        let registry = Registry::open_read_only(dir)?;
        let reference = ModelRef::parse(&self.name())?;
        self.version = match registry.resolve(&reference) {
            Ok(entry) => Some(entry.version),
            Err(RegistryError::NotFound(_)) => None,
            Err(err) => return Err(err),
        };
        self.moves = registry
            .alias_history(&self.model)?
            .into_iter()
            .filter(|m| m.alias == self.alias)
            .collect();
        self.entries = registry.list(Some(&self.model))?;
        Ok(())
    }

    /// `churn@prod`.
    pub fn name(&self) -> String {
        format!("{}@{}", self.model, self.alias)
    }

    /// The first move that pointed the alias at `version`: its registration's, when it was
    /// promoted as it was registered (a later move back to it is a rollback).
    pub fn move_to(&self, version: i64) -> Option<&AliasMove> {
        self.moves.iter().find(|m| m.to_version == version)
    }
}

/// `version 2`, or `none` for an alias that pointed nowhere.
pub fn version_words(version: Option<i64>) -> String {
    version.map_or_else(|| "none".into(), |v| format!("version {v}"))
}

/// `1 → 2 at 2026-12-03T03:17:31.801Z (promoted at registration)`.
pub fn describe_move(m: &AliasMove) -> String {
    format!(
        "{} → {} at {}{}",
        version_words(m.from_version),
        version_words(Some(m.to_version)),
        m.at,
        m.reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    )
}
