use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The memory a tool was given (`--memory`) and the most it held. What does not fit the budget
/// is spilled to temporary files, so a run that reaches its budget is slower, never killed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryUse {
    pub budget_bytes: u64,
    /// The process's peak resident set (VmHWM) when the work was done.
    pub peak_bytes: u64,
}
