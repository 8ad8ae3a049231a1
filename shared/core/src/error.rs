//! Errors that mean "bad usage or bad input" (exit 2). Each names the file, field or row at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: not valid JSON: {source}")]
    Json {
        origin: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{origin}: the run record must be a JSON object, found {found}")]
    NotAnObject { origin: String, found: &'static str },
    #[error("{origin}: no run record (input is empty)")]
    Empty { origin: String },
    #[error(
        "run record: an earlier check failed ({sections}); refusing to continue (fix the cause and rerun that stage)"
    )]
    EarlierCheckFailed { sections: String },
    #[error("{field}: {message}")]
    Field { field: String, message: String },
    /// An object store's error (runfn-storage's), kept whole so that an unreachable store
    /// still reads as the environment's failure (exit 4), not the input's.
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl InputError {
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> InputError {
        InputError::Field {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// `text` as an error message may echo it: at most 80 characters, then how long it was. A
/// 100 KB name given by mistake would otherwise come back whole on stderr and in alerts.
pub fn shown(text: &str) -> String {
    const MOST: usize = 80;
    let count = text.chars().count();
    if count <= MOST {
        text.to_string()
    } else {
        let head: String = text.chars().take(MOST).collect();
        format!("{head}… ({count} characters)")
    }
}

/// The JSON type name used in error messages.
pub fn json_type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_shown_cut_with_its_length() {
        assert_eq!(shown("churn"), "churn");
        let long = "x".repeat(100_000);
        let cut = shown(&long);
        assert!(
            cut.len() < 120 && cut.ends_with("(100000 characters)"),
            "{cut}"
        );
    }
}
