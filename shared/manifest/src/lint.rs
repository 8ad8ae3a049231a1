//! Lint: what makes a manifest unfit to define a reproducible run. Every problem names its field.

use serde_json::{Map, Value};

use crate::gates::{self, GateKind};
use crate::snapshot::SnapshotRef;
use crate::suggest;

/// The top-level fields a manifest may have.
pub const TOP_LEVEL_FIELDS: &[&str] = &[
    "run_id",
    "description",
    "data",
    "code",
    "config",
    "seed",
    "eval",
    "validate",
    "leak_check",
    "leaks",
    "alert",
    "cost",
    "tags",
];

/// The fields of `data` the tools read.
pub const DATA_FIELDS: &[&str] = &[
    "snapshot",
    "entity",
    "time",
    "label",
    "label_positive",
    "label_time",
    "categorical",
    "text",
    "as_of",
    "splits",
    "max_unsplit_fraction",
];

/// The fields of `code`: the commit and the image the run's code is.
const CODE_FIELDS: &[&str] = &["commit", "image"];

/// The fields of `cost`: the price of an hour of one core and of one GPU.
const COST_FIELDS: &[&str] = &["core_hour", "gpu_hour", "currency"];

/// Seeds are hashed as JSON numbers, which are exact only up to 2^53.
const MAX_SEED: u64 = 1 << 53;

/// One lint problem, as `mf_hash.problems` lists it.
pub use runfn_schema::record::Problem;

/// Every problem in `manifest`, in field order. An empty list means it passes.
pub fn lint(manifest: &Map<String, Value>) -> Vec<Problem> {
    lint_as(manifest, Pinning::Pinned)
}

/// Whether the manifest must already name an immutable snapshot (a run), or may be a template
/// whose snapshot `mf-hash pin` fills in each night (`./lake/tonight`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinning {
    Pinned,
    Template,
}

/// [`lint`], with a template's snapshot allowed to lack its immutable id (a location that moves
/// by name, `latest` or `current`, is still refused).
pub fn lint_as(manifest: &Map<String, Value>, pinning: Pinning) -> Vec<Problem> {
    let mut problems = Problems::default();
    problems.unknown_keys("", manifest, TOP_LEVEL_FIELDS);
    lint_run_id(manifest.get("run_id"), &mut problems);
    lint_data(manifest.get("data"), pinning, &mut problems);
    lint_code(manifest.get("code"), &mut problems);
    lint_seed(manifest.get("seed"), &mut problems);
    // The settings other tools read, checked by the same code they use: a typo stops the run
    // here, before any data is read, not at the stage that reads it.
    if let Some(config) = manifest.get("config")
        && !config.is_object()
    {
        problems.add("config", "must be a mapping of settings");
    } else if let Err(message) = runfn_schema::train::TrainConfig::from_json(manifest.get("config"))
    {
        problems.add_located(&message);
    }
    if let Err(err) = runfn_schema::validate::Thresholds::from_manifest(manifest.get("validate")) {
        problems.add(err.field.trim_start_matches("manifest."), err.message);
    }
    lint_eval(manifest.get("eval"), &mut problems);
    lint_cost(manifest.get("cost"), &mut problems);
    lint_tags(manifest.get("tags"), &mut problems);
    if let Err(e) = crate::leaks::parse_leaks(manifest.get("leaks")) {
        problems.add(e.field.trim_start_matches("manifest."), e.message);
    }
    problems.0
}

