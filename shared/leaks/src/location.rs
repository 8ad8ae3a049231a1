//! Where a row is, the one coordinate every pass over the snapshot shares.

/// Where a row is: file index and 1-based data row within the file.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Loc {
    pub file: u32,
    pub row: u64,
}
