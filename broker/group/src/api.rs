//! The coordinator's inputs and outputs as plain Rust types. The server translates Kafka
//! messages (any supported version) to these and back; nothing here knows the wire.

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::offsets::OffsetRecord;
pub use crate::offsets::TopicPartition;

/// Server-chosen id of one in-flight request, echoed in [`Effect::Respond`] so a deferred
/// response finds its connection. Must be unique among requests still waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Id of one batch of offset records handed to the server in [`Effect::PersistOffsets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PersistId(pub u64);

/// A request that changes group state; fed to [`crate::Coordinator::handle`].
#[derive(Debug, Clone)]
pub enum Request {
    /// JoinGroup v0-5 (and later, fields permitting).
    JoinGroup(JoinGroupRequest),
    /// SyncGroup v0-3.
    SyncGroup(SyncGroupRequest),
    /// Heartbeat v0-3.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup v0-3 (v0-2 carry one member; the server wraps it in a one-item list).
    LeaveGroup(LeaveGroupRequest),
    /// OffsetCommit v2-7.
    OffsetCommit(OffsetCommitRequest),
    /// A committed transaction's offsets, from the transaction coordinator (answered with
    /// [`Response::OffsetCommit`]).
    CommitTxnOffsets(TxnCommitRequest),
    /// ConsumerGroupHeartbeat (KIP-848), answered at once.
    ConsumerGroupHeartbeat(Box<ConsumerHeartbeatRequest>),
}

/// A response, emitted immediately or later (deferred JoinGroup/SyncGroup/OffsetCommit).
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// Answer to [`Request::JoinGroup`].
    JoinGroup(JoinGroupResponse),
    /// Answer to [`Request::SyncGroup`].
    SyncGroup(SyncGroupResponse),
    /// Answer to [`Request::Heartbeat`].
    Heartbeat(HeartbeatResponse),
    /// Answer to [`Request::LeaveGroup`].
    LeaveGroup(LeaveGroupResponse),
    /// Answer to [`Request::OffsetCommit`] and [`Request::CommitTxnOffsets`].
    OffsetCommit(OffsetCommitResponse),
    /// Answer to [`Request::ConsumerGroupHeartbeat`].
    ConsumerGroupHeartbeat(ConsumerHeartbeatResponse),
}

/// What the server must do. Effects in one `Vec` are to be carried out in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send `response` to the connection that sent `request_id`.
    Respond {
        /// The request being answered.
        request_id: RequestId,
        /// The answer.
        response: Response,
    },
    /// Append `records` to the internal offsets log, then report the outcome with
    /// [`crate::Coordinator::persisted`] (commits are only applied and answered then).
    PersistOffsets {
        /// Echo this in `persisted`.
        id: PersistId,
        /// Records in log order.
        records: Vec<OffsetRecord>,
    },
}

/// One assignor a member supports, with its subscription metadata (opaque to us).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    /// Assignor name, e.g. `range`, `cooperative-sticky`.
    pub name: String,
    /// The client's subscription bytes for that assignor.
    pub metadata: Bytes,
}

/// JoinGroup request fields.
#[derive(Debug, Clone)]
pub struct JoinGroupRequest {
    /// Group to join.
    pub group_id: String,
    /// Empty on first join; the assigned id afterwards.
    pub member_id: String,
    /// `group.instance.id` for static members (v5+).
    pub group_instance_id: Option<String>,
    /// The request header's client id.
    pub client_id: String,
    /// The peer address, shown by DescribeGroups.
    pub client_host: String,
    /// Session timeout, in milliseconds.
    pub session_timeout_ms: i32,
    /// Rebalance timeout, in milliseconds (v0: pass the session timeout).
    pub rebalance_timeout_ms: i32,
    /// Protocol type, `consumer` for Kafka consumers.
    pub protocol_type: String,
    /// Supported assignors in preference order.
    pub protocols: Vec<Protocol>,
    /// True from JoinGroup v4: unknown members first get `MEMBER_ID_REQUIRED`.
    pub require_known_member_id: bool,
    /// True from JoinGroup v9 (KIP-814): a static leader rejoining a Stable group gets the
    /// members back with `skip_assignment` set, instead of the old leader id.
    pub supports_skip_assignment: bool,
}

/// One member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    /// Member id.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub group_instance_id: Option<String>,
    /// Its metadata for the selected protocol.
    pub metadata: Bytes,
}

