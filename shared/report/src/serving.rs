//! The page's table of what serves: predict's drift checks against the model's training data
//! and its test scores, each with its value, limit and sampling noise.

use std::fmt::Write as _;

use serde_json::Value;

use crate::escape::esc;

fn figure(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.4}"))
}

pub fn serving_drift_table(html: &mut String, latest: &Value) {
    let predict = &latest["predict"];
    let Some(drift) = predict.get("drift").filter(|d| d.is_object()) else {
        if let Some(why) = predict["no_drift"].as_str() {
            let _ = write!(
                html,
                "<h2>What serves</h2><p class=\"note\">No drift checks: {}</p>",
                esc(why)
            );
        }
        return;
    };
    let passed = drift["passed"] == Value::Bool(true);
    let _ = write!(
        html,
        "<h2>What serves</h2><p class=\"note\" data-drift=\"{}\">{} rows of {} scored with {}: {}.</p>",
        if passed { "passed" } else { "failed" },
        predict["rows"],
        esc(predict["snapshot"].as_str().unwrap_or("")),
        esc(drift["against"].as_str().unwrap_or("")),
        if passed {
            "no drift beyond the limits"
        } else {
            "drift beyond the limits: retrain"
        }
    );
    html.push_str("<table><tr><th>feature</th><th>check</th><th>value</th><th>limit</th><th>noise</th><th>verdict</th></tr>");
    let mut row = |column: &str, name: &str, check: &Value| {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(column),
            esc(name),
            figure(&check["value"]),
            figure(&check["threshold"]),
            figure(&check["noise"]),
            if check["passed"] == Value::Bool(true) {
                "ok"
            } else {
                "DRIFT"
            }
        );
    };
    if let Some(score) = drift.get("score").filter(|s| s.is_object()) {
        row("(score)", "score_drift", score);
    }
    for check in drift["checks"].as_array().into_iter().flatten() {
        row(
            check["column"].as_str().unwrap_or(""),
            check["name"].as_str().unwrap_or(""),
            check,
        );
    }
    html.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_check_is_a_row_and_a_drift_says_so() {
        let record = json!({"predict": {"rows": 3521, "snapshot": "lake/<today>", "drift": {
            "passed": false, "against": "telco@1",
            "checks": [
                {"name": "numeric_drift", "column": "monthly_charges", "value": 0.21,
                 "threshold": 0.1, "noise": 0.01, "passed": false, "fails_run": true},
                {"name": "new_categories", "column": "contract", "value": 0.0,
                 "threshold": 0.01, "noise": 0.002, "passed": true, "fails_run": true}],
            "score": {"value": 0.004, "threshold": 0.1, "noise": 0.01, "passed": true,
                      "test": {"edges": [0.1], "counts": [1, 1]}, "served": [1, 1]}}}});
        let mut html = String::new();
        serving_drift_table(&mut html, &record);
        assert!(html.contains("data-drift=\"failed\""), "{html}");
        assert!(html.contains("lake/&lt;today&gt;"), "{html}");
        assert!(html.contains("<td>monthly_charges</td><td>numeric_drift</td><td>0.2100</td><td>0.1000</td><td>0.0100</td><td>DRIFT</td>"), "{html}");
        assert!(
            html.contains("<td>contract</td><td>new_categories</td>"),
            "{html}"
        );
        assert!(
            html.contains("<td>(score)</td><td>score_drift</td><td>0.0040</td>"),
            "{html}"
        );

        let mut none = String::new();
        serving_drift_table(&mut none, &json!({"predict": {"no_drift": "a file"}}));
        assert!(none.contains("No drift checks: a file"), "{none}");
        let mut nothing = String::new();
        serving_drift_table(&mut nothing, &json!({"evaluate": {}}));
        assert!(nothing.is_empty());
    }
}
