//! Training curves as TensorBoard event files: one run folder per curve, each with one event file
//! that `tensorboard --logdir` (or its `EventAccumulator`) reads without TensorFlow installed.
//!
//! The file is a TFRecord stream of `tensorflow.Event` protobuf messages. Only the handful of
//! fields a scalar needs is declared here, with TensorFlow's field numbers (`event.proto`,
//! `summary.proto`): a reader skips nothing it needs and we pull in no `.proto` build step.

use std::path::{Path, PathBuf};

use prost::Message;
use runfn_core::InputError;

use crate::curves::Curve;

/// The first record of every event file; readers use it to recognise the format.
const FILE_VERSION: &str = "brain.Event:2";

/// `tensorflow.Event`, the fields a scalar summary uses.
#[derive(Clone, PartialEq, prost::Message)]
struct Event {
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(oneof = "What", tags = "3, 5")]
    what: Option<What>,
}

/// `Event.what`.
#[derive(Clone, PartialEq, prost::Oneof)]
enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
}

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, prost::Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<SummaryValue>,
}

/// `tensorflow.Summary.Value`, scalars only.
#[derive(Clone, PartialEq, prost::Message)]
struct SummaryValue {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(oneof = "Scalar", tags = "2")]
    value: Option<Scalar>,
}

/// `Summary.Value.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
enum Scalar {
    #[prost(float, tag = "2")]
    SimpleValue(f32),
}

/// Writes one event file per curve under `dir` and returns their paths, in the order of
/// `curves`: `dir/<run>/events.out.tfevents.<start>.runfn`, where `<run>` is the curve's label
/// made safe as a folder name (`seed 7` → `seed-7`, a repeated name gets `-2`, `-3`, ...) and
/// `<start>` is `start_unix_s` in whole seconds.
///
/// Each step line gives `train/loss`, `train/lr`, `train/samples_per_s`,
/// `train/data_wait_fraction`, `train/step_time_s` and `train/since_checkpoint_s`; each
/// validation scoring gives `val/auc` and `val/logloss`; a missing value is left out. An
/// event's wall time is `start_unix_s` plus the training time up to its step (the windows'
/// step times), not the clock at writing, so the same inputs give byte-identical files.
pub fn write(dir: &Path, curves: &[Curve], start_unix_s: f64) -> Result<Vec<PathBuf>, InputError> {
    if !start_unix_s.is_finite() || start_unix_s < 0.0 {
        return Err(InputError::field(
            "tensorboard start time",
            format!("must be a non-negative number of seconds since 1970, got {start_unix_s}"),
        ));
    }
    let file_name = format!("events.out.tfevents.{}.runfn", start_unix_s.floor() as u64);
    let mut used: Vec<String> = Vec::new();
    let mut written = Vec::with_capacity(curves.len());
    for curve in curves {
        let run = unique_name(run_folder_name(&curve.label), &used);
        used.push(run.clone());
        let run_dir = dir.join(&run);
        runfn_core::paths::create_dir_all(&run_dir)?;
        let path = run_dir.join(&file_name);
        runfn_core::atomic::write_bytes_atomic(&path, &event_file(curve, start_unix_s)?)?;
        written.push(path);
    }
    Ok(written)
}

/// The whole event file of one curve: the version record, then the step and validation
/// summaries in step order.
fn event_file(curve: &Curve, start_unix_s: f64) -> Result<Vec<u8>, InputError> {
    let mut out = Vec::new();
    let version = Event {
        wall_time: start_unix_s,
        step: 0,
        what: Some(What::FileVersion(FILE_VERSION.into())),
    };
    append_record(&mut out, &version.encode_to_vec());
    let mut elapsed_s = 0.0;
    let mut previous_step = 0;
    let mut val = curve.val.iter().peekable();
    for point in &curve.steps {
        // `step_time_s` is the window's mean, so the window's time is it times its steps.
        let window = point.step.saturating_sub(previous_step).max(1) as f64;
        elapsed_s += point.step_time_s.unwrap_or(0.0) * window;
        previous_step = point.step;
        let wall_time = start_unix_s + elapsed_s;
        let train = [
            ("train/loss", point.loss),
            ("train/lr", point.lr),
            ("train/samples_per_s", point.samples_per_s),
            ("train/data_wait_fraction", point.data_wait_fraction),
            ("train/step_time_s", point.step_time_s),
            ("train/since_checkpoint_s", Some(point.since_checkpoint_s)),
        ];
        append_summary(&mut out, curve, point.step, wall_time, &train)?;
        while let Some(v) = val.next_if(|v| v.step <= point.step) {
            let scores = [("val/auc", v.auc), ("val/logloss", v.logloss)];
            append_summary(&mut out, curve, v.step, wall_time, &scores)?;
        }
    }
    let wall_time = start_unix_s + elapsed_s;
    for v in val {
        let scores = [("val/auc", v.auc), ("val/logloss", v.logloss)];
        append_summary(&mut out, curve, v.step, wall_time, &scores)?;
    }
    Ok(out)
}

