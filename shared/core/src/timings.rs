//! The `timings` entry each tool appends: where the time of a whole run went.

use std::time::{Instant, SystemTime};

use serde_json::{Map, Value, json};

use crate::error::{InputError, json_type_name};

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

    /// `{tool, started_at, wall_s, cpu_s, max_rss_bytes, environment}`. CPU time and peak RSS
    /// come from `getrusage` and this program's own high-water mark (`VmHWM`); the environment
    /// from a few small file reads.
    pub fn entry(&self, tool: &str) -> Value {
        self.entry_with(tool, Map::new())
    }

    /// The entry with `extra` added to its `environment` (train's libtorch, device and GPU).
    pub fn entry_with(&self, tool: &str, extra: Map<String, Value>) -> Value {
        let usage = ResourceUsage::of_this_process();
        let mut environment = crate::environment::of_this_machine();
        environment.extend(extra);
        json!({
            "tool": tool,
            "started_at": humantime::format_rfc3339_millis(self.started_at).to_string(),
            "wall_s": round_micros(self.started.elapsed().as_secs_f64()),
            "cpu_s": round_micros(usage.cpu_s),
            "max_rss_bytes": usage.max_rss_bytes,
            "environment": environment,
        })
    }
}

/// The entries of several records' `timings`, each once, in the order first seen: one entry
/// is one tool run, known by its `(tool, started_at)`, so the stages reruns share (everything
/// before `train` in a noise-floor's seeds) count once. An entry missing from some list gets
/// its list's `tag` fields (noise-floor tags a rerun's own entries with its seed).
pub fn merge(lists: &[(&[Value], Map<String, Value>)]) -> Vec<Value> {
    let key = |entry: &Value| (entry["tool"].to_string(), entry["started_at"].to_string());
    let keys: Vec<std::collections::HashSet<(String, String)>> = lists
        .iter()
        .map(|(entries, _)| entries.iter().map(key).collect())
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut merged = Vec::new();
    for (entries, tag) in lists {
        for entry in *entries {
            let k = key(entry);
            if !seen.insert(k.clone()) {
                continue;
            }
            let mut entry = entry.clone();
            if let Value::Object(fields) = &mut entry
                && !keys.iter().all(|list| list.contains(&k))
            {
                fields.extend(tag.clone());
            }
            merged.push(entry);
        }
    }
    merged
}

/// `manifest.cost`: what an hour of one core and of one GPU costs.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    pub core_hour: f64,
    pub gpu_hour: f64,
    pub currency: Option<String>,
}

impl Rates {
    /// The rates in `cost` (the record's `manifest.cost`), or none without it. mf-hash's lint
    /// already refuses bad values; this check is for records that did not come through it.
    pub fn parse(cost: Option<&Value>) -> Result<Option<Rates>, InputError> {
        let Some(cost) = cost else { return Ok(None) };
        let Value::Object(cost) = cost else {
            return Err(InputError::field(
                "manifest.cost",
                format!("must be a mapping, found {}", json_type_name(cost)),
            ));
        };
        let rate = |key: &str| -> Result<f64, InputError> {
            match cost.get(key) {
                None => Ok(0.0),
                Some(Value::Number(n)) if n.as_f64().is_some_and(|v| v >= 0.0) => {
                    Ok(n.as_f64().unwrap_or(0.0))
                }
                Some(other) => Err(InputError::field(
                    format!("manifest.cost.{key}"),
                    format!("must be a number >= 0, found {other}"),
                )),
            }
        };
        let currency = match cost.get("currency") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(InputError::field(
                    "manifest.cost.currency",
                    format!("must be a string, found {}", json_type_name(other)),
                ));
            }
        };
        Ok(Some(Rates {
            core_hour: rate("core_hour")?,
            gpu_hour: rate("gpu_hour")?,
            currency,
        }))
    }

    /// `{cpu, gpu, total, currency}` of one timings entry: its CPU seconds at `core_hour`, and
    /// its wall seconds times `environment.gpus` at `gpu_hour` (a GPU is held, busy or not,
    /// for the whole stage).
    pub fn cost_of(&self, entry: &Value) -> Value {
        let cpu_s = entry["cpu_s"].as_f64().unwrap_or(0.0);
        let wall_s = entry["wall_s"].as_f64().unwrap_or(0.0);
        let gpus = entry["environment"]["gpus"].as_f64().unwrap_or(0.0);
        let cpu = cpu_s / 3600.0 * self.core_hour;
        let gpu = wall_s / 3600.0 * self.gpu_hour * gpus;
        json!({
            "cpu": round_nanos(cpu),
            "gpu": round_nanos(gpu),
            "total": round_nanos(cpu + gpu),
            "currency": self.currency,
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
        // getrusage's ru_maxrss survives execve: a tool started by a large process (a test
        // harness, a Python orchestrator) reported the parent's size at fork as its own peak.
        // VmHWM is this program's own address space's peak.
        let own_peak = peak_of_this_program().unwrap_or(own.max_rss_bytes);
        ResourceUsage {
            cpu_s: own.cpu_s + children.cpu_s,
            max_rss_bytes: own_peak.max(children.max_rss_bytes),
        }
    }
}

/// `VmHWM` of /proc/self/status: the peak resident set of this program since it was exec'd.
fn peak_of_this_program() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    peak_in_status(&status)
}

