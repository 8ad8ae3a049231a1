//! The machine and software a tool ran on, for its `timings` entry: read from `/proc`, `uname`
//! and `/etc/os-release`, so taking it costs a few file reads and never fails (an unreadable
//! source leaves its field empty or zero rather than stopping the tool).

use serde_json::{Map, Value, json};

/// A quarter of the machine's memory (1 GiB where it cannot be read): the default `--memory`
/// of the tools that read rows.
pub fn quarter_of_the_machine() -> u64 {
    of_this_machine()
        .get("memory_bytes")
        .and_then(Value::as_u64)
        .filter(|&bytes| bytes > 0)
        .map_or(1 << 30, |bytes| bytes / 4)
}

/// `{cpu_model, cores_online, cores_available, memory_bytes, kernel, os, version}`.
/// `cores_available` is what this process may run on (its CPU affinity mask, which containers
/// and `taskset` narrow); `cores_online` is the machine's.
pub fn of_this_machine() -> Map<String, Value> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let os_release = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    let mut env = Map::new();
    env.insert("cpu_model".into(), json!(cpu_model(&cpuinfo)));
    env.insert("cores_online".into(), json!(cores_online()));
    env.insert("cores_available".into(), json!(cores_available()));
    env.insert("memory_bytes".into(), json!(memory_bytes(&meminfo)));
    env.insert("kernel".into(), json!(kernel_release()));
    env.insert("os".into(), json!(os_name(&os_release)));
    // Every runfn crate takes the workspace's version, so this crate's is the tool's.
    env.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    env
}

/// The first `model name` line (x86), else `Hardware`/`CPU part` style lines other
/// architectures use, else the architecture.
fn cpu_model(cpuinfo: &str) -> String {
    for key in ["model name", "Model", "Hardware", "cpu model", "uarch"] {
        if let Some(value) = field(cpuinfo, key, ':') {
            return value;
        }
    }
    std::env::consts::ARCH.to_string()
}

fn field(text: &str, key: &str, separator: char) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(separator)?;
        (k.trim() == key && !v.trim().is_empty()).then(|| v.trim().to_string())
    })
}

fn cores_online() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as u64
}

fn cores_available() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// `MemTotal` in bytes (the file says kB, meaning KiB).
fn memory_bytes(meminfo: &str) -> u64 {
    field(meminfo, "MemTotal", ':')
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn kernel_release() -> String {
    let mut name = std::mem::MaybeUninit::<libc::utsname>::zeroed();
    // SAFETY: uname fills the struct on success; a zeroed struct holds empty strings.
    let name = unsafe {
        if libc::uname(name.as_mut_ptr()) != 0 {
            return String::new();
        }
        name.assume_init()
    };
    // SAFETY: uname NUL-terminates each field within its array.
    let release = unsafe { std::ffi::CStr::from_ptr(name.release.as_ptr()) };
    release.to_string_lossy().into_owned()
}

/// `PRETTY_NAME`, else `NAME VERSION_ID`, else the OS family.
fn os_name(os_release: &str) -> String {
    let value = |key| field(os_release, key, '=').map(|v| v.trim_matches('"').to_string());
    if let Some(pretty) = value("PRETTY_NAME").filter(|v| !v.is_empty()) {
        return pretty;
    }
    match (value("NAME"), value("VERSION_ID")) {
        (Some(name), Some(version)) => format!("{name} {version}"),
        (Some(name), None) => name,
        _ => std::env::consts::OS.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_files() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(cpu_model(cpuinfo), "Intel(R) Xeon(R) CPU @ 2.20GHz");
        assert_eq!(cpu_model(""), std::env::consts::ARCH);
        assert_eq!(
            memory_bytes("MemTotal:       16384 kB\nMemFree: 1 kB\n"),
            16384 * 1024
        );
        assert_eq!(memory_bytes("nothing"), 0);
        let os = "NAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(os_name(os), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(os_name("NAME=Alpine\nVERSION_ID=3.20\n"), "Alpine 3.20");
    }

    #[test]
    fn this_machine_is_plausible() {
        let env = of_this_machine();
        assert!(env["cores_online"].as_u64().unwrap() >= 1);
        assert!(env["cores_available"].as_u64().unwrap() <= env["cores_online"].as_u64().unwrap());
        assert!(env["memory_bytes"].as_u64().unwrap() > 0);
        assert!(!env["kernel"].as_str().unwrap().is_empty());
        assert!(!env["os"].as_str().unwrap().is_empty());
    }
}
