//! Store errors as one line that names the URL and says what to check, with every known secret
//! replaced by `***`.

use std::error::Error;
use std::sync::Mutex;

use runfn_core::retryable::{Cause, EnvironmentFailed, io_cause};

#[derive(Debug, thiserror::Error)]
#[error("{url}: {message}")]
pub struct StorageError {
    pub url: String,
    pub message: String,
    /// Set when the store, not the request, failed (unreachable, timing out, a full disk while
    /// staging): the tool then exits 4 and a retry may pass.
    #[source]
    pub environment: Option<EnvironmentFailed>,
}

impl StorageError {
    pub fn new(url: impl Into<String>, message: impl Into<String>) -> StorageError {
        StorageError {
            url: redact(&url.into()),
            message: redact(&message.into()),
            environment: None,
        }
    }

    fn with_cause(mut self, cause: Option<Cause>) -> StorageError {
        self.environment = cause.map(EnvironmentFailed::new);
        self
    }

    /// Says what a store's error means for the user: a missing object, refused credentials, a
    /// server that cannot be reached, or the store's own words (one line, shortened).
    pub fn from_store(url: &str, bucket: &str, endpoint: &str, error: object_store::Error) -> Self {
        let detail = one_line(&error.to_string());
        let lower = detail.to_ascii_lowercase();
        let cause = store_cause(&error);
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
            _ if cause.is_some() => {
                format!("the server {endpoint} went away or cannot be reached ({detail})")
            }
            _ => detail,
        };
        StorageError::new(url, message).with_cause(cause)
    }

    pub fn io(url: &str, path: &std::path::Path, error: std::io::Error) -> StorageError {
        let cause = io_cause(&error);
        StorageError::new(url, format!("{}: {error}", path.display())).with_cause(cause)
    }
}

impl From<StorageError> for runfn_core::InputError {
    fn from(error: StorageError) -> runfn_core::InputError {
        runfn_core::InputError::Store(Box::new(error))
    }
}

/// Whether a store's error is the environment's, from the types in its source chain: the HTTP
/// client's kind of failure (connecting, sending, timing out, interrupted) or an OS error.
fn store_cause(error: &object_store::Error) -> Option<Cause> {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut next: Option<&(dyn Error + 'static)> = Some(error);
    while let Some(cause) = next {
        if let Some(http) = cause.downcast_ref::<HttpError>() {
            match http.kind() {
                HttpErrorKind::Connect | HttpErrorKind::Request | HttpErrorKind::Interrupted => {
                    return Some(Cause::Unreachable);
                }
                HttpErrorKind::Timeout => return Some(Cause::TimedOut),
                HttpErrorKind::Decode | HttpErrorKind::Unknown => {}
                _ => {}
            }
        }
        if let Some(found) = cause.downcast_ref::<std::io::Error>().and_then(io_cause) {
            return Some(found);
        }
        next = cause.source();
    }
    None
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
    let mut out = redact_urls(text);
    for secret in secrets.iter() {
        out = out.replace(secret.as_str(), "***");
    }
    out
}

/// Every URL in `text` with its user and password (`http://AK:secret@host`) and its query
/// string (a presigned URL's signature, an access token) replaced by `***`: servers and
/// clients put both into their messages.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The URL runs to the next whitespace, quote or bracket.
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')' | '`'))
            .unwrap_or(after.len());
        let (url, tail) = after.split_at(end);
        let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        let (authority, path) = url.split_at(authority_end);
        match authority.rfind('@') {
            Some(userinfo) => {
                out.push_str("***");
                out.push_str(&authority[userinfo..]);
            }
            None => out.push_str(authority),
        }
        match path.find('?') {
            Some(query) => {
                out.push_str(&path[..query]);
                out.push_str("?***");
            }
            None => out.push_str(path),
        }
        rest = tail;
    }
    out.push_str(rest);
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
    fn credentials_and_tokens_in_urls_never_appear() {
        let text = "connect to http://AKIA1:pa%40ss@127.0.0.1:9000/b/k?X-Amz-Signature=abc&t=1 \
                    failed; see s3://bucket/key and https://host/p?token=zzz.";
        let out = redact_urls(text);
        assert!(!out.contains("pa%40ss") && !out.contains("AKIA1"), "{out}");
        assert!(!out.contains("abc") && !out.contains("zzz"), "{out}");
        assert!(out.contains("http://***@127.0.0.1:9000/b/k?***"), "{out}");
        assert!(
            out.contains("s3://bucket/key and https://host/p?***"),
            "{out}"
        );
        let e = StorageError::new("s3://b/k", "endpoint http://u:p4ss@h:1 refused");
        assert_eq!(e.to_string(), "s3://b/k: endpoint http://***@h:1 refused");
    }

    #[test]
    fn an_unreachable_store_is_the_environment_s_failure() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = StorageError::io("s3://b/k", std::path::Path::new("/tmp/x"), refused);
        let err = anyhow::Error::new(e);
        assert_eq!(
            runfn_core::retryable::cause_of(&err),
            Some(Cause::Unreachable)
        );
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = StorageError::io("s3://b/k", std::path::Path::new("/tmp/x"), missing);
        assert_eq!(
            runfn_core::retryable::cause_of(&anyhow::Error::new(e)),
            None
        );
    }

    #[test]
    fn long_details_stay_on_one_line() {
        let text = format!("a\nb {}", "x".repeat(600));
        let line = one_line(&text);
        assert!(!line.contains('\n'));
        assert!(line.chars().count() <= 401);
    }
}
