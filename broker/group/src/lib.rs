//! Sluice's consumer-group coordinator (the classic protocol and KIP-848's consumer
//! protocol) and committed-offset store.
//!
//! Pure: no tokio, no sockets, no clock, no wire format. The coordinator is a
//! deterministic state machine fed `(now_ms, request)` that returns [`Effect`]s; time and
//! randomness are injected, so every behaviour is unit-tested without sleeps and replays
//! exactly in simulation.
//!
//! # How the server drives it
//!
//! ```text
//! start:    let mut c = Coordinator::new(config, Box::new(rng), now_ms)?;
//!           c.load(now_ms, records_of_the_offsets_log.map(OffsetRecord::decode));
//! request:  JoinGroup / SyncGroup / Heartbeat / LeaveGroup / OffsetCommit
//!             -> translate to `Request`, pick a unique `RequestId`, then
//!                for e in c.handle(now_ms, request_id, request) { carry out e }
//!           OffsetFetch / ListGroups / DescribeGroups / DeleteGroups
//!             -> c.fetch_offsets / c.list_groups / c.describe_group / c.delete_groups
//!           a transaction commits -> Request::CommitTxnOffsets for each of its groups
//!           a topic is deleted -> c.delete_topic_offsets(topic)
//! effects:  Respond { request_id, response }  send it on that request's connection
//!                                             (drop it if the connection is gone)
//!           PersistOffsets { id, records }    append records (key = encode_key(),
//!                                             value = encode_value(), None = tombstone)
//!                                             to the offsets partition, then feed
//!                                             c.persisted(id, Ok(()) or Err(code)) and
//!                                             carry out its effects (the commit answer)
//! timers:   sleep until c.next_deadline_ms(), then carry out c.on_tick(now_ms)'s effects;
//!           recompute the deadline after every call above.
//! compaction: c.snapshot() is the live content of the offsets log (one record per
//!           live key); write it as the new log when the log has grown well past it,
//!           with no PersistOffsets batch in flight in between.
//! ```
//!
//! `now_ms` is wall-clock milliseconds since the Unix epoch (as Kafka's `time.milliseconds`):
//! commit timestamps are persisted and offset retention spans restarts. Time going
//! backwards delays timers; nothing breaks. The coordinator is single-threaded: the
//! server owns it from one task and feeds it calls one at a time.
//!
//! Effects of one call are carried out in order, and `PersistOffsets` batches are
//! appended in the order they were emitted, across calls. A JoinGroup answer is deferred until the
//! rebalance's join phase completes (all members rejoined, the rebalance timeout, or the
//! initial rebalance delay); a SyncGroup answer until the leader's SyncGroup; an
//! OffsetCommit answer until `persisted`. Every deferred request is eventually answered
//! (success, or an error such as `UNKNOWN_MEMBER_ID` when its member is removed, or
//! `REBALANCE_IN_PROGRESS` when the same member sends a newer request).
//!
//! The server owns what needs the outside world: `NOT_COORDINATOR` and
//! FindCoordinator (one broker is the coordinator of every group),
//! `UNKNOWN_TOPIC_OR_PARTITION` for commits to partitions that do not exist, version
//! differences of the Kafka messages (e.g. LeaveGroup v0-2 carry one member, JoinGroup v0
//! has no rebalance timeout: pass the session timeout; `require_known_member_id` from v4).
//!
//! # Example
//!
//! ```
//! use sluice_group::*;
//!
//! let rng = Box::new(SplitMix64::new(7));
//! let mut c = Coordinator::new(GroupConfig::default(), rng, 0).unwrap();
//! let join = JoinGroupRequest {
//!     group_id: "g".into(),
//!     member_id: String::new(),
//!     group_instance_id: None,
//!     client_id: "app".into(),
//!     client_host: "/127.0.0.1".into(),
//!     session_timeout_ms: 10_000,
//!     rebalance_timeout_ms: 30_000,
//!     protocol_type: "consumer".into(),
//!     protocols: vec![Protocol { name: "range".into(), metadata: Bytes::new() }],
//!     require_known_member_id: false,
//!     supports_skip_assignment: false,
//! };
//! // The first join of an empty group waits for group.initial.rebalance.delay.ms.
//! assert!(c.handle(0, RequestId(1), Request::JoinGroup(join)).is_empty());
//! let at = c.next_deadline_ms().unwrap();
//! assert_eq!(at, 3_000);
//! let effects = c.on_tick(at);
//! let Effect::Respond { request_id, response: Response::JoinGroup(joined) } = &effects[0] else {
//!     panic!("expected the deferred JoinGroup answer");
//! };
//! assert_eq!((*request_id, joined.generation_id), (RequestId(1), 1));
//! assert_eq!(joined.leader, joined.member_id);
//! ```
//!
//! # Where Sluice differs from Kafka's classic coordinator (on purpose)
//! - Membership is soft state: after a restart every group is Empty and members rejoin
//!   (their heartbeats get `UNKNOWN_MEMBER_ID`). Kafka also persists the generation and
//!   assignment; clients recover the same way either way.
//! - A static member rejoining a Stable group with changed protocol metadata triggers a
//!   rebalance (Kafka only checks whether the selected protocol would change, which
//!   misses a changed subscription).
//! - Protocol selection breaks vote ties by the leader's preference (Kafka: hash order).
//! - A request superseded by a newer one from the same member (a retried JoinGroup or
//!   SyncGroup) is answered `REBALANCE_IN_PROGRESS`, and a removed member's waiting
//!   SyncGroup `UNKNOWN_MEMBER_ID`; Kafka drops those callbacks.
//! - Every collection has a cap ([`limits`]); Kafka's `group.max.size` defaults to
//!   unbounded, ours to [`limits::GROUP_MEMBERS_MAX`]. A full group still takes back a
//!   restarting static member: its `group.instance.id` holds its seat.
//! - An Empty group's offsets expire `offsets.retention.minutes` after both the group
//!   became Empty and the commit (Kafka: after the group became Empty only).
//!
//! # Layout
//! - [`limits`]: every bound, with its unit and why.
//! - [`error`]: [`ErrorCode`] (Kafka's numbers, `sluice_kafka`'s one table) and
//!   [`DecodeError`] for log records.
//! - [`config`]: [`GroupConfig`], Kafka's `group.*` and `offsets.*` broker keys.
//! - [`rng`]: [`MemberIdRng`] injection and member ids (`<client_id>-<uuid>`); tests seed
//!   [`SplitMix64`] (`sluice_kafka::rng`).
//! - [`api`]: requests, responses and [`Effect`]s as plain types.
//! - [`state`]: [`GroupState`] and its legal moves.
//! - [`member`]: one member: protocols, assignment, waiting requests, expiry.
//! - `group.rs`: one [`Group`]: membership, protocol selection, heartbeat, leave, commit
//!   validation, describe.
//! - `rebalance.rs`: the rebalance moves of a group (join, sync, preparing a rebalance,
//!   completing the join phase).
//! - `timers.rs`: member removal, session expiry, the join, initial-delay and sync timers.
//! - [`coordinator`]: [`Coordinator`]: routes by group id, deadline index, admin APIs.
//! - `coordinator/commit.rs`: OffsetCommit, a committed transaction's offsets, the persist
//!   round trip, offset retention.
//! - [`consumer`]: consumer-protocol groups (KIP-848): ConsumerGroupHeartbeat, member
//!   epochs, the target assignment, reconciliation (`consumer/reconcile.rs`: revoke before
//!   reassigning), the `uniform` and `range` assignors ([`consumer::assignor`]);
//!   `coordinator/modern.rs` routes them and checks member epochs of commits and fetches.
//! - [`subscription`]: subscribed topics from consumer-protocol metadata (offset expiry).
//! - `invariants.rs`: consistency checks run after every call in debug builds.
//! - [`offsets`]: [`OffsetStore`] and the byte layout of [`OffsetRecord`]s (written and read
//!   with `sluice_kafka::bytes`).
//!
//! Architecture Invariant: this crate depends on no other Sluice crate but the leaf
//! `sluice-kafka`, does no I/O and reads no clock; group membership is soft state (only offsets are persisted), for
//! consumer-protocol groups too: after a restart their members get `UNKNOWN_MEMBER_ID`
//! and rejoin with epoch 0 (Kafka persists member metadata and target assignments).
//!
//! Architecture Invariant: in a consumer-protocol group no partition is ever owned
//! (assigned or pending revocation) by two members; a partition goes to its new owner
//! only after the old one reported it revoked (checked after every call in debug builds).
//!
//! Architecture Invariant: a committed offset is visible to OffsetFetch only after the
//! server acknowledged its record with `persisted`; once every handed-out batch is
//! appended (failed appends left out), replaying the log gives exactly the in-memory
//! store (the simulation test checks this).

