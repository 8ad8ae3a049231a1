//! `--scores FILE`: a model runfn did not train, judged by the scores its own program wrote for
//! the split's rows. The rows are read from the shards (labels, slices, keys) and their digest
//! recomputed, exactly as for runfn's own model; the file must cover those rows and no others.

use std::path::{Path, PathBuf};

use runfn_core::side_file::{MODEL_LIMIT, blake3_bounded};
use runfn_core::{InputError, Record};
use runfn_data::spec::DataSpec;
use runfn_learn::external_scores::{ScoresFile, read_split};
use runfn_learn::score::Scored;
use runfn_schema::record::ExternalTrain;

/// What scored the rows, as the section names it.
pub struct Scorer {
    pub model: String,
    pub weights_blake3: String,
    pub model_manifest_hash: String,
    pub scores: ScoresFile,
}

/// The key that joins the file's rows to the split's: `--key`, else `manifest.eval.row_key`,
/// else the manifest's entity.
pub fn key_column(
    flag: Option<&str>,
    row_key: Option<&str>,
    spec: &DataSpec,
) -> Result<String, InputError> {
    flag.or(row_key)
        .or(spec.entity.as_deref())
        .map(str::to_string)
        .ok_or_else(|| {
            InputError::field(
                "--key",
                "is needed with --scores: the manifest declares neither eval.row_key nor data.entity to join the scores to the split's rows",
            )
        })
}

/// Reads the split's labels and `columns` (slices and the key, the key last), then the scores
/// file in the split's order.
pub fn score(
    record: &Record,
    path: &Path,
    key: &str,
    shards: &[PathBuf],
    columns: &[String],
    split: &str,
) -> anyhow::Result<(Scored, ScoresFile)> {
    let spec = DataSpec::from_record(record)?;
    let label = spec.label.as_deref().ok_or_else(|| {
        InputError::field(
            "manifest.data.label",
            "is missing: scores are judged against the label",
        )
    })?;
    let rows = read_split(shards, label, spec.label_positive.as_ref(), columns)?;
    let keys = &rows
        .columns
        .iter()
        .find(|(name, _)| name == key)
        .expect("the key column is read")
        .1;
    let (file, scores) = ScoresFile::read(path, key, keys, split)?;
    Ok((
        Scored {
            scores,
            labels: rows.labels,
            slices: rows.columns,
            unseen: Vec::new(),
        },
        file,
    ))
}

/// The model the scores stand for: for the candidate, the record's `external_train` artifact
/// (its blake3 checked now, so a changed file is caught before it is gated); otherwise the scores
/// file itself.
pub fn scorer(record: &Record, scores: ScoresFile, candidate: bool) -> anyhow::Result<Scorer> {
    let manifest_hash = record
        .get_path("manifest_hash")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    let external = if candidate {
        record.section::<ExternalTrain>()?
    } else {
        None
    };
    let Some(external) = external else {
        return Ok(Scorer {
            model: scores.path.display().to_string(),
            weights_blake3: scores.blake3.clone(),
            model_manifest_hash: manifest_hash,
            scores,
        });
    };
    check_artifact(&external)?;
    Ok(Scorer {
        model: external.artifact.clone(),
        weights_blake3: external.artifact_blake3.clone(),
        model_manifest_hash: manifest_hash,
        scores,
    })
}

/// The artifact `external_train` names has the blake3 it claims.
pub fn check_artifact(external: &ExternalTrain) -> anyhow::Result<()> {
    let local = runfn_storage::local_path(&external.artifact)?;
    let found = blake3_bounded(&local, MODEL_LIMIT)?;
    if found != external.artifact_blake3 {
        return Err(InputError::field(
            "external_train.artifact",
            format!(
                "{}: its blake3 is {found}, but external_train.artifact_blake3 is {} (the file changed after it was recorded)",
                external.artifact, external.artifact_blake3
            ),
        )
        .into());
    }
    Ok(())
}
