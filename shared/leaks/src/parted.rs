//! The checks in parts (a Slurm job array, a Kubernetes Indexed Job) and their merge, which
//! finds what one process finds, to the byte.
//!
//! A part reads a contiguous run of the snapshot's files (balanced by bytes; a file is never
//! cut, since every place a check names is a file and a row in it) exactly as one process reads
//! them, and stops where one process would start judging: what its sorters hold (key
//! occurrences, text band keys, numbers of the label-proxy candidates) it writes as one sorted
//! run per sorter; its files' texts as they were stored; what adds up (row counts, time ranges,
//! label values, category counts, train categories) folded over its files in file order. The
//! merge puts each part's files back where one process has them once read, adds each part's runs
//! to the sorters, where they are merged with what is sorted there, and judges. Every figure,
//! example and twin pair is one process's (`tests/leak_check_parts.rs`); the merge's own work
//! is the merging of sorted runs and the checks.

use std::fs::File;
use std::path::{Path, PathBuf};

use runfn_core::parts::{Part, PartDone, PartHeader, assign, fingerprint, relative_name};
use runfn_data::DataError;
use runfn_data::Snapshot;
use runfn_data::partitioned::Partitioned;
use runfn_data::read::BadValues;
use runfn_data::sorted_runs::{Merge, RunFile, read_range, write_run};
use serde::{Deserialize, Serialize};

use crate::categories::{CategoriesState, FileCategories};
use crate::config::LeakConfig;
use crate::keys::{FileKeyCounts, FileKeys, Keys, Occurrence, hash_head};
use crate::near_twins::FileTexts;
use crate::scan::{FileScan, Layout, Sinks, Tallies, spilled};

const TOOL: &str = "leak-check";
const FORMAT: &str = "leak-check-part-v1";

/// What a part leaves beside its runs.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Partial {
    header: PartHeader,
    /// Which run of the part this is (the clock and the process): reducers name the parts they
    /// reduced by their partials' hashes, so a part run again since is told apart even where it
    /// wrote the same bytes.
    written: String,
    /// What decides what the scan keeps of a row (the columns' roles, the splits): parts and the
    /// merge must agree on it.
    scan: String,
    files: Vec<FileState>,
    tallies: Tallies,
    categories: Vec<CategoriesState>,
    runs: Runs,
    bad_values: BadValues,
}

/// One file a part read: its key occurrences per split, and per text column the bytes of its
/// texts' store (`None`: no text with shingles).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileState {
    index: usize,
    entities: Vec<u64>,
    rows: Vec<u64>,
    texts: Vec<Option<u64>>,
}

/// The part's sorted runs and side files, named relative to its folder (so the folder may be
/// mounted elsewhere on the merge's machine).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Runs {
    entities: RunFile,
    rows: RunFile,
    bands: Vec<RunFile>,
    proxies: Vec<RunFile>,
}

fn runs_dir(dir: &Path, part: Part) -> PathBuf {
    dir.join(format!("{TOOL}.part-{}-of-{}.runs", part.index, part.count))
}

fn text_store_name(slot: usize, file: usize) -> String {
    format!("texts-{slot}-{file}")
}

fn categories_name(slot: usize) -> String {
    format!("categories-{slot}.train")
}

/// The files part `part` reads, by their names relative to the snapshot's root: what it hashes
/// of a pinned snapshot.
pub fn part_files(snapshot: &Snapshot, part: Part) -> Vec<String> {
    let weights: Vec<u64> = snapshot.files.iter().map(|f| f.bytes).collect();
    let assignment = assign(&weights, part.count);
    snapshot
        .files
        .iter()
        .zip(assignment)
        .filter(|(_, k)| *k == part.index)
        .map(|(f, _)| relative_name(&snapshot.root, &f.path))
        .collect()
}

/// The files' names (relative to the snapshot's root) and bytes: the units parts cut.
fn listing(data: &Partitioned) -> (Vec<u64>, String) {
    let root = &data.snapshot.root;
    let names: Vec<(String, u64)> = data
        .snapshot
        .files
        .iter()
        .map(|f| (relative_name(root, &f.path), f.bytes))
        .collect();
    let weights = names.iter().map(|(_, bytes)| *bytes).collect();
    (
        weights,
        fingerprint(names.iter().map(|(n, b)| (n.as_str(), *b))),
    )
}

