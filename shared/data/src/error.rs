//! Data errors: each names the file, column or row at fault. All of them mean exit 2.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("column `{column}`: {message}")]
    Column { column: String, message: String },
    #[error("{0}")]
    Other(String),
}

impl DataError {
    pub fn file(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> DataError {
        DataError::File {
            path: path.into(),
            message: message.to_string(),
        }
    }

    pub fn column(column: impl Into<String>, message: impl std::fmt::Display) -> DataError {
        DataError::Column {
            column: column.into(),
            message: message.to_string(),
        }
    }
}
