//! `--nproc-per-node N` without torchrun: start N ranks of this program on this machine with the
//! launch variables set, forward SIGINT, SIGTERM and SIGHUP to them, and stop them all as soon as
//! one fails, so a job never lingers with a dead rank. As under torchrun, the ranks join a store
//! the launcher hosts ([`crate::store::HostedStore`]) instead of rank 0 hosting one.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::launch::Launch;

/// The job: `program args...` run `nproc` times.
#[derive(Debug, Clone)]
pub struct LocalJob {
    pub nproc: usize,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Bytes every rank reads on stdin (the run record), or None to give them no stdin.
    pub stdin: Option<Vec<u8>>,
    pub master_addr: String,
    /// The port of the store the caller hosts for the ranks, and keeps until `run` returns.
    pub master_port: u16,
    /// How long the other ranks get to stop after SIGTERM before SIGKILL.
    pub grace: Duration,
}

/// How the job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// 0 when every rank exited 0; else the first failed rank's exit code (1 when it was killed
    /// by a signal).
    pub code: i32,
    /// The first rank that failed, with a description of how.
    pub failed: Option<(usize, String)>,
    /// A signal received and forwarded to the ranks.
    pub forwarded: Option<i32>,
    /// How each rank ended, in rank order ("exited with status 1", "was killed by signal 9").
    pub endings: Vec<String>,
}

fn install_forwarding() {
    runfn_core::stop::install_for(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "ended".into(),
    }
}

fn send(child: &Child, signal: i32) {
    // SAFETY: signalling a child we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}

/// Runs the job to the end. `log` gets one line per event (a rank failing, a signal forwarded).
pub fn run(job: &LocalJob, log: &dyn Fn(String)) -> Result<Outcome> {
    install_forwarding();
    let mut children: Vec<Option<Child>> = Vec::with_capacity(job.nproc);
    for rank in 0..job.nproc {
        let launch = Launch {
            rank,
            world: job.nproc,
            local_rank: rank,
            local_world: job.nproc,
            master_addr: job.master_addr.clone(),
            master_port: job.master_port,
            agent_store: true,
        };
        let mut command = Command::new(&job.program);
        command
            .args(&job.args)
            .envs(launch.env())
            .stdin(if job.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            // Only rank 0 writes the record; the others' stdout would corrupt it.
            .stdout(if rank == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        let spawned = command
            .spawn()
            .with_context(|| format!("cannot start rank {rank}: {}", job.program.display()));
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                for c in children.iter_mut().flatten() {
                    send(c, libc::SIGKILL);
                    let _ = c.wait();
                }
                return Err(e);
            }
        };
        if let (Some(bytes), Some(mut stdin)) = (job.stdin.clone(), child.stdin.take()) {
            // A rank that fails before reading its stdin closes the pipe; that failure is
            // reported through its exit status, not here.
            std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            });
        }
        children.push(Some(child));
    }

    let mut outcome = Outcome {
        code: 0,
        failed: None,
        forwarded: None,
        endings: vec![String::new(); job.nproc],
    };
    let mut stop_deadline: Option<Instant> = None;
    let mut killed = false;
    loop {
        let signal = runfn_core::stop::take().unwrap_or(0);
        if signal != 0 {
            log(format!(
                "received signal {signal}; forwarding it to every rank"
            ));
            outcome.forwarded = Some(signal);
            for child in children.iter().flatten() {
                send(child, signal);
            }
            stop_deadline.get_or_insert(Instant::now() + job.grace);
        }
        let mut ended = Vec::new();
        for (rank, slot) in children.iter_mut().enumerate() {
            if let Some(child) = slot
                && let Some(status) = child.try_wait()?
            {
                *slot = None;
                ended.push((rank, status));
            }
        }
        for (rank, status) in ended {
            let how = describe(status);
            outcome.endings[rank] = how.clone();
            if status.success() || outcome.failed.is_some() {
                continue;
            }
            outcome.code = match status.code() {
                Some(code) if code != 0 => code,
                _ => 1,
            };
            outcome.failed = Some((rank, how.clone()));
            if outcome.forwarded.is_none() {
                log(format!("rank {rank} {how}; stopping the other ranks"));
                for other in children.iter().flatten() {
                    send(other, libc::SIGTERM);
                }
                stop_deadline = Some(Instant::now() + job.grace);
            }
        }
        if children.iter().all(Option::is_none) {
            break;
        }
        if !killed && stop_deadline.is_some_and(|d| Instant::now() >= d) {
            for child in children.iter().flatten() {
                send(child, libc::SIGKILL);
            }
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(outcome)
}