/// JoinGroup response fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// Error code.
    pub error: ErrorCode,
    /// The new generation (-1 on error).
    pub generation_id: i32,
    /// The group's protocol type (v7+ on the wire).
    pub protocol_type: Option<String>,
    /// The selected protocol (assignor).
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// This member's id (also set with `MEMBER_ID_REQUIRED`).
    pub member_id: String,
    /// All members with metadata; only in the leader's response.
    pub members: Vec<JoinGroupMember>,
    /// KIP-814 (v9+): the leader must not run the assignor, only learn the members (a
    /// static leader that rejoined without changing the group's protocol).
    pub skip_assignment: bool,
}

/// SyncGroup request fields.
#[derive(Debug, Clone)]
pub struct SyncGroupRequest {
    /// Group id.
    pub group_id: String,
    /// Generation from the JoinGroup response.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` (v3+).
    pub group_instance_id: Option<String>,
    /// Protocol type (v5+; `None` to skip the check).
    pub protocol_type: Option<String>,
    /// Protocol name (v5+; `None` to skip the check).
    pub protocol_name: Option<String>,
    /// The leader's assignment per member id; empty from followers.
    pub assignments: Vec<(String, Bytes)>,
}

/// SyncGroup response fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// Error code.
    pub error: ErrorCode,
    /// The group's protocol type (v5+ on the wire).
    pub protocol_type: Option<String>,
    /// The group's protocol name (v5+ on the wire).
    pub protocol_name: Option<String>,
    /// This member's assignment (empty on error).
    pub assignment: Bytes,
}

/// Heartbeat request fields.
#[derive(Debug, Clone)]
pub struct HeartbeatRequest {
    /// Group id.
    pub group_id: String,
    /// Generation the member believes in.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` (v3+).
    pub group_instance_id: Option<String>,
}

/// Heartbeat response fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// Error code.
    pub error: ErrorCode,
}

/// One member leaving (LeaveGroup v3 batches them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingMember {
    /// Member id; empty to remove a static member by instance id (admin removal).
    pub member_id: String,
    /// `group.instance.id`, if static.
    pub group_instance_id: Option<String>,
}

/// LeaveGroup request fields.
#[derive(Debug, Clone)]
pub struct LeaveGroupRequest {
    /// Group id.
    pub group_id: String,
    /// Members leaving.
    pub members: Vec<LeavingMember>,
}

/// Per-member LeaveGroup result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftMember {
    /// As requested.
    pub member_id: String,
    /// As requested.
    pub group_instance_id: Option<String>,
    /// Error code for this member.
    pub error: ErrorCode,
}

/// LeaveGroup response fields. For v0-2 the server sends `error` if it is not `None`,
/// else the first member's error (as Kafka does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// Top-level error code.
    pub error: ErrorCode,
    /// One entry per leaving member, in request order.
    pub members: Vec<LeftMember>,
}

/// One partition's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitPartition {
    /// The partition.
    pub tp: TopicPartition,
    /// Next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, -1 if unknown (v6+).
    pub leader_epoch: i32,
    /// Client metadata string (`None` is stored as empty, like Kafka).
    pub metadata: Option<String>,
}

/// OffsetCommit request fields. The server answers `UNKNOWN_TOPIC_OR_PARTITION` itself
/// for partitions that do not exist and passes only the rest.
#[derive(Debug, Clone)]
pub struct OffsetCommitRequest {
    /// Group id.
    pub group_id: String,
    /// Generation, -1 for simple (standalone) consumers.
    pub generation_id: i32,
    /// Member id, empty for simple consumers.
    pub member_id: String,
    /// `group.instance.id` (v7+).
    pub group_instance_id: Option<String>,
    /// Partitions to commit.
    pub partitions: Vec<CommitPartition>,
}

/// The offsets a transaction committed for one group (a consumer-transform-produce app's
/// `send_offsets_to_transaction`), written when the transaction commits (Kafka's
/// `onTransactionCompleted`). The TxnOffsetCommit that carried them was checked when it
/// arrived, so no member or generation is checked now: the offsets are written whatever the
/// group's state (missing, Empty, rebalancing, Stable); a missing group is created as for a
/// simple consumer. The same per-partition checks and caps as OffsetCommit apply
/// (`offset.metadata.max.bytes`, [`crate::limits::GROUP_OFFSETS_MAX`]), and the caller
/// answers `UNKNOWN_TOPIC_OR_PARTITION` itself, as for OffsetCommit.
#[derive(Debug, Clone)]
pub struct TxnCommitRequest {
    /// Group id (not empty, as Kafka requires of TxnOffsetCommit).
    pub group_id: String,
    /// Partitions to commit.
    pub partitions: Vec<CommitPartition>,
}

