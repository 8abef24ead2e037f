//! The Kafka error codes the coordinator returns ([`ErrorCode`], Kafka's numbers and names,
//! defined once in `sluice-kafka`), and the typed error for decoding records of the internal
//! offsets log.
//!
//! The codes the coordinator returns, and when:
//! - `UNKNOWN_SERVER_ERROR`: persisting committed offsets failed in the server's log;
//! - `OFFSET_METADATA_TOO_LARGE`: a commit's metadata over `offset.metadata.max.bytes`;
//! - `COORDINATOR_NOT_AVAILABLE`: the group is being deleted, or a coordinator-wide limit
//!   is reached (retriable);
//! - `ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`, `REBALANCE_IN_PROGRESS`,
//!   `MEMBER_ID_REQUIRED`, `FENCED_INSTANCE_ID`, `UNRELEASED_INSTANCE_ID`: the classic
//!   protocol's membership answers; `FENCED_MEMBER_EPOCH`, `STALE_MEMBER_EPOCH`,
//!   `UNSUPPORTED_ASSIGNOR`, `INVALID_REGULAR_EXPRESSION`: the consumer protocol's (KIP-848);
//! - `INCONSISTENT_GROUP_PROTOCOL`, `INVALID_GROUP_ID`, `INVALID_SESSION_TIMEOUT`,
//!   `GROUP_MAX_SIZE_REACHED`: a join the group cannot take;
//! - `INVALID_COMMIT_OFFSET_SIZE`: the group holds too many committed offsets to accept new
//!   partitions; `INVALID_REQUEST`: a field over one of the limits in [`crate::limits`];
//! - `NON_EMPTY_GROUP`, `GROUP_ID_NOT_FOUND`, `GROUP_SUBSCRIBED_TO_TOPIC`: DeleteGroups and
//!   OffsetDelete.

pub use sluice_kafka::ErrorCode;

use sluice_kafka::bytes::ReadError;

/// A record of the internal offsets log that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A field is cut short, over its limit, or not UTF-8, or bytes remain after the last
    /// field (the error names the field and the limit).
    #[error("offset record: {0}")]
    Read(#[from] ReadError),
    /// The version byte is one this build does not know.
    #[error("offset record version {0} is not supported (this build reads version 0)")]
    UnknownVersion(u8),
    /// The key kind byte is neither offset (0) nor group (1).
    #[error("offset record key kind {0} is unknown")]
    UnknownKeyKind(u8),
    /// A group record carried a value; only group tombstones exist in version 0.
    #[error("group record with a value; version 0 only has group tombstones")]
    GroupValue,
}
