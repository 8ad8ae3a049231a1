//! The manifest hash: blake3 over a format tag and the RFC 8785 canonical JSON of the manifest.

use runfn_core::canonical::{CanonicalError, to_canonical_string};
use runfn_core::{InputError, Record};
use serde_json::Value;

/// Changing how manifests are normalized or hashed means a new tag, never a silent change.
pub const FORMAT_TAG: &str = "runfn-manifest-v1";

/// 64 lowercase hex characters identifying `manifest`'s content.
pub fn manifest_hash(manifest: &Value) -> Result<String, CanonicalError> {
    let canonical = to_canonical_string(manifest)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(FORMAT_TAG.as_bytes());
    hasher.update(b"\n");
    hasher.update(canonical.as_bytes());
    Ok(hasher.finalize().to_hex().to_string())
}

/// When the record names its `manifest_hash`, its manifest must be the very one that hash names: a manifest edited after hashing (a learning rate, a gate, a
/// split) would otherwise run under the old hash's name, and `train` would resume that hash's
/// checkpoint with other settings. Every tool that reads a record checks this.
pub fn verify_record(record: &Record) -> Result<(), InputError> {
    // A record's manifest is an object: `Record` refuses any other.
    let Some(manifest) = record.get("manifest") else {
        return Ok(());
    };
    let Some(Value::String(recorded)) = record.get("manifest_hash") else {
        return Ok(());
    };
    let actual =
        manifest_hash(manifest).map_err(|e| InputError::field("manifest", e.to_string()))?;
    if &actual != recorded {
        return Err(InputError::field(
            "manifest_hash",
            format!(
                "the record's manifest hashes to {}, not to its manifest_hash {}: the manifest was \
                 edited after hashing; run mf-hash again",
                &actual[..12.min(actual.len())],
                recorded.chars().take(12).collect::<String>()
            ),
        ));
    }
    Ok(())
}

/// Whether `text` looks like a manifest hash.
pub fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_whose_manifest_was_edited_after_hashing_is_refused() {
        let manifest = json!({"seed": 1, "config": {"lr": 0.003}});
        let hash = manifest_hash(&manifest).unwrap();
        let record = |manifest: Value| {
            Record::from_value(json!({"manifest": manifest, "manifest_hash": hash}), "t").unwrap()
        };
        verify_record(&record(manifest.clone())).unwrap();
        let edited = json!({"seed": 1, "config": {"lr": 0.3}});
        let err = verify_record(&record(edited)).unwrap_err().to_string();
        assert!(
            err.starts_with("manifest_hash: the record's manifest hashes to"),
            "{err}"
        );
    }

    #[test]
    fn key_order_does_not_matter_but_values_and_list_order_do() {
        let a = manifest_hash(&json!({"seed": 1, "config": {"lr": 0.003, "hidden": [64, 32]}}))
            .unwrap();
        let b = manifest_hash(&json!({"config": {"hidden": [64, 32], "lr": 0.003}, "seed": 1}))
            .unwrap();
        assert_eq!(a, b);
        let lr = manifest_hash(&json!({"seed": 1, "config": {"lr": 0.0031, "hidden": [64, 32]}}))
            .unwrap();
        let order = manifest_hash(&json!({"seed": 1, "config": {"lr": 0.003, "hidden": [32, 64]}}))
            .unwrap();
        assert_ne!(a, lr);
        assert_ne!(a, order);
        assert!(is_hash(&a));
    }

    #[test]
    fn golden_hash_never_changes_silently() {
        // Pinned: if this changes, FORMAT_TAG must change too.
        assert_eq!(
            manifest_hash(&json!({"seed": 1234, "config": {"lr": 0.003}})).unwrap(),
            blake3::hash(b"runfn-manifest-v1\n{\"config\":{\"lr\":0.003},\"seed\":1234}")
                .to_hex()
                .to_string()
        );
    }
}
