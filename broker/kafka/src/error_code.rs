//! Kafka's error codes: the numbers and names of `Errors.java`, never ours. One table for
//! every code a Sluice crate returns (the group and transaction coordinators, the security
//! core, the storage engine's refusals as the server answers them); a crate's typed errors
//! map to it, and the server puts [`ErrorCode::code`] on the wire. Adding a code is one
//! line here, with Kafka's number and name.
//!
//! The server's tests pin this table against `kafka-protocol`'s, which is generated from
//! Kafka's own specs: every number here names the same error there.

/// Declares [`ErrorCode`] and its tables from one list of `Variant = number, "NAME"`.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $code:literal, $name:literal;)*) => {
        /// A Kafka error code (`Errors.java`): `as i16` or [`ErrorCode::code`] is the number
        /// on the wire, [`ErrorCode::name`] Kafka's name for it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i16)]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant = $code,)*
        }

        impl ErrorCode {
            /// Every code, in the order of the table.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant),*];

            /// Kafka's name for the code (`Errors.java`), e.g. `INVALID_REQUEST`.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                }
            }

            /// The code with Kafka's number `code`, if it is one of this table's.
            #[must_use]
            pub const fn from_code(code: i16) -> Option<Self> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    /// An unexpected error: a failed append of the coordinator's records, an exhausted
    /// producer-id space.
    UnknownServerError = -1, "UNKNOWN_SERVER_ERROR";
    /// Success.
    None = 0, "NONE";
    /// A fetch or a reset asked for an offset outside the log.
    OffsetOutOfRange = 1, "OFFSET_OUT_OF_RANGE";
    /// A batch whose bytes are damaged (length, CRC): the client may retry.
    CorruptMessage = 2, "CORRUPT_MESSAGE";
    /// A topic or partition the cluster does not have.
    UnknownTopicOrPartition = 3, "UNKNOWN_TOPIC_OR_PARTITION";
    /// The request went to a broker that does not lead the partition, or (AlterPartition)
    /// came from one that does not.
    NotLeaderOrFollower = 6, "NOT_LEADER_OR_FOLLOWER";
    /// A request that did not complete in time (an acks=all produce whose high watermark
    /// did not pass its batch within the request's timeout).
    RequestTimedOut = 7, "REQUEST_TIMED_OUT";
    /// A batch over the partition's `max.message.bytes`.
    MessageTooLarge = 10, "MESSAGE_TOO_LARGE";
    /// An offset commit's metadata string over its limit.
    OffsetMetadataTooLarge = 12, "OFFSET_METADATA_TOO_LARGE";
    /// The coordinator is still replaying its log (retriable).
    CoordinatorLoadInProgress = 14, "COORDINATOR_LOAD_IN_PROGRESS";
    /// The coordinator cannot take the request now (retriable).
    CoordinatorNotAvailable = 15, "COORDINATOR_NOT_AVAILABLE";
    /// This broker is not the coordinator of the group or transactional id.
    NotCoordinator = 16, "NOT_COORDINATOR";
    /// A topic name that is empty, too long or has characters Kafka refuses.
    InvalidTopicException = 17, "INVALID_TOPIC_EXCEPTION";
    /// acks=all to a partition whose ISR is smaller than `min.insync.replicas`: refused
    /// before the append.
    NotEnoughReplicas = 19, "NOT_ENOUGH_REPLICAS";
    /// acks=all appended, but the ISR fell below `min.insync.replicas` before it was
    /// replicated.
    NotEnoughReplicasAfterAppend = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND";
    /// The request's generation is not the group's current one.
    IllegalGeneration = 22, "ILLEGAL_GENERATION";
    /// A member's protocol type or protocols do not match the group's.
    InconsistentGroupProtocol = 23, "INCONSISTENT_GROUP_PROTOCOL";
    /// An empty or over-long group id.
    InvalidGroupId = 24, "INVALID_GROUP_ID";
    /// The member id is not (or no longer) in the group.
    UnknownMemberId = 25, "UNKNOWN_MEMBER_ID";
    /// A session timeout outside the broker's bounds.
    InvalidSessionTimeout = 26, "INVALID_SESSION_TIMEOUT";
    /// The group is rebalancing; the member must rejoin.
    RebalanceInProgress = 27, "REBALANCE_IN_PROGRESS";
    /// A commit that would take a group or transaction over its offset cap.
    InvalidCommitOffsetSize = 28, "INVALID_COMMIT_OFFSET_SIZE";
    /// A SASL mechanism the broker does not offer.
    UnsupportedSaslMechanism = 33, "UNSUPPORTED_SASL_MECHANISM";
    /// A SASL message out of turn.
    IllegalSaslState = 34, "ILLEGAL_SASL_STATE";
    /// CreateTopics for a name the cluster already has.
    TopicAlreadyExists = 36, "TOPIC_ALREADY_EXISTS";
    /// A partition count below 1, not above the current one, or over the limit.
    InvalidPartitions = 37, "INVALID_PARTITIONS";
    /// A replication factor below 1 or above the live brokers.
    InvalidReplicationFactor = 38, "INVALID_REPLICATION_FACTOR";
    /// A replica assignment naming a broker twice or one the cluster does not have.
    InvalidReplicaAssignment = 39, "INVALID_REPLICA_ASSIGNMENT";
    /// A config entry that cannot be set.
    InvalidConfig = 40, "INVALID_CONFIG";
    /// The request went to a broker that is not the active controller (retriable).
    NotController = 41, "NOT_CONTROLLER";
    /// A field over one of the limits, or a request that makes no sense.
    InvalidRequest = 42, "INVALID_REQUEST";
    /// A request a broker policy or bound refuses.
    PolicyViolation = 44, "POLICY_VIOLATION";
    /// A produced batch's sequence is not the next the partition expects.
    OutOfOrderSequenceNumber = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER";
    /// A produced batch an idempotent producer sent before (answered with its offset).
    DuplicateSequenceNumber = 46, "DUPLICATE_SEQUENCE_NUMBER";
    /// A fenced producer epoch (for request versions before KIP-588).
    InvalidProducerEpoch = 47, "INVALID_PRODUCER_EPOCH";
    /// The operation is not legal in the transaction's state.
    InvalidTxnState = 48, "INVALID_TXN_STATE";
    /// The transactional id is unknown, or belongs to another producer id.
    InvalidProducerIdMapping = 49, "INVALID_PRODUCER_ID_MAPPING";
    /// A transaction timeout outside `1..=transaction.max.timeout.ms`.
    InvalidTransactionTimeout = 50, "INVALID_TRANSACTION_TIMEOUT";
    /// The transaction is completing, or another change to it is being persisted (retriable).
    ConcurrentTransactions = 51, "CONCURRENT_TRANSACTIONS";
    /// The partition's log failed a write or fsync and is fenced.
    KafkaStorageError = 56, "KAFKA_STORAGE_ERROR";
    /// A SASL exchange failed (bad credentials, or a client-visible reason).
    SaslAuthenticationFailed = 58, "SASL_AUTHENTICATION_FAILED";
    /// An idempotent producer whose state the partition does not know.
    UnknownProducerId = 59, "UNKNOWN_PRODUCER_ID";
    /// Delegation tokens are not enabled (no `delegation.token.secret.key`).
    DelegationTokenAuthDisabled = 61, "DELEGATION_TOKEN_AUTH_DISABLED";
    /// No delegation token has that HMAC.
    DelegationTokenNotFound = 62, "DELEGATION_TOKEN_NOT_FOUND";
    /// The caller neither owns nor may renew the delegation token.
    DelegationTokenOwnerMismatch = 63, "DELEGATION_TOKEN_OWNER_MISMATCH";
    /// Token requests are not allowed on this connection (token-authenticated, or not SASL).
    DelegationTokenRequestNotAllowed = 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED";
    /// The caller may not describe or create the token (ACLs).
    DelegationTokenAuthorizationFailed = 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED";
    /// The delegation token's expiry has passed.
    DelegationTokenExpired = 66, "DELEGATION_TOKEN_EXPIRED";
    /// DeleteGroups on a group that still has members.
    NonEmptyGroup = 68, "NON_EMPTY_GROUP";
    /// The group does not exist.
    GroupIdNotFound = 69, "GROUP_ID_NOT_FOUND";
    /// A request whose leader epoch is older than the partition's current one.
    FencedLeaderEpoch = 74, "FENCED_LEADER_EPOCH";
    /// A request whose leader epoch is newer than the one this replica knows.
    UnknownLeaderEpoch = 75, "UNKNOWN_LEADER_EPOCH";
    /// A broker's request carries a broker epoch that is not its current registration's.
    StaleBrokerEpoch = 77, "STALE_BROKER_EPOCH";
    /// JoinGroup v4+ first round trip: retry with the returned member id.
    MemberIdRequired = 79, "MEMBER_ID_REQUIRED";
    /// ElectLeaders: the preferred replica is not in the ISR or not active.
    PreferredLeaderNotAvailable = 80, "PREFERRED_LEADER_NOT_AVAILABLE";
    /// The group already has `group.max.size` members.
    GroupMaxSizeReached = 81, "GROUP_MAX_SIZE_REACHED";
    /// Another member with the same `group.instance.id` replaced this one.
    FencedInstanceId = 82, "FENCED_INSTANCE_ID";
    /// ElectLeaders: the preferred replica leads already.
    ElectionNotNeeded = 84, "ELECTION_NOT_NEEDED";
    /// OffsetDelete of a partition whose topic the group's members consume.
    GroupSubscribedToTopic = 86, "GROUP_SUBSCRIBED_TO_TOPIC";
    /// A well-formed batch the broker refuses (old magic, a malformed record, ...).
    InvalidRecord = 87, "INVALID_RECORD";
    /// A newer producer with the same transactional id has fenced this one.
    ProducerFenced = 90, "PRODUCER_FENCED";
    /// The resource (a user's credential, ...) does not exist.
    ResourceNotFound = 91, "RESOURCE_NOT_FOUND";
    /// The resource is named twice in one request.
    DuplicateResource = 92, "DUPLICATE_RESOURCE";
    /// A credential outside the broker's bounds (iterations, salt, key lengths).
    UnacceptableCredential = 93, "UNACCEPTABLE_CREDENTIAL";
    /// An AlterPartition whose partition epoch is not the partition's current one.
    InvalidUpdateVersion = 95, "INVALID_UPDATE_VERSION";
    /// A topic id the cluster does not have.
    UnknownTopicId = 100, "UNKNOWN_TOPIC_ID";
    /// A broker registers with a node id another live incarnation holds.
    DuplicateBrokerRegistration = 101, "DUPLICATE_BROKER_REGISTRATION";
    /// A heartbeat or request from a node id that is not registered.
    BrokerIdNotRegistered = 102, "BROKER_ID_NOT_REGISTERED";
    /// DescribeTransactions on an unknown transactional id.
    TransactionalIdNotFound = 105, "TRANSACTIONAL_ID_NOT_FOUND";
    /// An AlterPartition adds to the ISR a broker that is fenced, shutting down, or whose
    /// broker epoch is stale (KIP-841, KIP-903).
    IneligibleReplica = 107, "INELIGIBLE_REPLICA";
    /// A consumer-protocol member's epoch is ahead of or behind the coordinator's.
    FencedMemberEpoch = 110, "FENCED_MEMBER_EPOCH";
    /// A static member joined while the member with its `group.instance.id` is active.
    UnreleasedInstanceId = 111, "UNRELEASED_INSTANCE_ID";
    /// A server assignor the coordinator does not have.
    UnsupportedAssignor = 112, "UNSUPPORTED_ASSIGNOR";
    /// An OffsetCommit or OffsetFetch with an outdated member epoch (retriable).
    StaleMemberEpoch = 113, "STALE_MEMBER_EPOCH";
    /// The transaction cannot go on; the producer can abort it (KIP-890).
    TransactionAbortable = 120, "TRANSACTION_ABORTABLE";
    /// A subscribed topic regex that does not compile.
    InvalidRegularExpression = 128, "INVALID_REGULAR_EXPRESSION";
}