/// Everything of the layout the scan reads rows by (whether pairs are listed is the merge's
/// affair), and the splits.
fn scan_fingerprint(data: &Partitioned, layout: &Layout) -> String {
    let roles = (
        (layout.entity, layout.time, layout.label, layout.label_time),
        (&layout.label_positive, layout.train),
        (&layout.text, &layout.as_of, &layout.features),
        (&layout.proxies, &layout.categories),
    );
    let text = format!("{roles:?}\n{}", data.splitting());
    format!("blake3:{}", blake3::hash(text.as_bytes()).to_hex())
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads part `part`'s files of `data` and writes its partial and runs into `dir`.
pub fn check_part(
    data: &Partitioned,
    config: &LeakConfig,
    part: Part,
    dir: &Path,
) -> Result<PartDone, DataError> {
    let layout = Layout::new(data, config)?;
    let (weights, listing) = listing(data);
    let assignment = assign(&weights, part.count);
    let own: Vec<usize> = (0..weights.len())
        .filter(|&i| assignment[i] == part.index)
        .collect();
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    // What an earlier or killed run of this part left goes first; the partial, written last,
    // says the runs are whole.
    let runs = runs_dir(dir, part);
    std::fs::remove_file(part.path(dir, TOOL))
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        })
        .map_err(io_at(dir))?;
    if runs.exists() {
        std::fs::remove_dir_all(&runs).map_err(io_at(&runs))?;
    }
    std::fs::create_dir(&runs).map_err(io_at(&runs))?;

    let spill = config.spill_root()?;
    let sinks = crate::sinks(&layout, config, spill.path())?;
    let (scans, bad_values) = data.fold_files(
        &own,
        || FileScan::new(&layout),
        |scan, batch| scan.add(&layout, &sinks, batch),
    )?;

    let mut files = Vec::with_capacity(scans.len());
    let mut tallies = Tallies::new(&layout);
    let mut categories: Vec<FileCategories> = (0..layout.categories.len())
        .map(|_| FileCategories::default())
        .collect();
    for (&index, scan) in own.iter().zip(scans) {
        let entities = scan
            .entities
            .finish(&sinks.entities)
            .map_err(io_at(&runs))?;
        let rows = scan.rows.finish(&sinks.rows).map_err(io_at(&runs))?;
        let mut texts = Vec::with_capacity(scan.texts.len());
        for (slot, (file_texts, search)) in scan.texts.into_iter().zip(&sinks.texts).enumerate() {
            texts.push(match file_texts.finish(search).map_err(io_at(&runs))? {
                None => None,
                Some(store) => Some(keep_store(store, &runs.join(text_store_name(slot, index)))?),
            });
        }
        for (target, column) in categories.iter_mut().zip(scan.categories) {
            target.absorb(column).map_err(io_at(&runs))?;
        }
        tallies.absorb(scan.tallies, &sinks.proxies)?;
        files.push(FileState {
            index,
            entities: entities.per_split().to_vec(),
            rows: rows.per_split().to_vec(),
            texts,
        });
    }
    for (proxy, sink) in tallies.proxy_numeric.iter_mut().zip(&sinks.proxies) {
        proxy.flush(sink).map_err(|e| spilled(sink.root(), e))?;
    }
    let categories = categories
        .iter_mut()
        .enumerate()
        .map(|(slot, column)| {
            let path = runs.join(categories_name(slot));
            column.persist(&path).map_err(io_at(&path))
        })
        .collect::<Result<Vec<_>, _>>()?;

    let Sinks {
        entities,
        rows,
        texts,
        proxies,
        root: _,
    } = sinks;
    let runs_written = Runs {
        entities: keep_run(
            &runs,
            "entities.run".into(),
            entities.into_sorted().map_err(io_at(&runs))?,
        )?,
        rows: keep_run(
            &runs,
            "rows.run".into(),
            rows.into_sorted().map_err(io_at(&runs))?,
        )?,
        bands: texts
            .into_iter()
            .enumerate()
            .map(|(slot, search)| {
                keep_run(
                    &runs,
                    format!("bands-{slot}.run"),
                    search.into_sorted().map_err(io_at(&runs))?,
                )
            })
            .collect::<Result<_, _>>()?,
        proxies: proxies
            .into_iter()
            .enumerate()
            .map(|(slot, sink)| {
                keep_run(
                    &runs,
                    format!("proxy-{slot}.run"),
                    sink.into_sorted().map_err(io_at(&runs))?,
                )
            })
            .collect::<Result<_, _>>()?,
    };
    let done: Vec<u64> = own.iter().map(|&i| i as u64).collect();
    let partial = Partial {
        header: PartHeader {
            format: FORMAT.into(),
            part,
            listing,
            units: weights.len() as u64,
            done: done.clone(),
        },
        written: format!(
            "{} {}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            std::process::id()
        ),
        scan: scan_fingerprint(data, &layout),
        files,
        tallies,
        categories,
        runs: runs_written,
        bad_values,
    };
    runfn_core::parts::write_partial(
        dir,
        TOOL,
        part,
        &partial,
        (done.len() as u64, weights.len() as u64),
    )
    .map_err(DataError::from)
}