/// A manifest for drift checks alone (`ds-validate`, `ds-validate compare`): `data` and
/// `validate`; no code, seed, label or splits are needed, since nothing is trained. Whatever
/// it does hold is checked as in a run's manifest.
pub fn lint_drift_only(manifest: &Map<String, Value>) -> Vec<Problem> {
    let mut problems = Problems::default();
    problems.unknown_keys("", manifest, TOP_LEVEL_FIELDS);
    if manifest.contains_key("run_id") {
        lint_run_id(manifest.get("run_id"), &mut problems);
    }
    // No `data` at all is a comparison of two saved profiles: nothing to read there.
    if manifest.contains_key("data")
        && let Some(data) = problems.object("data", manifest.get("data"))
    {
        problems.unknown_keys("data", data, DATA_FIELDS);
        for optional in ["snapshot", "label", "entity", "time", "label_time"] {
            if let Some(value) = data.get(optional) {
                problems.string(&format!("data.{optional}"), Some(value));
            }
        }
        if let Some(snapshot) = data.get("snapshot").and_then(Value::as_str)
            && snapshot.contains('@')
            && let Err(reason) = SnapshotRef::parse(snapshot)
        {
            problems.add("data.snapshot", reason);
        }
        if data.contains_key("splits") {
            lint_splits(data.get("splits"), &mut problems);
        }
        lint_label_positive(data.get("label_positive"), &mut problems);
        lint_columns("data.categorical", data.get("categorical"), &mut problems);
        lint_columns("data.text", data.get("text"), &mut problems);
    }
    if let Err(err) = runfn_schema::validate::Thresholds::from_manifest(manifest.get("validate")) {
        problems.add(err.field.trim_start_matches("manifest."), err.message);
    }
    if manifest.contains_key("seed") {
        lint_seed(manifest.get("seed"), &mut problems);
    }
    if manifest.contains_key("code") {
        lint_code(manifest.get("code"), &mut problems);
    }
    lint_tags(manifest.get("tags"), &mut problems);
    problems.0
}

fn lint_tags(value: Option<&Value>, problems: &mut Problems) {
    for (field, message) in crate::tags::problems(value) {
        problems.add(field, message);
    }
}