impl ErrorCode {
    /// Kafka's wire number.
    #[must_use]
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// True for [`ErrorCode::None`].
    #[must_use]
    pub const fn is_ok(self) -> bool {
        matches!(self, ErrorCode::None)
    }
}

impl std::fmt::Display for ErrorCode {
    /// Kafka's name, as Kafka's own logs and messages write it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `InvalidRequest` -> `INVALID_REQUEST`.
    fn screaming(camel: &str) -> String {
        let mut out = String::new();
        for (i, c) in camel.char_indices() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
        }
        out
    }

    #[test]
    fn each_name_is_its_variant_in_kafkas_spelling() {
        for &code in ErrorCode::ALL {
            assert_eq!(code.name(), screaming(&format!("{code:?}")));
            assert_eq!(code.to_string(), code.name());
        }
    }

    #[test]
    fn numbers_are_unique_and_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for &code in ErrorCode::ALL {
            assert!(seen.insert(code.code()), "{code:?} twice");
            assert_eq!(ErrorCode::from_code(code.code()), Some(code));
        }
        assert_eq!(ErrorCode::from_code(42), Some(ErrorCode::InvalidRequest));
        assert_eq!(ErrorCode::from_code(i16::MAX), None);
        assert!(ErrorCode::None.is_ok() && !ErrorCode::InvalidRequest.is_ok());
    }
}
