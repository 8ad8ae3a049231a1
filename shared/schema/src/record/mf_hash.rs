use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `mf_hash`: the manifest's lint and hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MfHash {
    pub passed: bool,
    /// `runfn-manifest-v1`.
    pub format: String,
    pub problems: Vec<Problem>,
    /// With `--check`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<HashCheck>,
    /// With `--data-digest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_digest: Option<DataDigest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    /// Dotted path of the field at fault, e.g. `code.image`.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HashCheck {
    pub expected: String,
    pub matched: bool,
}

/// The snapshot's content digest (`runfn-data-v1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataDigest {
    pub path: String,
    /// `blake3:<64 hex>`.
    pub digest: String,
    pub files: u64,
    pub bytes: u64,
}
