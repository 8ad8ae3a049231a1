//! `train --nproc-per-node N`: this process becomes a launcher that starts N ranks of itself on
//! this machine, with the same launch variables torchrun would set.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use runfn_core::record::{RecordInput, read_text};
use runfn_core::{Exit, Record};
use runfn_dist::local::{self, LocalJob};
use runfn_dist::store::HostedStore;

/// Runs the job and returns the exit code of the first rank that failed (0 when none did).
pub fn run(
    nproc: u32,
    master_port: Option<u16>,
    timeout: Duration,
    record_file: Option<&Path>,
    quiet: bool,
) -> Result<ExitCode> {
    if std::env::var_os("RANK").is_some() {
        bail!(
            "--nproc-per-node starts the ranks itself, but RANK is already set (this process is a rank \
             of another launcher such as torchrun); drop one of the two"
        );
    }
    let master_addr = std::env::var("MASTER_ADDR").unwrap_or_else(|_| "127.0.0.1".into());
    let master_port = match (master_port, std::env::var("MASTER_PORT").ok()) {
        (Some(port), _) => port,
        (None, Some(text)) => text
            .parse()
            .with_context(|| format!("MASTER_PORT={text:?} is not a TCP port"))?,
        (None, None) => 0,
    };
    // Every rank reads the same record: the file itself, or stdin's text read once here. It is
    // checked once here too, so bad input gets one error instead of one per rank.
    let (text, origin) = read_text(record_file)?;
    Record::parse(&text, &origin, RecordInput::Required)?.refuse_failed_checks("train")?;
    let stdin = record_file.is_none().then(|| text.into_bytes());
    // This process hosts the rendezvous store, as torchrun's agent does, and holds its port until
    // every rank has ended.
    let store = HostedStore::host(master_port, timeout)?;
    let master_port = store.port();
    let job = LocalJob {
        nproc: nproc as usize,
        program: std::env::current_exe().context("cannot find this program's path")?,
        args: args_without_launcher_flags(std::env::args_os().skip(1)),
        stdin,
        master_addr: master_addr.clone(),
        master_port,
        grace: Duration::from_secs(10),
    };
    if !quiet {
        eprintln!("train: starting {nproc} ranks, rendezvous at {master_addr}:{master_port}");
    }
    let outcome = local::run(&job, &|line| eprintln!("train: {line}"))?;
    drop(store);
    let preempted = i32::from(Exit::Preempted.code());
    match &outcome.failed {
        _ if quiet => {}
        Some(_) if outcome.code == preempted => eprintln!(
            "train: the job was preempted: every rank checkpointed the same step; rerun to resume"
        ),
        Some((rank, how)) => eprintln!("train: the job failed: rank {rank} {how}"),
        _ => {}
    }
    if outcome.failed.is_some() && !quiet {
        let endings: Vec<String> = (outcome.endings.iter().enumerate())
            .map(|(rank, how)| format!("rank {rank} {how}"))
            .collect();
        eprintln!("train: how the ranks ended: {}", endings.join(", "));
    }
    Ok(ExitCode::from(outcome.code.clamp(0, 255) as u8))
}

/// The command line minus `--nproc-per-node N` and `--master-port P` (in either spelling).
fn args_without_launcher_flags(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for arg in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        let text = arg.to_string_lossy();
        if text == "--nproc-per-node" || text == "--master-port" {
            skip_next = true;
        } else if !(text.starts_with("--nproc-per-node=") || text.starts_with("--master-port=")) {
            out.push(arg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_flags_are_removed_in_both_spellings() {
        let args = [
            "--nproc-per-node",
            "2",
            "--out",
            "o",
            "--master-port=9",
            "-q",
            "--nproc-per-node=3",
        ]
        .map(OsString::from);
        let kept = args_without_launcher_flags(args.into_iter());
        assert_eq!(kept, ["--out", "o", "-q"].map(OsString::from));
    }
}
