//! Canonical JSON per RFC 8785 (JCS): the byte form that hashes are taken over.
//!
//! Written here rather than taken from a crate because the crates that exist are unmaintained and
//! accept integers beyond 2^53 silently; number formatting, the hard part, comes from `ryu-js`,
//! which implements ECMAScript's Number-to-String exactly as JCS requires.

use std::fmt::Write;

use serde_json::{Map, Number, Value};

/// The largest integer an IEEE double holds exactly; JCS numbers are doubles.
const MAX_EXACT_INTEGER: u64 = 1 << 53;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{path}: the number {number} cannot be canonicalized exactly (integers must lie within ±2^53)"
)]
pub struct CanonicalError {
    pub path: String,
    pub number: String,
}

/// The RFC 8785 canonical form of `value`: keys sorted by UTF-16 code units, no white space,
/// numbers as ECMAScript prints doubles, strings with the minimal escapes.
pub fn to_canonical_string(value: &Value) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_value(value, &mut out, &mut String::from("$"))?;
    Ok(out)
}

/// A copy of `value` with every object's keys in canonical order, for output people read.
pub fn sorted_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            Value::Object(
                keys.into_iter()
                    .map(|key| (key.clone(), sorted_keys(&map[key])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

fn write_value(value: &Value, out: &mut String, path: &mut String) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out, path)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let len = path.len();
                let _ = write!(path, "[{i}]");
                write_value(item, out, path)?;
                path.truncate(len);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(map, out, path)?,
    }
    Ok(())
}

fn write_object(
    map: &Map<String, Value>,
    out: &mut String,
    path: &mut String,
) -> Result<(), CanonicalError> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        let len = path.len();
        path.push('.');
        path.push_str(key);
        write_value(value, out, path)?;
        path.truncate(len);
    }
    out.push('}');
    Ok(())
}

fn write_number(n: &Number, out: &mut String, path: &str) -> Result<(), CanonicalError> {
    let too_large = || CanonicalError {
        path: path.to_string(),
        number: n.to_string(),
    };
    let double = if let Some(u) = n.as_u64() {
        if u > MAX_EXACT_INTEGER {
            return Err(too_large());
        }
        u as f64
    } else if let Some(i) = n.as_i64() {
        if i.unsigned_abs() > MAX_EXACT_INTEGER {
            return Err(too_large());
        }
        i as f64
    } else {
        n.as_f64().ok_or_else(too_large)?
    };
    if double == 0.0 {
        // ECMAScript prints negative zero as "0".
        out.push('0');
    } else {
        out.push_str(ryu_js::Buffer::new().format_finite(double));
    }
    Ok(())
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn rfc8785_section_3_2_2_example() {
        let input = r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]}"#;
        let value: Value = serde_json::from_str(input).unwrap();
        assert_eq!(
            to_canonical_string(&value).unwrap(),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // RFC 8785 section 3.2.3: "\r" < "1" < "\u0080" < "ö" < "€" < "😀" < "\ufb33".
        let value = json!({"\u{20ac}": 1, "\r": 2, "\u{fb33}": 3, "1": 4, "\u{1f600}": 5, "\u{80}": 6, "\u{f6}": 7});
        let canonical = to_canonical_string(&value).unwrap();
        assert_eq!(
            canonical,
            "{\"\\r\":2,\"1\":4,\"\u{80}\":6,\"\u{f6}\":7,\"\u{20ac}\":1,\"\u{1f600}\":5,\"\u{fb33}\":3}"
        );
    }

    #[test]
    fn integers_and_doubles_of_equal_value_agree() {
        assert_eq!(
            to_canonical_string(&json!([1, 1.0, -0.0, 0])).unwrap(),
            "[1,1,0,0]"
        );
        assert_eq!(to_canonical_string(&json!(1e21)).unwrap(), "1e+21");
        assert_eq!(to_canonical_string(&json!(0.003)).unwrap(), "0.003");
    }

    #[test]
    fn integers_beyond_two_to_the_53_are_refused_with_their_path() {
        let err = to_canonical_string(&json!({"seed": [1, 9007199254740993u64]})).unwrap_err();
        assert_eq!(err.path, "$.seed[1]");
        assert!(to_canonical_string(&json!(9007199254740992u64)).is_ok());
        assert!(to_canonical_string(&json!(-9007199254740993i64)).is_err());
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-(1i64 << 53)..(1i64 << 53)).prop_map(|i| json!(i)),
            // Integral doubles between 2^53 and 1e21 print as integer literals, which a reader
            // takes for integers out of range; such values are refused on the way back in.
            any::<f64>()
                .prop_filter("finite, printed as a double", |f| f.is_finite()
                    && (f.abs() < 9.0e15 || f.abs() >= 1e21 || f.fract() != 0.0))
                .prop_map(|f| json!(f)),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".*", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn canonical_form_is_valid_json_of_equal_value_and_a_fixed_point(value in arb_json()) {
            let canonical = to_canonical_string(&value).unwrap();
            let reparsed: Value = serde_json::from_str(&canonical).unwrap();
            prop_assert_eq!(to_canonical_string(&reparsed).unwrap(), canonical.clone());
            let sorted = to_canonical_string(&sorted_keys(&value)).unwrap();
            prop_assert_eq!(sorted, canonical);
        }
    }
}
