//! train across processes through c10d (Gloo on the CPU): ranks equal to one process, the
//! torchrun environment, a rank killed or hung mid-run, and the setup errors.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::train::{edited, random_in, start, train, wait_for_step, weights_hash};
use crate::util::{Output, Run, bin, bin_for, spawn_with_stdin, tool, wait_within};

/// The fixture's record trained for `steps` steps, checkpointing every 50.
pub fn record(steps: u64) -> String {
    edited(|r| {
        r["manifest"]["config"]["max_steps"] = steps.into();
        r["manifest"]["config"]["ckpt_every"] = 50.into();
    })
}

/// `train --nproc-per-node N` with one libtorch thread per rank.
fn train_ranks(record: &str, out: &Path, n: usize, extra: &[&str]) -> Output {
    let n = n.to_string();
    let mut args = vec!["--nproc-per-node", n.as_str(), "--dist-timeout", "20"];
    args.extend_from_slice(extra);
    train(record, out, &args)
}

/// Starts one rank the way torchrun, Slurm or a Kubernetes operator would: the launch
/// variables in its environment.
fn start_rank(
    record: &str,
    out: &Path,
    rank: usize,
    world: usize,
    port: u16,
    timeout: &str,
) -> Child {
    let mut command = Command::new(bin("train"));
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["--out".as_ref(), out.as_os_str()])
        .args(["-q", "--threads", "1", "--dist-timeout", timeout])
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("LOCAL_WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string());
    spawn_with_stdin(&mut command, record.as_bytes())
}

