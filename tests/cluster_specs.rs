//! The Kubernetes Jobs and the Argo Workflows template under docs/cluster/ pass the schemas their
//! projects publish (pinned packages, offline: `scripts/check-cluster-specs.sh`), and the check
//! refuses a spec with a misspelt field, a wrong type, an undefined template, an undeclared
//! parameter, an unknown dependency or a part count that does not match the Job's completions.
//! (Argo's published schema does not refuse an unknown field; Kubernetes' strict one does.)

use std::path::Path;
use std::process::{Command, Output};

fn check(kubernetes: &[&Path], argo: &[&Path]) -> Output {
    let mut command = Command::new("scripts/check-cluster-specs.sh");
    if !kubernetes.is_empty() || !argo.is_empty() {
        command.args(kubernetes).arg("--").args(argo);
    }
    command.output().expect("check-cluster-specs.sh runs")
}

/// A copy of `spec` with `from` replaced by `to` (which must be there), in `dir`.
fn broken(dir: &Path, spec: &str, from: &str, to: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(spec).unwrap();
    assert!(text.contains(from), "{spec} has no `{from}`");
    let path = dir.join(format!(
        "{}-{}",
        to.len(),
        Path::new(spec).file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

#[test]
fn the_cluster_specs_pass_their_published_schemas_and_broken_ones_do_not() {
    let out = check(&[], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let job = "docs/cluster/kubernetes/validate-parts.yaml";
    let night = "docs/cluster/argo/night.yaml";
    let cases: [(&str, &str, &str, &str); 7] = [
        (
            job,
            "completionMode: Indexed",
            "completionMod: Indexed",
            "completionMod",
        ),
        (job, "completions: 4", "completions: four", "completions"),
        (
            job,
            "completions: 4",
            "completions: 3",
            "in a Job of 3 completions",
        ),
        (night, "template: shardify", "template: shardfy", "shardfy"),
        (
            night,
            "{{workflow.parameters.parts}}",
            "{{workflow.parameters.part}}",
            "parameters.part}}",
        ),
        (
            night,
            "depends: leaks.Succeeded",
            "depends: leak.Succeeded",
            "depends on leak",
        ),
        (
            night,
            "parameters: [{name: out}, {name: in}, {name: tool}]",
            "parameters: {name: out}",
            "must be array",
        ),
    ];
    for (spec, from, to, named) in cases {
        let path = broken(dir.path(), spec, from, to);
        let out = if spec == job {
            check(&[&path], &[])
        } else {
            check(&[], &[&path])
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{to}: {stderr}");
        assert!(stderr.contains(named), "{to}: {stderr}");
    }
}

/// `runfn-stage`, which every cluster spec runs: the record appears only when the stage passed,
/// a symlink's target is written and the link kept, a FIFO is refused and left alone, and `%K`
/// without an index is refused.
#[test]
fn runfn_stage_writes_atomically_and_refuses_special_files() {
    let dir = tempfile::tempdir().unwrap();
    let stage = |out: &Path, program: &[&str]| {
        Command::new("scripts/runfn-stage")
            .arg(out)
            .arg("-")
            .args(program)
            .output()
            .unwrap()
    };
    let out = dir.path().join("record.json");
    let passed = stage(&out, &["echo", "{}"]);
    assert!(passed.status.success(), "{passed:?}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{}\n");
    let failed = stage(&out, &["sh", "-c", "echo partial; exit 3"]);
    assert_eq!(failed.status.code(), Some(3));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "{}\n",
        "a failed stage kept the old record"
    );
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("record.json", &link).unwrap();
    assert!(stage(&link, &["echo", "[1]"]).status.success());
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "[1]\n");
    let fifo = dir.path().join("pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let refused = stage(&fifo, &["echo", "{}"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a regular file"));
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let unindexed = stage(&out, &["echo", "%K/4"]);
    assert_eq!(unindexed.status.code(), Some(2));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
