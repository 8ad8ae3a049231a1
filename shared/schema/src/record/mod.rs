//! The run record's sections, one type each: the tools write their section from these types and
//! read earlier sections into them, and `docs/schema/` is generated from them, so a team's own
//! scripts can validate a record with any JSON Schema validator.
//!
//! A field that is `Option` and skipped when `None` may be absent (`name?` in docs/record.md);
//! any other `Option` is always written, as `null` when there is nothing to say.

mod evaluate;
mod external;
mod gate;
mod jobs;
mod leaks;
mod mf_hash;
mod register;
mod report;
mod setup;
mod shards;
mod timing;
mod train;
mod validate;

pub use evaluate::{
    Contamination, EvalMetrics, Evaluate, Mistake, Predict, RowScoresRef, ScoreBins, ScoreDrift,
    ServingDrift, Unseen,
};
pub use external::{ExternalTrain, ScoresFile};
pub use gate::{Gate, GateCheck, GateErrors, PairedNumbers};
pub use jobs::{CkptInputs, CkptInterval, NoiseFloor, SliceSpread};
pub use leaks::{LeakChance, LeakCheck, Leaks};
pub use mf_hash::{DataDigest, HashCheck, MfHash, Problem};
pub use register::{Register, RegisterRefused, RegisterSection};
pub use report::{Quartiles, Report, ReportPair, ReportStage};
pub use setup::{DemoData, Pin};
pub use shards::{ResolvedSplit, ShardSplit, Shards, Unsplit};
pub use timing::{Cost, Environment, Gpu, Timing};
pub use train::{
    AlertKind, ResumedFrom, Train, TrainAlert, TrainBest, TrainDistributed, TrainEarlyStopping,
    TrainFeatures, TrainSection, TrainStopped,
};
pub use validate::{
    Calibration, CheckHistory, PreviousModel, Validate, ValidateCheck, WindowBounds,
};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A top-level section of the run record: its key and its type.
pub trait Section: Serialize + DeserializeOwned + JsonSchema {
    /// The record's key the section is written under.
    const KEY: &'static str;
}

macro_rules! sections {
    ($($ty:ty => $key:literal $(as $written:ty)?),* $(,)?) => {
        $(impl Section for $ty { const KEY: &'static str = $key; })*

        /// Every section's key and its JSON Schema (of every shape it is written in), in the
        /// record's order.
        pub fn section_schemas() -> Vec<(&'static str, schemars::Schema)> {
            vec![$(($key, sections!(@schema $ty $(, $written)?))),*]
        }
    };
    (@schema $ty:ty) => { schemars::schema_for!($ty) };
    (@schema $ty:ty, $written:ty) => { schemars::schema_for!($written) };
}

sections! {
    MfHash => "mf_hash",
    Validate => "validate",
    Leaks => "leaks",
    Shards => "shards",
    CkptInterval => "ckpt_interval",
    Train => "train" as TrainSection,
    ExternalTrain => "external_train",
    NoiseFloor => "noise_floor",
    Evaluate => "evaluate",
    Gate => "gate",
    Register => "register" as RegisterSection,
    Report => "report",
    Predict => "predict",
    Pin => "pin",
    DemoData => "demo_data",
}

impl Section for TrainSection {
    const KEY: &'static str = "train";
}

impl Section for RegisterSection {
    const KEY: &'static str = "register";
}

/// The whole record's schema, self-contained: each section by its key (`baseline` is an
/// evaluation too), the manifest as an object and its hash as 64 hex characters, `timings` a
/// list of entries, and any other key allowed (a team's own sections pass through every tool
/// untouched). Every type's definition is under `$defs`, once.
pub fn record_schema() -> schemars::Schema {
    use serde_json::{Map, Value, json};
    let mut defs = Map::new();
    // A section's schema with its definitions hoisted into `defs`; the reference to it.
    let mut hoist = |name: &str, schema: schemars::Schema| -> Value {
        let mut schema = schema.to_value();
        if let Some(fields) = schema.as_object_mut() {
            if let Some(Value::Object(inner)) = fields.remove("$defs") {
                defs.extend(inner);
            }
            fields.remove("$schema");
        }
        defs.insert(name.to_string(), schema);
        json!({"$ref": format!("#/$defs/{name}")})
    };
    let mut properties = Map::new();
    properties.insert(
        "manifest".into(),
        json!({"type": "object", "description": "the normalized manifest (keys sorted)"}),
    );
    properties.insert(
        "manifest_hash".into(),
        json!({"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$",
            "description": "the run's identity: blake3 of the canonical manifest"}),
    );
    for (key, schema) in section_schemas() {
        let name = schema
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(key)
            .to_string();
        let reference = hoist(&name, schema);
        properties.insert(key.into(), reference);
    }
    properties.insert("baseline".into(), json!({"$ref": "#/$defs/Evaluate"}));
    let timing = hoist("Timing", schemars::schema_for!(Timing));
    properties.insert("timings".into(), json!({"type": "array", "items": timing}));
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Run record",
        "description": "One run record as every runfn tool reads and writes it.",
        "type": "object",
        "properties": properties,
        "$defs": defs,
    });
    schemars::Schema::try_from(schema).expect("an object is a schema")
}

/// Every schema file of `docs/schema/`: name and pretty-printed JSON, ending in a newline.
pub fn schema_files() -> Vec<(String, String)> {
    let pretty = |schema: &schemars::Schema| {
        serde_json::to_string_pretty(schema).expect("a schema serializes") + "\n"
    };
    let mut files: Vec<(String, String)> = section_schemas()
        .iter()
        .map(|(key, schema)| (format!("{key}.json"), pretty(schema)))
        .collect();
    files.push(("timing.json".into(), pretty(&schemars::schema_for!(Timing))));
    files.push(("record.json".into(), pretty(&record_schema())));
    files
}
