use serde_json::json;

use crate::util::{assert_golden, testdata, tool};

/// Pinned so that no refactor can change a manifest's identity silently. A deliberate change of
/// normalization needs a new format tag (runfn-manifest-v2) and new pins.
const CHURN_HASH: &str = "b456aff0ffa18e7358da860a2424ffc10f7c145bf2a30578b3979328bee86224";
const CHURN_LR_HASH: &str = "b0522b6c6c7fb2c129947694e53d15207fa2afdc122db997ad43e920c6c1d560";
const CHURN_HIDDEN_REORDERED_HASH: &str =
    "a40109f34953e19e706f5906b967d4e7bab46da19a9f7fcc04e50f30a394d614";

fn hash_of(args: &[&str]) -> String {
    let out = tool("mf-hash").args(args).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["manifest_hash"]
        .as_str()
        .expect("hash")
        .to_string()
}

#[test]
fn example_manifest_golden() {
    let out = tool("mf-hash").args(["testdata/mf-hash/churn.yaml"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_golden("mf-hash", "churn", out.json());
}

#[test]
fn golden_hashes_are_pinned() {
    assert_eq!(hash_of(&["testdata/mf-hash/churn.yaml"]), CHURN_HASH);
    assert_eq!(hash_of(&["testdata/mf-hash/churn-lr.yaml"]), CHURN_LR_HASH);
    assert_eq!(
        hash_of(&["testdata/mf-hash/churn-hidden-reordered.yaml"]),
        CHURN_HIDDEN_REORDERED_HASH
    );
}

#[test]
fn yaml_and_json_with_other_order_and_spelling_hash_the_same() {
    assert_eq!(
        hash_of(&["testdata/mf-hash/churn-reordered.json"]),
        CHURN_HASH
    );
    let yaml = std::fs::read(testdata("mf-hash/churn.yaml")).unwrap();
    let out = tool("mf-hash").stdin(yaml).run();
    assert_eq!(out.json()["manifest_hash"], CHURN_HASH);
    let json_text = std::fs::read(testdata("mf-hash/churn-reordered.json")).unwrap();
    let out = tool("mf-hash").args(["-"]).stdin(json_text).run();
    assert_eq!(out.json()["manifest_hash"], CHURN_HASH);
}

#[test]
fn lint_problems_exit_2_naming_every_field_and_nothing_on_stdout() {
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/bad-lint.yaml"])
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "", "nothing on stdout");
    let named: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|line| line.strip_prefix("mf-hash: problem: "))
        .collect();
    assert_eq!(
        named,
        [
            "confg: unknown field (did you mean `config`?)",
            "data.snapshot: `./lake/churn@latest`: `latest` names a moving target, not an immutable snapshot",
            "data.splits.Train: overlaps the split `train` by name",
            "data.splits: has no `test` split",
            "code.commit: must be a string, found the number 1234567 (quote it in YAML)",
            "code.image: `registry.example.com/train:1.4` is not pinned by digest: use `<name>@sha256:<64 hex>`, not a tag",
            "seed: must be a non-negative integer, found a string",
            "eval.gates.acu_min_delta: `acu_min_delta` names no known metric `acu` (did you mean `auc`?); known metrics: auc, accuracy, logloss, brier, ece, positive_rate",
        ],
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.lines().last().unwrap_or("").starts_with(
            "mf-hash: testdata/mf-hash/bad-lint.yaml: confg: unknown field (did you mean `config`?) (7 more problems above)"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn check_flag_compares_the_hash() {
    let ok = tool("mf-hash")
        .args(["testdata/mf-hash/churn.yaml", "--check", CHURN_HASH])
        .run();
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(
        ok.json()["mf_hash"]["check"],
        json!({"expected": CHURN_HASH, "matched": true})
    );
    let changed = tool("mf-hash")
        .args(["testdata/mf-hash/churn-lr.yaml", "--check", CHURN_HASH])
        .run();
    assert_eq!(changed.code, 1);
    let record = changed.json();
    assert_eq!(record["mf_hash"]["passed"], false);
    assert_eq!(record["mf_hash"]["problems"][0]["field"], "manifest_hash");
    let bad = tool("mf-hash")
        .args(["testdata/mf-hash/churn.yaml", "--check", "abc"])
        .run();
    bad.assert_bad_input(
        "mf-hash",
        "--check: `abc` is not 64 lowercase hex characters",
    );
}

#[test]
fn bad_input_exits_2_naming_the_file_and_line() {
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/malformed.yaml"])
        .run();
    out.assert_bad_input("mf-hash", "testdata/mf-hash/malformed.yaml: ");
    assert!(out.stderr.contains("line"), "{}", out.stderr);
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/duplicate-key.json"])
        .run();
    out.assert_bad_input("mf-hash", "duplicate key `seed`");
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/missing.yaml"])
        .run();
    out.assert_bad_input("mf-hash", "testdata/mf-hash/missing.yaml: ");
    let out = tool("mf-hash").stdin("[1, 2]").run();
    out.assert_bad_input(
        "mf-hash",
        "<stdin>: the manifest must be a mapping of fields, found an array",
    );
    let out = tool("mf-hash").stdin("").run();
    out.assert_bad_input("mf-hash", "<stdin>: the manifest is empty");
    let out = tool("mf-hash").args(["--format", "toml"]).run();
    assert_eq!(out.code, 2, "clap usage errors are exit 2 too");
}

#[test]
fn data_digest_is_added_and_verifies_a_blake3_pin() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("snapshot");
    std::fs::create_dir_all(data.join("part")).unwrap();
    std::fs::write(data.join("part/a.csv"), "id,churned\n1,0\n").unwrap();
    std::fs::write(data.join("b.csv"), "id,churned\n2,1\n").unwrap();
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/churn.yaml", "--data-digest"])
        .args([&data])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let digest = out.json()["mf_hash"]["data_digest"].clone();
    assert_eq!(
        (digest["files"].as_u64(), digest["bytes"].as_u64()),
        (Some(2), Some(30))
    );
    let pinned = digest["digest"].as_str().unwrap().to_string();
    assert!(pinned.starts_with("blake3:") && pinned.len() == 7 + 64);

    let manifest = std::fs::read_to_string(testdata("mf-hash/churn.yaml")).unwrap();
    let pinned_manifest = manifest.replace("@snapshot=5d1a90c2", &format!("@{pinned}"));
    let path = dir.path().join("pinned.yaml");
    std::fs::write(&path, &pinned_manifest).unwrap();
    let ok = tool("mf-hash")
        .args([&path])
        .args(["--data-digest".as_ref(), data.as_os_str()])
        .run();
    assert_eq!(ok.code, 0, "{}", ok.stderr);

    std::fs::write(data.join("b.csv"), "id,churned\n2,0\n").unwrap();
    let changed = tool("mf-hash")
        .args([&path])
        .args(["--data-digest".as_ref(), data.as_os_str()])
        .run();
    changed.assert_bad_input("mf-hash", &format!("since it was pinned as {pinned}"));
    assert!(
        changed.stderr.contains("without a listing"),
        "pinned by hand, so no listing names the file: {}",
        changed.stderr
    );

    let missing = tool("mf-hash")
        .args([
            "testdata/mf-hash/churn.yaml",
            "--data-digest",
            "no/such/folder",
        ])
        .run();
    missing.assert_bad_input("mf-hash", "--data-digest no/such/folder: ");
}

#[test]
fn commit_from_git_fills_the_commit_and_refuses_a_dirty_tree() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .current_dir(dir.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            status.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        String::from_utf8(status.stdout).unwrap()
    };
    git(&["init", "-q"]);
    std::fs::copy(
        testdata("mf-hash/churn.yaml"),
        dir.path().join("manifest.yaml"),
    )
    .unwrap();
    git(&["add", "manifest.yaml"]);
    git(&["commit", "-qm", "manifest"]);
    let head = git(&["rev-parse", "HEAD"]).trim().to_string();

    let out = tool("mf-hash")
        .current_dir(dir.path())
        .args(["manifest.yaml", "--commit-from-git"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["manifest"]["code"]["commit"], head);

    std::fs::write(dir.path().join("train.py"), "print('changed')\n").unwrap();
    let dirty = tool("mf-hash")
        .current_dir(dir.path())
        .args(["manifest.yaml", "--commit-from-git"])
        .run();
    dirty.assert_bad_input("mf-hash", "has uncommitted changes");
    assert!(dirty.stderr.contains("train.py"), "{}", dirty.stderr);
}

#[test]
fn help_shows_examples_and_output_schema() {
    let out = tool("mf-hash").args(["--help"]).run();
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.contains("Examples:") && out.stdout.contains("\"manifest_hash\""),
        "{}",
        out.stdout
    );
}

/// Thirty typos across every section of the demo manifest: each stops at mf-hash (exit 1, the
/// record listing it), before any data is read, naming the field and, where a known name is
/// close, that name.
#[test]
fn thirty_typos_in_every_section_are_named_with_the_close_name() {
    let demo = std::fs::read_to_string(testdata("demo/manifest.yaml")).unwrap();
    let extra = |line: &str| format!("{demo}{line}\n");
    let replaced = |from: &str, to: &str| {
        assert!(demo.contains(from), "{from}");
        demo.replacen(from, to, 1)
    };
    let cases: Vec<(String, &str, &str)> = vec![
        (
            replaced("run_id: churn-demo", "run_idd: churn-demo"),
            "run_idd",
            "`run_id`",
        ),
        (replaced("\nseed: 7", "\nsede: 7"), "sede", "`seed`"),
        (replaced("\neval:", "\nevl:"), "evl", "`eval`"),
        (replaced("\nconfig: {", "\nconifg: {"), "conifg", "`config`"),
        (
            replaced("  entity: customer_id", "  entty: customer_id"),
            "data.entty",
            "`entity`",
        ),
        (
            replaced("  label: churned", "  lable: churned"),
            "data.lable",
            "`label`",
        ),
        (
            replaced("  label_time: label_date", "  label_tme: label_date"),
            "data.label_tme",
            "`label_time`",
        ),
        (
            replaced("  splits: {", "  split: {"),
            "data.split",
            "`splits`",
        ),
        (
            replaced("  time: signup_date", "  tme: signup_date"),
            "data.tme",
            "`time`",
        ),
        (replaced("  as_of: {", "  asof: {"), "data.asof", "`as_of`"),
        (
            replaced("  commit: 9c41be0", "  comit: 9c41be0"),
            "code.comit",
            "`commit`",
        ),
        (
            replaced("  image: registry", "  imag: registry"),
            "code.imag",
            "`image`",
        ),
        (
            replaced("hidden: [64, 32]", "hiden: [64, 32]"),
            "config.hiden",
            "`hidden`",
        ),
        (
            replaced("lr: 0.003", "lr: fast"),
            "config.lr",
            "must be a number",
        ),
        (
            replaced("max_steps: 4000", "max_step: 4000"),
            "config.max_step",
            "`max_steps`",
        ),
        (
            replaced("model: mlp", "model: mlpp"),
            "config.model",
            "only \"mlp\"",
        ),
        (
            replaced("global_batch: 1024", "global_bath: 1024"),
            "config.global_bath",
            "`global_batch`",
        ),
        (
            replaced("lr: 0.003", "lr: 0.003, dropuot: 0.1"),
            "config.dropuot",
            "`dropout`",
        ),
        (
            replaced("lr: 0.003", "lr: 0.003, alerts: {loss_windw: 20}"),
            "config.alerts.loss_windw",
            "`loss_window`",
        ),
        (
            replaced("lr: 0.003", "lr: 0.003, patiense: 3"),
            "config.patiense",
            "`patience`",
        ),
        (
            replaced("  slices: [", "  slice: ["),
            "eval.slice",
            "`slices`",
        ),
        (
            replaced("  gates: {", "  gatse: {"),
            "eval.gatse",
            "`gates`",
        ),
        (
            replaced("auc_min_delta: -0.002", "acu_min_delta: -0.002"),
            "eval.gates.acu_min_delta",
            "`auc`",
        ),
        (
            extra("validate: {numeric_drfit: 0.2}"),
            "validate.numeric_drfit",
            "`numeric_drift`",
        ),
        (
            extra("validate: {alpah: 0.01}"),
            "validate.alpah",
            "`alpha`",
        ),
        (
            extra("validate: {max_grwoth: 0.5}"),
            "validate.max_grwoth",
            "`max_growth`",
        ),
        (
            extra("leaks: {near_duplicate: {max_fraction: 0.1, reason: templates}}"),
            "leaks.near_duplicate",
            "`near_duplicates`",
        ),
        (
            extra("leaks: {exact_duplicates: {max_fracton: 0.1, reason: resold}}"),
            "leaks.exact_duplicates.max_fracton",
            "`max_fraction`",
        ),
        (
            extra("cost: {core_hr: 0.04}"),
            "cost.core_hr",
            "`core_hour`",
        ),
        (
            extra("cost: {gpu_houre: 2.5}"),
            "cost.gpu_houre",
            "`gpu_hour`",
        ),
    ];
    assert_eq!(cases.len(), 30);
    let dir = tempfile::tempdir().unwrap();
    let mut missed = Vec::new();
    for (i, (text, field, named)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("typo{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        // A snapshot that does not exist: the typo must be found without reading any data.
        let out = tool("mf-hash").args([path.as_os_str()]).run();
        // Exit 2, nothing on stdout, the field and its suggestion on a `problem:` line.
        let problems = out.stderr.clone();
        let found = out.code == 2
            && out.stdout.is_empty()
            && problems
                .lines()
                .any(|line| line.contains(&format!("problem: {field}: ")) && line.contains(named));
        if !found {
            missed.push(format!("{field} ({named}): exit {}: {problems}", out.code));
        }
    }
    assert!(
        missed.is_empty(),
        "{} missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

/// A team's tags are hashed with the manifest (another owner, another run), and a tag that is
/// not text or whose name is unfit is a lint problem naming it.
#[test]
fn tags_are_hashed_with_the_manifest_and_linted() {
    let dir = tempfile::tempdir().unwrap();
    let churn = std::fs::read_to_string(testdata("mf-hash/churn.yaml")).unwrap();
    let write = |name: &str, tags: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{churn}\n{tags}\n")).unwrap();
        path.display().to_string()
    };
    let ana = write("ana.yaml", "tags: {owner: ana, ticket: ML-412}");
    let bo = write("bo.yaml", "tags: {owner: bo, ticket: ML-412}");
    let out = tool("mf-hash").args([ana.as_str()]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["manifest"]["tags"]["owner"], "ana");
    let (hash_ana, hash_bo) = (hash_of(&[&ana]), hash_of(&[&bo]));
    assert_ne!(hash_ana, hash_bo);
    assert_ne!(hash_ana, CHURN_HASH);

    let bad = write("bad.yaml", "tags: {ticket: 412, \"on call\": ana}");
    let out = tool("mf-hash").args([bad.as_str()]).run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains(
            "problem: tags.ticket: must be text, found the number 412 (quote it in YAML)"
        ) && out
            .stderr
            .contains("problem: tags.on call: `on call` must be letters"),
        "{}",
        out.stderr
    );
}