/// Appends one event with the scalars that are present; none present, no event.
fn append_summary(
    out: &mut Vec<u8>,
    curve: &Curve,
    step: u64,
    wall_time: f64,
    scalars: &[(&str, Option<f64>)],
) -> Result<(), InputError> {
    let value: Vec<SummaryValue> = scalars
        .iter()
        .filter_map(|(tag, value)| {
            value.map(|value| SummaryValue {
                tag: (*tag).into(),
                // TensorBoard's scalar is a 32-bit float; the curves need no more.
                value: Some(Scalar::SimpleValue(value as f32)),
            })
        })
        .collect();
    if value.is_empty() {
        return Ok(());
    }
    let step = i64::try_from(step).map_err(|_| {
        InputError::field(
            format!("{}: step {step}", curve.metrics.display()),
            "is past TensorBoard's largest step (2^63 - 1)",
        )
    })?;
    let event = Event {
        wall_time,
        step,
        what: Some(What::Summary(Summary { value })),
    };
    append_record(out, &event.encode_to_vec());
    Ok(())
}

/// TFRecord framing: length (u64 LE), its masked CRC, the data, the data's masked CRC.
fn append_record(out: &mut Vec<u8>, data: &[u8]) {
    let length = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&length);
    out.extend_from_slice(&masked_crc(&length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
}

/// CRC-32C, rotated and offset as TFRecord stores it (so that a CRC over data that holds CRCs
/// is not trivially zero).
fn masked_crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
        .rotate_right(15)
        .wrapping_add(0xa282_ead8)
}

/// A folder name for `label`: letters, digits, `.`, `_` and `-` kept, every other run of
/// characters one `-`, no leading dot (no hidden folder, no `..`).
fn run_folder_name(label: &str) -> String {
    let mut name = String::with_capacity(label.len());
    for c in label.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_start_matches(['-', '.']).trim_end_matches('-');
    if name.is_empty() {
        "run".into()
    } else {
        name.into()
    }
}

