//! Data snapshot references: `<location>@<immutable id>`.
//!
//! The id is what makes a run reproducible: `snapshot=5d1a90c2`, `version=12`, or a content
//! digest `blake3:<64 hex>` / `sha256:<64 hex>` that `mf-hash --data-digest` can verify.

/// Words that name a moving target, never an immutable snapshot.
const MUTABLE_WORDS: &[&str] = &[
    "latest", "current", "head", "newest", "live", "main", "master", "today", "now", "tip",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRef<'a> {
    /// Where the snapshot lives (a path or URL), without the id.
    pub location: &'a str,
    /// The immutable id after the last `@`.
    pub id: &'a str,
}

impl<'a> SnapshotRef<'a> {
    /// Splits and checks a snapshot reference; the error says what makes it mutable.
    pub fn parse(text: &'a str) -> Result<SnapshotRef<'a>, String> {
        let Some((location, id)) = text.rsplit_once('@') else {
            return Err(format!(
                "`{text}` has no immutable id: append `@snapshot=<id>` or `@blake3:<64 hex>`"
            ));
        };
        if location.is_empty() {
            return Err(format!("`{text}` has an id but no location"));
        }
        if let Some(word) = location
            .split(['/', '\\'])
            .find(|segment| is_mutable_word(segment))
        {
            return Err(format!(
                "`{text}` points through `{word}`, which moves; name a fixed snapshot"
            ));
        }
        let value = match id.split_once(['=', ':']) {
            Some((kind, value)) => {
                if let Some(problem) = digest_problem(kind, value) {
                    return Err(format!("`{text}`: {problem}"));
                }
                value
            }
            None => id,
        };
        if value.is_empty()
            || !value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(format!(
                "`{text}`: the id `{id}` must be letters, digits, `.`, `_` or `-` after an optional `key=`"
            ));
        }
        if is_mutable_word(value) || is_mutable_word(id) {
            return Err(format!(
                "`{text}`: `{id}` names a moving target, not an immutable snapshot"
            ));
        }
        Ok(SnapshotRef { location, id })
    }

    /// The content digest this reference pins, as `blake3:<hex>`, when it pins one.
    pub fn content_digest(&self) -> Option<&'a str> {
        self.id.starts_with("blake3:").then_some(self.id)
    }
}

fn is_mutable_word(word: &str) -> bool {
    MUTABLE_WORDS
        .iter()
        .any(|mutable| word.eq_ignore_ascii_case(mutable))
}

fn digest_problem(kind: &str, value: &str) -> Option<String> {
    let is_digest = matches!(kind, "blake3" | "sha256");
    let is_hex64 = value.len() == 64
        && value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (is_digest && !is_hex64).then(|| format!("a {kind} digest must be 64 lowercase hex characters"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_immutable_ids() {
        let r = SnapshotRef::parse("./lake/churn@snapshot=5d1a90c2").unwrap();
        assert_eq!(r.location, "./lake/churn");
        assert_eq!(r.id, "snapshot=5d1a90c2");
        assert!(SnapshotRef::parse("s3://b/churn@version=12").is_ok());
        assert!(SnapshotRef::parse("s3://data-main-bucket/churn@v12").is_ok());
        let digest = format!("blake3:{}", "ab".repeat(32));
        let text = format!("lake/churn@{digest}");
        let r = SnapshotRef::parse(&text).unwrap();
        assert_eq!(r.content_digest(), Some(digest.as_str()));
    }

    #[test]
    fn refuses_moving_targets() {
        for bad in [
            "./lake/churn",
            "./lake/churn@latest",
            "./lake/churn@snapshot=LATEST",
            "s3://b/latest/churn@snapshot=1",
            "lake/churn@blake3:abc",
            "lake/churn@snapshot=",
            "@snapshot=1",
        ] {
            assert!(SnapshotRef::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
