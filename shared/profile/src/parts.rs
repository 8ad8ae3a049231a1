//! A snapshot profiled in parts (`ds-validate --part K/N --parts DIR`) and merged: each part
//! profiles its pieces (files, runs of a large Parquet file's row groups) and keeps one profile
//! per piece; the merge puts every piece's profile together in piece order, exactly as one
//! process does, so the merged profile, its windows and every check on them are identical to a
//! single process's (no sketch is merged in another order).

use runfn_core::parts::{Part, PartHeader, assign, check_coverage, fingerprint};
use runfn_data::DataError;
use runfn_data::read::{Piece, Snapshot};
use serde::{Deserialize, Serialize};

use crate::history::{Cut, PieceProfile, PieceRoles, Windowed, merge_pieces, profile_pieces};
use crate::profile::{PIECE_ROWS, pieces};

pub const PROFILE_PART_FORMAT: &str = "ds-validate-part-v1";

/// One part's profiles, piece by piece.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilePart {
    pub part: PartHeader,
    /// With windows: the newest time value of the whole snapshot (data.time), which windows
    /// count back from; every part must find the same. Without: the newest of the files this
    /// part read, and the merge takes the greatest (the whole snapshot's, which the
    /// explanations' expiry is judged by).
    pub newest: Option<f64>,
    /// `validate.window` when the pieces were cut into windows.
    pub window: Option<String>,
    pub pieces: Vec<PieceProfile>,
}

/// A unit of work's name (file, and its run of row groups) and weight (bytes).
type Unit = (String, u64);

/// The snapshot's pieces (runs of at least `piece_rows` rows of a Parquet file's row groups, or
/// whole files), each with the name and weight the assignment is made from.
fn listing(snapshot: &Snapshot, piece_rows: u64) -> Result<(Vec<Piece>, Vec<Unit>), DataError> {
    let pieces = pieces(snapshot, piece_rows)?;
    let mut per_file = vec![0u64; snapshot.files.len()];
    for piece in &pieces {
        per_file[piece.file] += 1;
    }
    let root = &snapshot.root;
    let units = pieces
        .iter()
        .map(|piece| {
            let file = &snapshot.files[piece.file];
            let name = file.path.strip_prefix(root).unwrap_or(&file.path);
            let groups = piece
                .row_groups
                .as_ref()
                .map(|g| format!("#{}..{}", g.start, g.end))
                .unwrap_or_default();
            (
                format!("{}{groups}", name.display()),
                file.bytes / per_file[piece.file].max(1),
            )
        })
        .collect();
    Ok((pieces, units))
}

fn fingerprint_of(units: &[Unit]) -> String {
    fingerprint(units.iter().map(|(n, w)| (n.as_str(), *w)))
}

/// The files part `part` of `snapshot` reads, by their `/`-separated path under the snapshot
/// (as a pin lists them).
pub fn files_of_part(
    snapshot: &Snapshot,
    part: Part,
) -> Result<std::collections::BTreeSet<String>, DataError> {
    let (pieces, units) = listing(snapshot, PIECE_ROWS)?;
    let weights: Vec<u64> = units.iter().map(|(_, w)| *w).collect();
    let assignment = assign(&weights, part.count);
    Ok(pieces
        .iter()
        .zip(assignment)
        .filter(|(_, at)| *at == part.index)
        .map(|(piece, _)| relative_name(&snapshot.root, &snapshot.files[piece.file].path))
        .collect())
}

/// The pieces of `files` (whole files of the snapshot, by position) profiled one by one, in
/// piece order: what a part of a tool that cuts its work by files (predict) keeps for the merge.
/// [`merge_file_profiles`] of every part's, in file order, is [`crate::profile_snapshot`]'s
/// profile, byte for byte.
pub fn profile_files(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    files: &[usize],
) -> Result<Vec<PieceProfile>, DataError> {
    let mut mine = Vec::new();
    for &file in files {
        mine.extend(snapshot.pieces(file, PIECE_ROWS)?);
    }
    profile_pieces(snapshot, roles, None, &mine)
}

/// The snapshot's profile from its files' piece profiles ([`profile_files`]), in file order.
pub fn merge_file_profiles(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    pieces: Vec<PieceProfile>,
) -> Result<crate::Profile, DataError> {
    Ok(merge_pieces(snapshot, roles, None, pieces)?.whole)
}

pub use runfn_core::parts::relative_name;

/// Profiles part `part` of `snapshot`: its pieces, cut into windows by `cut`.
pub fn profile_part(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    cut: Option<Cut>,
    window: Option<&str>,
    newest: Option<f64>,
    part: Part,
) -> Result<ProfilePart, DataError> {
    profile_part_in(snapshot, roles, (cut, window), newest, part, PIECE_ROWS)
}