/// Waits for a rank or launcher; none of these jobs takes two minutes, so a hang fails fast.
fn finish(child: Child) -> Output {
    wait_within(child, Duration::from_secs(120))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The f32 tensors of a safetensors file, by name.
fn tensors(path: &Path) -> Vec<(String, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out: Vec<(String, Vec<f32>)> = header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, info)| {
            assert_eq!(info["dtype"], "F32", "{name}");
            let at = |i: usize| info["data_offsets"][i].as_u64().unwrap() as usize;
            let values = data[at(0)..at(1)]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (name.clone(), values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The largest relative difference ‖a − b‖ / ‖a‖ over the tensors of two model files.
pub fn max_relative_difference(a: &Path, b: &Path) -> f64 {
    let (a, b) = (tensors(a), tensors(b));
    assert_eq!(
        a.iter().map(|t| &t.0).collect::<Vec<_>>(),
        b.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    a.iter()
        .zip(&b)
        .map(|((name, x), (_, y))| {
            let diff: f64 = x.iter().zip(y).map(|(p, q)| f64::from(p - q).powi(2)).sum();
            let norm: f64 = x.iter().map(|p| f64::from(*p).powi(2)).sum();
            assert!(norm > 0.0, "{name} is all zeros");
            (diff / norm).sqrt()
        })
        .fold(0.0, f64::max)
}

#[test]
fn two_and_four_ranks_match_one_process() {
    let record = record(200);
    let dir = tempfile::tempdir().unwrap();
    let one = train(&record, &dir.path().join("one"), &[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    for n in [2, 4] {
        let out = dir.path().join(format!("ranks{n}"));
        let ranks = train_ranks(&record, &out, n, &[]);
        assert_eq!(ranks.code, 0, "{}", ranks.stderr);
        let section = &ranks.json()["train"];
        assert_eq!(section["steps"], 200);
        assert_eq!(section["distributed"]["world_size"], n);
        assert_eq!(section["distributed"]["backend"], "gloo");
        assert_eq!(section["distributed"]["buckets"], 1);
        let cpus = std::thread::available_parallelism().unwrap().get();
        match section["distributed"]["cpus"].as_array() {
            Some(pinned) => assert_eq!(pinned.len(), cpus / n, "rank 0's share of {cpus} CPUs"),
            None => assert!(cpus < n, "{n} ranks on {cpus} CPUs are pinned"),
        }
        let fraction = section["distributed"]["allreduce_fraction"]
            .as_f64()
            .unwrap();
        assert!(fraction > 0.0 && fraction < 1.0, "{fraction}");
        let difference = max_relative_difference(
            &dir.path().join("one/model.safetensors"),
            &out.join("model.safetensors"),
        );
        assert!(
            difference < 1e-5,
            "{n} ranks differ from one process by {difference:e}"
        );
        // Every rank's place in the data is in the checkpoint.
        let state: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("checkpoints/step-0000000200.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(state["world_size"], n);
        let ranks = state["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), n);
        let per = 128 / n as u64;
        for (i, r) in ranks.iter().enumerate() {
            assert_eq!(r["rank"], i);
            assert_eq!(
                r["rows"],
                serde_json::json!([i as u64 * per, (i as u64 + 1) * per])
            );
            assert_eq!(r["epoch"], state["epoch"]);
            assert_eq!(r["position"], state["position"]);
        }
    }
}

/// With shards read in pieces (the test build cuts the 2,500-row shards into 700-row pieces,
/// as shards of millions of rows are cut), two ranks still train one process's model, each
/// reading its own rows of every piece.
#[test]
fn two_ranks_reading_shards_in_pieces_match_one_process() {
    let record = record(200);
    let dir = tempfile::tempdir().unwrap();
    let pieces = [("RUNFN_TEST_PIECE_ROWS", "700")];
    let run = |out: &Path, extra: &[&str]| {
        Run::new(bin_for("train", &pieces))
            .env(pieces[0].0, pieces[0].1)
            .args(["--out".as_ref(), out.as_os_str()])
            .args(["-q", "--threads", "1", "--dist-timeout", "20"])
            .args(extra)
            .stdin(record.clone())
            .run()
    };
    let one = run(&dir.path().join("one"), &[]);
    let two = run(&dir.path().join("two"), &["--nproc-per-node", "2"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    assert_ne!(
        weights_hash(&one),
        weights_hash(&train(&record, &dir.path().join("whole"), &[])),
        "the pieces changed the data order"
    );
    let difference = max_relative_difference(
        &dir.path().join("one/model.safetensors"),
        &dir.path().join("two/model.safetensors"),
    );
    assert!(difference < 1e-5, "two ranks differ by {difference:e}");
}

#[test]
fn ranks_started_by_an_outside_launcher_write_one_record() {
    let record = record(150);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let out = dir.path().join("env");
    let rank1 = start_rank(&record, &out, 1, 2, port, "20");
    let rank0 = start_rank(&record, &out, 0, 2, port, "20");
    let (rank0, rank1) = (finish(rank0), finish(rank1));
    assert_eq!(rank1.code, 0, "{}", rank1.stderr);
    assert_eq!(rank1.stdout, "", "only rank 0 writes the record");
    let launched = train_ranks(&record, &dir.path().join("launcher"), 2, &[]);
    // The same two-rank sums in the same order: bit-identical to --nproc-per-node.
    assert_eq!(weights_hash(&rank0), weights_hash(&launched));
}

/// `train --nproc-per-node 2` whose ranks give up on a lost peer after 30 s.
const LAUNCHER_30S: [&str; 4] = ["--nproc-per-node", "2", "--dist-timeout", "30"];

/// Waits until `path` exists.
pub fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_killed_rank_stops_its_peer_and_a_restart_resumes_exactly() {
    let record = record(1500);
    let dir = tempfile::tempdir().unwrap();
    let straight = train_ranks(&record, &dir.path().join("straight"), 2, &[]);
    let out = dir.path().join("killed");
    let port = free_port();
    let rank0 = start_rank(&record, &out, 0, 2, port, "30");
    let mut rank1 = start_rank(&record, &out, 1, 2, port, "30");
    wait_for(&out.join("checkpoints/step-0000000100.json"));
    rank1.kill().unwrap();
    let killed_at = Instant::now();
    let _ = rank1.wait();
    let rank0 = wait_within(rank0, Duration::from_secs(30));
    let took = killed_at.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "rank 0 took {took:?} to notice"
    );
    assert_eq!(rank0.code, 1, "{}", rank0.stderr);
    let section = &rank0.json()["train"];
    assert_eq!(section["passed"], false);
    let reason = section["reason"].as_str().unwrap();
    assert!(
        reason.contains("rank 0 of 2: all-reduce failed"),
        "{reason}"
    );
    assert!(!out.join("model.safetensors").exists());

    let resumed = train_ranks(&record, &out, 2, &[]);
    assert_eq!(weights_hash(&resumed), weights_hash(&straight));
    let from = resumed.json()["train"]["resumed_from"]["step"]
        .as_u64()
        .unwrap();
    assert!(
        from >= 100 && from.is_multiple_of(50),
        "resumed from {from}"
    );
}

#[test]
fn a_hung_rank_ends_its_peer_within_the_timeout() {
    let record = record(5000);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hung");
    let port = free_port();
    let rank0 = start_rank(&record, &out, 0, 2, port, "3");
    let mut rank1 = start_rank(&record, &out, 1, 2, port, "3");
    wait_for(&out.join("checkpoints/step-0000000050.json"));
    let pid = rank1.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let stopped_at = Instant::now();
    let rank0 = wait_within(rank0, Duration::from_secs(20));
    let took = stopped_at.elapsed();
    let _ = rank1.kill();
    let _ = rank1.wait();
    assert_eq!(rank0.code, 1, "{}", rank0.stderr);
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(20),
        "rank 0 ended {took:?} after its peer hung (timeout 3 s)"
    );
    let reason = rank0.json()["train"]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    // Gloo words it "Timed out waiting ... for recv" or "... timed out", by where it waited.
    assert!(reason.to_lowercase().contains("timed out"), "{reason}");
}

#[test]
fn the_launcher_stops_every_rank_when_one_fails() {
    let record = record(5000);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launcher");
    let launcher = start(&record, &out, &LAUNCHER_30S, &[]);
    wait_for(&out.join("checkpoints/step-0000000050.json"));
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", launcher.id())).unwrap();
    let pids: Vec<String> = children.split_whitespace().map(str::to_string).collect();
    assert_eq!(pids.len(), 2, "two ranks: {pids:?}");
    let rank1 = pids
        .iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .unwrap()
                .split(|b| *b == 0)
                .any(|v| v == b"RANK=1")
        })
        .expect("a rank 1")
        .clone();
    // Each rank runs on its own share of the CPUs.
    let allowed = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .map(|v| v.trim().to_string())
            })
            .unwrap()
    };
    if std::thread::available_parallelism().unwrap().get() >= 2 {
        assert_ne!(allowed(&pids[0]), allowed(&pids[1]));
    }
    assert!(
        Command::new("kill")
            .args(["-KILL", &rank1])
            .status()
            .unwrap()
            .success()
    );
    let killed_at = Instant::now();
    let output = wait_within(launcher, Duration::from_secs(30));
    assert!(killed_at.elapsed() < Duration::from_secs(30));
    assert_ne!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stderr.contains("rank 1 was killed by signal 9"),
        "{}",
        output.stderr
    );
    for pid in &pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "rank process {pid} outlived the launcher"
        );
    }
}