/// Writes `sorted` as the run `name` in the part's folder `runs`, named relative to it.
fn keep_run<T: runfn_data::spill_sort::Record>(
    runs: &Path,
    name: String,
    sorted: runfn_data::spill_sort::Sorted<T>,
) -> Result<RunFile, DataError> {
    let path = runs.join(&name);
    let mut run = write_run(sorted, &path).map_err(io_at(&path))?;
    run.path = PathBuf::from(name);
    Ok(run)
}

/// Copies a file's text store (a temporary file) to `path`, returning its bytes.
fn keep_store(mut store: File, path: &Path) -> Result<u64, DataError> {
    use std::io::Seek;
    store.rewind().map_err(io_at(path))?;
    let mut out = File::create(path).map_err(io_at(path))?;
    let bytes = std::io::copy(&mut store, &mut out).map_err(io_at(path))?;
    out.sync_all().map_err(io_at(path))?;
    Ok(bytes)
}

/// A part's partial as read, with the blake3 of its text (what reducers name the parts by).
struct Loaded {
    partial: Partial,
    blake3: String,
}

/// Every part's partial in `dir`, checked against `data` and `layout`: the same snapshot, the
/// same roles and splits, each part's files those the assignment gives it.
fn read_parts(data: &Partitioned, layout: &Layout, dir: &Path) -> Result<Vec<Loaded>, DataError> {
    let (weights, listing) = listing(data);
    let loaded = runfn_core::parts::read_partials(
        dir,
        TOOL,
        |text, origin| {
            let partial = serde_json::from_str::<Partial>(text).map_err(|e| {
                runfn_core::InputError::field(origin, format!("is not a leak-check partial: {e}"))
            })?;
            Ok(Loaded {
                partial,
                blake3: blake3::hash(text.as_bytes()).to_hex().to_string(),
            })
        },
        |l: &Loaded| &l.partial.header,
    )
    .map_err(DataError::from)?;
    let count = loaded[0].partial.header.part.count;
    let assignment = assign(&weights, count);
    let scan = scan_fingerprint(data, layout);
    for Loaded { partial, .. } in &loaded {
        let part = partial.header.part;
        partial
            .header
            .check(dir, FORMAT, &listing, "another snapshot")
            .map_err(DataError::from)?;
        let refuse = |message: String| {
            DataError::file(
                part.path(dir, TOOL),
                format!("{message}: run the parts and the merge with the same manifest and flags"),
            )
        };
        if partial.scan != scan {
            return Err(refuse(
                "read the rows with other columns or splits than this merge".into(),
            ));
        }
        let expected: Vec<u64> = (0..weights.len())
            .filter(|&i| assignment[i] == part.index)
            .map(|i| i as u64)
            .collect();
        let read: Vec<u64> = partial.files.iter().map(|f| f.index as u64).collect();
        if partial.header.done != expected || read != expected {
            return Err(refuse(format!("did other files than part {part} does")));
        }
        if partial.categories.len() != layout.categories.len()
            || partial.runs.bands.len() != layout.text.len()
            || partial.runs.proxies.len() != layout.proxies.len()
        {
            return Err(refuse("holds other columns than this merge checks".into()));
        }
    }
    Ok(loaded)
}

const REDUCE_TOOL: &str = "leak-check-reduce";
const REDUCE_FORMAT: &str = "leak-check-reduce-v1";

