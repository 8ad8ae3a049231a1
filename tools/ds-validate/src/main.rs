//! ds-validate: profile a snapshot, compare it with the previous profile, fail on unexplained drift.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod parted;

use clap::{Args as ClapArgs, Parser, Subcommand};
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::parts::PartArgs;
use runfn_core::record::{RecordInput, read_text};
use runfn_core::{Exit, InputError, Record};
use runfn_data::partitioned::Partitioned;
use runfn_data::spec::{DataSource, DataSpec};
use runfn_profile::Check;
use runfn_profile::history::judge;
use runfn_profile::{
    EXPLANATION_FORM, Explanation, Profile, Roles, SettingsError, Thresholds, compare,
    profile_snapshot,
};
use runfn_schema::record::{Calibration, PreviousModel, Validate};
use serde_json::Value;

const AFTER_HELP: &str = "\
Examples:
  mf-hash manifest.yaml | ds-validate --previous runs/last/profile.json > runs/churn/validate.json
  ds-validate --explained explained.json --previous old.json < record.json
  ds-validate --previous-model churn@prod --registry registry < record.json   # vs what serves
  mf-hash weather.yaml --drift-only | ds-validate   # validate.window: \"1 week\": drift by history
  ds-validate profile --in lake/churn/part-00003.csv --label churned > p3.json   # one file, any machine
  ds-validate merge p*.json > profile.json
  ds-validate compare --previous old.json --current profile.json --manifest drift.yaml
  ds-validate --part $SLURM_ARRAY_TASK_ID/8 --parts parts/ < record.json   # one of 8 parts
  ds-validate --parts parts/ --previous old.json < record.json   # their merge: the record

Profiles every column of the snapshot (--in, else manifest.data.snapshot): type, count, nulls,
min, max, mean, std, quantiles (t-digest), distinct count (exact where values were counted, else
HyperLogLog), top categories, and the label's rate; files in parallel, merged, in batches sized
by --memory (the timings entry says the budget and the peak). Then checks it,
alone and against --previous, with the thresholds of manifest.validate (defaults in brackets):
bad_values [0.001 share], label_missing [validate.max_label_missing: 0 share], label_invalid (NaN
or not 0/1), schema_change, row_count_change [a shrink of 0.5], label_rate_shift [0.03],
null_rate_rise [0.005], out_of_range [0.01 share], numeric_drift [Wasserstein-1 distance in
standard deviations: 0.01; exact value counts for a column of up to 1000 distinct values, the
t-digest past that], new_categories [0.01 share], categorical_drift [total variation over all
categories: 0.01].
Dates are not range- or drift-checked, nor is a numeric entity id; entity and text columns are not
category-checked, nor is a column with over 10000 distinct values (an id or free text: its counts
are given up, only its distinct count kept, and its summary has top_skipped instead of top).
--previous-model compares with the profile stored in the registry for the model that serves
(register profile NAME@ALIAS); when the registry has no such model yet (the first run), only this
snapshot's own checks run and the section says so in no_previous.