#[test]
fn sigterm_to_the_launcher_stops_every_rank_at_one_step_and_a_rerun_ends_the_same() {
    let max_steps = 1500;
    let record = record(max_steps);
    let dir = tempfile::tempdir().unwrap();
    let straight = train_ranks(&record, &dir.path().join("straight"), 2, &[]);
    let out = dir.path().join("sigterm");
    let mut launcher = start(
        &record,
        &out,
        &["--nproc-per-node", "2", "--dist-timeout", "20"],
        &[],
    );
    let target = random_in(30, 1400);
    wait_for_step(&out, target, &mut launcher);
    let pids =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", launcher.id())).unwrap();
    let pid = launcher.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let output = wait_within(launcher, Duration::from_secs(30));
    assert_eq!(
        output.code, 3,
        "SIGTERM after step {target}: {}",
        output.stderr
    );
    assert!(
        output.stderr.contains("forwarding it to every rank"),
        "{}",
        output.stderr
    );
    for child in pids.split_whitespace() {
        assert!(
            !Path::new(&format!("/proc/{child}")).exists(),
            "rank process {child} outlived the launcher"
        );
    }
    let section = output.json()["train"].clone();
    assert_eq!(section["preempted"], true, "{section}");
    let step = section["steps"].as_u64().unwrap();
    assert!(
        step >= target && step < max_steps,
        "stopped at {step} after {target}"
    );
    // Rank 0's checkpoint holds both ranks' places, at the same step of the same epoch.
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join(format!("checkpoints/step-{step:010}.json"))).unwrap(),
    )
    .unwrap();
    let ranks = state["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    assert_eq!(ranks[0]["epoch"], ranks[1]["epoch"]);
    assert_eq!(ranks[0]["position"], ranks[1]["position"]);
    assert_eq!(state["step"], step);

    let resumed = train_ranks(&record, &out, 2, &[]);
    assert_eq!(
        weights_hash(&resumed),
        weights_hash(&straight),
        "SIGTERM at step {step}"
    );
    assert_eq!(resumed.json()["train"]["resumed_from"]["step"], step);
}

#[test]
fn resuming_with_another_world_size_warns_and_continues() {
    let record = record(150);
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("single");
    let straight = train(&record, &single, &[]);
    assert_eq!(straight.code, 0, "{}", straight.stderr);
    // Resume the single-process run from step 100 with two ranks.
    let out = dir.path().join("grown");
    std::fs::create_dir_all(out.join("checkpoints")).unwrap();
    for file in ["step-0000000100.json", "step-0000000100.safetensors"] {
        std::fs::copy(
            single.join("checkpoints").join(file),
            out.join("checkpoints").join(file),
        )
        .unwrap();
    }
    let grown = tool("train")
        .args(["--out".as_ref(), out.as_os_str()])
        .args(["--threads", "1", "--nproc-per-node", "2"])
        .stdin(record.clone())
        .run();
    assert_eq!(grown.code, 0, "{}", grown.stderr);
    assert!(
        grown
            .stderr
            .contains("was written by 1 rank(s) and this run has 2"),
        "{}",
        grown.stderr
    );
    assert_eq!(grown.json()["train"]["resumed_from"]["step"], 100);
    let difference = max_relative_difference(
        &single.join("model.safetensors"),
        &out.join("model.safetensors"),
    );
    assert!(difference < 1e-5, "{difference:e}");
}