/// A reducer's keys: those whose hash lies in its range, grouped over every part's runs.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReducePartial {
    header: PartHeader,
    /// The blake3 of each part's partial it reduced, in part order.
    parts: Vec<String>,
    settings: ReduceSettings,
    entities: Keys,
    rows: Keys,
}

/// What decides a grouping's result beyond the occurrences: reducers and the merge must agree.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReduceSettings {
    examples: usize,
    /// Whether every twin pair is kept (`--pairs-out`).
    pairs: bool,
    /// The splits' order in time.
    rank: Vec<usize>,
}

fn reduce_settings(data: &Partitioned, config: &LeakConfig) -> ReduceSettings {
    ReduceSettings {
        examples: config.examples,
        pairs: config.collect_pairs,
        rank: crate::checks::ranks(data, config),
    }
}

/// Reducer `reducer`'s range of the keys' 64-bit heads: `from..to`, `None` the end.
fn hash_range(reducer: Part) -> (u64, Option<u64>) {
    let at = |k: u32| ((u128::from(k) << 64) / u128::from(reducer.count)) as u64;
    let to = (reducer.index + 1 < reducer.count).then(|| at(reducer.index + 1));
    (at(reducer.index), to)
}

/// Groups the keys (entity ids and row hashes) in reducer `reducer`'s range of hashes, over the
/// runs of every part in `dir`, reading from each run only that range, and writes its partial.
pub fn reduce_parts(
    data: &Partitioned,
    config: &LeakConfig,
    reducer: Part,
    dir: &Path,
) -> Result<PartDone, DataError> {
    let layout = Layout::new(data, config)?;
    let loaded = read_parts(data, &layout, dir)?;
    let settings = reduce_settings(data, config);
    let (from, to) = hash_range(reducer);
    let group = |run_of: &dyn Fn(&Runs) -> &RunFile,
                 counts_of: &dyn Fn(&FileState) -> &Vec<u64>,
                 pairs: bool|
     -> Result<Keys, DataError> {
        let mut sources: Vec<Box<dyn Iterator<Item = std::io::Result<Occurrence>>>> = Vec::new();
        let mut counts = Vec::new();
        for Loaded { partial, .. } in &loaded {
            let runs = runs_dir(dir, partial.header.part);
            let run = run_of(&partial.runs);
            let run = RunFile {
                path: runs.join(&run.path),
                ..run.clone()
            };
            let range =
                read_range::<Occurrence>(&run, hash_head, from, to).map_err(io_at(&run.path))?;
            sources.push(Box::new(range));
            counts.extend(
                partial
                    .files
                    .iter()
                    .map(|f| FileKeyCounts::restored(counts_of(f).clone())),
            );
        }
        Keys::group_sorted(
            Merge::new(sources),
            &counts,
            &settings.rank,
            settings.examples,
            pairs,
        )
        .map_err(io_at(dir))
    };
    let entities = group(&|r| &r.entities, &|f| &f.entities, false)?;
    let rows = group(&|r| &r.rows, &|f| &f.rows, settings.pairs)?;
    // The parts' listing, which `read_parts` found to be this snapshot's.
    let listing = loaded[0].partial.header.listing.clone();
    let partial = ReducePartial {
        header: PartHeader {
            format: REDUCE_FORMAT.into(),
            part: reducer,
            listing,
            units: u64::from(reducer.count),
            done: vec![u64::from(reducer.index)],
        },
        parts: loaded.iter().map(|l| l.blake3.clone()).collect(),
        settings,
        entities,
        rows,
    };
    runfn_core::parts::write_partial(
        dir,
        REDUCE_TOOL,
        reducer,
        &partial,
        (1, u64::from(reducer.count)),
    )
    .map_err(DataError::from)
}