#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    /// `unknown field` for each key of `map` (at `prefix`, empty at the top) that is not in
    /// `known`, with the close name when there is one.
    fn unknown_keys(&mut self, prefix: &str, map: &Map<String, Value>, known: &[&str]) {
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                let field = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                self.add(field, format!("unknown field{}", suggest::hint(key, known)));
            }
        }
    }

    /// A problem written `manifest.FIELD: message`, as the settings' parsers write them.
    fn add_located(&mut self, text: &str) {
        let text = text.strip_prefix("manifest.").unwrap_or(text);
        match text.split_once(": ") {
            Some((field, message)) => self.add(field, message),
            None => self.add("config", text),
        }
    }

    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            field: field.into(),
            message: message.into(),
        });
    }

    /// The string at `field`, or a problem saying it is missing or of the wrong type.
    fn string<'v>(&mut self, field: &str, value: Option<&'v Value>) -> Option<&'v str> {
        match value {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
            Some(Value::String(_)) => {
                self.add(field, "is empty");
                None
            }
            Some(Value::Number(n)) => {
                self.add(
                    field,
                    format!("must be a string, found the number {n} (quote it in YAML)"),
                );
                None
            }
            Some(other) => {
                self.add(
                    field,
                    format!("must be a string, found {}", type_name(other)),
                );
                None
            }
            None => {
                self.add(field, "is missing");
                None
            }
        }
    }

    fn object<'v>(
        &mut self,
        field: &str,
        value: Option<&'v Value>,
    ) -> Option<&'v Map<String, Value>> {
        match value {
            Some(Value::Object(map)) => Some(map),
            Some(other) => {
                self.add(
                    field,
                    format!("must be a mapping, found {}", type_name(other)),
                );
                None
            }
            None => {
                self.add(field, "is missing");
                None
            }
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    runfn_core::error::json_type_name(value)
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn lint_run_id(value: Option<&Value>, problems: &mut Problems) {
    if let Some(run_id) = problems.string("run_id", value)
        && !is_name(run_id)
    {
        problems.add(
            "run_id",
            format!("`{run_id}` must be letters, digits, `.`, `_` or `-` (it names folders)"),
        );
    }
}

fn lint_data(value: Option<&Value>, pinning: Pinning, problems: &mut Problems) {
    let Some(data) = problems.object("data", value) else {
        return;
    };
    problems.unknown_keys("data", data, DATA_FIELDS);
    if let Some(snapshot) = problems.string("data.snapshot", data.get("snapshot")) {
        // A template's location is checked as it will be once pinned.
        let checked = match pinning {
            Pinning::Template if !snapshot.contains('@') => format!("{snapshot}@snapshot=pinned"),
            _ => snapshot.to_string(),
        };
        if let Err(reason) = SnapshotRef::parse(&checked) {
            problems.add("data.snapshot", reason.replace("@snapshot=pinned", ""));
        }
    }
    problems.string("data.label", data.get("label"));
    for optional in ["entity", "time"] {
        if let Some(value) = data.get(optional) {
            problems.string(&format!("data.{optional}"), Some(value));
        }
    }
    lint_splits(data.get("splits"), problems);
    lint_label_positive(data.get("label_positive"), problems);
    lint_columns("data.categorical", data.get("categorical"), problems);
    if let Some(value) = data.get("max_unsplit_fraction")
        && !value.as_f64().is_some_and(|v| (0.0..=1.0).contains(&v))
    {
        problems.add(
            "data.max_unsplit_fraction",
            format!(
                "must be a share of the rows between 0 and 1, found {}",
                serde_json::to_string(value).unwrap_or_default()
            ),
        );
    }
}

/// The label value that means positive is compared with the column's values by type, so it is
/// one value: text, a number or a boolean.
fn lint_label_positive(value: Option<&Value>, problems: &mut Problems) {
    if let Some(value @ (Value::Array(_) | Value::Object(_))) = value {
        problems.add(
            "data.label_positive",
            format!(
                "must be the label value that means positive (text, a number or a boolean), found {}",
                type_name(value)
            ),
        );
    }
}

fn lint_columns(field: &str, value: Option<&Value>, problems: &mut Problems) {
    match value {
        None => {}
        Some(Value::Array(columns)) => {
            for (i, column) in columns.iter().enumerate() {
                problems.string(&format!("{field}[{i}]"), Some(column));
            }
        }
        Some(other) => problems.add(
            field,
            format!("must be a list of column names, found {}", type_name(other)),
        ),
    }
}

fn lint_splits(value: Option<&Value>, problems: &mut Problems) {
    let Some(splits) = problems.object("data.splits", value) else {
        return;
    };
    let mut seen: Vec<(String, &str)> = Vec::new();
    for (name, rule) in splits {
        let field = format!("data.splits.{name}");
        problems.string(&field, Some(rule));
        if !is_name(name) {
            problems.add(
                &field,
                "a split name must be letters, digits, `.`, `_` or `-` (it names folders)",
            );
        }
        let folded = name.trim().to_ascii_lowercase();
        if let Some((_, earlier)) = seen.iter().find(|(f, _)| *f == folded) {
            problems.add(&field, format!("overlaps the split `{earlier}` by name"));
        }
        seen.push((folded, name));
    }
    for required in ["train", "test"] {
        if !splits.contains_key(required) {
            problems.add("data.splits", format!("has no `{required}` split"));
        }
    }
}

fn lint_code(value: Option<&Value>, problems: &mut Problems) {
    let Some(code) = problems.object("code", value) else {
        return;
    };
    problems.unknown_keys("code", code, CODE_FIELDS);
    if let Some(commit) = problems.string("code.commit", code.get("commit")) {
        let hex = commit
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !(7..=40).contains(&commit.len()) || !hex {
            problems.add(
                "code.commit",
                format!("`{commit}` must be 7 to 40 lowercase hex characters (a git commit id)"),
            );
        }
    }
    if let Some(image) = problems.string("code.image", code.get("image"))
        && let Some(reason) = image_problem(image)
    {
        problems.add("code.image", reason);
    }
}

fn image_problem(image: &str) -> Option<String> {
    let Some((name, digest)) = image.split_once('@') else {
        return Some(format!(
            "`{image}` is not pinned by digest: use `<name>@sha256:<64 hex>`, not a tag"
        ));
    };
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if name.is_empty() || !valid {
        Some(format!(
            "`{image}`: the digest must be `sha256:` and 64 lowercase hex characters"
        ))
    } else {
        None
    }
}

fn lint_seed(value: Option<&Value>, problems: &mut Problems) {
    match value {
        None => problems.add(
            "seed",
            "is missing (set an integer seed so the run can be repeated)",
        ),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(seed) if seed <= MAX_SEED => {}
            Some(_) => problems.add(
                "seed",
                format!("{n} is above 2^53 and cannot be hashed exactly"),
            ),
            None => problems.add("seed", format!("must be a non-negative integer, found {n}")),
        },
        Some(other) => problems.add(
            "seed",
            format!("must be a non-negative integer, found {}", type_name(other)),
        ),
    }
}