/// libtorch's own log lines (`[W1204 12:00:00.000 socket.cpp:...]`, `[rank0]:[E...]`) are not
/// ours to print: a rendezvous failure is the one line that names it.
fn no_cpp_log_lines(stderr: &str) {
    let cpp: Vec<&str> = stderr
        .lines()
        .filter(|line| {
            let line = line.trim_start_matches(|c: char| c != '[' && !c.is_alphanumeric());
            let line = line.strip_prefix("[rank").map_or(line, |rest| {
                rest.split_once("]:").map_or(line, |(_, after)| after)
            });
            line.len() > 2
                && line.starts_with('[')
                && matches!(line.as_bytes()[1], b'W' | b'E' | b'I' | b'F')
                && line.as_bytes()[2].is_ascii_digit()
        })
        .collect();
    assert!(
        cpp.is_empty(),
        "libtorch's log lines on stderr: {cpp:?}\n{stderr}"
    );
}

#[test]
fn setup_errors_are_clear() {
    let record = record(100);
    let dir = tempfile::tempdir().unwrap();

    // A missing peer: rank 0 of 2 alone.
    let started = Instant::now();
    let alone = finish(start_rank(
        &record,
        &dir.path().join("alone"),
        0,
        2,
        free_port(),
        "2",
    ));
    alone.assert_environment_failed("train", "timed out after 2 s: not every rank joined");
    no_cpp_log_lines(&alone.stderr);
    // Rank 1 of 2 with nobody at MASTER_ADDR:MASTER_PORT.
    let orphan = finish(start_rank(
        &record,
        &dir.path().join("orphan"),
        1,
        2,
        free_port(),
        "2",
    ));
    assert_eq!(orphan.code, 4, "{}", orphan.stderr);
    no_cpp_log_lines(&orphan.stderr);
    assert!(started.elapsed() < Duration::from_secs(30));

    // The rendezvous port is taken.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let busy = finish(start_rank(
        &record,
        &dir.path().join("busy"),
        0,
        2,
        port,
        "2",
    ));
    busy.assert_environment_failed("train", &format!("MASTER_PORT {port} is already in use"));
    no_cpp_log_lines(&busy.stderr);
    // --nproc-per-node hosts the store itself, so a taken --master-port is named before any rank
    // starts.
    let hosted = train_ranks(
        &record,
        &dir.path().join("hosted"),
        2,
        &["--master-port", &port.to_string()],
    );
    hosted.assert_environment_failed("train", &format!("port {port} is already in use"));
    assert!(!dir.path().join("hosted").exists());

    // A global batch the ranks cannot share evenly (128 over 3).
    let uneven = train_ranks(&record, &dir.path().join("uneven"), 3, &[]);
    assert_ne!(uneven.code, 0);
    assert!(
        uneven
            .stderr
            .contains("global_batch = 128 does not split evenly over 3 ranks"),
        "{}",
        uneven.stderr
    );

    // A malformed launch environment names the variable.
    let bad = tool("train")
        .args(["--out".as_ref(), dir.path().join("bad").as_os_str()])
        .env("RANK", "2")
        .env("WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", "29500")
        .stdin(record.clone())
        .run();
    bad.assert_bad_input("train", "RANK=2 is not below WORLD_SIZE=2");

    // NCCL is only in a CUDA build.
    let nccl = finish({
        let mut c = Command::new(bin("train"));
        c.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["--out".as_ref(), dir.path().join("nccl").as_os_str()])
            .args(["-q", "--dist-backend", "nccl"])
            .envs([
                ("RANK", "0"),
                ("WORLD_SIZE", "1"),
                ("MASTER_ADDR", "127.0.0.1"),
            ])
            .env("MASTER_PORT", free_port().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        {
            use std::io::Write;
            let _ = child.stdin.take().unwrap().write_all(record.as_bytes());
        }
        child
    });
    nccl.assert_bad_input("train", "nccl backend is not in this build");

    // --nproc-per-node inside a launched rank.
    let nested = tool("train")
        .args(["--out".as_ref(), dir.path().join("nested").as_os_str()])
        .args(["--nproc-per-node", "2"])
        .env("RANK", "0")
        .stdin(record.clone())
        .run();
    nested.assert_bad_input("train", "RANK is already set");

    // A malformed record is refused once, by the launcher, before any rank starts.
    let malformed = tool("train")
        .args(["--out".as_ref(), dir.path().join("malformed").as_os_str()])
        .args(["--nproc-per-node", "2"])
        .stdin("{\"manifest\": ")
        .run();
    malformed.assert_bad_input("train", "<stdin>");
    assert_eq!(malformed.stderr.lines().count(), 1, "{}", malformed.stderr);
}
