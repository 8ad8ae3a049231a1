//! The SQLite index of entries, aliases and alias history.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::blobs::{BlobStore, Blobs};
use crate::names::{ModelRef, validate_name};
use crate::{RegistryError, Result};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    weights_blake3 TEXT NOT NULL,
    manifest_hash TEXT NOT NULL,
    snapshot TEXT,
    code_commit TEXT,
    image TEXT,
    metrics TEXT NOT NULL,
    gate TEXT NOT NULL,
    ungated_reason TEXT,
    blobs TEXT NOT NULL,
    created_at TEXT NOT NULL,
    tags TEXT,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS aliases (
    name TEXT NOT NULL,
    alias TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (name, alias),
    FOREIGN KEY (name, version) REFERENCES entries (name, version)
);
CREATE TABLE IF NOT EXISTS alias_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    alias TEXT NOT NULL,
    from_version INTEGER,
    to_version INTEGER NOT NULL,
    at TEXT NOT NULL,
    reason TEXT
);
";

#[derive(Debug)]
pub struct Registry {
    dir: PathBuf,
    db_path: PathBuf,
    conn: Connection,
    pub blobs: BlobStore,
    /// A test's fault, never set in a real run (only the tests' `register-with-faults` sets it):
    /// a registration, once its blobs are stored and before its index transaction, creates
    /// this file and sleeps a minute, so a test can SIGKILL it at exactly that moment.
    pub pause_after_blobs: Option<PathBuf>,
}

/// What `register` did: the entry, and whether it is new (false: the same record was
/// registered before, and that entry is returned unchanged).
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub entry: Entry,
    pub added: bool,
}

/// What a registration supplies (the model and its lineage); the version and time are assigned
/// inside the transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEntry {
    pub name: String,
    pub weights_blake3: String,
    pub manifest_hash: String,
    pub snapshot: Option<String>,
    pub code_commit: Option<String>,
    pub image: Option<String>,
    pub metrics: Value,
    pub gate: Value,
    pub ungated_reason: Option<String>,
    pub blobs: Blobs,
    /// The manifest's `tags` (a team's own metadata: owner, ticket); none for entries
    /// registered before tags were kept.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tags: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(flatten)]
    pub lineage: NewEntry,
    pub version: i64,
    pub created_at: String,
    /// Aliases pointing at this entry now.
    pub aliases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AliasMove {
    pub name: String,
    pub alias: String,
    pub from_version: Option<i64>,
    pub to_version: i64,
    pub at: String,
    pub reason: Option<String>,
}

/// Something `verify` found wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub entry: String,
    pub blob: String,
    pub problem: String,
}

