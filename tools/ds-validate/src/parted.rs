//! `--part K/N --parts DIR` (profile this part's pieces into DIR) and `--parts DIR` alone (merge
//! them): the record a merge writes is the one a single process writes.

use std::path::Path;

use runfn_core::cli::Tool;
use runfn_core::parts::{Part, read_partials, write_partial};
use runfn_core::{Exit, InputError};
use runfn_data::DataError;
use runfn_data::spec::DataSpec;
use runfn_profile::history::{Cut, PieceRoles, Windowed, span};
use runfn_profile::parts::{MergeError, ProfilePart, merge_parts, profile_part};

const TOOL: &str = "ds-validate";

/// The roles a profile of `spec`'s data is made with.
pub fn with_roles<T>(spec: &DataSpec, run: impl FnOnce(&PieceRoles) -> T) -> T {
    let identifiers: Vec<String> = spec.entity.iter().chain(&spec.text).cloned().collect();
    let roles = PieceRoles {
        label: spec.label.as_deref(),
        positive: spec.label_positive.as_ref(),
        identifiers: &identifiers,
    };
    run(&roles)
}

/// The windows' cut for `window` (manifest.validate.window) back from `anchor`.
pub fn cut<'a>(time: &'a str, window: &str, anchor: f64) -> Result<Cut<'a>, InputError> {
    let (count, unit) = runfn_schema::validate::window_span(window)
        .map_err(|m| InputError::field("manifest.validate.window", m))?;
    Ok(Cut {
        time,
        span: span(count, &unit),
        anchor,
    })
}

/// The newest value of `time` over the whole snapshot, reading that column alone (the other
/// columns are stepped over, neither built nor parsed): windows count back from it, so every
/// part of a windowed run needs it and each finds the same.
pub fn newest_time(snapshot: &runfn_data::Snapshot, time: &str) -> Result<Option<f64>, DataError> {
    let projected = snapshot.clone().project(&[time]);
    runfn_data::rolling::latest_time(&projected, time)
}

/// The newest value of `time` in the files this part reads: without windows a part needs no
/// newest time before it profiles, so it reads only its own files' time column, and the merge
/// takes the greatest of the parts' (the whole snapshot's newest, as one process finds it).
pub fn newest_time_of_part(
    snapshot: &runfn_data::Snapshot,
    time: &str,
    part: Part,
) -> Result<Option<f64>, DataError> {
    let mine = runfn_profile::parts::files_of_part(snapshot, part)?;
    let mut own = snapshot.clone().project(&[time]);
    own.files.retain(|file| {
        mine.contains(&runfn_profile::parts::relative_name(
            &snapshot.root,
            &file.path,
        ))
    });
    runfn_data::rolling::latest_time(&own, time)
}

/// Checks the files this part reads against the snapshot's pin, hashing them alone.
pub fn verify_part(
    snapshot: &runfn_data::Snapshot,
    spec: &DataSpec,
    path: &Path,
    part: Part,
) -> Result<(), DataError> {
    let mine = runfn_profile::parts::files_of_part(snapshot, part)?;
    spec.verify_snapshot(path, &|relative| mine.contains(relative))
}

/// Profiles this part's pieces and writes the partial; prints where it went.
pub fn run_part(
    tool: &Tool,
    snapshot: &runfn_data::Snapshot,
    spec: &DataSpec,
    window: Option<(&str, Cut)>,
    newest: Option<f64>,
    part: Part,
    dir: &Path,
) -> anyhow::Result<Exit> {
    let partial = with_roles(spec, |roles| {
        profile_part(
            snapshot,
            roles,
            window.map(|(_, c)| c),
            window.map(|(w, _)| w),
            newest,
            part,
        )
    })?;
    let units = (partial.pieces.len() as u64, partial.part.units);
    let done = write_partial(dir, TOOL, part, &partial, units)?;
    let rows: u64 = partial.pieces.iter().map(|p| p.whole.rows).sum();
    tool.info(format!(
        "part {part}: profiled {} of {} pieces ({rows} rows) into {}",
        units.0, units.1, done.partial
    ));
    runfn_core::cli::write_stdout(done.line().as_bytes())?;
    Ok(Exit::Passed)
}

/// Every part's partial in `dir`, in part order.
pub fn read_parts(dir: &Path) -> Result<Vec<ProfilePart>, InputError> {
    read_partials(
        dir,
        TOOL,
        |text, origin| {
            serde_json::from_str::<ProfilePart>(text)
                .map_err(|e| InputError::field(origin, format!("not a {TOOL} partial: {e}")))
        },
        |p: &ProfilePart| &p.part,
    )
}

/// The snapshot's windowed profile from the parts, merged in piece order.
pub fn merge(
    tool: &Tool,
    snapshot: &runfn_data::Snapshot,
    spec: &DataSpec,
    window: Option<(&str, Cut)>,
    parts: Vec<ProfilePart>,
    dir: &Path,
) -> anyhow::Result<Windowed> {
    let count = parts.len();
    let merged = with_roles(spec, |roles| {
        merge_parts(
            snapshot,
            roles,
            window.map(|(_, c)| c),
            window.map(|(w, _)| w),
            parts,
        )
    })
    .map_err(|err| match err {
        // Parts that do not fit are the input's; a snapshot that cannot be read keeps its
        // error, so a failing disk or store stays the environment's.
        MergeError::Parts(message) => {
            anyhow::Error::new(InputError::field(dir.display().to_string(), message))
        }
        MergeError::Data(err) => anyhow::Error::new(err),
    })?;
    tool.info(format!(
        "merged {count} parts from {}: {} rows",
        dir.display(),
        merged.whole.rows
    ));
    Ok(merged)
}