A drift check fails only above its threshold and above its noise: the value sampling alone would
reach at these two sample sizes, at a false-alarm rate of validate.alpha [0.001] shared by every
test of the run (Bonferroni). Large tables thus fail on shifts past the threshold, small ones not
on noise. validate.fail_on [features]: only checks on the model's features (config.features, else
the columns train chooses by default) and the label fail the run, plus bad values, null rises
and schema changes of the columns manifest.data names; any other column's failures are reported
(fails_run: false, and \"reported, not failed\" on stderr). fail_on: all fails on every column.
Growth is not drift: a snapshot that grows passes row_count_change whatever its growth, unless
validate.max_growth [none] sets a limit; one that shrinks by more than row_count_change fails
(0 for a cumulative snapshot, which should never lose a row).

Drift against the data's own rhythm: with validate.window (\"1 week\", \"1 month\": what each
night adds) and data.time, the snapshot is cut into windows counted back from its newest time.
The newest window is compared with the one before it (values out of range and new categories
with every window before), and each drift check is also judged against its own history: the same
check between every earlier window and its references (a control chart; Student-t prediction on
the raw and square-root scale, Holm over the run's checks at validate.alpha). A check fails only
beyond its threshold, its sampling noise and its history. Under 4 earlier window pairs it is
judged by threshold and noise alone, and calibration.note says so. With --previous-model, only
schema changes are checked against what serves. The profile file keeps each window's profile,
for predict. The method: docs/drift.md.

In parts (a Slurm job array, a Kubernetes Indexed Job): --part K/N --parts DIR profiles part K
(0-based) of N of the snapshot's pieces (files, runs of a large Parquet file's row groups, each
part a contiguous run balanced by bytes) and writes DIR/ds-validate.part-K-of-N.json, printing
{\"part\": {tool, part, partial, units, of}}; with validate.window each part also reads the time
column of the whole snapshot, for the newest time the windows count back from (without, only its
own files', and the merge takes the newest of the parts'). The same command
with --parts DIR and no --part merges them in piece order and writes what one process writes:
the same profile file byte for byte, the same section (exactly, not within a sketch's error). A
missing or doubled part, or a snapshot that changed since the parts ran, is refused (exit 2).
docs/parts.md.

--explained lists accepted drifts, each bounded by the largest value it explains and its last day:
[{\"column\": \"temp\", \"check\": \"numeric_drift\", \"reason\": \"spring\", \"max_value\": 0.6,
\"until\": \"2026-06-30\"}]. A larger drift, or one after that day (the snapshot's newest date, else
today), fails again. compare takes --manifest FILE or --record FILE for thresholds, fail_on, data
roles and config.features; a drift-only manifest (data and validate) will do.

Output: the input record plus
  \"validate\": {\"passed\": bool, \"profile\": {rows, files, label, label_rate, bad_values,
               columns: {<name>: {type, count, nulls, null_rate, distinct, min, max, mean, std,
               quantiles, top | top_skipped, label_rate}}}, \"profile_file\", \"previous\",
               \"previous_model\"?: {reference, version}, \"no_previous\"?: why nothing was compared,
               \"calibration\"?: {window, current, reference: {start, end, rows}, history_windows,
               method: history|sampling, min_history, note?},
               \"checks\": [{\"name\", \"column\", \"value\", \"threshold\", \"noise\"?, \"passed\",
               \"fails_run\", \"detail\"?, \"explained\"?, \"explained_until\"?,
               \"history\"?: {windows, mean, sd, p, p_holm}}]}
`profile` and `merge` print a full profile (with its sketches); `compare` prints the record.

Exit: 0 passed, 1 an unexplained check failed (record still on stdout), 2 bad usage or input.";

/// Profile a data snapshot, compare it with the previous profile, fail on unexplained drift.
#[derive(Debug, Parser)]
#[command(name = "ds-validate", version, after_help = AFTER_HELP, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    validate: ValidateArgs,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Profile a snapshot (or one file of it) and print the full, mergeable profile.
    Profile {
        #[command(flatten)]
        source: SourceArgs,
        /// The label column (default: manifest.data.label of a record given with --record).
        #[arg(long, value_name = "COLUMN")]
        label: Option<String>,
        /// Write the profile to FILE (atomically) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Merge profiles of parts of a snapshot into one.
    Merge {
        /// Profiles to merge, in order.
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
        /// Write the merged profile to FILE (atomically) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Check a profile against a previous one and print a record with the `validate` section.
    Compare {
        #[arg(long, value_name = "FILE")]
        previous: Option<PathBuf>,
        #[arg(long, value_name = "FILE")]
        current: PathBuf,
        #[arg(long, value_name = "COLUMN")]
        label: Option<String>,
        #[arg(long, value_name = "FILE")]
        explained: Option<PathBuf>,
        /// A manifest (YAML or JSON) whose `validate` thresholds, `fail_on`, `data` roles and
        /// `config.features` apply; a drift-only manifest (data and validate) is enough.
        #[arg(long, value_name = "FILE", conflicts_with = "record")]
        manifest: Option<PathBuf>,
        /// A run record whose manifest applies, as with --manifest.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, ClapArgs)]
struct SourceArgs {
    /// The snapshot: a file or a folder (default: the record's shards, else manifest.data.snapshot).
    #[arg(long = "in", value_name = "PATH", conflicts_with = "shards")]
    input: Option<PathBuf>,
    /// A shard folder written by shardify (default: the record's shards.dir).
    #[arg(long, value_name = "DIR")]
    shards: Option<PathBuf>,
    /// A schema file fixing column types.
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Memory the rows being read may take (default: a quarter of the machine's): batches are
    /// sized by what the widest file's rows take once read.
    #[arg(long, value_name = "SIZE", value_parser = runfn_data::spec::parse_size)]
    memory: Option<u64>,
}

impl SourceArgs {
    fn memory_bytes(&self) -> u64 {
        self.memory
            .unwrap_or_else(runfn_core::environment::quarter_of_the_machine)
    }
}

/// Times a batch is held while it is profiled: as read, cast, and the columns' own passes over
/// it (values hashed, numbers kept for the quantiles), with room to spare.
const BATCH_COPIES: u64 = 8;

#[derive(Debug, Clone, ClapArgs)]
struct ValidateArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// The previous snapshot's profile, to check drift against.
    #[arg(long, value_name = "FILE", conflicts_with = "previous_model")]
    previous: Option<PathBuf>,
    /// Check drift against the profile stored with this model (NAME@ALIAS or NAME@VERSION) in
    /// the registry; none there yet (a first run) means no drift checks, said in no_previous.
    #[arg(long, value_name = "MODEL")]
    previous_model: Option<String>,
    /// The registry for --previous-model (default: RUNFN_REGISTRY, else ./registry).
    #[arg(long, value_name = "DIR", requires = "previous_model")]
    registry: Option<PathBuf>,
    /// Where to save this snapshot's full profile (default: runs/<run_id>/profile.json).
    #[arg(long, value_name = "FILE")]
    profile_out: Option<PathBuf>,
    /// Drifts a person has explained: [{"column", "check", "reason"}].
    #[arg(long, value_name = "FILE")]
    explained: Option<PathBuf>,
    #[command(flatten)]
    parts: PartArgs,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("ds-validate", runfn_version::long());
    runfn_core::cli::main("ds-validate", args.common.clone(), |tool| {
        match args.command {
            None => validate(tool, args.validate),
            Some(Command::Profile {
                source,
                label,
                output,
            }) => profile_command(tool, &source, label, output.as_deref()),
            Some(Command::Merge { profiles, output }) => {
                merge_command(tool, &profiles, output.as_deref())
            }
            Some(Command::Compare {
                previous,
                current,
                label,
                explained,
                manifest,
                record,
            }) => compare_command(
                tool,
                CompareInputs {
                    previous: previous.as_deref(),
                    current: &current,
                    label,
                    explained: explained.as_deref(),
                    manifest: manifest.as_deref(),
                    record: record.as_deref(),
                },
            ),
        }
    })
}

fn validate(tool: &Tool, args: ValidateArgs) -> anyhow::Result<Exit> {
    let mut record = Record::read(args.source.record.as_deref(), RecordInput::Optional)?;
    record.refuse_failed_checks("validate")?;
    runfn_manifest::verify_record(&record)?;
    let spec = DataSpec::from_record(&record)?;
    let setting = |e: SettingsError| InputError::field(e.field, e.message);
    let thresholds =
        Thresholds::from_manifest(record.get_path("manifest.validate")).map_err(setting)?;
    let features = Roles::features_from_manifest(record.get_path("manifest")).map_err(setting)?;
    // Every input is read before anything is written: a bad --previous or --explained leaves no
    // profile file behind.
    let (previous, previous_model, no_previous) = match (&args.previous, &args.previous_model) {
        (Some(path), _) => (Some(read_profile(path)?), None, None),
        (None, Some(reference)) => {
            let registry = args.registry.clone().unwrap_or_else(registry_default);
            match serving_profile(&registry, reference)? {
                Served::Profile(profile, version) => (
                    Some(profile),
                    Some(PreviousModel {
                        reference: reference.clone(),
                        version: Some(version),
                    }),
                    None,
                ),
                Served::Nothing(why) => (
                    None,
                    Some(PreviousModel {
                        reference: reference.clone(),
                        version: None,
                    }),
                    Some(format!("{why}: the first run, drift checks skipped")),
                ),
            }
        }
        (None, None) => (
            None,
            None,
            Some("no --previous profile: drift checks skipped".to_string()),
        ),
    };
    let explanations = read_explanations(args.explained.as_deref())?;
    let source = spec.source(
        &record,
        args.source.input.as_deref(),
        args.source.shards.as_deref(),
    )?;
    let roles = roles_of(&spec, spec.label.clone(), features);
    // --part K/N --parts DIR profiles a part into DIR; --parts DIR alone merges the parts.
    let parting = args.parts.part.zip(args.parts.parts.clone());
    // A part hashes the files it reads (below), the merge none: the parts hashed them all.
    let hash_all = args.parts.parts.is_none();
    let snapshot = open_source(
        &source,
        args.source.schema.as_deref(),
        &spec,
        hash_all,
        args.source.memory_bytes(),
    )?;
    if let (Some((part, _)), DataSource::Snapshot(path)) = (&parting, &source) {
        parted::verify_part(&snapshot.1, &spec, path, *part)?;
    }
    let merging = match (&args.parts.part, &args.parts.parts) {
        (None, Some(dir)) => Some((dir.clone(), parted::read_parts(dir)?)),
        _ => None,
    };
    let newest = match (&merging, &spec.time) {
        (Some((_, parts)), _) => runfn_profile::parts::newest_of(parts),
        (None, Some(time)) => match &parting {
            Some((part, _)) if thresholds.window.is_none() => {
                parted::newest_time_of_part(&snapshot.1, time, *part)?
            }
            _ => parted::newest_time(&snapshot.1, time)?,
        },
        (None, None) => None,
    };
    let today = today(newest);
    let (current, comparison, calibration) = match &thresholds.window {
        None => {
            if let Some((part, dir)) = &parting {
                return parted::run_part(tool, &snapshot.1, &spec, None, newest, *part, dir);
            }
            let current = match merging {
                Some((dir, parts)) => {
                    parted::merge(tool, &snapshot.1, &spec, None, parts, &dir)?.whole
                }
                None => profile_source(tool, &snapshot, &spec, spec.label.clone())?,
            };
            let comparison = compare(
                previous.as_ref(),
                &current,
                &thresholds,
                &roles,
                &explanations,
                &today,
            );
            (current, comparison, None)
        }
        Some(window) => {
            let (time, anchor) = match (&spec.time, newest) {
                (Some(time), Some(anchor)) => (time, anchor),
                (None, _) => {
                    return Err(InputError::field(
                        "manifest.validate.window",
                        "needs a time column to cut windows by (manifest.data.time)",
                    )
                    .into());
                }
                (Some(time), None) => {
                    return Err(InputError::field(
                        "manifest.data.time",
                        format!("`{time}` holds no value to count windows back from"),
                    )
                    .into());
                }
            };
            let time_type = snapshot
                .1
                .column_type(time)
                .unwrap_or(runfn_data::ColumnType::Timestamp);
            if let Some(message) = runfn_data::rolling::future_anchor(time, time_type, anchor) {
                return Err(InputError::field("manifest.data.time", message).into());
            }
            let cut = parted::cut(time, window, anchor)?;
            let by_window = Some((window.as_str(), cut));
            if let Some((part, dir)) = &parting {
                return parted::run_part(tool, &snapshot.1, &spec, by_window, newest, *part, dir);
            }
            let windowed = match merging {
                Some((dir, parts)) => {
                    parted::merge(tool, &snapshot.1, &spec, by_window, parts, &dir)?
                }
                None => {
                    tool.info(format!(
                        "profiling {} by windows of {window}",
                        snapshot.0.display()
                    ));
                    parted::with_roles(&spec, |roles| {
                        runfn_profile::history::profile_windows(
                            &snapshot.1,
                            roles.label,
                            roles.positive,
                            roles.identifiers,
                            time,
                            cut.span,
                            anchor,
                        )
                    })?
                }
            };
            let (comparison, calibration) = judge(
                &windowed,
                previous.as_ref(),
                &thresholds,
                &roles,
                &explanations,
                &today,
                window,
            )
            .map_err(|m| InputError::field("manifest.validate.window", m))?;
            (windowed.into_profile(), comparison, Some(calibration))
        }
    };
    current.check_label()?;
    let profile_out = args.profile_out.or_else(|| {
        record
            .get_path("manifest.run_id")
            .and_then(Value::as_str)
            .map(|id| PathBuf::from("runs").join(id).join("profile.json"))
    });
    if let Some(path) = &profile_out {
        write_profile(path, &current)?;
    }
    match (&no_previous, &previous_model) {
        (Some(why), _) if calibration.is_none() => {
            tool.info(format!("{why}; only this snapshot's own checks run"))
        }
        (None, Some(model)) => tool.info(format!(
            "drift against {}, version {}",
            args.previous_model.as_deref().unwrap_or_default(),
            model.version.unwrap_or_default()
        )),
        _ => {}
    }
    if let Some(calibration) = &calibration {
        describe_calibration(tool, calibration);
    }
    report(tool, &comparison);
    let passed = comparison.passed;
    record.set(&Validate {
        passed,
        profile: current.summary(),
        profile_file: profile_out.map(|p| p.display().to_string()),
        previous: args.previous.map(|p| p.display().to_string()),
        checks: comparison.checks.iter().map(Check::to_record).collect(),
        previous_model,
        // With windows, drift was checked whatever served before.
        no_previous: no_previous.filter(|_| calibration.is_none()),
        calibration,
    })?;
    tool.finish_within(
        record,
        Exit::from_passed(passed),
        args.source.memory_bytes(),
    )
}

fn describe_calibration(tool: &Tool, calibration: &Calibration) {
    tool.info(format!(
        "drift of ({}, {}] ({} rows) against ({}, {}] ({} rows), judged against {} earlier window pairs{}",
        calibration.current.start,
        calibration.current.end,
        calibration.current.rows,
        calibration.reference.start,
        calibration.reference.end,
        calibration.reference.rows,
        calibration.history_windows,
        calibration
            .note
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    ));
}

/// The day explanations expire against: the snapshot's newest date when it has a time column
/// (so a rerun of the same snapshot decides the same), else today's (UTC).
fn today(newest: Option<f64>) -> String {
    use runfn_data::ColumnType;
    let micros = newest.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_micros() as f64)
    });
    runfn_data::rolling::format_point(micros, ColumnType::Timestamp)
        .chars()
        .take(10)
        .collect()
}

/// What the data spec says the columns are: the label, the identifiers (entity and text, new
/// by design), the other columns it names, and the model's features when listed.
fn roles_of(spec: &DataSpec, label: Option<String>, features: Option<Vec<String>>) -> Roles {
    Roles {
        label,
        identifiers: spec.entity.iter().chain(&spec.text).cloned().collect(),
        reserved: spec
            .time
            .iter()
            .chain(&spec.label_time)
            .chain(spec.as_of.values())
            .cloned()
            .collect(),
        features,
    }
}

fn registry_default() -> PathBuf {
    std::env::var_os("RUNFN_REGISTRY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("registry"))
}

enum Served {
    Profile(Profile, i64),
    /// Nothing serves yet: why.
    Nothing(String),
}

/// The profile stored with the model `reference` names. A registry or alias that does not exist
/// yet is a first run; an entry without a profile, or a damaged blob, is an error.
fn serving_profile(registry: &Path, reference: &str) -> Result<Served, InputError> {
    use runfn_registry::{ModelRef, Registry, RegistryError};
    let field = |e: RegistryError| InputError::field("--previous-model", e.to_string());
    let parsed = ModelRef::parse(reference).map_err(field)?;
    let entry = match Registry::open_read_only(registry).and_then(|r| Ok((r.resolve(&parsed)?, r)))
    {
        Ok(found) => found,
        Err(RegistryError::NotFound(why)) => return Ok(Served::Nothing(why)),
        Err(err) => return Err(field(err)),
    };
    let (entry, registry) = entry;
    let hash = entry.lineage.blobs.profile.as_ref().ok_or_else(|| {
        InputError::field(
            "--previous-model",
            format!(
                "{}@{} was registered without a data profile; give --previous FILE",
                entry.lineage.name, entry.version
            ),
        )
    })?;
    let bytes = registry.blobs.read(hash).map_err(field)?;
    let origin = format!("{reference} (version {})", entry.version);
    let text = String::from_utf8(bytes)
        .map_err(|_| InputError::field(&origin, "the stored profile is not UTF-8"))?;
    Ok(Served::Profile(
        Profile::parse(&text, &origin)?,
        entry.version,
    ))
}

/// The snapshot a source names, with the path it was opened from.
/// The source opened; a pinned snapshot is checked by hashing every file (`hash_all`), or only
/// by the paths and sizes its pin lists.
fn open_source(
    source: &DataSource,
    schema: Option<&Path>,
    spec: &DataSpec,
    hash_all: bool,
    memory_bytes: u64,
) -> anyhow::Result<(PathBuf, runfn_data::Snapshot)> {
    let (path, mut snapshot) = match source {
        DataSource::Shards(dir) => (dir.clone(), Partitioned::from_shards(dir)?.snapshot),
        DataSource::Snapshot(path) => (
            path.clone(),
            spec.open_snapshot_hashing(path, schema, &|_| hash_all)?,
        ),
    };
    snapshot.bound_batches(memory_bytes, BATCH_COPIES)?;
    Ok((path, snapshot))
}

fn profile_source(
    tool: &Tool,
    (input, snapshot): &(PathBuf, runfn_data::Snapshot),
    spec: &DataSpec,
    label: Option<String>,
) -> anyhow::Result<Profile> {
    if let Some(label) = label
        .as_deref()
        .filter(|l| snapshot.column_type(l).is_none())
    {
        return Err(InputError::field(
            "--label",
            format!("names the column `{label}`, which the snapshot does not have"),
        )
        .into());
    }
    tool.info(format!(
        "profiling {} ({} files, {} bytes)",
        input.display(),
        snapshot.files.len(),
        snapshot.bytes()
    ));
    let identifiers: Vec<String> = spec.entity.iter().chain(&spec.text).cloned().collect();
    Ok(profile_snapshot(
        snapshot,
        label.as_deref(),
        spec.label_positive.as_ref(),
        &identifiers,
    )?)
}

fn report(tool: &Tool, comparison: &runfn_profile::Comparison) {
    for check in &comparison.checks {
        if check.passed {
            continue;
        }
        let column = check
            .column
            .as_deref()
            .map(|c| format!(" `{c}`"))
            .unwrap_or_default();
        let value = match (check.value, check.threshold, check.noise) {
            (Some(v), Some(t), Some(n)) if n > t => format!(": {v:.4} > {t} and > noise {n:.4}"),
            (Some(v), Some(t), _) => format!(": {v:.4} > {t}"),
            _ => String::new(),
        };
        let detail = check
            .detail
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        match &check.explained {
            Some(reason) => tool.info(format!(
                "explained: {}{column}{value}{detail}: {reason} (until {})",
                check.name,
                check.explained_until.as_deref().unwrap_or("?")
            )),
            None if !check.fails_run => tool.info(format!(
                "reported, not failed: {}{column}{value}{detail}: not a feature or the label \
                 (manifest.validate.fail_on: all fails on it)",
                check.name
            )),
            // Why the run stops: shown even under -q, like any tool's failed check.
            None => tool.notice(format!("failed: {}{column}{value}{detail}", check.name)),
        }
    }
}

fn profile_command(
    tool: &Tool,
    source: &SourceArgs,
    label: Option<String>,
    output: Option<&Path>,
) -> anyhow::Result<Exit> {
    let record = match &source.record {
        Some(path) => Record::read(Some(path), RecordInput::Required)?,
        None => Record::new(),
    };
    let spec = DataSpec::from_record(&record)?;
    let data = match &source.shards {
        Some(dir) => DataSource::Shards(dir.clone()),
        None => DataSource::Snapshot(spec.snapshot_path(source.input.as_deref())?),
    };
    let snapshot = open_source(
        &data,
        source.schema.as_deref(),
        &spec,
        true,
        source.memory_bytes(),
    )?;
    let profile = profile_source(tool, &snapshot, &spec, label.or(spec.label.clone()))?;
    emit_profile(&profile, output)
}

fn merge_command(tool: &Tool, paths: &[PathBuf], output: Option<&Path>) -> anyhow::Result<Exit> {
    let mut merged: Option<Profile> = None;
    for path in paths {
        let profile = read_profile(path)?;
        match merged.as_mut() {
            None => merged = Some(profile),
            Some(merged) => merged
                .merge(&profile)
                .map_err(|m| InputError::field(path.display().to_string(), m))?,
        }
    }
    let merged = merged.ok_or_else(|| InputError::field("merge", "needs at least one profile"))?;
    tool.info(format!(
        "merged {} profiles: {} rows",
        paths.len(),
        merged.rows
    ));
    emit_profile(&merged, output)
}

struct CompareInputs<'a> {
    previous: Option<&'a Path>,
    current: &'a Path,
    label: Option<String>,
    explained: Option<&'a Path>,
    manifest: Option<&'a Path>,
    record: Option<&'a Path>,
}

/// The manifest of --manifest or --record, as JSON; an empty map without either.
fn compare_manifest(inputs: &CompareInputs) -> Result<Value, InputError> {
    if let Some(path) = inputs.manifest {
        let (text, origin) = read_text(Some(path))?;
        let format = runfn_manifest::parse::Format::from_extension(path)
            .unwrap_or_else(|| runfn_manifest::parse::Format::sniff(&text));
        return runfn_manifest::parse::parse_manifest(&text, format, &origin)
            .map_err(|e| InputError::field(e.origin, e.message));
    }
    if let Some(path) = inputs.record {
        let record = Record::read(Some(path), RecordInput::Required)?;
        return Ok(record
            .get_path("manifest")
            .cloned()
            .unwrap_or(Value::Object(Default::default())));
    }
    Ok(Value::Object(Default::default()))
}

fn compare_command(tool: &Tool, inputs: CompareInputs) -> anyhow::Result<Exit> {
    let manifest = compare_manifest(&inputs)?;
    if inputs.manifest.is_some()
        && let Some(map) = manifest.as_object()
        && let Some(problem) = runfn_manifest::lint_drift_only(map).first()
    {
        return Err(InputError::field(
            format!("manifest.{}", problem.field),
            problem.message.clone(),
        )
        .into());
    }
    let setting = |e: SettingsError| InputError::field(e.field, e.message);
    let thresholds = Thresholds::from_manifest(manifest.get("validate")).map_err(setting)?;
    if thresholds.window.is_some() {
        return Err(InputError::field(
            "manifest.validate.window",
            "compares windows of one snapshot: run `ds-validate --record` on the snapshot, not `compare` on two profiles",
        )
        .into());
    }
    let features = Roles::features_from_manifest(Some(&manifest)).map_err(setting)?;
    let current_profile = read_profile(inputs.current)?;
    let previous_profile = inputs.previous.map(read_profile).transpose()?;
    let spec = DataSpec::from_record(&{
        let mut holder = Record::new();
        holder.set_section("manifest", manifest.clone());
        holder
    })?;
    let label = inputs
        .label
        .or(spec.label.clone())
        .or(current_profile.label.clone());
    let roles = roles_of(&spec, label, features);
    let comparison = compare(
        previous_profile.as_ref(),
        &current_profile,
        &thresholds,
        &roles,
        &read_explanations(inputs.explained)?,
        &today(None),
    );
    report(tool, &comparison);
    let passed = comparison.passed;
    let mut record = Record::new();
    record.set(&Validate {
        passed,
        profile: current_profile.summary(),
        profile_file: Some(inputs.current.display().to_string()),
        previous: inputs.previous.map(|p| p.display().to_string()),
        checks: comparison.checks.iter().map(Check::to_record).collect(),
        previous_model: None,
        no_previous: None,
        calibration: None,
    })?;
    tool.finish(record, Exit::from_passed(passed))
}

fn emit_profile(profile: &Profile, output: Option<&Path>) -> anyhow::Result<Exit> {
    match output {
        Some(path) => write_profile(path, profile)?,
        None => {
            let mut text = serde_json::to_string(profile)?;
            text.push('\n');
            runfn_core::cli::write_stdout(text.as_bytes())?;
        }
    }
    Ok(Exit::Passed)
}

fn write_profile(path: &Path, profile: &Profile) -> Result<(), InputError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        runfn_core::paths::create_dir_all(parent)?;
    }
    let text = serde_json::to_string(profile)
        .map_err(|e| InputError::field(path.display().to_string(), e.to_string()))?;
    runfn_core::atomic::write_bytes_atomic(path, format!("{text}\n").as_bytes())
}

fn read_profile(path: &Path) -> Result<Profile, InputError> {
    let (text, origin) = read_text(Some(path))?;
    Profile::parse(&text, &origin)
}

fn read_explanations(path: Option<&Path>) -> Result<Vec<Explanation>, InputError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let (text, origin) = read_text(Some(path))?;
    let explanations: Vec<Explanation> = serde_json::from_str(&text)
        .map_err(|e| InputError::field(&origin, format!("expected {EXPLANATION_FORM}: {e}")))?;
    for (i, explanation) in explanations.iter().enumerate() {
        if let Some(problem) = explanation.problem() {
            return Err(InputError::field(format!("{origin}[{i}]"), problem));
        }
    }
    Ok(explanations)
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