impl Registry {
    /// Where an entry's index row disagrees with the blobs it names.
    fn lineage_problems(&self, entry: &Entry) -> Vec<String> {
        let lineage = &entry.lineage;
        let mut problems = Vec::new();
        if lineage.weights_blake3 != lineage.blobs.weights {
            problems.push(format!(
                "weights_blake3 {} is not the weights blob {}",
                lineage.weights_blake3, lineage.blobs.weights
            ));
        }
        let record: Value = match self
            .blobs
            .read(&lineage.blobs.record)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        {
            Some(record) => record,
            None => {
                problems.push("the record blob is not a JSON run record".into());
                return problems;
            }
        };
        let recorded = record
            .pointer("/train/weights_blake3")
            .or_else(|| record.pointer("/external_train/artifact_blake3"))
            .and_then(Value::as_str);
        if recorded.is_some_and(|w| w != lineage.weights_blake3) {
            problems.push(format!(
                "weights_blake3 {} is not the weights its record trained ({})",
                lineage.weights_blake3,
                recorded.unwrap_or_default()
            ));
        }
        let manifest_hash = record.get("manifest_hash").and_then(Value::as_str);
        if manifest_hash.is_some_and(|m| m != lineage.manifest_hash) {
            problems.push(format!(
                "manifest_hash {} is not its record's ({})",
                lineage.manifest_hash,
                manifest_hash.unwrap_or_default()
            ));
        }
        problems
    }
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// How long a registration waits for another one's write lock before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection that only reads `db_path`. A WAL database is read through its shared-memory file,
/// which a read-only folder without one cannot get: there nothing can be writing, so the file is
/// then read as the immutable file it is.
fn read_only_connection(db_path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db_path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let readable = |conn: &Connection| {
        conn.query_row("SELECT count(*) FROM entries", [], |row| {
            row.get::<_, i64>(0)
        })
    };
    match readable(&conn) {
        Ok(_) => Ok(conn),
        Err(_) => {
            let uri = format!("file:{}?immutable=1", uri_path(db_path));
            let conn = Connection::open_with_flags(&uri, flags | OpenFlags::SQLITE_OPEN_URI)?;
            readable(&conn)?;
            Ok(conn)
        }
    }
}

/// `path` as the path part of an SQLite `file:` URI: `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

/// Opens the index, switched to WAL and with its schema. Concurrent registrations queue on the
/// write lock (the busy timeout). SQLite does not call the busy handler everywhere: while the
/// first process creates the file and switches it to WAL, another one's `journal_mode` pragma or
/// first transaction can fail at once with "database is locked" (seen with eight registrations
/// into a new registry on a loaded machine), so the whole set-up is retried until the same limit.
fn connect(db_path: &Path) -> rusqlite::Result<Connection> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match try_connect(db_path) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn try_connect(db_path: &Path) -> rusqlite::Result<Connection> {
    let mut conn = Connection::open(db_path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    add_missing_columns(&tx)?;
    tx.commit()?;
    Ok(conn)
}

/// Columns added since the first registries were made, added to a registry that lacks them
/// (its entries read them as empty): `tags`, the manifest's tags as JSON.
fn add_missing_columns(tx: &rusqlite::Transaction) -> rusqlite::Result<()> {
    let has_tags: bool = tx.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('entries') WHERE name = 'tags'",
        [],
        |row| row.get(0),
    )?;
    if !has_tags {
        tx.execute_batch("ALTER TABLE entries ADD COLUMN tags TEXT")?;
    }
    Ok(())
}

/// The file in a registry that names the store its blobs are kept in.
pub const BLOB_STORE_FILE: &str = "blob-store";

/// The registry's blobs: local, or in the store that `RUNFN_REGISTRY_BLOBS` names (remembered in
/// `dir/blob-store` the first time, so every later reader finds the blobs without the variable;
/// a different store for the same registry is refused).
fn blob_store(dir: &Path, writable: bool) -> Result<BlobStore> {
    let file = dir.join(BLOB_STORE_FILE);
    let remembered = match std::fs::read_to_string(&file) {
        Ok(text) => Some(text.trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(RegistryError::Io { path: file, source }),
    };
    let asked = std::env::var("RUNFN_REGISTRY_BLOBS")
        .ok()
        .map(|v| v.trim().trim_end_matches('/').to_string())
        .filter(|v| !v.is_empty());
    let url = match (remembered, asked) {
        (Some(old), Some(new)) if old != new => {
            return Err(RegistryError::Invalid(format!(
                "RUNFN_REGISTRY_BLOBS is {new}, but the registry in {} keeps its blobs in {old} \
                 ({}); unset it or use another registry",
                dir.display(),
                file.display()
            )));
        }
        (Some(url), _) => Some(url),
        (None, Some(url)) => {
            if writable {
                runfn_core::atomic::write_bytes_atomic(&file, format!("{url}\n").as_bytes())?;
            }
            Some(url)
        }
        (None, None) => None,
    };
    let local = dir.join("blobs");
    match url {
        Some(url) => {
            let store = runfn_storage::Remote::parse(&url)
                .map_err(|e| RegistryError::Invalid(format!("{}: {e}", file.display())))?;
            Ok(BlobStore::with_store(local, store))
        }
        None => Ok(BlobStore::new(local)),
    }
}

impl Registry {
    /// Opens (creating when absent) the registry in `dir`.
    pub fn open(dir: &Path) -> Result<Registry> {
        std::fs::create_dir_all(dir).map_err(|source| RegistryError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let db_path = dir.join("index.sqlite");
        let sql = |source| RegistryError::sql(&db_path, source);
        let conn = connect(&db_path).map_err(sql)?;
        Ok(Registry {
            dir: dir.to_path_buf(),
            blobs: blob_store(dir, true)?,
            db_path,
            conn,
            pause_after_blobs: None,
        })
    }

    /// Opens the registry in `dir` for commands that only read it (resolve, list, verify, and
    /// the tools that score or compare with a registered model): it must exist, and nothing is
    /// written, so a registry on a read-only mount can be read.
    pub fn open_read_only(dir: &Path) -> Result<Registry> {
        let db_path = dir.join("index.sqlite");
        if !db_path.is_file() {
            return Err(RegistryError::NotFound(format!(
                "no registry at {} (no index.sqlite there)",
                dir.display()
            )));
        }
        let conn = read_only_connection(&db_path)
            .map_err(|source| RegistryError::sql(&db_path, source))?;
        Ok(Registry {
            dir: dir.to_path_buf(),
            blobs: blob_store(dir, false)?,
            db_path,
            conn,
            pause_after_blobs: None,
        })
    }

    /// Opens the registry in `dir` for commands that only read it: a registry that does not exist
    /// is an error, never created (an empty one made by a typo would verify clean).
    pub fn open_existing(dir: &Path) -> Result<Registry> {
        if !dir.join("index.sqlite").is_file() {
            return Err(RegistryError::NotFound(format!(
                "no registry at {} (no index.sqlite there)",
                dir.display()
            )));
        }
        Registry::open(dir)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `work` in an IMMEDIATE transaction (the write lock is taken up front, so two writers
    /// queue instead of deadlocking on an upgrade) and commits when it returns `Ok(Ok(_))`; the
    /// inner result carries a refusal that rolls back.
    fn write<T>(
        &mut self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<Result<T>>,
    ) -> Result<Result<T>> {
        let db_path = self.db_path.clone();
        let sql = |source| RegistryError::sql(&db_path, source);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let outcome = work(&tx).map_err(sql)?;
        if outcome.is_ok() {
            tx.commit().map_err(sql)?;
        }
        Ok(outcome)
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> RegistryError + '_ {
        |source| RegistryError::sql(&self.db_path, source)
    }

    /// Inserts an entry with the next version of its name and, with `promote`, points that
    /// alias at it, all in one transaction. The record is the registration's idempotency key:
    /// when this name already has an entry made from the very same record (a retry of a
    /// registration that committed but could not say so: its stdout failed, it was stopped),
    /// that entry is returned with `added: false` and nothing changes.
    pub fn register(&mut self, entry: NewEntry, promote: Option<&str>) -> Result<Registration> {
        validate_name("name", &entry.name)?;
        if let Some(alias) = promote {
            validate_name("alias", alias)?;
        }
        for (role, hash) in entry.blobs.all() {
            self.blobs
                .check(hash)?
                .map_err(|e| RegistryError::Invalid(format!("{role} blob: {e}")))?;
        }
        if let Some(marker) = &self.pause_after_blobs {
            let _ = std::fs::write(marker, b"");
            std::thread::sleep(Duration::from_secs(60));
        }
        let at = now();
        let (version, added) = self.write(|tx| {
            let earlier: Option<i64> = tx
                .query_row(
                    "SELECT version FROM entries WHERE name = ?1 AND json_extract(blobs, '$.record') = ?2
                     ORDER BY version DESC LIMIT 1",
                    params![entry.name, entry.blobs.record],
                    |row| row.get(0),
                )
                .optional()?;
            if let Some(version) = earlier {
                return Ok(Ok((version, false)));
            }
            let version: i64 = tx.query_row(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM entries WHERE name = ?1",
                params![entry.name],
                |row| row.get(0),
            )?;
            tx.execute(
                "INSERT INTO entries (name, version, weights_blake3, manifest_hash, snapshot, code_commit,
                                      image, metrics, gate, ungated_reason, blobs, created_at, tags)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    entry.name,
                    version,
                    entry.weights_blake3,
                    entry.manifest_hash,
                    entry.snapshot,
                    entry.code_commit,
                    entry.image,
                    entry.metrics.to_string(),
                    entry.gate.to_string(),
                    entry.ungated_reason,
                    serde_json::to_string(&entry.blobs).expect("blobs serialize"),
                    at,
                    (!entry.tags.is_empty())
                        .then(|| serde_json::to_string(&entry.tags).expect("tags serialize")),
                ],
            )?;
            if let Some(alias) = promote {
                move_alias(tx, &entry.name, alias, version, Some("promoted at registration"), &at)?;
            }
            Ok(Ok((version, true)))
        })??;
        Ok(Registration {
            entry: self.show(&entry.name, version)?,
            added,
        })
    }

    /// Points `name@alias` at `version`, recording the move.
    pub fn set_alias(
        &mut self,
        name: &str,
        alias: &str,
        version: i64,
        reason: Option<&str>,
    ) -> Result<AliasMove> {
        validate_name("name", name)?;
        validate_name("alias", alias)?;
        let at = now();
        let from = self.write(|tx| {
            let exists: bool = tx.query_row(
                "SELECT EXISTS(SELECT 1 FROM entries WHERE name = ?1 AND version = ?2)",
                params![name, version],
                |row| row.get(0),
            )?;
            if !exists {
                return Ok(Err(RegistryError::NotFound(format!(
                    "{name} version {version}: no such entry"
                ))));
            }
            Ok(Ok(move_alias(tx, name, alias, version, reason, &at)?))
        })??;
        Ok(AliasMove {
            name: name.into(),
            alias: alias.into(),
            from_version: from,
            to_version: version,
            at,
            reason: reason.map(str::to_string),
        })
    }

    pub fn resolve(&self, reference: &ModelRef) -> Result<Entry> {
        match reference {
            ModelRef::Version { name, version } => self.show(name, *version),
            ModelRef::Alias { name, alias } => {
                let version: Option<i64> = self
                    .conn
                    .query_row(
                        "SELECT version FROM aliases WHERE name = ?1 AND alias = ?2",
                        params![name, alias],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(self.sql())?;
                match version {
                    Some(v) => self.show(name, v),
                    None => Err(RegistryError::NotFound(format!(
                        "{name}@{alias}: no such alias in {}",
                        self.dir.display()
                    ))),
                }
            }
        }
    }

    pub fn show(&self, name: &str, version: i64) -> Result<Entry> {
        let mut entries = self.query(
            "SELECT * FROM entries WHERE name = ?1 AND version = ?2",
            params![name, version],
        )?;
        entries.pop().ok_or_else(|| {
            RegistryError::NotFound(format!("{name} version {version}: no such entry"))
        })
    }

    /// Every entry (of `name`, when given), by name then version.
    pub fn list(&self, name: Option<&str>) -> Result<Vec<Entry>> {
        match name {
            Some(name) => self.query(
                "SELECT * FROM entries WHERE name = ?1 ORDER BY version",
                params![name],
            ),
            None => self.query("SELECT * FROM entries ORDER BY name, version", params![]),
        }
    }

    pub fn alias_history(&self, name: &str) -> Result<Vec<AliasMove>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT name, alias, from_version, to_version, at, reason FROM alias_history
                 WHERE name = ?1 ORDER BY id",
            )
            .map_err(self.sql())?;
        let rows = stmt
            .query_map(params![name], |row| {
                Ok(AliasMove {
                    name: row.get(0)?,
                    alias: row.get(1)?,
                    from_version: row.get(2)?,
                    to_version: row.get(3)?,
                    at: row.get(4)?,
                    reason: row.get(5)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<std::result::Result<_, _>>()
            .map_err(self.sql())
    }

    fn query(&self, sql: &str, args: impl rusqlite::Params) -> Result<Vec<Entry>> {
        let mut stmt = self.conn.prepare(sql).map_err(self.sql())?;
        let rows = stmt
            .query_map(args, |row| {
                let text = |i: &str| -> rusqlite::Result<String> { row.get(i) };
                let json = |s: String| serde_json::from_str(&s).unwrap_or(Value::Null);
                Ok(Entry {
                    lineage: NewEntry {
                        name: row.get("name")?,
                        weights_blake3: text("weights_blake3")?,
                        manifest_hash: text("manifest_hash")?,
                        snapshot: row.get("snapshot")?,
                        code_commit: row.get("code_commit")?,
                        image: row.get("image")?,
                        metrics: json(text("metrics")?),
                        gate: json(text("gate")?),
                        ungated_reason: row.get("ungated_reason")?,
                        blobs: serde_json::from_str(&text("blobs")?).unwrap_or_default(),
                        // A registry opened read-only before it was ever opened to write since
                        // tags were kept has no column: no tags.
                        tags: row
                            .get::<_, Option<String>>("tags")
                            .ok()
                            .flatten()
                            .and_then(|tags| serde_json::from_str(&tags).ok())
                            .unwrap_or_default(),
                    },
                    version: row.get("version")?,
                    created_at: text("created_at")?,
                    aliases: Vec::new(),
                })
            })
            .map_err(self.sql())?;
        let mut entries: Vec<Entry> = rows
            .collect::<std::result::Result<_, _>>()
            .map_err(self.sql())?;
        for entry in &mut entries {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT alias FROM aliases WHERE name = ?1 AND version = ?2 ORDER BY alias",
                )
                .map_err(self.sql())?;
            entry.aliases = stmt
                .query_map(params![entry.lineage.name, entry.version], |row| row.get(0))
                .map_err(self.sql())?
                .collect::<std::result::Result<_, _>>()
                .map_err(self.sql())?;
        }
        Ok(entries)
    }

    /// Re-hashes every blob of every entry, checks that each entry's index row says what its
    /// blobs say (the weights it names are the weights blob, and the record it was registered
    /// from names the same weights and manifest), and that every alias points at an entry. An
    /// index edited by hand to point one entry at another's weights is found here.
    pub fn verify(&self) -> Result<Vec<Problem>> {
        let mut problems = Vec::new();
        for entry in self.list(None)? {
            let id = format!("{}@{}", entry.lineage.name, entry.version);
            let mut whole = true;
            for (role, hash) in entry.lineage.blobs.all() {
                if let Err(problem) = self.blobs.check(hash)? {
                    whole = false;
                    problems.push(Problem {
                        entry: id.clone(),
                        blob: role.into(),
                        problem,
                    });
                }
            }
            if whole {
                problems.extend(
                    self.lineage_problems(&entry)
                        .into_iter()
                        .map(|problem| Problem {
                            entry: id.clone(),
                            blob: "index".into(),
                            problem,
                        }),
                );
            }
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT a.name, a.alias, a.version FROM aliases a
                 LEFT JOIN entries e ON e.name = a.name AND e.version = a.version
                 WHERE e.name IS NULL",
            )
            .map_err(self.sql())?;
        let dangling: Vec<(String, String, i64)> = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(self.sql())?
            .collect::<std::result::Result<_, _>>()
            .map_err(self.sql())?;
        for (name, alias, version) in dangling {
            problems.push(Problem {
                entry: format!("{name}@{alias}"),
                blob: String::new(),
                problem: format!("alias points at version {version}, which does not exist"),
            });
        }
        Ok(problems)
    }
}

/// Upserts the alias and appends the move to the history; returns the previous version.
fn move_alias(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    alias: &str,
    version: i64,
    reason: Option<&str>,
    at: &str,
) -> rusqlite::Result<Option<i64>> {
    let from: Option<i64> = tx
        .query_row(
            "SELECT version FROM aliases WHERE name = ?1 AND alias = ?2",
            params![name, alias],
            |row| row.get(0),
        )
        .optional()?;
    tx.execute(
        "INSERT INTO aliases (name, alias, version) VALUES (?1, ?2, ?3)
         ON CONFLICT (name, alias) DO UPDATE SET version = excluded.version",
        params![name, alias, version],
    )?;
    tx.execute(
        "INSERT INTO alias_history (name, alias, from_version, to_version, at, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![name, alias, from, version, at, reason],
    )?;
    Ok(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(registry: &Registry, record: &str, tags: &[(&str, &str)]) -> NewEntry {
        let put = |bytes: &[u8]| registry.blobs.put(bytes).unwrap();
        NewEntry {
            name: "churn".into(),
            weights_blake3: put(b"weights"),
            manifest_hash: "m".repeat(64),
            snapshot: None,
            code_commit: None,
            image: None,
            metrics: Value::Null,
            gate: Value::Null,
            ungated_reason: None,
            blobs: Blobs {
                weights: put(b"weights"),
                record: put(record.as_bytes()),
                manifest: put(b"{}"),
                evaluation: None,
                profile: None,
                scores: None,
                weights_format: None,
                framework: None,
            },
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// The manifest's tags are kept with the entry and read back; a registry made before tags
    /// were kept gets the column the first time it is opened to write, and reads its old
    /// entries, even read-only before that, as having none.
    #[test]
    fn tags_are_kept_and_old_registries_read_as_having_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = Registry::open(dir.path()).unwrap();
        let tagged = entry(&registry, "one", &[("owner", "ana"), ("ticket", "ML-412")]);
        registry.register(tagged.clone(), Some("prod")).unwrap();
        let found = registry
            .resolve(&ModelRef::parse("churn@prod").unwrap())
            .unwrap();
        assert_eq!(found.lineage.tags, tagged.tags);
        let listed = serde_json::to_value(&registry.list(None).unwrap()[0]).unwrap();
        assert_eq!(listed["tags"]["owner"], "ana");

        // An index as the first registries made it: no tags column.
        let old = tempfile::tempdir().unwrap();
        let mut registry = Registry::open(old.path()).unwrap();
        let plain = entry(&registry, "two", &[]);
        registry.register(plain, None).unwrap();
        drop(registry);
        let conn = Connection::open(old.path().join("index.sqlite")).unwrap();
        conn.execute_batch("ALTER TABLE entries DROP COLUMN tags")
            .unwrap();
        drop(conn);
        let read_only = Registry::open_read_only(old.path()).unwrap();
        let listed = read_only.list(None).unwrap();
        assert!(listed[0].lineage.tags.is_empty());
        assert!(
            serde_json::to_value(&listed[0])
                .unwrap()
                .get("tags")
                .is_none(),
            "no tags, no key"
        );
        drop(read_only);
        let mut registry = Registry::open(old.path()).unwrap();
        let tagged = entry(&registry, "three", &[("owner", "bo")]);
        registry.register(tagged, None).unwrap();
        let listed = registry.list(None).unwrap();
        assert!(listed[0].lineage.tags.is_empty());
        assert_eq!(listed[1].lineage.tags["owner"], "bo");
    }
}