fn profile_part_in(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    (cut, window): (Option<Cut>, Option<&str>),
    newest: Option<f64>,
    part: Part,
    piece_rows: u64,
) -> Result<ProfilePart, DataError> {
    let (pieces, units) = listing(snapshot, piece_rows)?;
    let weights: Vec<u64> = units.iter().map(|(_, w)| *w).collect();
    let assignment = assign(&weights, part.count);
    let mine: Vec<usize> = (0..pieces.len())
        .filter(|&i| assignment[i] == part.index)
        .collect();
    let my_pieces: Vec<Piece> = mine.iter().map(|&i| pieces[i].clone()).collect();
    let profiles = profile_pieces(snapshot, roles, cut, &my_pieces)?;
    Ok(ProfilePart {
        part: PartHeader {
            format: PROFILE_PART_FORMAT.into(),
            part,
            listing: fingerprint_of(&units),
            units: pieces.len() as u64,
            done: mine.iter().map(|&i| i as u64).collect(),
        },
        newest,
        window: window.map(String::from),
        pieces: profiles,
    })
}

/// Why parts could not be merged: parts that do not fit together (the input's fault, exit 2),
/// or the snapshot could not be read while listing or merging (its error kept whole, so that a
/// failing disk or store stays the environment's, exit 4).
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{0}")]
    Parts(String),
    #[error(transparent)]
    Data(#[from] DataError),
}

/// The windowed profile from every part's pieces, merged in piece order: refuses parts of
/// another listing, another window or another newest time, or that do not cover the pieces as
/// the assignment says.
pub fn merge_parts(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    cut: Option<Cut>,
    window: Option<&str>,
    parts: Vec<ProfilePart>,
) -> Result<Windowed, MergeError> {
    merge_parts_in(snapshot, roles, (cut, window), parts, PIECE_ROWS)
}

fn merge_parts_in(
    snapshot: &Snapshot,
    roles: &PieceRoles,
    (cut, window): (Option<Cut>, Option<&str>),
    parts: Vec<ProfilePart>,
    piece_rows: u64,
) -> Result<Windowed, MergeError> {
    let (pieces, units) = listing(snapshot, piece_rows)?;
    fits(&pieces, &units, (cut, window), &parts)?;
    let mut slots: Vec<Option<PieceProfile>> = vec![None; pieces.len()];
    for part in parts {
        for (profile, unit) in part.pieces.into_iter().zip(part.part.done) {
            slots[unit as usize] = Some(profile);
        }
    }
    let per_piece: Vec<PieceProfile> = slots.into_iter().flatten().collect();
    Ok(merge_pieces(snapshot, roles, cut, per_piece)?)
}

/// Whether the parts fit together and cover the listing as the assignment says.
fn fits(
    pieces: &[Piece],
    units: &[Unit],
    (cut, window): (Option<Cut>, Option<&str>),
    parts: &[ProfilePart],
) -> Result<(), MergeError> {
    let bad = MergeError::Parts;
    let listing = fingerprint_of(units);
    let count = parts.first().map_or(1, |p| p.part.part.count);
    for part in parts {
        let at = part.part.part;
        if part.part.format != PROFILE_PART_FORMAT {
            return Err(bad(format!(
                "part {at}: format `{}`, expected `{PROFILE_PART_FORMAT}`",
                part.part.format
            )));
        }
        if part.part.listing != listing {
            return Err(bad(format!(
                "part {at} profiled another listing of the snapshot ({} pieces now): it changed since the parts ran",
                pieces.len()
            )));
        }
        if part.window.as_deref() != window {
            return Err(bad(format!(
                "part {at} was cut by validate.window {:?}, the manifest now says {:?}",
                part.window, window
            )));
        }
        if part.pieces.len() != part.part.done.len() {
            return Err(bad(format!(
                "part {at} holds {} piece profiles for {} pieces done",
                part.pieces.len(),
                part.part.done.len()
            )));
        }
    }
    let newest: Vec<Option<f64>> = parts.iter().map(|p| p.newest).collect();
    if window.is_some() && newest.windows(2).any(|w| w[0] != w[1]) {
        return Err(bad(format!(
            "the parts found different newest times ({newest:?}): the snapshot changed while they ran"
        )));
    }
    if let (Some(cut), Some(Some(found))) = (cut, newest.first())
        && cut.anchor != *found
    {
        return Err(bad(format!(
            "the parts cut windows back from {found}, the merge from {}",
            cut.anchor
        )));
    }
    let weights: Vec<u64> = units.iter().map(|(_, w)| *w).collect();
    let headers: Vec<&PartHeader> = parts.iter().map(|p| &p.part).collect();
    check_coverage(&headers, &assign(&weights, count)).map_err(bad)
}