/// `name`, or `name-2`, `name-3`, ... when an earlier curve took it: two curves never share a
/// run folder (TensorBoard would merge them into one run).
fn unique_name(name: String, used: &[String]) -> String {
    if !used.contains(&name) {
        return name;
    }
    (2..)
        .map(|n| format!("{name}-{n}"))
        .find(|candidate| !used.contains(candidate))
        .expect("an unused suffix exists")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curves::{StepPoint, ValPoint};

    fn step(step: u64, loss: Option<f64>, step_time_s: f64) -> StepPoint {
        StepPoint {
            step,
            loss,
            lr: Some(0.001),
            samples_per_s: Some(1000.0),
            data_wait_fraction: None,
            step_time_s: Some(step_time_s),
            since_checkpoint_s: 1.5,
        }
    }

    fn curve(label: &str) -> Curve {
        Curve {
            label: label.into(),
            seed: Some(7),
            metrics: PathBuf::from("runs/a/metrics.jsonl"),
            steps: vec![
                step(10, Some(0.6), 0.5),
                step(20, Some(0.5), 0.25),
                step(30, None, 0.25),
            ],
            val: vec![ValPoint {
                step: 20,
                auc: Some(0.75),
                logloss: None,
            }],
            alerts: Vec::new(),
            checkpoints: Vec::new(),
        }
    }

    /// Splits an event file into its records, checking each length and CRC on the way.
    fn decode_records(bytes: &[u8]) -> Result<Vec<Event>, String> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let take = |rest: &mut &[u8], n: usize, what: &str| {
                if rest.len() < n {
                    return Err(format!("truncated {what}: {} bytes left", rest.len()));
                }
                let (head, tail) = rest.split_at(n);
                *rest = tail;
                Ok(head.to_vec())
            };
            let crc_of = |bytes: Vec<u8>| u32::from_le_bytes(bytes.try_into().unwrap());
            let length = take(&mut rest, 8, "length")?;
            if crc_of(take(&mut rest, 4, "length CRC")?) != masked_crc(&length) {
                return Err("length CRC mismatch".into());
            }
            let len = u64::from_le_bytes(length.try_into().unwrap()) as usize;
            let data = take(&mut rest, len, "record")?;
            if crc_of(take(&mut rest, 4, "data CRC")?) != masked_crc(&data) {
                return Err("data CRC mismatch".into());
            }
            events.push(Event::decode(data.as_slice()).map_err(|e| e.to_string())?);
        }
        Ok(events)
    }

    fn scalars(event: &Event) -> Vec<(String, f32)> {
        let Some(What::Summary(summary)) = &event.what else {
            panic!("not a summary: {event:?}");
        };
        summary
            .value
            .iter()
            .map(|v| {
                let Some(Scalar::SimpleValue(x)) = v.value else {
                    panic!("no simple_value in {v:?}");
                };
                (v.tag.clone(), x)
            })
            .collect()
    }

    #[test]
    fn masked_crc_matches_the_tfrecord_definition() {
        // CRC-32C("123456789") is the standard check value 0xE3069283; masked per TFRecord.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc(b"123456789"), 0xc78a_b0e5);
    }

    #[test]
    fn records_round_trip_with_lengths_crcs_and_scalars() {
        let bytes = event_file(&curve("seed 7"), 1000.0).unwrap();
        let events = decode_records(&bytes).unwrap();
        assert_eq!(events[0].what, Some(What::FileVersion(FILE_VERSION.into())));
        assert_eq!(events[0].wall_time, 1000.0);
        let steps: Vec<i64> = events[1..].iter().map(|e| e.step).collect();
        assert_eq!(steps, [10, 20, 20, 30]);
        // 10 steps of 0.5 s, then 10 of 0.25 s, then 10 more.
        let walls: Vec<f64> = events[1..].iter().map(|e| e.wall_time).collect();
        assert_eq!(walls, [1005.0, 1007.5, 1007.5, 1010.0]);
        let tags: Vec<String> = scalars(&events[1]).into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            tags,
            [
                "train/loss",
                "train/lr",
                "train/samples_per_s",
                "train/step_time_s",
                "train/since_checkpoint_s"
            ]
        );
        assert_eq!(scalars(&events[1])[0], ("train/loss".into(), 0.6));
        assert_eq!(scalars(&events[3]), [("val/auc".into(), 0.75)]);
        // A non-finite loss (None) is left out, the other scalars stay.
        assert!(scalars(&events[4]).iter().all(|(t, _)| t != "train/loss"));
    }

    #[test]
    fn a_corrupted_byte_fails_the_crc() {
        let mut bytes = event_file(&curve("seed 7"), 1000.0).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 0xff;
        assert_eq!(decode_records(&bytes).unwrap_err(), "data CRC mismatch");
    }

    #[test]
    fn files_land_in_one_folder_per_curve_and_are_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let curves = [
            curve("seed 7"),
            curve("seed 7"),
            curve("/runs/x y/metrics.jsonl"),
        ];
        let paths = write(dir.path(), &curves, 1_700_000_000.9).unwrap();
        let name = "events.out.tfevents.1700000000.runfn";
        assert_eq!(
            paths,
            [
                dir.path().join("seed-7").join(name),
                dir.path().join("seed-7-2").join(name),
                dir.path().join("runs-x-y-metrics.jsonl").join(name),
            ]
        );
        let first = std::fs::read(&paths[0]).unwrap();
        assert_eq!(first, event_file(&curves[0], 1_700_000_000.9).unwrap());
        write(dir.path(), &curves, 1_700_000_000.9).unwrap();
        assert_eq!(std::fs::read(&paths[0]).unwrap(), first);
        assert_eq!(
            std::fs::read_dir(dir.path().join("seed-7"))
                .unwrap()
                .count(),
            1
        );
    }

    #[test]
    fn folder_names_are_safe() {
        assert_eq!(run_folder_name("seed 7"), "seed-7");
        assert_eq!(run_folder_name("../../etc"), "etc");
        assert_eq!(run_folder_name("..."), "run");
        assert_eq!(run_folder_name("a/b\\c:d"), "a-b-c-d");
    }

    #[test]
    fn a_bad_start_time_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = write(dir.path(), &[curve("seed 7")], f64::NAN)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("tensorboard start time: must be"), "{err}");
    }
}