fn peak_in_status(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
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

/// Costs to a billionth of the currency unit: a short stage costs millionths of a cent.
fn round_nanos(amount: f64) -> f64 {
    (amount * 1e9).round() / 1e9
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_peak_is_this_programs_own_high_water_mark() {
        let status =
            "Name:\tshardify\nVmPeak:\t  900000 kB\nVmHWM:\t   92160 kB\nVmRSS:\t   80000 kB\n";
        assert_eq!(peak_in_status(status), Some(92160 * 1024));
        assert_eq!(peak_in_status("Name:\tx\n"), None);
        assert!(peak_of_this_program().is_some_and(|b| b > 0));
    }

    use super::*;

    #[test]
    fn entry_has_the_documented_fields() {
        let entry = Stopwatch::start().entry("mf-hash");
        let object = entry.as_object().unwrap();
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "tool",
                "started_at",
                "wall_s",
                "cpu_s",
                "max_rss_bytes",
                "environment"
            ]
        );
        assert_eq!(entry["environment"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(entry["tool"], "mf-hash");
        assert!(entry["started_at"].as_str().unwrap().ends_with('Z'));
        assert!(entry["wall_s"].as_f64().unwrap() >= 0.0);
        assert!(entry["max_rss_bytes"].as_u64().unwrap() > 0);
    }

    #[test]
    fn cost_is_cpu_hours_plus_gpu_hours() {
        let rates = Rates::parse(Some(
            &json!({"core_hour": 0.04, "gpu_hour": 2.5, "currency": "USD"}),
        ))
        .unwrap()
        .unwrap();
        let cpu_only = json!({"cpu_s": 900.0, "wall_s": 600.0, "environment": {}});
        assert_eq!(
            rates.cost_of(&cpu_only),
            json!({"cpu": 0.01, "gpu": 0.0, "total": 0.01, "currency": "USD"})
        );
        let two_gpus = json!({"cpu_s": 3600.0, "wall_s": 1800.0, "environment": {"gpus": 2}});
        assert_eq!(
            rates.cost_of(&two_gpus),
            json!({"cpu": 0.04, "gpu": 2.5, "total": 2.54, "currency": "USD"})
        );
        assert_eq!(Rates::parse(None).unwrap(), None);
    }

    #[test]
    fn bad_rates_name_their_field() {
        for (cost, field) in [
            (json!({"core_hour": -1}), "manifest.cost.core_hour"),
            (json!({"gpu_hour": "2.5"}), "manifest.cost.gpu_hour"),
            (json!({"currency": 1}), "manifest.cost.currency"),
            (json!([1]), "manifest.cost"),
        ] {
            let err = Rates::parse(Some(&cost)).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{field}:")), "{err}");
        }
    }

    #[test]
    fn merge_keeps_each_entry_once_and_tags_the_unshared() {
        let entry = |tool: &str, at: &str| json!({"tool": tool, "started_at": at, "wall_s": 1.0});
        let shared = [entry("mf-hash", "t0"), entry("shardify", "t1")];
        let seed = |n: u64| {
            let mut tag = Map::new();
            tag.insert("seed".into(), json!(n));
            tag
        };
        let a = [shared[0].clone(), shared[1].clone(), entry("train", "t2")];
        let b = [shared[0].clone(), shared[1].clone(), entry("train", "t3")];
        let merged = merge(&[(&a, seed(1)), (&b, seed(2))]);
        assert_eq!(
            merged,
            [
                entry("mf-hash", "t0"),
                entry("shardify", "t1"),
                json!({"tool": "train", "started_at": "t2", "wall_s": 1.0, "seed": 1}),
                json!({"tool": "train", "started_at": "t3", "wall_s": 1.0, "seed": 2}),
            ]
        );
    }
}