/// The snapshot's newest time from its parts: with windows each part found it (all the same:
/// [`merge_parts`] checks it); without, each found its own files', and it is the greatest.
pub fn newest_of(parts: &[ProfilePart]) -> Option<f64> {
    match parts.first() {
        Some(first) if first.window.is_some() => first.newest,
        _ => parts.iter().filter_map(|p| p.newest).reduce(f64::max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile_in_pieces;
    use crate::profile::tests::telco_parquet;

    /// Without windows each part found its own files' newest time, and the snapshot's is the
    /// greatest of them; with windows every part found the snapshot's.
    #[test]
    fn the_newest_time_of_parts_without_windows_is_the_greatest() {
        let part = |index: u32, newest: Option<f64>, window: Option<&str>| ProfilePart {
            part: PartHeader {
                format: PROFILE_PART_FORMAT.into(),
                part: Part { index, count: 3 },
                listing: String::new(),
                units: 3,
                done: vec![u64::from(index)],
            },
            newest,
            window: window.map(String::from),
            pieces: Vec::new(),
        };
        let own = [
            part(0, Some(5.0), None),
            part(1, None, None),
            part(2, Some(9.0), None),
        ];
        assert_eq!(newest_of(&own), Some(9.0));
        assert_eq!(newest_of(&[part(0, None, None)]), None);
        let windowed = [
            part(0, Some(9.0), Some("1 month")),
            part(1, Some(9.0), Some("1 month")),
        ];
        assert_eq!(newest_of(&windowed), Some(9.0));
    }

    /// The telco table's roles: its label, nothing else.
    const CHURNED: PieceRoles<'static> = PieceRoles {
        label: Some("churned"),
        positive: None,
        identifiers: &[],
    };

    /// A Parquet file's runs of row groups spread over parts, profiled and merged: the profile
    /// one process makes of the same pieces, exactly.
    #[test]
    fn row_groups_in_parts_merge_to_the_profile_of_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = telco_parquet(dir.path());
        let roles = CHURNED;
        let count = 3;
        let parts: Vec<ProfilePart> = (0..count)
            .map(|index| {
                let part = Part { index, count };
                profile_part_in(&snapshot, &roles, (None, None), None, part, 1200).unwrap()
            })
            .collect();
        let done: Vec<Vec<u64>> = parts.iter().map(|p| p.part.done.clone()).collect();
        assert_eq!(
            done,
            vec![vec![0, 1], vec![2], vec![3, 4]],
            "contiguous, by bytes"
        );
        let one = profile_in_pieces(&snapshot, Some("churned"), None, &[], 1200).unwrap();
        let mut reversed = parts.clone();
        reversed.reverse();
        for parts in [parts, reversed] {
            let merged = merge_parts_in(&snapshot, &roles, (None, None), parts, 1200).unwrap();
            assert!(
                merged.whole == one,
                "the merged profile differs from one process's"
            );
        }
        // A part missing, or a part of another cut of the file, is refused.
        let mut short = Vec::new();
        for index in [0, 2] {
            let part = Part { index, count };
            short.push(profile_part_in(&snapshot, &roles, (None, None), None, part, 1200).unwrap());
        }
        let err = merge_parts_in(&snapshot, &roles, (None, None), short, 1200).unwrap_err();
        assert!(
            matches!(&err, MergeError::Parts(m) if m.contains("part 1")),
            "{err}"
        );
        let other = (0..count)
            .map(|index| {
                let part = Part { index, count };
                profile_part_in(&snapshot, &roles, (None, None), None, part, 2000).unwrap()
            })
            .collect();
        let err = merge_parts_in(&snapshot, &roles, (None, None), other, 1200).unwrap_err();
        assert!(
            matches!(&err, MergeError::Parts(m) if m.contains("another listing")),
            "{err}"
        );
    }

    /// A snapshot that cannot be read at the merge keeps its read's error whole (was a string,
    /// so a failing disk or store under a merge read as bad input, exit 2, not exit 4).
    #[test]
    fn a_read_failing_at_the_merge_keeps_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = telco_parquet(dir.path());
        let roles = CHURNED;
        let part = Part { index: 0, count: 1 };
        let parts =
            vec![profile_part_in(&snapshot, &roles, (None, None), None, part, 1200).unwrap()];
        for file in &snapshot.files {
            std::fs::remove_file(&file.path).unwrap();
        }
        let err = merge_parts_in(&snapshot, &roles, (None, None), parts, 1200).unwrap_err();
        let MergeError::Data(data) = &err else {
            panic!("not the read's error: {err}");
        };
        let io = std::iter::successors(Some(data as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        })
        .find_map(|e| e.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound),
            "{err}"
        );
    }
}
