//! Two hosts on one machine: two Linux network namespaces joined by a veth pair, one rank in
//! each, started the way torchrun starts them on two nodes (its variables, `GLOO_SOCKET_IFNAME`
//! naming the link). The weights equal one process's, a slow link still trains, and a link
//! taken down mid-run ends the survivor within `--dist-timeout` and a rerun resumes exactly.
//!
//! Needs root (CAP_NET_ADMIN) for the namespaces; CI has it. The namespaces, their link and every
//! process in them are removed at the end, also when an assertion fails.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::distributed::{max_relative_difference, record, wait_for};
use crate::train::{train, weights_hash};
use crate::util::{Output, bin, spawn_with_stdin, wait_within};

/// Documentation-range addresses (RFC 5737, TEST-NET-1): never routed anywhere.
const ADDRESSES: [&str; 2] = ["192.0.2.1", "192.0.2.2"];
const PORT: &str = "29500";

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Two namespaces `rf<pid>x<n>a`/`b`, each with its end of one veth pair, up, addressed.
struct Hosts {
    names: [String; 2],
    links: [String; 2],
    children: Vec<Child>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip runs (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {} (network namespaces need root: CAP_NET_ADMIN)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

impl Hosts {
    fn new() -> Hosts {
        let id = format!(
            "{}x{}",
            std::process::id() % 100_000,
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let hosts = Hosts {
            names: [format!("rf{id}a"), format!("rf{id}b")],
            // Interface names are at most 15 bytes.
            links: [format!("rv{id}a"), format!("rv{id}b")],
            children: Vec::new(),
        };
        for name in &hosts.names {
            ip(&["netns", "add", name]);
        }
        ip(&[
            "link",
            "add",
            &hosts.links[0],
            "type",
            "veth",
            "peer",
            "name",
            &hosts.links[1],
        ]);
        for (i, (ns, link)) in hosts.names.iter().zip(&hosts.links).enumerate() {
            ip(&["link", "set", link, "netns", ns]);
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{}/24", ADDRESSES[i]),
                "dev",
                link,
            ]);
            ip(&["-n", ns, "link", "set", link, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    /// Starts rank `rank` of 2 in its namespace, rank 0's address as the master.
    fn start(&mut self, record: &str, out: &Path, rank: usize, timeout_s: &str) {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.names[rank]])
            .arg(bin("train"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["--out".as_ref(), out.as_os_str()])
            .args(["-q", "--threads", "1", "--dist-timeout", timeout_s])
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", "2")
            .env("LOCAL_RANK", "0")
            .env("LOCAL_WORLD_SIZE", "1")
            .env("GROUP_RANK", rank.to_string())
            .env("MASTER_ADDR", ADDRESSES[0])
            .env("MASTER_PORT", PORT)
            .env("GLOO_SOCKET_IFNAME", &self.links[rank]);
        let child = spawn_with_stdin(&mut command, record.as_bytes());
        self.children.push(child);
    }

    /// Waits for both ranks (in the order started), each within `limit`.
    fn finish(&mut self, limit: Duration) -> Vec<Output> {
        self.children
            .drain(..)
            .map(|c| wait_within(c, limit))
            .collect()
    }

    /// Both ranks of one run on the two hosts: rank 0 writes `out`, rank 1 a folder of its own
    /// (OUT need not be shared between machines).
    fn train(&mut self, record: &str, out: &Path) -> Output {
        let elsewhere = out.with_extension("rank1");
        self.start(record, &elsewhere, 1, "20");
        self.start(record, out, 0, "20");
        let mut outs = self.finish(Duration::from_secs(120));
        let rank0 = outs.pop().unwrap();
        let rank1 = outs.pop().unwrap();
        assert_eq!(rank1.code, 0, "rank 1: {}", rank1.stderr);
        assert_eq!(rank0.code, 0, "rank 0: {}", rank0.stderr);
        let _ = std::fs::rename(&elsewhere, out.with_extension("rank1-done"));
        rank0
    }

    /// Runs `args` (a `tc` or `ip` command) inside host `i`.
    fn exec(&self, i: usize, args: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.names[i]])
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Deleting a namespace removes its end of the veth pair, and with it the other end.
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "delete", name]).output();
        }
    }
}

/// `(allreduce_fraction, allreduce_s_per_step)` of rank 0's record.
fn allreduce(out: &Output) -> (f64, f64) {
    let d = &out.json()["train"]["distributed"];
    (
        d["allreduce_fraction"].as_f64().unwrap(),
        d["allreduce_s_per_step"].as_f64().unwrap(),
    )
}

