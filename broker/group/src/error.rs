//! Kafka error codes the coordinator returns (Kafka's numbers, never ours), and the typed
//! error for decoding records of the internal offsets log.

/// A Kafka protocol error code, limited to the ones this crate returns.
///
/// `as i16` (or [`ErrorCode::code`]) gives the number to put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ErrorCode {
    /// Persisting committed offsets failed in the server's log.
    UnknownServerError = -1,
    /// Success.
    None = 0,
    /// The commit's metadata string is longer than `offset.metadata.max.bytes`.
    OffsetMetadataTooLarge = 12,
    /// The group is being deleted, or a coordinator-wide limit is reached (retriable).
    CoordinatorNotAvailable = 15,
    /// The request's generation is not the group's current generation.
    IllegalGeneration = 22,
    /// Protocol type or protocols do not match the group's.
    InconsistentGroupProtocol = 23,
    /// Empty or over-long group id.
    InvalidGroupId = 24,
    /// The member id is not (or no longer) part of the group.
    UnknownMemberId = 25,
    /// Session timeout outside `group.{min,max}.session.timeout.ms`.
    InvalidSessionTimeout = 26,
    /// The group is rebalancing; the member must rejoin.
    RebalanceInProgress = 27,
    /// The group holds too many committed offsets to accept new partitions.
    InvalidCommitOffsetSize = 28,
    /// A field is over one of the limits in [`crate::limits`].
    InvalidRequest = 42,
    /// DeleteGroups on a group that still has members.
    NonEmptyGroup = 68,
    /// DeleteGroups on a group that does not exist.
    GroupIdNotFound = 69,
    /// JoinGroup v4+ first round trip: retry with the returned member id.
    MemberIdRequired = 79,
    /// The group already has `group.max.size` members.
    GroupMaxSizeReached = 81,
    /// Another member with the same `group.instance.id` replaced this one.
    FencedInstanceId = 82,
    /// OffsetDelete of a partition whose topic the group's members consume.
    GroupSubscribedToTopic = 86,
    /// A consumer-protocol member's epoch is ahead of or behind the coordinator's: it must
    /// drop its partitions and rejoin with epoch 0.
    FencedMemberEpoch = 110,
    /// A static member joined while the member with its `group.instance.id` is still active.
    UnreleasedInstanceId = 111,
    /// A server assignor this coordinator does not have.
    UnsupportedAssignor = 112,
    /// An OffsetCommit or OffsetFetch with an outdated member epoch (retry with the
    /// heartbeat's newer epoch).
    StaleMemberEpoch = 113,
    /// A subscribed topic regex that does not compile.
    InvalidRegularExpression = 128,
}

impl ErrorCode {
    /// Kafka's wire number.
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// True for [`ErrorCode::None`].
    pub const fn is_ok(self) -> bool {
        matches!(self, ErrorCode::None)
    }
}

/// A record of the internal offsets log that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The record ended before a field did.
    #[error("offset record truncated: needed {needed} bytes at byte {at}, have {len}")]
    Truncated {
        /// Byte position of the field.
        at: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Length of the record.
        len: usize,
    },
    /// The version byte is one this build does not know.
    #[error("offset record version {0} is not supported (this build reads version 0)")]
    UnknownVersion(u8),
    /// The key kind byte is neither offset (0) nor group (1).
    #[error("offset record key kind {0} is unknown")]
    UnknownKeyKind(u8),
    /// A string field is not UTF-8.
    #[error("offset record has a string that is not UTF-8")]
    InvalidUtf8,
    /// Bytes remain after the last field.
    #[error("offset record has {0} trailing bytes")]
    TrailingBytes(usize),
    /// A group record carried a value; only group tombstones exist in version 0.
    #[error("group record with a value; version 0 only has group tombstones")]
    GroupValue,
    /// A length field exceeds the limit in [`crate::limits`].
    #[error("offset record field of {len} bytes is over the limit of {max} bytes")]
    TooLong {
        /// Length read.
        len: usize,
        /// The limit.
        max: usize,
    },
}
