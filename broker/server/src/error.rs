//! The server's error types: config problems (fatal at start) and broker operations
//! (turned into Kafka error codes by the handlers).

use std::path::PathBuf;

use kafka_protocol::ResponseError;
use sluice_kafka::ErrorCode;
use sluice_storage::BatchError;

/// A config source was wrong; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The key is not a broker config key.
    #[error("unknown config key {0:?}")]
    UnknownKey(String),
    /// A `SLUICE_*` variable does not name a config key.
    #[error("unknown environment variable {0} (SLUICE_* variables must name a config key)")]
    UnknownEnv(String),
    /// The value did not parse or is out of range.
    #[error("bad value {value:?} for config key {key:?}: {reason}")]
    BadValue {
        /// The Kafka-style key.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The TOML file did not parse.
    #[error("config file {path}: {reason}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// Two keys contradict each other.
    #[error("inconsistent config: {0}")]
    Inconsistent(String),
    /// The config file could not be read.
    #[error("config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A broker operation failed; carries the Kafka error code and a message for the client.
#[derive(Debug, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct KafkaError {
    /// The Kafka error to put in the response.
    pub code: ResponseError,
    /// The human message (CreateTopics/DeleteTopics carry it to the client).
    pub message: String,
    /// The records that made a produced batch invalid: index in its batch and why (Produce
    /// v8+ `record_errors`, KIP-467). Empty for errors that are not about one record.
    pub record_errors: Vec<(i32, String)>,
}

impl KafkaError {
    /// Builds an error from a Kafka code and a message.
    pub fn new(code: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            record_errors: Vec::new(),
        }
    }

    /// Builds an error from one of our crates' codes (`sluice_kafka::ErrorCode`, a failure:
    /// never NONE) and a message.
    pub fn from_code(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(response_error(code), message)
    }

    /// The same error, blaming the record at `index` of its batch.
    #[must_use]
    pub fn with_record_error(mut self, index: i32, reason: impl Into<String>) -> Self {
        self.record_errors.push((index, reason.into()));
        self
    }

    /// The Kafka answer to a batch the storage engine's rules refuse: damaged bytes are
    /// CORRUPT_MESSAGE (the client may retry); well-formed batches we refuse (old magic, bad
    /// record count, a malformed record, unknown codec) are INVALID_RECORD, as Kafka answers
    /// them, with the record named for a malformed record.
    pub fn from_batch(context: &str, error: &BatchError) -> Self {
        let out = Self::from_code(error.error_code(), format!("{context}: {error}"));
        match error {
            BatchError::BadRecord { index, reason } => out.with_record_error(*index, *reason),
            _ => out,
        }
    }
}

/// The `kafka-protocol` error with the number of `code`, one of our crates' failures (the
/// two tables agree: `every_code_of_ours_is_kafkas` below). NONE, which is no failure, and
/// a number `kafka-protocol` does not know, are UNKNOWN_SERVER_ERROR.
pub fn response_error(code: ErrorCode) -> ResponseError {
    match ResponseError::try_from_code(code.code()) {
        Some(ResponseError::Unknown(_)) | None => ResponseError::UnknownServerError,
        Some(known) => known,
    }
}

/// Starting or stopping the broker failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Socket or filesystem trouble outside a partition.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A partition log could not be opened or closed.
    #[error("{context}: {source}")]
    Storage {
        /// Which topic-partition.
        context: String,
        /// The storage error.
        source: sluice_storage::StorageError,
    },
    /// A broken invariant of this build (our bug, never the user's input).
    #[error("internal: {0}")]
    Internal(String),
    /// The plugin directory or the wasm engine could not be set up.
    #[error("plugins: {0}")]
    Plugins(#[from] sluice_plugin_host::RegistryError),
    /// The data dir's partitions do not fit the descriptor limit (`descriptors.rs`).
    #[error("refusing to start: {0}")]
    DescriptorBudget(String),
}

impl ServerError {
    /// Wraps an I/O error with what we were doing.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sluice_kafka::ErrorCode` is our one table of Kafka's codes; `kafka-protocol`'s is
    /// generated from Kafka's specs. Every number of ours names the same error there.
    #[test]
    fn every_code_of_ours_is_kafkas() {
        for &code in ErrorCode::ALL.iter().filter(|c| !c.is_ok()) {
            let theirs = ResponseError::try_from_code(code.code());
            assert!(
                theirs.is_some_and(|t| !matches!(t, ResponseError::Unknown(_))),
                "{code:?} ({}) is not a kafka-protocol error",
                code.code()
            );
            assert_eq!(format!("{:?}", response_error(code)), format!("{code:?}"));
        }
        assert_eq!(ResponseError::try_from_code(ErrorCode::None.code()), None);
    }
}
