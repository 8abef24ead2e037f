//! The server's error types: config problems (fatal at start) and broker operations
//! (turned into Kafka error codes by the handlers).

use std::path::PathBuf;

use kafka_protocol::ResponseError;

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
}

impl KafkaError {
    /// Builds an error from a Kafka code and a message.
    pub fn new(code: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
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
}

impl ServerError {
    /// Wraps an I/O error with what we were doing.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }
}
