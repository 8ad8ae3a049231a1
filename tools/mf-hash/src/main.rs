//! mf-hash: read a run manifest (YAML or JSON), lint it, and hash its canonical form.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use runfn_core::canonical::sorted_keys;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::read_text;
use runfn_core::{Exit, InputError, Record};
use runfn_manifest::digest::{DataDigest, digest_path, total_bytes};
use runfn_manifest::hash::is_hash;
use runfn_manifest::snapshot::SnapshotRef;
use runfn_manifest::{FORMAT_TAG, Format, Problem, lint, manifest_hash, parse_manifest};
use serde_json::{Value, json};

const AFTER_HELP: &str = "\
Examples:
  mf-hash manifest.yaml > runs/churn/record.json
  mf-hash manifest.yaml --check 3f1c...e9 -q            # exit 1 when the manifest changed
  mf-hash manifest.yaml --commit-from-git --data-digest ./lake/churn | ds-validate

Output (one JSON object on stdout):
  {\"manifest\": {...normalized, keys sorted...},
   \"manifest_hash\": \"<64 hex>\",            blake3 of \"runfn-manifest-v1\\n\" + RFC 8785 JSON
   \"mf_hash\": {\"passed\": bool, \"format\": \"runfn-manifest-v1\",
               \"problems\": [{\"field\": \"code.image\", \"message\": \"...\"}],
               \"check\": {\"expected\": \"<hex>\", \"matched\": bool},          with --check
               \"data_digest\": {\"path\", \"digest\": \"blake3:<hex>\", \"files\", \"bytes\"}},  with --data-digest
   \"timings\": [{\"tool\": \"mf-hash\", \"started_at\", \"wall_s\", \"cpu_s\", \"max_rss_bytes\"}]}

Exit: 0 clean, 1 lint problem or --check mismatch (record still on stdout), 2 bad usage or input.";

/// Lint a run manifest and hash its canonical form.
#[derive(Debug, Parser)]
#[command(name = "mf-hash", version, after_help = AFTER_HELP)]
struct Args {
    /// The manifest, YAML or JSON (`-` or nothing: stdin).
    manifest: Option<PathBuf>,
    /// Input format (default: from the extension, else JSON when it starts with `{`).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Exit 1 unless the manifest hashes to HASH.
    #[arg(long, value_name = "HASH")]
    check: Option<String>,
    /// Set code.commit to the git HEAD of the current folder; refuse a dirty work tree.
    #[arg(long)]
    commit_from_git: bool,
    /// Add a content digest of this data snapshot (folder or file); verified against a
    /// `@blake3:` snapshot id.
    #[arg(long, value_name = "PATH")]
    data_digest: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FormatArg {
    Json,
    Yaml,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("mf-hash");
    runfn_core::cli::main("mf-hash", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    if let Some(expected) = &args.check
        && !is_hash(expected)
    {
        return Err(InputError::field(
            "--check",
            format!("`{expected}` is not 64 lowercase hex characters"),
        )
        .into());
    }
    let (text, origin) = read_text(args.manifest.as_deref())?;
    let format = match (
        args.format,
        args.manifest.as_deref().and_then(Format::from_extension),
    ) {
        (Some(FormatArg::Json), _) => Format::Json,
        (Some(FormatArg::Yaml), _) => Format::Yaml,
        (None, Some(format)) => format,
        (None, None) => Format::sniff(&text),
    };
    let mut manifest = parse_manifest(&text, format, &origin)?;
    if args.commit_from_git {
        let commit = runfn_manifest::git::clean_head_commit(".".as_ref())?;
        set_commit(&mut manifest, commit, &origin)?;
    }
    let fields = manifest.as_object().context("the manifest is a mapping")?;
    let mut problems = lint(fields);
    let hash = match manifest_hash(&manifest) {
        Ok(hash) => Some(hash),
        Err(err) => {
            problems.push(Problem {
                field: err.path.trim_start_matches("$.").to_string(),
                message: err.to_string(),
            });
            None
        }
    };

    let mut section = json!({"passed": true, "format": FORMAT_TAG});
    if let Some(expected) = &args.check {
        let matched = hash.as_deref() == Some(expected.as_str());
        if !matched {
            problems.push(Problem {
                field: "manifest_hash".into(),
                message: format!(
                    "is {}, expected {expected} (--check)",
                    hash.as_deref().unwrap_or("not computable")
                ),
            });
        }
        section["check"] = json!({"expected": expected, "matched": matched});
    }
    if let Some(path) = &args.data_digest {
        let digest = digest_with_progress(tool, path)?;
        problems.extend(pin_problem(fields, &digest));
        section["data_digest"] = serde_json::to_value(&digest)?;
    }
    for problem in &problems {
        tool.info(format_args!("problem: {problem}"));
    }
    let passed = problems.is_empty();
    section["passed"] = json!(passed);
    section["problems"] = serde_json::to_value(&problems)?;

    let mut record = Record::new();
    record.set_section("manifest", sorted_keys(&manifest));
    record.set_section("manifest_hash", hash.map_or(Value::Null, Value::String));
    record.set_section("mf_hash", section);
    tool.finish(record, Exit::from_passed(passed))
}

fn set_commit(manifest: &mut Value, commit: String, origin: &str) -> Result<(), InputError> {
    let code = manifest
        .as_object_mut()
        .map(|fields| fields.entry("code").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .ok_or_else(|| {
            InputError::field(
                format!("{origin}: code"),
                "must be a mapping to take --commit-from-git",
            )
        })?;
    code.insert("commit".into(), Value::String(commit));
    Ok(())
}

fn digest_with_progress(tool: &Tool, path: &std::path::Path) -> anyhow::Result<DataDigest> {
    let bar = tool.progress_bar(
        total_bytes(path)?,
        "{bytes}/{total_bytes} {binary_bytes_per_sec}",
    );
    let digest = digest_path(path, &|bytes| bar.inc(bytes))?;
    bar.finish_and_clear();
    tool.info(format!(
        "{}: {} ({} files, {} bytes)",
        digest.path, digest.digest, digest.files, digest.bytes
    ));
    Ok(digest)
}

/// A snapshot pinned by `@blake3:<hex>` must match the digest of the data given.
fn pin_problem(manifest: &serde_json::Map<String, Value>, digest: &DataDigest) -> Option<Problem> {
    let snapshot = manifest.get("data")?.get("snapshot")?.as_str()?;
    let pinned = SnapshotRef::parse(snapshot).ok()?.content_digest()?;
    (pinned != digest.digest).then(|| Problem {
        field: "data.snapshot".into(),
        message: format!(
            "pins {pinned}, but {} hashes to {}",
            digest.path, digest.digest
        ),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
