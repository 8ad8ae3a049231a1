//! Reading a list of failure times: one per line, RFC 3339 or Unix seconds; `#` starts a comment.

use std::path::Path;
use std::time::UNIX_EPOCH;

use runfn_core::InputError;

/// The failure times in `path`, as seconds since the Unix epoch.
pub fn read_failure_times(path: &Path) -> Result<Vec<f64>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_failure_times(&text, &path.display().to_string())
}

pub fn parse_failure_times(text: &str, origin: &str) -> Result<Vec<f64>, InputError> {
    let mut times = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let entry = line.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        let time = parse_time(entry).ok_or_else(|| {
            InputError::field(
                format!("{origin}:{}", index + 1),
                format!("`{entry}` is not a timestamp (RFC 3339 such as 2026-11-02T08:15:00Z, or Unix seconds)"),
            )
        })?;
        times.push(time);
    }
    Ok(times)
}

fn parse_time(entry: &str) -> Option<f64> {
    if let Ok(seconds) = entry.parse::<f64>() {
        return seconds.is_finite().then_some(seconds);
    }
    let time = humantime::parse_rfc3339_weak(entry).ok()?;
    Some(match time.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rfc3339_unix_seconds_and_comments() {
        let text = "# node failures\n2026-11-01T00:00:00Z\n\n1761955200 # also 2025-11-01\n2026-11-01 06:00:00\n";
        let times = parse_failure_times(text, "f.txt").unwrap();
        assert_eq!(times.len(), 3);
        assert_eq!(times[2] - times[0], 6.0 * 3600.0);
    }

    #[test]
    fn bad_line_is_named() {
        let err = parse_failure_times("2026-11-01T00:00:00Z\nyesterday\n", "f.txt").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f.txt:2: `yesterday` is not a timestamp (RFC 3339 such as 2026-11-02T08:15:00Z, or Unix seconds)"
        );
    }
}