/// A misspelt rate would price every stage at zero, so unknown keys are problems too.
fn lint_cost(value: Option<&Value>, problems: &mut Problems) {
    let Some(value) = value else { return };
    let Some(cost) = problems.object("cost", Some(value)) else {
        return;
    };
    for key in cost.keys() {
        if !COST_FIELDS.contains(&key.as_str()) {
            problems.add(
                format!("cost.{key}"),
                format!("unknown field{}", suggest::hint(key, COST_FIELDS)),
            );
        }
    }
    let known: Map<String, Value> = cost
        .iter()
        .filter(|(key, _)| COST_FIELDS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if let Err(runfn_core::InputError::Field { field, message }) =
        runfn_core::timings::Rates::parse(Some(&Value::Object(known)))
    {
        problems.add(field.trim_start_matches("manifest."), message);
    }
}

fn lint_eval(value: Option<&Value>, problems: &mut Problems) {
    let Some(value) = value else { return };
    let Some(eval) = problems.object("eval", Some(value)) else {
        return;
    };
    if let Err(settings) = crate::eval_settings::EvalSettings::parse(eval) {
        for problem in settings {
            problems.add(problem.field, problem.message);
        }
    }
    if let Some(slices) = eval.get("slices") {
        match slices {
            Value::Array(columns) => {
                for (i, column) in columns.iter().enumerate() {
                    problems.string(&format!("eval.slices[{i}]"), Some(column));
                }
            }
            other => problems.add(
                "eval.slices",
                format!("must be a list of columns, found {}", type_name(other)),
            ),
        }
    }
    if let Some(baseline) = eval.get("baseline_model") {
        problems.string("eval.baseline_model", Some(baseline));
    }
    if let Some(gates) = eval.get("gates")
        && let Some(gates) = problems.object("eval.gates", Some(gates))
    {
        for (key, limit) in gates {
            lint_gate(key, limit, problems);
        }
    }
}

fn lint_gate(key: &str, limit: &Value, problems: &mut Problems) {
    let field = format!("eval.gates.{key}");
    let kind = match gates::parse_gate_key(key) {
        Ok(kind) => kind,
        Err(reason) => return problems.add(field, reason),
    };
    let Some(number) = limit.as_f64() else {
        return problems.add(
            field,
            format!("must be a number, found {}", type_name(limit)),
        );
    };
    match kind {
        GateKind::MaxSliceDrop if number < 0.0 => problems.add(field, "must be zero or more"),
        GateKind::MinSliceRows if limit.as_u64().is_none() => {
            problems.add(field, "must be a non-negative integer")
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> Value {
        json!({
            "run_id": "churn-2026-11-02-b",
            "data": {
                "snapshot": "./lake/churn@snapshot=5d1a90c2",
                "entity": "customer_id", "time": "signup_date", "label": "churned",
                "splits": {"train": "signup_date < 2026-08-01", "val": "2026-08", "test": "2026-09"}
            },
            "code": {"commit": "9c41be0", "image": format!("registry.example.com/train@sha256:{}", "0f".repeat(32))},
            "config": {"model": "mlp", "hidden": [64, 32], "lr": 0.003},
            "seed": 1234,
            "eval": {"baseline_model": "churn@prod", "slices": ["region"], "gates": {"auc_min_delta": -0.002, "max_slice_drop": 0.01}}
        })
    }

    fn problems_after(edit: impl FnOnce(&mut Value)) -> Vec<String> {
        let mut manifest = valid();
        edit(&mut manifest);
        lint(manifest.as_object().unwrap())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_example_manifest_is_clean() {
        assert_eq!(problems_after(|_| {}), Vec::<String>::new());
    }

    #[test]
    fn a_positive_label_value_of_any_scalar_type_and_categorical_columns_are_clean() {
        for positive in [json!("YES"), json!(2), json!(1.0), json!(true)] {
            let problems = problems_after(|m| {
                m["data"]["label_positive"] = positive;
                m["data"]["categorical"] = json!(["policePrecinct"]);
            });
            assert_eq!(problems, Vec::<String>::new());
        }
    }

    #[test]
    fn a_cost_with_rates_and_currency_is_clean() {
        let problems = problems_after(|m| {
            m["cost"] = json!({"core_hour": 0.04, "gpu_hour": 2.5, "currency": "USD"});
        });
        assert_eq!(problems, Vec::<String>::new());
    }

    #[test]
    fn each_rule_names_its_field() {
        type Edit = Box<dyn FnOnce(&mut Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|m| m["data"]["snapshot"] = json!("./lake/churn@latest")),
                "data.snapshot: ",
            ),
            (
                Box::new(|m| {
                    m["data"].as_object_mut().unwrap().remove("snapshot");
                }),
                "data.snapshot: is missing",
            ),
            (
                Box::new(|m| m["code"]["image"] = json!("registry.example.com/train:1.4")),
                "code.image: `registry.example.com/train:1.4` is not pinned by digest",
            ),
            (
                Box::new(|m| m["code"]["commit"] = json!("xyz1234")),
                "code.commit: `xyz1234` must be 7 to 40",
            ),
            (
                Box::new(|m| m["code"]["commit"] = json!(1234567)),
                "code.commit: must be a string, found the number 1234567 (quote it in YAML)",
            ),
            (
                Box::new(|m| m["seed"] = json!(12.5)),
                "seed: must be a non-negative integer, found 12.5",
            ),
            (
                Box::new(|m| {
                    m.as_object_mut().unwrap().remove("seed");
                }),
                "seed: is missing",
            ),
            (
                Box::new(|m| {
                    m["data"]["splits"] = json!({"train": "a", "Train": "b", "test": "c"})
                }),
                "data.splits.Train: overlaps the split `train` by name",
            ),
            (
                Box::new(|m| {
                    m["data"].as_object_mut().unwrap().remove("splits");
                }),
                "data.splits: is missing",
            ),
            (
                Box::new(|m| m["data"]["splits"] = json!({"train": "a"})),
                "data.splits: has no `test` split",
            ),
            (
                Box::new(|m| m["eval"]["gates"] = json!({"acu_min_delta": 0})),
                "eval.gates.acu_min_delta: `acu_min_delta` names no known metric `acu` (did you mean `auc`?)",
            ),
            (
                Box::new(|m| m["confg"] = json!({})),
                "confg: unknown field (did you mean `config`?)",
            ),
            (
                Box::new(|m| m["cost"] = json!({"core_hour": -0.04})),
                "cost.core_hour: must be a number >= 0, found -0.04",
            ),
            (
                Box::new(|m| m["cost"] = json!({"gpu_hour": "2.5"})),
                "cost.gpu_hour: must be a number >= 0",
            ),
            (
                Box::new(|m| m["cost"] = json!({"core_hours": 0.04})),
                "cost.core_hours: unknown field (did you mean `core_hour`?)",
            ),
            (
                Box::new(|m| m["cost"] = json!(3)),
                "cost: must be a mapping",
            ),
            (
                Box::new(|m| m["data"]["label_positive"] = json!(["YES"])),
                "data.label_positive: must be the label value that means positive (text, a number or a boolean), found an array",
            ),
            (
                Box::new(|m| m["data"]["categorical"] = json!("policePrecinct")),
                "data.categorical: must be a list of column names, found a string",
            ),
            (
                Box::new(|m| m["data"]["categorical"] = json!(["policePrecinct", 3])),
                "data.categorical[1]: must be a string, found the number 3 (quote it in YAML)",
            ),
            (
                Box::new(|m| m["data"]["max_unsplit_fraction"] = json!(5)),
                "data.max_unsplit_fraction: must be a share of the rows between 0 and 1, found 5",
            ),
            (
                Box::new(|m| m["data"]["max_unsplit_fraction"] = json!("1%")),
                "data.max_unsplit_fraction: must be a share of the rows between 0 and 1, found \"1%\"",
            ),
        ];
        for (edit, expected) in cases {
            let problems = problems_after(edit);
            assert!(
                problems.iter().any(|p| p.starts_with(expected)),
                "expected a problem starting with {expected:?}, got {problems:?}"
            );
        }
    }
}
