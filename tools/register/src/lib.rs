//! register: store an approved model with its lineage; move and resolve aliases; verify. The
//! binaries are thin: `register` runs [`main`] with no faults; `register-with-faults` (the
//! tests' build only) with the pause its environment asks for.

mod confine;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use runfn_core::canonical::to_canonical_string;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_registry::{Blobs, ModelRef, NewEntry, Registry};
use runfn_schema::record::{
    Evaluate, ExternalTrain, Gate, Register, RegisterRefused, RegisterSection, Train, Validate,
};
use serde_json::{Value, json};

const AFTER_HELP: &str = "\
Examples:
  gate < compared.json | register --name churn --promote prod > registered.json
  register --name churn --allow-ungated --reason 'first model, no baseline yet' < evaluated.json
  register alias churn@prod 7 --reason 'roll back: v8 mis-scores new regions'
  register resolve churn@prod
  register profile churn@prod > prod-profile.json     # the data profile it was trained on
  register list churn
  register show churn 7
  register history churn
  register verify

The registry is a folder (--registry, else RUNFN_REGISTRY, else ./registry): index.sqlite
(SQLite, WAL) lists entries and aliases; blobs/ab/<blake3> holds the weights, the evaluation, the
normalized manifest, the data profile and the whole run record, read-only. With
RUNFN_REGISTRY_BLOBS=s3://bucket/prefix (remembered in the registry's blob-store file) the blobs
are also uploaded to <prefix>/ab/<blake3> and blobs/ is a local cache; index.sqlite stays a local
file. The weights path train recorded may be a store URL. A registration writes
its blobs, then inserts the entry with the next version of its name (and moves --promote's
alias) in one transaction: concurrent registrations get distinct consecutive versions, and a
process killed halfway leaves no half entry and no alias pointing nowhere. Every alias move is
kept in an append-only history (from, to, time, reason).

A record whose `gate` is missing or failed is refused (exit 1) unless --allow-ungated with
--reason, which is stored with the entry. Names and aliases match [a-z0-9][a-z0-9._-]*.
The model and scores files are copied only from inside the working folder or an --artifacts
folder (symlinks resolved; RUNFN_ARTIFACTS may list more, `:`-separated): a record naming any
other file is refused (exit 2). The blobs keep the read bits their files had.

Output (registering): the input record plus
  \"register\": {\"passed\", \"reason\" (when refused), \"registry\", \"name\", \"version\",
               \"weights_blake3\", \"weights\", \"manifest_hash\", \"promoted\", \"ungated_reason\",
               \"already_registered\" (true: this same record was registered before, as that
               version; nothing was added, so a retry never makes a second version)}
Output (resolve, show): the entry {name, version, weights_blake3, weights, manifest_hash, snapshot,
code_commit, image, metrics, gate, ungated_reason, blobs, created_at, aliases}; list: an array of
entries; profile: the stored ds-validate profile, as written; history: an array of moves; verify: {passed, entries, problems: [{entry, blob, problem}]}.

Exit: 0 done, 1 refused (gate missing or failed) or verify found problems, 2 bad usage or input
(an unknown name, version or alias, an invalid name, weights that changed since train).";

/// Store an approved model with its lineage in the registry; aliases such as churn@prod.
#[derive(Debug, Parser)]
#[command(name = "register", version, after_help = AFTER_HELP)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// The registry folder (default: RUNFN_REGISTRY, else ./registry).
    #[arg(long, value_name = "DIR", global = true)]
    registry: Option<PathBuf>,
    /// The model's name (default: manifest.name, else manifest.run_id).
    #[arg(long)]
    name: Option<String>,
    /// Point this alias (for example prod) at the new entry.
    #[arg(long, value_name = "ALIAS")]
    promote: Option<String>,
    /// Register even though the record's gate is missing or failed (needs --reason).
    #[arg(long, requires = "reason")]
    allow_ungated: bool,
    /// Why: stored with an ungated entry, or with an alias move.
    #[arg(long, global = true)]
    reason: Option<String>,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// A folder the model or scores file may also come from, besides the working folder
    /// (repeatable; a store URL allows nothing more).
    #[arg(long, value_name = "DIR")]
    artifacts: Vec<String>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Point NAME@ALIAS at VERSION (the move is recorded with --reason).
    Alias { reference: String, version: i64 },
    /// Print the entry NAME@ALIAS or NAME@VERSION names, with its weights path and hash.
    Resolve { reference: String },
    /// Print the data profile stored with the entry NAME@ALIAS or NAME@VERSION names (the
    /// snapshot it was trained on, as ds-validate profiled it), for ds-validate --previous.
    Profile { reference: String },
    /// List every entry, or those of NAME.
    List { name: Option<String> },
    /// Print one entry.
    Show { name: String, version: i64 },
    /// Print the alias moves of NAME, oldest first.
    History { name: String },
    /// Re-hash every blob; report missing or corrupt ones and aliases pointing nowhere.
    Verify,
}

