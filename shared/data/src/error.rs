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

/// A partial's or side file's read or write failure: an I/O error stays one (a full disk is the
/// environment's, exit 4), anything else is the input's fault.
impl From<runfn_core::InputError> for DataError {
    fn from(error: runfn_core::InputError) -> DataError {
        match error {
            runfn_core::InputError::Io { path, source } => DataError::Io { path, source },
            other => DataError::Other(other.to_string()),
        }
    }
}

impl DataError {
    pub fn file(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> DataError {
        DataError::File {
            path: path.into(),
            message: message.to_string(),
        }
    }

    /// An error a library (Arrow, Parquet) reported about `path`. An OS error in its chain is
    /// kept as the source, so that a full disk or a failing device stays the environment's
    /// (exit 4, which a retry may cure) rather than becoming text that reads as bad input.
    pub fn library(
        path: impl Into<PathBuf>,
        error: &(dyn std::error::Error + 'static),
    ) -> DataError {
        let mut next = Some(error);
        while let Some(inner) = next {
            if let Some(io) = inner.downcast_ref::<std::io::Error>() {
                let source = match io.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(io.kind(), io.to_string()),
                };
                return DataError::Io {
                    path: path.into(),
                    source,
                };
            }
            next = inner.source();
        }
        DataError::file(path, error)
    }

    pub fn column(column: impl Into<String>, message: impl std::fmt::Display) -> DataError {
        DataError::Column {
            column: column.into(),
            message: message.to_string(),
        }
    }
}