/// Who sends a TxnOffsetCommit (v3+, KIP-447: the consumer's group metadata, from
/// `sendOffsetsToTransaction(offsets, groupMetadata)`), checked against the group when the
/// request arrives ([`crate::Coordinator::check_txn_offset_commit`]) so a zombie instance of
/// a consume-transform-produce application cannot commit after its group moved on. v0-v2
/// carry none of it: generation -1, an empty member id and no instance id, always allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitMember {
    /// Group id.
    pub group_id: String,
    /// The generation (classic group) or member epoch (consumer group); -1 for none.
    pub generation_id: i32,
    /// Member id; empty for none.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

/// Per-partition result of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionResult {
    /// The partition.
    pub tp: TopicPartition,
    /// Error code.
    pub error: ErrorCode,
}

/// OffsetCommit response fields, one entry per requested partition in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    /// Per-partition results.
    pub partitions: Vec<PartitionResult>,
}

/// One partition in an OffsetFetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    /// The partition.
    pub tp: TopicPartition,
    /// Committed offset, -1 if none.
    pub offset: i64,
    /// Committed leader epoch, -1 if none.
    pub leader_epoch: i32,
    /// Committed metadata, empty if none.
    pub metadata: String,
}

/// One group in ListGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// Group id.
    pub group_id: String,
    /// Protocol type, empty for offset-only (simple consumer) groups.
    pub protocol_type: String,
    /// State name (ListGroups v4 filters on it); a consumer-protocol group with members
    /// is Stable.
    pub state: crate::GroupState,
    /// Kafka's state of a consumer-protocol (KIP-848) group; `None` for classic groups
    /// (ListGroups v5 shows group type `consumer` for these, `classic` for the others).
    pub consumer_state: Option<crate::state::ConsumerGroupState>,
}

/// One member in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`, if static.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Metadata for the selected protocol (empty unless Stable, as Kafka).
    pub metadata: Bytes,
    /// Current assignment (empty unless Stable, as Kafka).
    pub assignment: Bytes,
}

/// One group in DescribeGroups. A group that does not exist is described as `Dead` with
/// error `None` (Kafka before DescribeGroups v6; v6+ servers send `GROUP_ID_NOT_FOUND`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// Error code (`INVALID_GROUP_ID` for an empty id).
    pub error: ErrorCode,
    /// State.
    pub state: crate::GroupState,
    /// Protocol type, empty if none.
    pub protocol_type: String,
    /// Selected protocol while Stable, else empty.
    pub protocol: String,
    /// Members.
    pub members: Vec<DescribedMember>,
}

/// Topic name -> partition numbers. The coordinator works with topic names; the server
/// maps the wire's topic ids to names and back.
pub type Assignment = std::collections::BTreeMap<String, std::collections::BTreeSet<i32>>;

/// ConsumerGroupHeartbeat request fields (KIP-848). `None` means "unchanged since the
/// last heartbeat" (the wire's null / -1).
#[derive(Debug, Clone, Default)]
pub struct ConsumerHeartbeatRequest {
    /// Group id.
    pub group_id: String,
    /// Member id; empty on a first join lets the coordinator pick one.
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 for a static member leaving temporarily, else the
    /// member's current epoch.
    pub member_epoch: i32,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// Rebalance timeout in ms, -1 if unchanged.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscribed topic regex (RE2 syntax, matched by the server's [`crate::TopicMatcher`]).
    pub subscribed_topic_regex: Option<String>,
    /// `group.remote.assignor`.
    pub server_assignor: Option<String>,
    /// The partitions the member owns (after its last reconciliation).
    pub owned: Option<Assignment>,
    /// The request header's client id.
    pub client_id: String,
    /// The peer address.
    pub client_host: String,
    /// Who sends it (`User:alice`): the topics its regex matches are filtered by this
    /// principal's DESCRIBE rights ([`crate::TopicMatcher::may_describe`]).
    pub principal: String,
}

/// ConsumerGroupHeartbeat response fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    /// Error code.
    pub error: ErrorCode,
    /// The member's id (`None` on error).
    pub member_id: Option<String>,
    /// The member's epoch (-1 after a leave, -2 after a static member's leave).
    pub member_epoch: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// The partitions the member owns from now on; `None` if unchanged.
    pub assignment: Option<Assignment>,
}