/// The tool. `pause_after_blobs` is a test's fault (none in `register`): see
/// `runfn_registry::Registry::pause_after_blobs`.
pub fn main(pause_after_blobs: Option<PathBuf>) -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("register", runfn_version::long());
    runfn_core::cli::main("register", args.common.clone(), |tool| {
        run(tool, args, pause_after_blobs)
    })
}

fn registry_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("RUNFN_REGISTRY").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("registry"))
}

fn print(tool: &Tool, value: &Value, pretty: bool) -> anyhow::Result<()> {
    let _ = tool;
    let text = if pretty {
        serde_json::to_string_pretty(value)?
    } else {
        value.to_string()
    };
    runfn_core::cli::write_stdout(format!("{text}\n").as_bytes())?;
    Ok(())
}

fn entry_json(registry: &Registry, entry: &runfn_registry::Entry) -> Value {
    let mut value = serde_json::to_value(entry).expect("entries serialize");
    value["weights"] = json!(
        registry
            .blobs
            .path(&entry.lineage.weights_blake3)
            .display()
            .to_string()
    );
    // An outside model's format and framework at the top, where a reader looks first (they are
    // kept with the blobs too).
    let blobs = &entry.lineage.blobs;
    if let Some(format) = &blobs.weights_format {
        value["weights_format"] = json!(format);
    }
    if let Some(framework) = &blobs.framework {
        value["framework"] = json!(framework);
    }
    value
}

fn run(tool: &Tool, args: Args, pause_after_blobs: Option<PathBuf>) -> anyhow::Result<Exit> {
    let dir = registry_dir(args.registry.clone());
    let pretty = args.common.pretty;
    if args.command.is_some()
        && (args.name.is_some()
            || args.promote.is_some()
            || args.allow_ungated
            || args.record.is_some())
    {
        return Err(InputError::field(
            "register",
            "--name, --promote, --allow-ungated and --record apply to registering a record, not to a subcommand",
        )
        .into());
    }
    match args.command {
        None => register(tool, args, dir, pause_after_blobs),
        Some(Command::Alias { reference, version }) => {
            let (name, alias) = match ModelRef::parse(&reference)? {
                ModelRef::Alias { name, alias } => (name, alias),
                ModelRef::Version { .. } => {
                    return Err(InputError::field(
                        "alias",
                        format!("`{reference}`: expected NAME@ALIAS, not a version"),
                    )
                    .into());
                }
            };
            let mut registry = Registry::open_existing(&dir)?;
            let moved = registry.set_alias(&name, &alias, version, args.reason.as_deref())?;
            tool.info(format!(
                "{name}@{alias}: {} -> {version}",
                moved.from_version.map_or("none".into(), |v| v.to_string())
            ));
            print(tool, &serde_json::to_value(moved)?, pretty)?;
            Ok(Exit::Passed)
        }
        Some(Command::Resolve { reference }) => {
            let reference = ModelRef::parse(&reference)?;
            let registry = Registry::open_read_only(&dir)?;
            let entry = registry.resolve(&reference)?;
            print(tool, &entry_json(&registry, &entry), pretty)?;
            Ok(Exit::Passed)
        }
        Some(Command::Profile { reference }) => {
            let registry = Registry::open_read_only(&dir)?;
            let entry = registry.resolve(&ModelRef::parse(&reference)?)?;
            let Some(hash) = &entry.lineage.blobs.profile else {
                return Err(InputError::field(
                    reference,
                    format!(
                        "{}@{} was registered without a data profile",
                        entry.lineage.name, entry.version
                    ),
                )
                .into());
            };
            let bytes = registry.blobs.read(hash)?;
            runfn_core::cli::write_stdout(&bytes)?;
            Ok(Exit::Passed)
        }
        Some(Command::List { name }) => {
            let registry = Registry::open_read_only(&dir)?;
            let entries: Vec<Value> = registry
                .list(name.as_deref())?
                .iter()
                .map(|e| entry_json(&registry, e))
                .collect();
            print(tool, &Value::Array(entries), pretty)?;
            Ok(Exit::Passed)
        }
        Some(Command::Show { name, version }) => {
            let registry = Registry::open_read_only(&dir)?;
            let entry = registry.show(&name, version)?;
            print(tool, &entry_json(&registry, &entry), pretty)?;
            Ok(Exit::Passed)
        }
        Some(Command::History { name }) => {
            let registry = Registry::open_read_only(&dir)?;
            print(
                tool,
                &serde_json::to_value(registry.alias_history(&name)?)?,
                pretty,
            )?;
            Ok(Exit::Passed)
        }
        Some(Command::Verify) => {
            let registry = Registry::open_read_only(&dir)?;
            let problems = registry.verify()?;
            let entries = registry.list(None)?.len();
            for p in &problems {
                tool.warn(format!("{} {}: {}", p.entry, p.blob, p.problem));
            }
            tool.info(format!("{entries} entries, {} problems", problems.len()));
            print(
                tool,
                &json!({"passed": problems.is_empty(), "entries": entries, "problems": problems}),
                pretty,
            )?;
            Ok(Exit::from_passed(problems.is_empty()))
        }
    }
}

