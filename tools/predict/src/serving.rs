//! Watching what serves: the rows scored compared with what the model learned from. Each
//! feature's drift from the training profile stored with the model in the registry (the checks
//! ds-validate runs between two snapshots, with their noise allowances, and, where the profile
//! kept its windows, against how far the training period's own windows stood from its whole),
//! and the scores' drift from the model's test scores (binned at their deciles when it was
//! evaluated).

use std::path::Path;

use runfn_core::{InputError, Record};
use runfn_profile::history::judge_served;
use runfn_profile::{Profile, Roles, Thresholds};
use runfn_registry::{ModelRef, Registry};
use runfn_schema::record::{ScoreBins, ScoreDrift, ServingDrift};
use runfn_stats::drift::jensen_shannon_histograms;
use runfn_stats::sampling::divergence_allowance;
use serde_json::Value;

/// The checks of a feature's drift that mean the served rows differ from the training rows
/// (a row count or a label says nothing about serving).
const FEATURE_DRIFT: [&str; 5] = [
    "null_rate_rise",
    "out_of_range",
    "numeric_drift",
    "new_categories",
    "categorical_drift",
];

/// What the model learned from, as the registry kept it.
pub struct Training {
    /// `NAME@VERSION`.
    pub against: String,
    pub profile: Profile,
    /// The test split's score bins, when its evaluation kept them.
    pub bins: Option<ScoreBins>,
    /// The registered manifest's `validate` thresholds.
    pub validate: Option<Value>,
}

/// The training side of a registered model, or why there is none to compare with.
pub fn training(
    registry: &Path,
    registered_as: Option<&str>,
) -> anyhow::Result<Result<Training, String>> {
    let Some(reference) = registered_as else {
        return Ok(Err(
            "the model is a file, not a registered entry: no training profile to compare with"
                .into(),
        ));
    };
    let registry = Registry::open_read_only(registry)?;
    let entry = registry.resolve(&ModelRef::parse(reference)?)?;
    let Some(profile_blob) = &entry.lineage.blobs.profile else {
        return Ok(Err(format!(
            "{reference} was registered without a data profile: nothing to compare with"
        )));
    };
    let text = |hash: &str| -> anyhow::Result<String> {
        String::from_utf8(registry.blobs.read(hash)?)
            .map_err(|_| InputError::field(reference, "a stored blob is not UTF-8").into())
    };
    let profile = Profile::parse(
        &text(profile_blob)?,
        &format!("{reference} (training profile)"),
    )?;
    let bins = match &entry.lineage.blobs.evaluation {
        Some(hash) => serde_json::from_str::<Value>(&text(hash)?)
            .ok()
            .and_then(|e| serde_json::from_value(e.get("score_bins")?.clone()).ok()),
        None => None,
    };
    let validate = serde_json::from_str::<Value>(&text(&entry.lineage.blobs.manifest)?)
        .ok()
        .and_then(|m| m.get("validate").cloned());
    Ok(Ok(Training {
        against: reference.to_string(),
        profile,
        bins,
        validate,
    }))
}

/// The thresholds: the record's manifest's `validate`, else the registered manifest's.
pub fn thresholds(record: &Record, training: &Training) -> Result<Thresholds, InputError> {
    let own = record.get_path("manifest.validate");
    Thresholds::from_manifest(own.or(training.validate.as_ref()))
        .map_err(|e| InputError::field(e.field, e.message))
}

/// The served rows' profile and score counts against the training side.
pub fn compare_served(
    training: &Training,
    served: &Profile,
    served_scores: Option<&[u64]>,
    thresholds: &Thresholds,
    features: &[String],
    identifiers: &[String],
) -> ServingDrift {
    let roles = Roles {
        label: None,
        identifiers: identifiers.to_vec(),
        reserved: Vec::new(),
        features: Some(features.to_vec()),
    };
    let (checks, windows) = judge_served(&training.profile, served, thresholds, &roles);
    let calibration = if windows > 0 {
        format!(
            "history: each check also against how far the {windows} windows of the training \
             snapshot stood from its whole (Holm at alpha {})",
            thresholds.alpha
        )
    } else {
        "sampling: the training profile kept no windows (set validate.window), so only \
         sampling noise and the thresholds judge"
            .to_string()
    };
    let checks: Vec<_> = checks
        .iter()
        .filter(|c| FEATURE_DRIFT.contains(&c.name))
        .filter(|c| {
            c.column
                .as_ref()
                .is_some_and(|name| features.contains(name))
        })
        .map(runfn_profile::Check::to_record)
        .collect();
    let score = training
        .bins
        .as_ref()
        .zip(served_scores)
        .map(|(test, served)| score_drift(test, served, thresholds, windows == 0));
    let passed = checks.iter().all(|c| c.passed || !c.fails_run)
        && score.as_ref().is_none_or(|s| s.passed || !s.fails_run);
    ServingDrift {
        passed,
        against: training.against.clone(),
        checks,
        score,
        calibration: Some(calibration),
    }
}

/// The served scores' divergence from the test scores, in the test scores' decile bins, beyond
/// both the numeric drift threshold and what sampling alone gives at these sizes. The test
/// scores are one window's; where the training windows calibrate the feature checks, a score
/// drift is reported but does not fail (`fails_run`), since no history says how far a month's
/// scores ordinarily stand from the test month's.
fn score_drift(
    test: &ScoreBins,
    served: &[u64],
    thresholds: &Thresholds,
    fails_run: bool,
) -> ScoreDrift {
    let binned = jensen_shannon_histograms(&test.counts, served);
    let (n, m) = (test.counts.iter().sum(), served.iter().sum());
    let noise = divergence_allowance(binned.bins, n, m, thresholds.alpha);
    let threshold = thresholds.numeric_drift;
    ScoreDrift {
        value: binned.divergence,
        threshold,
        noise,
        passed: binned.divergence <= threshold.max(noise),
        fails_run,
        test: test.clone(),
        served: served.to_vec(),
    }
}

/// The `data` section of the manifest the registered model (`registered_as`) was trained under:
/// its entity and time columns are the keys a scored row is known by. None for a model file.
pub fn registered_data(
    registry: &Path,
    registered_as: Option<&str>,
) -> anyhow::Result<Option<Value>> {
    let Some(reference) = registered_as else {
        return Ok(None);
    };
    let registry = Registry::open_read_only(registry)?;
    let entry = registry.resolve(&ModelRef::parse(reference)?)?;
    let manifest: Value = serde_json::from_slice(
        &registry.blobs.read(&entry.lineage.blobs.manifest)?,
    )
    .map_err(|e| InputError::field(format!("{reference}'s registered manifest"), e.to_string()))?;
    Ok(manifest.get("data").cloned())
}