/// The reducers' keys in `dir`, added up, when any reducer ran: checked to be of these parts
/// (none run again since) and of this merge's settings.
fn reduced_keys(
    data: &Partitioned,
    config: &LeakConfig,
    dir: &Path,
    loaded: &[Loaded],
) -> Result<Option<(Keys, Keys)>, DataError> {
    if !runfn_core::parts::any_partial(dir, REDUCE_TOOL).map_err(DataError::from)? {
        return Ok(None);
    }
    let reducers = runfn_core::parts::read_json_partials(
        dir,
        REDUCE_TOOL,
        "a leak-check reducer",
        |r: &ReducePartial| &r.header,
    )
    .map_err(DataError::from)?;
    let parts: Vec<&String> = loaded.iter().map(|l| &l.blake3).collect();
    let settings = reduce_settings(data, config);
    let listing = &loaded[0].partial.header.listing;
    let (mut entities, mut rows) = (Keys::default(), Keys::default());
    for reducer in reducers {
        let name = reducer.header.part.path(dir, REDUCE_TOOL);
        reducer
            .header
            .check(dir, REDUCE_FORMAT, listing, "another snapshot")
            .map_err(DataError::from)?;
        if reducer.parts.iter().collect::<Vec<_>>() != parts {
            return Err(DataError::file(
                name,
                "reduced other parts than those in the folder (parts run again since): run the reducers again",
            ));
        }
        if reducer.settings != settings {
            return Err(DataError::file(
                name,
                "kept other examples or pairs than this merge (--pairs-out, the splits' order): give the reducers and the merge the same flags",
            ));
        }
        entities.absorb(reducer.entities);
        rows.absorb(reducer.rows);
    }
    entities.finish_absorbing(settings.examples);
    rows.finish_absorbing(settings.examples);
    Ok(Some((entities, rows)))
}

/// Merges the partials in `dir` into the report one process writes over `data`; the keys come
/// from the reducers when they ran, else are grouped here.
pub fn merge_parts(
    data: &Partitioned,
    config: &LeakConfig,
    dir: &Path,
) -> Result<crate::LeakReport, DataError> {
    let layout = Layout::new(data, config)?;
    let loaded = read_parts(data, &layout, dir)?;
    let reduced = reduced_keys(data, config, dir, &loaded)?;
    let spill = config.spill_root()?;
    let sinks = crate::sinks(&layout, config, spill.path())?;
    let mut files: Vec<FileScan> = Vec::with_capacity(data.snapshot.files.len());
    let mut bad_values = BadValues::default();
    for Loaded { partial, .. } in loaded {
        let part = partial.header.part;
        let runs = runs_dir(dir, part);
        let at = |run: &RunFile| RunFile {
            path: runs.join(&run.path),
            ..run.clone()
        };
        if reduced.is_none() {
            sinks
                .entities
                .add_run(at(&partial.runs.entities))
                .map_err(io_at(&runs))?;
            sinks
                .rows
                .add_run(at(&partial.runs.rows))
                .map_err(io_at(&runs))?;
        }
        for (search, run) in sinks.texts.iter().zip(&partial.runs.bands) {
            search.add_run(at(run)).map_err(io_at(&runs))?;
        }
        for (sink, run) in sinks.proxies.iter().zip(&partial.runs.proxies) {
            sink.add_run(at(run)).map_err(io_at(&runs))?;
        }
        bad_values.merge(&partial.bad_values);
        let first = files.len();
        for file in partial.files {
            let mut scan = FileScan::new(&layout);
            scan.entities = FileKeys::restored(file.entities);
            scan.rows = FileKeys::restored(file.rows);
            for (slot, written) in file.texts.iter().enumerate() {
                if let Some(written) = written {
                    let path = runs.join(text_store_name(slot, file.index));
                    let store = File::open(&path).map_err(io_at(&path))?;
                    let length = store.metadata().map_err(io_at(&path))?.len();
                    if length != *written {
                        return Err(DataError::file(
                            &path,
                            "has another length since its part wrote it: run that part again",
                        ));
                    }
                    scan.texts[slot] = FileTexts::restored(store, *written);
                }
            }
            files.push(scan);
        }
        // A part's folded tallies and categories go with its first file: they add up as the
        // files' own do, in file order.
        if let Some(scan) = files.get_mut(first) {
            scan.tallies = partial.tallies;
            for (slot, state) in partial.categories.into_iter().enumerate() {
                let path = runs.join(categories_name(slot));
                let train = File::open(&path).map_err(io_at(&path))?;
                scan.categories[slot] = FileCategories::restored(state, train);
            }
        }
    }
    crate::judge(
        data,
        config,
        &layout,
        files,
        sinks,
        bad_values.total(),
        reduced,
    )
}