pub mod api;
pub mod config;
pub mod consumer;
pub mod coordinator;
pub mod error;
mod group;
mod invariants;
pub mod limits;
pub mod member;
pub mod offsets;
mod rebalance;
pub mod rng;
pub mod state;
pub mod subscription;
mod timers;

pub use bytes::Bytes;

pub use api::{
    Assignment, CommitPartition, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse,
    DescribedMember, Effect, FetchedOffset, GroupDescription, HeartbeatRequest, HeartbeatResponse,
    JoinGroupMember, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    LeavingMember, LeftMember, ListedGroup, OffsetCommitRequest, OffsetCommitResponse,
    PartitionResult, PersistId, Protocol, Request, RequestId, Response, SyncGroupRequest,
    SyncGroupResponse, TopicPartition, TxnCommitRequest, TxnOffsetCommitMember,
};
pub use config::{ConfigError, GroupConfig};
pub use consumer::{ConsumerGroup, ConsumerGroupState, ConsumerMember, TopicMatcher};
pub use coordinator::{Coordinator, OffsetDeleteResult};
pub use error::{DecodeError, ErrorCode};
pub use group::Group;
pub use member::Member;
pub use offsets::{CommittedOffset, OffsetRecord, OffsetStore, RecordKey};
pub use rng::{MemberIdRng, SplitMix64};
pub use state::GroupState;