#[test]
fn two_hosts_train_one_process_s_model_and_a_slow_link_still_trains() {
    let record = record(200);
    let dir = tempfile::tempdir().unwrap();
    let one = train(&record, &dir.path().join("one"), &[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let mut hosts = Hosts::new();
    let two = hosts.train(&record, &dir.path().join("two"));
    let difference = max_relative_difference(
        &dir.path().join("one/model.safetensors"),
        &dir.path().join("two/model.safetensors"),
    );
    assert!(
        difference < 1e-5,
        "two hosts differ from one process by {difference:e}"
    );
    assert_eq!(two.json()["train"]["distributed"]["world_size"], 2);
    let (fast, fast_s) = allreduce(&two);

    // A slow link on both sides: 5 ms of delay with netem where the kernel has it. A kernel built
    // without netem (as some VM kernels are) gets a token bucket (TBF) at 2 Mbit/s instead: each
    // step's all-reduce then spends milliseconds on the wire, like a link with latency.
    let shaped = (0..2).all(|i| {
        let link = &hosts.links[i];
        let netem = hosts.exec(
            i,
            &[
                "tc", "qdisc", "add", "dev", link, "root", "netem", "delay", "5ms",
            ],
        );
        netem.status.success() || {
            let tbf = hosts.exec(
                i,
                &[
                    "tc", "qdisc", "add", "dev", link, "root", "tbf", "rate", "2mbit", "burst",
                    "2kb", "latency", "400ms",
                ],
            );
            assert!(
                tbf.status.success(),
                "tc: {}",
                String::from_utf8_lossy(&tbf.stderr)
            );
            false
        }
    });
    let slow = hosts.train(&record, &dir.path().join("slow"));
    assert_eq!(
        weights_hash(&slow),
        weights_hash(&two),
        "the same sums on a slower link"
    );
    let (slowed, slowed_s) = allreduce(&slow);
    eprintln!(
        "two hosts: all-reduce {:.1}% of the step ({:.2} ms) on the plain link, {:.1}% ({:.2} ms) with {}; max relative difference to one process {difference:.2e}",
        fast * 100.0,
        fast_s * 1e3,
        slowed * 100.0,
        slowed_s * 1e3,
        if shaped {
            "5 ms netem delay"
        } else {
            "a 2 Mbit/s token bucket (no netem in this kernel)"
        }
    );
    assert!(
        slowed_s > fast_s + 0.002 && slowed > fast,
        "the slow link shows in the all-reduce: {slowed_s} s vs {fast_s} s a step"
    );
}

#[test]
fn a_link_taken_down_ends_the_survivor_within_the_timeout_and_a_rerun_resumes_exactly() {
    let record = record(1500);
    let dir = tempfile::tempdir().unwrap();
    let mut hosts = Hosts::new();
    let straight = hosts.train(&record, &dir.path().join("straight"));

    let out = dir.path().join("cut");
    hosts.start(&record, &out.with_extension("rank1"), 1, "8");
    hosts.start(&record, &out, 0, "8");
    wait_for(&out.join("checkpoints/step-0000000100.json"));
    let down = hosts.exec(1, &["ip", "link", "set", &hosts.links[1], "down"]);
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    let cut_at = Instant::now();
    let rank0 = hosts.children.pop().unwrap();
    let rank0 = wait_within(rank0, Duration::from_secs(40));
    let took = cut_at.elapsed();
    eprintln!(
        "link down: rank 0 ended after {took:.1?} (--dist-timeout 8) with exit {}",
        rank0.code
    );
    assert!(
        took < Duration::from_secs(8 + 10),
        "rank 0 took {took:?} past an 8 s timeout"
    );
    assert_eq!(rank0.code, 1, "{}", rank0.stderr);
    let section = &rank0.json()["train"];
    assert_eq!(section["passed"], false);
    assert!(!out.join("model.safetensors").exists());
    let rank1 = hosts.finish(Duration::from_secs(40)).pop().unwrap();
    assert_ne!(rank1.code, 0, "rank 1 lost its peer too: {}", rank1.stderr);

    let up = hosts.exec(1, &["ip", "link", "set", &hosts.links[1], "up"]);
    assert!(up.status.success());
    let resumed = hosts.train(&record, &out);
    let from = resumed.json()["train"]["resumed_from"]["step"]
        .as_u64()
        .unwrap();
    assert!(
        from >= 100 && from.is_multiple_of(50),
        "resumed from {from}"
    );
    assert_eq!(weights_hash(&resumed), weights_hash(&straight));
}
