//! The paired gate's statistics against an independent computation in numpy and scipy, on a real
//! table: two logistic regressions (scikit-learn) on other features of the telco customers score
//! the same held-out rows; Python writes their per-row score files and computes DeLong's
//! variance from its pairwise definition (O(m·n), no ranks), a numpy paired bootstrap of the log
//! loss, and the p-values with scipy; `gate` must agree.

use serde_json::{Value, json};

use crate::util::{python_stdout, testdata, tool};

const ORACLE: &str = r#"
import json, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from scipy.stats import norm
from sklearn.linear_model import LogisticRegression

csv, out = sys.argv[1], sys.argv[2]
import csv as csvmod
rows = list(csvmod.DictReader(open(csv)))
y = np.array([r["churned"] == "1" for r in rows])
num = lambda c: np.array([float(r[c]) if r[c] else 0.0 for r in rows])
onehot = lambda c: np.array([[1.0 if r[c] == v else 0.0 for v in sorted({r[c] for r in rows})] for r in rows])
features_a = np.column_stack([num("tenure"), num("monthly_charges"), onehot("contract")])
features_b = np.column_stack([num("monthly_charges"), onehot("internet_service"), onehot("payment_method")])
rng = np.random.default_rng(5)
test = rng.random(len(rows)) < 0.3
train = ~test
def fit(x):
    x = (x - x[train].mean(0)) / (x[train].std(0) + 1e-12)
    return LogisticRegression(max_iter=2000).fit(x[train], y[train]).predict_proba(x[test])[:, 1]
a, b, labels = fit(features_a), fit(features_b), y[test]
contract = [r["contract"] for r, t in zip(rows, test) if t]

def write(path, scores):
    table = pa.table({"row": pa.array(range(len(scores)), pa.uint64()), "label": pa.array(labels.tolist()),
                      "score": pa.array(scores.astype(float)), "slice:contract": pa.array(contract)})
    meta = {b"runfn.format": b"runfn-row-scores-v1", b"runfn.split": b"test",
            b"runfn.rows_blake3": b"0" * 64, b"runfn.key": b"row"}
    pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd")
write(f"{out}/candidate.parquet", a)
write(f"{out}/baseline.parquet", b)

def delong(a, b, y):
    # The definition: psi over every (positive, negative) pair.
    pa_, na_ = a[y], a[~y]
    pb_, nb_ = b[y], b[~y]
    def comps(p, n):
        psi = (p[:, None] > n[None, :]) + 0.5 * (p[:, None] == n[None, :])
        return psi.mean(1), psi.mean(0)
    (a10, a01), (b10, b01) = comps(pa_, na_), comps(pb_, nb_)
    m, n = len(pa_), len(na_)
    s10 = np.cov(np.vstack([a10, b10]))
    s01 = np.cov(np.vstack([a01, b01]))
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    return a10.mean(), b10.mean(), var, int(m)

def logloss(p, y):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))

def bootstrap_se(a, b, y, resamples=4000):
    d = logloss(a, y) - logloss(b, y)
    idx = np.random.default_rng(1).integers(0, len(d), size=(resamples, len(d)))
    return d.mean(), d[idx].mean(1).std(ddof=1)

result = {}
for name, mask in [("overall", np.ones(len(labels), bool))] + [
        (f"contract={v}", np.array([c == v for c in contract])) for v in sorted(set(contract))]:
    auc_a, auc_b, var, positives = delong(a[mask], b[mask], labels[mask])
    d_ll, se_ll = bootstrap_se(a[mask], b[mask], labels[mask])
    result[name] = {"auc_a": auc_a, "auc_b": auc_b, "var": var, "positives": positives,
                    "rows": int(mask.sum()), "logloss_delta": d_ll, "logloss_se": se_ll}
# The overall AUC check's p-value under no_regression with limit -0.002, from scipy.
o = result["overall"]
result["overall"]["p"] = norm.cdf((o["auc_a"] - o["auc_b"] + 0.002) / np.sqrt(o["var"]))
print(json.dumps(result))
"#;

fn blake3_of(path: &std::path::Path) -> String {
    blake3::hash(&std::fs::read(path).unwrap())
        .to_hex()
        .to_string()
}

fn evaluation(path: &std::path::Path) -> Value {
    json!({"overall": {"rows": 0}, "rows_blake3": "0".repeat(64),
           "row_scores": {"path": path, "blake3": blake3_of(path)}})
}

#[test]
fn delong_and_the_bootstrap_agree_with_numpy_and_scipy_on_a_real_table() {
    let dir = tempfile::tempdir().unwrap();
    let csv = testdata("real/telco/snapshot/telco.csv");
    let oracle: Value = serde_json::from_str(&python_stdout(
        ORACLE,
        &[csv.as_os_str(), dir.path().as_os_str()],
    ))
    .unwrap();
    let record = json!({
        "manifest": {"seed": 3, "eval": {"slices": ["contract"], "resamples": 4000,
            "gates": {"auc_min_delta": -0.002, "logloss_min_delta": -0.5, "max_slice_drop": 0.5}}},
        "evaluate": evaluation(&dir.path().join("candidate.parquet")),
        "baseline": evaluation(&dir.path().join("baseline.parquet")),
    });
    let run = tool("gate").stdin(record.to_string()).run();
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let gate = run.json()["gate"].clone();
    assert_eq!(gate["method"], "paired");
    let checks = gate["checks"].as_array().unwrap();
    let find = |metric: &str, slice: &Value| {
        checks
            .iter()
            .find(|c| c["metric"] == metric && &c["slice"] == slice && c.get("status").is_some())
            .unwrap_or_else(|| panic!("no {metric} check for {slice}: {checks:?}"))
    };
    let mut compared = 0;
    for (name, expected) in oracle.as_object().unwrap() {
        let slice = if name == "overall" {
            Value::Null
        } else {
            Value::from(name.as_str())
        };
        let auc = find("auc", &slice);
        let f = |v: &Value| v.as_f64().unwrap();
        assert!(
            (f(&auc["candidate"]) - f(&expected["auc_a"])).abs() < 1e-12,
            "{name}"
        );
        assert!(
            (f(&auc["baseline"]) - f(&expected["auc_b"])).abs() < 1e-12,
            "{name}"
        );
        let variance = f(&auc["se_rows"]).powi(2);
        assert!(
            (variance - f(&expected["var"])).abs() < 1e-9,
            "{name}: DeLong variance {variance} vs numpy {}",
            expected["var"]
        );
        assert_eq!(auc["rows"], expected["rows"], "{name}");
        assert_eq!(auc["positives"], expected["positives"], "{name}");
        let logloss = find("logloss", &slice);
        assert_eq!(logloss["method"], "bootstrap");
        assert!((f(&logloss["delta"]) - f(&expected["logloss_delta"])).abs() < 1e-9);
        // Both standard errors are estimates from 4,000 resamples: each is off by about
        // 1/√(2·4000) ≈ 1.1% of itself, their ratio by about 1.6%; 5% is three of those.
        let ratio = f(&logloss["se_rows"]) / f(&expected["logloss_se"]);
        assert!(
            (ratio - 1.0).abs() < 0.05,
            "{name}: bootstrap se {} vs numpy {}",
            logloss["se_rows"],
            expected["logloss_se"]
        );
        compared += 1;
    }
    assert!(compared >= 4, "overall and at least three contracts");
    let overall = find("auc", &Value::Null);
    let p = overall["p_value"].as_f64().unwrap();
    let expected = oracle["overall"]["p"].as_f64().unwrap();
    assert!((p - expected).abs() < 1e-9, "p {p} vs scipy {expected}");
}
