//! The `timings` entry each tool appends: where the time of a whole run went.

use std::time::{Instant, SystemTime};

use serde_json::{Value, json};

/// Started when a tool starts; turned into one `timings` entry when it finishes.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    started_at: SystemTime,
    started: Instant,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch {
            started_at: SystemTime::now(),
            started: Instant::now(),
        }
    }

    /// `{tool, started_at, wall_s, cpu_s, max_rss_bytes}`. CPU time and peak RSS come from one
    /// `getrusage` call, so taking the entry costs microseconds.
    pub fn entry(&self, tool: &str) -> Value {
        let usage = ResourceUsage::of_this_process();
        json!({
            "tool": tool,
            "started_at": humantime::format_rfc3339_millis(self.started_at).to_string(),
            "wall_s": round_micros(self.started.elapsed().as_secs_f64()),
            "cpu_s": round_micros(usage.cpu_s),
            "max_rss_bytes": usage.max_rss_bytes,
        })
    }
}

/// CPU time (user + system) and peak resident set size of this process and its waited-for children.
#[derive(Debug, Clone, Copy, Default)]
struct ResourceUsage {
    cpu_s: f64,
    max_rss_bytes: u64,
}

impl ResourceUsage {
    fn of_this_process() -> ResourceUsage {
        let own = rusage(libc::RUSAGE_SELF);
        let children = rusage(libc::RUSAGE_CHILDREN);
        ResourceUsage {
            cpu_s: own.cpu_s + children.cpu_s,
            max_rss_bytes: own.max_rss_bytes.max(children.max_rss_bytes),
        }
    }
}

fn rusage(who: libc::c_int) -> ResourceUsage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete `rusage` into the pointer on success and we read it
    // only then; a zeroed struct is itself a valid value.
    let usage = unsafe {
        if libc::getrusage(who, usage.as_mut_ptr()) != 0 {
            return ResourceUsage::default();
        }
        usage.assume_init()
    };
    let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    ResourceUsage {
        cpu_s: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss_bytes: (usage.ru_maxrss.max(0) as u64) * 1024,
    }
}

fn round_micros(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_has_the_documented_fields() {
        let entry = Stopwatch::start().entry("mf-hash");
        let object = entry.as_object().unwrap();
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["tool", "started_at", "wall_s", "cpu_s", "max_rss_bytes"]
        );
        assert_eq!(entry["tool"], "mf-hash");
        assert!(entry["started_at"].as_str().unwrap().ends_with('Z'));
        assert!(entry["wall_s"].as_f64().unwrap() >= 0.0);
        assert!(entry["max_rss_bytes"].as_u64().unwrap() > 0);
    }
}
