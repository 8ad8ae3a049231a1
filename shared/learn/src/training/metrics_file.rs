//! metrics.jsonl: one line per log window, val line and alert, appended as the run goes.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{Context, Result};
use runfn_core::atomic::write_bytes_atomic;
use serde_json::Value;

/// Opens the metrics stream for appending. On resume the lines after the checkpoint's step are
/// dropped first (they were written by the run that was interrupted and will be written again),
/// atomically; a fresh run starts an empty stream.
pub(crate) fn open_metrics(path: &Path, resumed_step: u64) -> Result<File> {
    let mut kept = String::new();
    if resumed_step > 0
        && let Ok(file) = File::open(path)
    {
        for line in BufReader::new(file).lines() {
            let line = line.with_context(|| path.display().to_string())?;
            let step = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v.get("step").and_then(Value::as_u64));
            match step {
                Some(s) if s <= resumed_step => {
                    kept.push_str(&line);
                    kept.push('\n');
                }
                _ => break,
            }
        }
    }
    write_bytes_atomic(path, kept.as_bytes())?;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_resume_keeps_the_lines_up_to_its_step_and_a_fresh_run_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let lines = "{\"step\":10}\n{\"step\":20,\"val\":{}}\n{\"step\":30}\n{\"step\":40}\n";
        std::fs::write(&path, lines).unwrap();
        let mut file = open_metrics(&path, 20).unwrap();
        writeln!(file, "{{\"step\":30,\"again\":true}}").unwrap();
        drop(file);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"step\":10}\n{\"step\":20,\"val\":{}}\n{\"step\":30,\"again\":true}\n"
        );
        drop(open_metrics(&path, 0).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }
}
