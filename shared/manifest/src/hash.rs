//! The manifest hash: blake3 over a format tag and the RFC 8785 canonical JSON of the manifest.

use runfn_core::canonical::{CanonicalError, to_canonical_string};
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

/// Whether `text` looks like a manifest hash.
pub fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
