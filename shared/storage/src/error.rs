//! Store errors as one line that names the URL and says what to check, with every known secret
//! replaced by `***`.

use std::sync::Mutex;

use runfn_core::InputError;

#[derive(Debug, thiserror::Error)]
#[error("{url}: {message}")]
pub struct StorageError {
    pub url: String,
    pub message: String,
}

impl StorageError {
    pub fn new(url: impl Into<String>, message: impl Into<String>) -> StorageError {
        StorageError {
            url: url.into(),
            message: redact(&message.into()),
        }
    }

    /// Says what a store's error means for the user: a missing object, refused credentials, a
    /// server that cannot be reached, or the store's own words (one line, shortened).
    pub fn from_store(url: &str, bucket: &str, endpoint: &str, error: object_store::Error) -> Self {
        let detail = one_line(&error.to_string());
        let lower = detail.to_ascii_lowercase();
        let message = match &error {
            object_store::Error::NotFound { .. } => "no such object".to_string(),
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => denied(bucket, &detail),
            _ if [
                "signaturedoesnotmatch",
                "invalidaccesskeyid",
                "accessdenied",
                "403 forbidden",
            ]
            .iter()
            .any(|code| lower.contains(code)) =>
            {
                denied(bucket, &detail)
            }
            _ if lower.contains("nosuchbucket") => {
                format!("the bucket `{bucket}` does not exist ({detail})")
            }
            _ if [
                "connection refused",
                "error sending request",
                "connect",
                "connection reset",
                "broken pipe",
                "timed out",
                "operation timed out",
            ]
            .iter()
            .any(|word| lower.contains(word)) =>
            {
                format!("the server {endpoint} went away or cannot be reached ({detail})")
            }
            _ => detail,
        };
        StorageError::new(url, message)
    }

    pub fn io(url: &str, path: &std::path::Path, error: std::io::Error) -> StorageError {
        StorageError::new(url, format!("{}: {error}", path.display()))
    }
}

impl From<StorageError> for InputError {
    fn from(error: StorageError) -> InputError {
        InputError::field(error.url, error.message)
    }
}

fn denied(bucket: &str, detail: &str) -> String {
    format!(
        "access to the bucket `{bucket}` was refused: check the credentials (AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and the bucket's policy ({detail})"
    )
}

/// Whitespace collapsed and cut at 400 characters, so the message stays one line.
fn one_line(text: &str) -> String {
    let joined: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() > 400 {
        let cut: String = joined.chars().take(400).collect();
        format!("{cut}…")
    } else {
        joined
    }
}

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Remembers a secret so that no message ever shows it.
pub(crate) fn note_secret(secret: &str) {
    if secret.len() >= 4 {
        let mut secrets = SECRETS.lock().unwrap_or_else(|e| e.into_inner());
        if !secrets.iter().any(|s| s == secret) {
            secrets.push(secret.to_string());
        }
    }
}

pub(crate) fn redact(text: &str) -> String {
    let secrets = SECRETS.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = text.to_string();
    for secret in secrets.iter() {
        out = out.replace(secret.as_str(), "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noted_secret_never_appears_in_a_message() {
        note_secret("wJalrXUtnFEMI/K7MDENG");
        let e = StorageError::new("s3://b/k", "signed with wJalrXUtnFEMI/K7MDENG, refused");
        assert_eq!(e.to_string(), "s3://b/k: signed with ***, refused");
    }

    #[test]
    fn long_details_stay_on_one_line() {
        let text = format!("a\nb {}", "x".repeat(600));
        let line = one_line(&text);
        assert!(!line.contains('\n'));
        assert!(line.chars().count() <= 401);
    }
}
