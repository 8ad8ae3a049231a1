//! The column types runfn works with, and the optional schema file that fixes them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::DataError;

/// Every column is one of these; inputs are cast to them so all files of a snapshot agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    Bool,
    Int64,
    Float64,
    Date,
    Timestamp,
    String,
}

impl ColumnType {
    pub fn data_type(self) -> DataType {
        match self {
            ColumnType::Bool => DataType::Boolean,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Date => DataType::Date32,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::String => DataType::Utf8,
        }
    }

    /// The runfn type an Arrow type is read as, or `None` when runfn has no use for it.
    pub fn from_data_type(data_type: &DataType) -> Option<ColumnType> {
        use DataType::*;
        Some(match data_type {
            Boolean => ColumnType::Bool,
            Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => ColumnType::Int64,
            Float16 | Float32 | Float64 | Decimal128(_, _) | Decimal256(_, _) => {
                ColumnType::Float64
            }
            Date32 | Date64 => ColumnType::Date,
            Timestamp(_, _) => ColumnType::Timestamp,
            Utf8 | LargeUtf8 | Utf8View | Dictionary(_, _) => ColumnType::String,
            _ => return None,
        })
    }

    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            ColumnType::Int64 | ColumnType::Float64 | ColumnType::Bool
        )
    }

    pub fn is_temporal(self) -> bool {
        matches!(self, ColumnType::Date | ColumnType::Timestamp)
    }

    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Bool => "bool",
            ColumnType::Int64 => "int64",
            ColumnType::Float64 => "float64",
            ColumnType::Date => "date",
            ColumnType::Timestamp => "timestamp",
            ColumnType::String => "string",
        }
    }
}

/// A column's name and type, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
}

pub fn arrow_schema(columns: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(&c.name, c.column_type.data_type(), true))
            .collect::<Vec<_>>(),
    ))
}

/// A schema file: `{"columns": {"name": "int64", ...}}`; columns it does not name are inferred.
pub fn read_schema_file(path: &Path) -> Result<BTreeMap<String, ColumnType>, DataError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SchemaFile {
        columns: BTreeMap<String, ColumnType>,
    }
    let text = std::fs::read_to_string(path).map_err(|source| DataError::Io {
        path: path.into(),
        source,
    })?;
    let file: SchemaFile = serde_json::from_str(&text).map_err(|e| {
        DataError::file(path, format!("not a schema file ({e}); expected {{\"columns\": {{\"name\": \"int64|float64|bool|date|timestamp|string\"}}}}"))
    })?;
    Ok(file.columns)
}