fn string_at(record: &Record, path: &str) -> Option<String> {
    record
        .get_path(path)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The model a record registers: runfn's (`train.weights`) or an outside trainer's artifact
/// (`external_train`), with where its recorded blake3 came from.
struct RegisteredModel {
    path: String,
    blake3: String,
    /// The record's field that names it, for errors.
    field: &'static str,
    recorded_by: &'static str,
    /// An outside artifact's format and framework.
    format: Option<String>,
    framework: Option<String>,
}

fn registered_model(record: &Record) -> anyhow::Result<RegisteredModel> {
    let train = record.section::<Train>()?;
    let external = record.section::<ExternalTrain>()?;
    match (train, external) {
        (Some(_), Some(_)) => Err(InputError::field(
            "external_train",
            "and train are both in the record: register stores one model; keep the section of the model that was evaluated",
        )
        .into()),
        (None, Some(external)) => Ok(RegisteredModel {
            path: external.artifact,
            blake3: external.artifact_blake3,
            field: "external_train.artifact",
            recorded_by: "its training script recorded it",
            format: Some(external.format),
            framework: Some(external.framework),
        }),
        (train, None) => {
            let Some((path, blake3)) = train
                .as_ref()
                .and_then(|t| t.weights.clone().zip(t.weights_blake3.clone()))
            else {
                return Err(InputError::field(
                    "train.weights",
                    "is missing: register needs a trained model (train's, or an outside trainer's external_train section)",
                )
                .into());
            };
            Ok(RegisteredModel {
                path,
                blake3,
                field: "train.weights",
                recorded_by: "training",
                format: None,
                framework: None,
            })
        }
    }
}

fn register(
    tool: &Tool,
    args: Args,
    dir: PathBuf,
    pause_after_blobs: Option<PathBuf>,
) -> anyhow::Result<Exit> {
    let mut record = Record::read(args.record.as_deref(), RecordInput::Required)?;
    // The gate is judged here (exit 1 with the reason); any other failed stage is bad input.
    let mut without_gate = record.clone().into_value();
    if let Some(map) = without_gate.as_object_mut() {
        map.remove("gate");
    }
    Record::from_value(without_gate, "stdin")?.refuse_failed_checks("register")?;
    let name = args
        .name
        .clone()
        .or_else(|| string_at(&record, "manifest.name"))
        .or_else(|| string_at(&record, "manifest.run_id"))
        .ok_or_else(|| {
            InputError::field(
                "--name",
                "is missing and the record has no manifest.name or run_id",
            )
        })?;
    runfn_registry::validate_name("--name", &name)?;
    if let Some(alias) = &args.promote {
        runfn_registry::validate_name("--promote", alias)?;
    }
    let gate = record.section::<Gate>()?;
    let gate_problem = match &gate {
        None => Some("the record has no gate section: the candidate was never gated".to_string()),
        Some(g) if !g.passed => Some(format!("the gate did not pass: {}", g.reasons.join("; "))),
        Some(_) => None,
    };
    let ungated_reason = match (&gate_problem, args.allow_ungated) {
        (Some(problem), false) => {
            tool.warn(format!(
                "refused: {problem} (--allow-ungated --reason TEXT overrides)"
            ));
            record.set(&RegisterSection::Refused(RegisterRefused {
                passed: false,
                reason: problem.clone(),
            }))?;
            return tool.finish(record, Exit::CheckFailed);
        }
        (Some(problem), true) => {
            let reason = args.reason.clone().unwrap_or_default();
            tool.warn(format!("registering ungated ({problem}): {reason}"));
            Some(reason)
        }
        (None, _) => None,
    };
    let model = registered_model(&record)?;
    let (weights_path, weights_blake3) = (model.path.clone(), model.blake3.clone());
    // The gate judged the model evaluate scored; registering another one (the final weights of a
    // run scored with `evaluate --checkpoint best`) would put an ungated model behind the alias.
    let evaluation = record.section::<Evaluate>()?;
    if let Some(scored) = evaluation.as_ref().map(|e| &e.weights_blake3)
        && *scored != weights_blake3
    {
        return Err(InputError::field(
            "evaluate.weights_blake3",
            format!(
                "is {scored}, but {} has {weights_blake3}: the model evaluated and gated is not the model register would store (evaluate --checkpoint best scores a checkpoint; register the final model scored as such)",
                model.field
            ),
        )
        .into());
    }
    runfn_manifest::verify_record(&record)?;
    let manifest_hash = string_at(&record, "manifest_hash")
        .ok_or_else(|| InputError::field("manifest_hash", "is missing (run mf-hash first)"))?;
    let manifest = record
        .get("manifest")
        .ok_or_else(|| InputError::field("manifest", "is missing"))?;

    let roots = confine::roots(&args.artifacts)?;
    confine::check(model.field, &weights_path, &roots)?;
    if let Some(scores) = evaluation.as_ref().and_then(|e| e.scores.as_ref()) {
        confine::check("evaluate.scores.path", &scores.path, &roots)?;
    }
    let mut registry = Registry::open(&dir)?;
    registry.pause_after_blobs = pause_after_blobs;
    let weights = registry
        .blobs
        .put_file(&runfn_storage::local_path(&weights_path)?)?;
    if weights != weights_blake3 {
        return Err(InputError::field(
            model.field,
            format!(
                "{weights_path}: its blake3 is {weights}, but {weights_blake3} was recorded (changed since {})",
                model.recorded_by
            ),
        )
        .into());
    }
    // An outside model was judged by its scores file: the one registered is the one gated.
    let scores = match evaluation.as_ref().and_then(|e| e.scores.as_ref()) {
        Some(scores) => {
            runfn_core::side_file::check_unchanged(
                "evaluate.scores",
                &scores.path,
                &scores.blake3,
                runfn_core::side_file::SCORES_LIMIT,
            )?;
            Some(
                registry
                    .blobs
                    .put_file(std::path::Path::new(&scores.path))?,
            )
        }
        None => None,
    };
    let manifest_text = to_canonical_string(manifest)?;
    let profile_file = record.section::<Validate>()?.and_then(|v| v.profile_file);
    let profile = match profile_file {
        Some(path) if std::path::Path::new(&path).exists() => {
            Some(registry.blobs.put_file(std::path::Path::new(&path))?)
        }
        _ => None,
    };
    let evaluation_blob = match record.get("evaluate") {
        Some(e) => Some(registry.blobs.put(e.to_string().as_bytes())?),
        None => None,
    };
    let blobs = Blobs {
        weights,
        record: registry
            .blobs
            .put(record.clone().into_value().to_string().as_bytes())?,
        manifest: registry.blobs.put(manifest_text.as_bytes())?,
        evaluation: evaluation_blob,
        profile,
        scores,
        weights_format: model.format.clone(),
        framework: model.framework.clone(),
    };
    let registration = registry.register(
        NewEntry {
            name,
            weights_blake3: weights_blake3.clone(),
            manifest_hash: manifest_hash.clone(),
            snapshot: string_at(&record, "manifest.data.snapshot"),
            code_commit: string_at(&record, "manifest.code.commit"),
            image: string_at(&record, "manifest.code.image"),
            metrics: match &evaluation {
                Some(e) => serde_json::to_value(&e.overall)?,
                None => Value::Null,
            },
            gate: gate.map_or(
                Value::Null,
                |g| json!({"passed": g.passed, "no_baseline": g.no_baseline, "reasons": g.reasons}),
            ),
            ungated_reason: ungated_reason.clone(),
            blobs,
            tags: record
                .get("manifest")
                .map(runfn_manifest::tags::of)
                .unwrap_or_default(),
        },
        args.promote.as_deref(),
    )?;
    let entry = &registration.entry;
    if registration.added {
        tool.info(format!(
            "{}@{} registered{}",
            entry.lineage.name,
            entry.version,
            args.promote
                .as_deref()
                .map(|a| format!(", now {}@{a}", entry.lineage.name))
                .unwrap_or_default()
        ));
    } else {
        tool.info(format!(
            "{}@{} was registered from this same record before: nothing added, no alias moved",
            entry.lineage.name, entry.version
        ));
    }
    let weights_location = registry.blobs.location(&entry.lineage.weights_blake3);
    record.set(&RegisterSection::Registered(Register {
        passed: true,
        reason: None,
        registry: dir.display().to_string(),
        name: entry.lineage.name.clone(),
        version: entry.version,
        weights_blake3,
        weights: weights_location,
        manifest_hash,
        promoted: args.promote.clone(),
        ungated_reason,
        already_registered: !registration.added,
    }))?;
    tool.finish(record, Exit::Passed)
}
