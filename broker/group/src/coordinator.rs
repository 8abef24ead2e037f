//! All groups of one coordinator: routes requests by group id, owns the committed-offset
//! store, and keeps a deadline index so the server needs only one timer.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::api::{
    CommitPartition, Effect, FetchedOffset, GroupDescription, HeartbeatResponse, JoinGroupRequest,
    LeaveGroupRequest, LeaveGroupResponse, LeftMember, ListedGroup, PersistId, Request, RequestId,
    Response, SyncGroupRequest, TopicPartition, TxnOffsetCommitMember,
};
use crate::config::{ConfigError, GroupConfig};
use crate::consumer::{ConsumerGroup, LiteralMatcher, TopicMatcher};
use crate::error::ErrorCode;
use crate::group::{Ctx, Group, join_error, respond, sync_error};
use crate::limits;
use crate::offsets::{OffsetRecord, OffsetStore, RecordKey};
use crate::rng::MemberIdRng;
use crate::state::GroupState;
use commit::PendingCommit;

mod commit;
mod modern;
pub use commit::OffsetDeleteResult;

/// The consumer-group coordinator: a deterministic state machine over all groups.
///
/// Drive it with [`Coordinator::handle`], [`Coordinator::persisted`] and
/// [`Coordinator::on_tick`]; each returns [`Effect`]s to carry out in order.
#[derive(Debug)]
pub struct Coordinator {
    pub(crate) config: GroupConfig,
    pub(crate) rng: Box<dyn MemberIdRng>,
    pub(crate) groups: BTreeMap<String, Group>,
    pub(crate) offsets: OffsetStore,
    /// (deadline ms, group id) for every group with a timer; mirrors `deadline_of`.
    deadlines: BTreeSet<(u64, String)>,
    deadline_of: HashMap<String, u64>,
    /// Commits handed to the server for persistence, answered in `persisted`.
    pub(crate) pending: BTreeMap<PersistId, PendingCommit>,
    /// Tombstone batches (deletes, expiry) handed to the server: their keys, by persist id.
    /// One entry per batch in flight, removed when `persisted` reports it (the server's
    /// writer queue bounds them: a batch it cannot take is reported failed at once).
    tombstone_batches: BTreeMap<PersistId, Vec<RecordKey>>,
    /// Keys whose tombstones failed to append. The store already dropped them, so the log
    /// would bring them back at the next start: written again at the next tick (bounded by
    /// `limits::OWED_TOMBSTONES_MAX`).
    owed_tombstones: BTreeSet<RecordKey>,
    /// Owed tombstones are not written again before this, in ms (one retry per
    /// `limits::TOMBSTONE_RETRY_MS`, so a failing disk is not hammered).
    tombstone_retry_at_ms: u64,
    next_persist_id: u64,
    next_incarnation: u64,
    /// When the next `offsets.retention.check.interval.ms` pass runs, in ms.
    pub(crate) next_retention_check_ms: u64,
    /// Every topic with its partition count, from [`Coordinator::update_topics`] (what
    /// consumer-protocol groups subscribe to).
    pub(crate) topics: BTreeMap<String, i32>,
    /// Regex engine of consumer-protocol subscriptions.
    pub(crate) matcher: Box<dyn TopicMatcher>,
}

impl Coordinator {
    /// A coordinator with no groups, starting its clock at `now_ms`.
    pub fn new(
        config: GroupConfig,
        rng: Box<dyn MemberIdRng>,
        now_ms: u64,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let next_retention_check_ms = now_ms + config.offsets_retention_check_interval_ms;
        Ok(Self {
            config,
            rng,
            groups: BTreeMap::new(),
            offsets: OffsetStore::default(),
            deadlines: BTreeSet::new(),
            deadline_of: HashMap::new(),
            pending: BTreeMap::new(),
            tombstone_batches: BTreeMap::new(),
            owed_tombstones: BTreeSet::new(),
            tombstone_retry_at_ms: 0,
            next_persist_id: 0,
            next_incarnation: 0,
            next_retention_check_ms,
            topics: BTreeMap::new(),
            matcher: Box::new(LiteralMatcher),
        })
    }

    /// Rebuilds committed offsets from the offsets log (records in log order). Call once,
    /// before any request. Every group with offsets comes back Empty (membership is soft
    /// state: members rejoin after a restart).
    pub fn load(&mut self, now_ms: u64, records: impl IntoIterator<Item = OffsetRecord>) {
        assert!(self.groups.is_empty(), "load runs before any request");
        self.offsets = OffsetStore::load(records);
        let ids: Vec<String> = self.offsets.group_ids().map(str::to_owned).collect();
        for id in ids {
            let group = Group::new(&id, now_ms, self.incarnation());
            self.groups.insert(id, group);
        }
    }

    /// Handles a request; the answer may be in the effects or come later (a JoinGroup
    /// waits for the rebalance, a SyncGroup for the leader, an OffsetCommit or a
    /// transaction's offsets for [`Coordinator::persisted`]).
    pub fn handle(&mut self, now_ms: u64, request_id: RequestId, request: Request) -> Vec<Effect> {
        let mut out = Vec::new();
        match request {
            Request::JoinGroup(req) => self.join_group(now_ms, request_id, req, &mut out),
            Request::SyncGroup(req) => self.sync_group(now_ms, request_id, req, &mut out),
            Request::Heartbeat(req) => {
                let error = self.heartbeat(now_ms, &req);
                respond(
                    &mut out,
                    request_id,
                    Response::Heartbeat(HeartbeatResponse { error }),
                );
            }
            Request::LeaveGroup(req) => {
                let response = self.leave_group(now_ms, req, &mut out);
                respond(&mut out, request_id, Response::LeaveGroup(response));
            }
            Request::OffsetCommit(req) => self.offset_commit(now_ms, request_id, req, &mut out),
            Request::CommitTxnOffsets(req) => {
                self.commit_txn_offsets(now_ms, request_id, req, &mut out);
            }
            Request::ConsumerGroupHeartbeat(req) => {
                let response = self.consumer_heartbeat(now_ms, &req);
                respond(
                    &mut out,
                    request_id,
                    Response::ConsumerGroupHeartbeat(response),
                );
            }
        }
        self.debug_check();
        out
    }

    /// Fires every timer due at `now_ms` (session and rebalance timeouts, the initial
    /// rebalance delay, pending syncs, offset retention).
    pub fn on_tick(&mut self, now_ms: u64) -> Vec<Effect> {
        let mut out = Vec::new();
        let due: Vec<String> = self
            .deadlines
            .iter()
            .take_while(|(at, _)| *at <= now_ms)
            .map(|(_, id)| id.clone())
            .collect();
        for id in due {
            self.with_group(now_ms, &id, &mut out, |group, ctx, out| {
                group.on_tick(ctx, out)
            });
            self.with_modern(now_ms, &id, |modern, cx| modern.on_tick(cx));
        }
        if now_ms >= self.next_retention_check_ms {
            self.next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms;
            self.expire_offsets(now_ms, &mut out);
        }
        self.retry_tombstones(now_ms, &mut out);
        self.debug_check();
        out
    }

    /// Hands tombstone `records` (deletes, expiry) to the server, remembering their keys
    /// so a failed append is written again.
    pub(crate) fn persist_tombstones(&mut self, records: Vec<OffsetRecord>, out: &mut Vec<Effect>) {
        if records.is_empty() {
            return;
        }
        let id = self.persist_id();
        let keys = records.iter().map(|r| r.key.clone()).collect();
        self.tombstone_batches.insert(id, keys);
        out.push(Effect::PersistOffsets { id, records });
    }

    /// Reports a tombstone batch's append; `false` if `id` is not one (a commit's).
    pub(crate) fn tombstones_persisted(&mut self, id: PersistId, appended: bool) -> bool {
        let Some(keys) = self.tombstone_batches.remove(&id) else {
            return false;
        };
        if !appended {
            let room = limits::OWED_TOMBSTONES_MAX.saturating_sub(self.owed_tombstones.len());
            self.owed_tombstones.extend(keys.into_iter().take(room));
        }
        true
    }

    /// The tombstones owed from failed appends whose keys are still gone from the store (a
    /// key committed again since needs none: its new value follows in the log). A group
    /// tombstone only while the group has no offset at all: later commits of it are logged
    /// after the old ones, and a group tombstone written now would delete them on replay.
    /// A key with a commit waiting for its persist stays owed until that commit is decided
    /// (the commit is logged before a tombstone written now, which would then delete it).
    fn retry_tombstones(&mut self, now_ms: u64, out: &mut Vec<Effect>) {
        if self.owed_tombstones.is_empty() || now_ms < self.tombstone_retry_at_ms {
            return;
        }
        self.tombstone_retry_at_ms = now_ms.saturating_add(limits::TOMBSTONE_RETRY_MS);
        let (deferred, due): (BTreeSet<RecordKey>, BTreeSet<RecordKey>) =
            std::mem::take(&mut self.owed_tombstones)
                .into_iter()
                .partition(|key| self.commit_in_flight(key));
        self.owed_tombstones = deferred;
        let records: Vec<OffsetRecord> = due
            .into_iter()
            .filter(|key| match key {
                RecordKey::Offset { group, tp } => self
                    .offsets
                    .group(group)
                    .is_none_or(|offsets| !offsets.contains_key(tp)),
                RecordKey::Group { group } => !self.offsets.has_offsets(group),
            })
            .map(|key| OffsetRecord { key, value: None })
            .collect();
        self.persist_tombstones(records, out);
    }

    /// When [`Coordinator::on_tick`] must next run, in ms.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let group = self.deadlines.first().map(|(at, _)| *at);
        let retry = (!self.owed_tombstones.is_empty()).then_some(self.tombstone_retry_at_ms);
        let next = [group, retry]
            .into_iter()
            .flatten()
            .fold(self.next_retention_check_ms, u64::min);
        Some(next)
    }

    /// A group, for inspection.
    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    /// The committed offsets.
    pub fn offsets(&self) -> &OffsetStore {
        &self.offsets
    }

    /// Live offset records, for writing a compacted offsets log.
    pub fn snapshot(&self) -> Vec<OffsetRecord> {
        self.offsets.snapshot()
    }

    /// OffsetFetch: the requested partitions (-1 where nothing is committed), or all of
    /// the group's committed partitions when `partitions` is `None` (v2+). An unknown group
    /// has no offsets. Commits not yet persisted are not visible.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<FetchedOffset>, ErrorCode> {
        if group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return Err(ErrorCode::InvalidGroupId);
        }
        let committed = self.offsets.group(group_id);
        let fetched = |tp: &TopicPartition| match committed.and_then(|c| c.get(tp)) {
            Some(c) => FetchedOffset {
                tp: tp.clone(),
                offset: c.offset,
                leader_epoch: c.leader_epoch,
                metadata: c.metadata.clone(),
            },
            None => FetchedOffset {
                tp: tp.clone(),
                offset: -1,
                leader_epoch: -1,
                metadata: String::new(),
            },
        };
        Ok(match partitions {
            Some(tps) => tps.iter().map(fetched).collect(),
            None => committed
                .into_iter()
                .flat_map(|c| c.keys())
                .map(fetched)
                .collect(),
        })
    }

    /// TxnOffsetCommit's group check, when the request arrives (Kafka's
    /// `validateTransactionalOffsetCommit`): the member fields of v3+ must match the group
    /// (see [`TxnOffsetCommitMember`]); a group that does not exist takes offsets from
    /// generation -1 only (it is created when the transaction commits), else
    /// ILLEGAL_GENERATION. `partitions` are the offsets to commit (a consumer-protocol
    /// member may commit at an older epoch the partitions it owned then).
    pub fn check_txn_offset_commit(
        &self,
        member: &TxnOffsetCommitMember,
        partitions: &[CommitPartition],
    ) -> Result<(), ErrorCode> {
        if member.group_id.is_empty() || member.group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return Err(ErrorCode::InvalidGroupId);
        }
        match self.groups.get(&member.group_id) {
            None if member.generation_id < 0 => Ok(()),
            None => Err(ErrorCode::IllegalGeneration),
            Some(group) => group.validate_txn_commit(
                member.generation_id,
                &member.member_id,
                member.group_instance_id.as_deref(),
                partitions,
            ),
        }
    }

    /// ListGroups: every group with its protocol type and state, in id order.
    pub fn list_groups(&self) -> Vec<ListedGroup> {
        let listed = |g: &Group| ListedGroup {
            group_id: g.id.clone(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            state: match g.modern.as_deref() {
                Some(m) if !m.members.is_empty() => GroupState::Stable,
                _ => g.state,
            },
            consumer_state: g.modern.as_deref().map(ConsumerGroup::state),
        };
        self.groups.values().map(listed).collect()
    }

    /// DescribeGroups for one group; a missing group is described as `Dead`.
    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        let error = match self.groups.get(group_id) {
            // As Kafka: DescribeGroups describes classic groups only.
            Some(group) if group.modern.is_some() => ErrorCode::GroupIdNotFound,
            Some(group) => return group.describe(),
            None if group_id.len() > limits::GROUP_ID_BYTES_MAX => ErrorCode::InvalidGroupId,
            None => ErrorCode::None,
        };
        GroupDescription {
            group_id: group_id.to_owned(),
            error,
            state: GroupState::Dead,
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        }
    }

    /// DeleteGroups: Empty groups are deleted with their offsets (tombstones to persist in
    /// the returned effects); others get `NON_EMPTY_GROUP` or `GROUP_ID_NOT_FOUND`.
    pub fn delete_groups(
        &mut self,
        group_ids: &[String],
    ) -> (Vec<(String, ErrorCode)>, Vec<Effect>) {
        let mut results = Vec::with_capacity(group_ids.len());
        let mut records = Vec::new();
        for id in group_ids {
            let error = match self.groups.get(id).map(Group::overall_state) {
                _ if id.len() > limits::GROUP_ID_BYTES_MAX => ErrorCode::InvalidGroupId,
                None | Some(GroupState::Dead) => ErrorCode::GroupIdNotFound,
                Some(GroupState::Empty) => {
                    self.remove_group(id);
                    records.extend(self.offsets.delete_group(id));
                    ErrorCode::None
                }
                Some(_) => ErrorCode::NonEmptyGroup,
            };
            results.push((id.clone(), error));
        }
        let mut out = Vec::new();
        self.persist_tombstones(records, &mut out);
        self.debug_check();
        (results, out)
    }

    fn join_group(
        &mut self,
        now_ms: u64,
        rid: RequestId,
        req: JoinGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        if let Err(e) = self.check_join(&req) {
            return respond(out, rid, join_error(&req.member_id, e));
        }
        if let Some(group) = self.groups.get_mut(&req.group_id)
            && let Some(modern) = &group.modern
        {
            if !modern.members.is_empty() {
                return respond(
                    out,
                    rid,
                    join_error(&req.member_id, ErrorCode::InconsistentGroupProtocol),
                );
            }
            group.modern = None; // an empty consumer group becomes a classic one
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() {
                return respond(
                    out,
                    rid,
                    join_error(&req.member_id, ErrorCode::UnknownMemberId),
                );
            }
            if let Err(e) = self.create_group(now_ms, &req.group_id) {
                return respond(out, rid, join_error(&req.member_id, e));
            }
        }
        let id = req.group_id.clone();
        self.with_group(now_ms, &id, out, |group, ctx, out| {
            group.join(ctx, rid, req, out)
        });
    }

    /// Request-level checks of JoinGroup, in Kafka's order, plus our limits.
    fn check_join(&self, req: &JoinGroupRequest) -> Result<(), ErrorCode> {
        if req.group_id.is_empty() || req.group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return Err(ErrorCode::InvalidGroupId);
        }
        let timeout = i64::from(req.session_timeout_ms);
        let (min, max) = (
            self.config.session_timeout_min_ms,
            self.config.session_timeout_max_ms,
        );
        if timeout < i64::from(min) || timeout > i64::from(max) {
            return Err(ErrorCode::InvalidSessionTimeout);
        }
        let invalid = req.rebalance_timeout_ms < 0
            || req
                .group_instance_id
                .as_ref()
                .is_some_and(|i| i.len() > limits::GROUP_INSTANCE_ID_BYTES_MAX)
            || req.client_id.len() > limits::CLIENT_ID_BYTES_MAX
            || req.client_host.len() > limits::CLIENT_HOST_BYTES_MAX
            || req.protocols.len() > limits::MEMBER_PROTOCOLS_MAX
            || req
                .protocols
                .iter()
                .any(|p| p.metadata.len() > limits::PROTOCOL_METADATA_BYTES_MAX);
        if invalid {
            return Err(ErrorCode::InvalidRequest);
        }
        Ok(())
    }

    fn sync_group(
        &mut self,
        now_ms: u64,
        rid: RequestId,
        req: SyncGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        if req.group_id.is_empty() || req.group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return respond(out, rid, sync_error(ErrorCode::InvalidGroupId));
        }
        if !self.groups.contains_key(&req.group_id) {
            return respond(out, rid, sync_error(ErrorCode::UnknownMemberId));
        }
        let id = req.group_id.clone();
        self.with_group(now_ms, &id, out, |group, ctx, out| {
            group.sync(ctx.now_ms, rid, req, out)
        });
    }

    fn heartbeat(&mut self, now_ms: u64, req: &crate::api::HeartbeatRequest) -> ErrorCode {
        if req.group_id.is_empty() || req.group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return ErrorCode::InvalidGroupId;
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        let error = group.heartbeat(now_ms, req);
        self.reindex(&req.group_id);
        error
    }

    fn leave_group(
        &mut self,
        now_ms: u64,
        req: LeaveGroupRequest,
        out: &mut Vec<Effect>,
    ) -> LeaveGroupResponse {
        if req.group_id.is_empty() || req.group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return LeaveGroupResponse {
                error: ErrorCode::InvalidGroupId,
                members: Vec::new(),
            };
        }
        if !self.groups.contains_key(&req.group_id) {
            let unknown = |m: &crate::api::LeavingMember| LeftMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                error: ErrorCode::UnknownMemberId,
            };
            return LeaveGroupResponse {
                error: ErrorCode::None,
                members: req.members.iter().map(unknown).collect(),
            };
        }
        let mut members = Vec::with_capacity(req.members.len());
        self.with_group(now_ms, &req.group_id, out, |group, ctx, out| {
            members.extend(req.members.iter().map(|m| group.leave(ctx, m, out)));
        });
        LeaveGroupResponse {
            error: ErrorCode::None,
            members,
        }
    }

    /// Runs `f` on a group with a fresh [`Ctx`], then refreshes its deadline.
    pub(crate) fn with_group(
        &mut self,
        now_ms: u64,
        group_id: &str,
        out: &mut Vec<Effect>,
        f: impl FnOnce(&mut Group, &mut Ctx<'_>, &mut Vec<Effect>),
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let mut ctx = Ctx {
            now_ms,
            config: &self.config,
            rng: self.rng.as_mut(),
        };
        f(group, &mut ctx, out);
        self.reindex(group_id);
    }

    pub(crate) fn create_group(&mut self, now_ms: u64, group_id: &str) -> Result<(), ErrorCode> {
        if self.groups.len() >= limits::GROUPS_MAX {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        let group = Group::new(group_id, now_ms, self.incarnation());
        self.groups.insert(group_id.to_owned(), group);
        Ok(())
    }

    pub(crate) fn remove_group(&mut self, group_id: &str) {
        if let Some(mut group) = self.groups.remove(group_id) {
            group.transition(GroupState::Dead, group.state_since_ms);
        }
        self.reindex(group_id);
    }

    fn incarnation(&mut self) -> u64 {
        self.next_incarnation += 1;
        self.next_incarnation
    }

    pub(crate) fn persist_id(&mut self) -> PersistId {
        self.next_persist_id += 1;
        PersistId(self.next_persist_id)
    }

    /// The group's deadline as filed in the index.
    pub(crate) fn indexed_deadline(&self, group_id: &str) -> Option<u64> {
        self.deadline_of.get(group_id).copied()
    }

    /// Runs [`Coordinator::check_invariants`] in debug builds, while the coordinator is
    /// small enough (a full check is linear in groups and pending commits; tests and
    /// simulations stay under the bound).
    pub(crate) fn debug_check(&self) {
        const FULL_CHECK_SIZE_MAX: usize = 1_000;
        if cfg!(debug_assertions) && self.groups.len() + self.pending.len() <= FULL_CHECK_SIZE_MAX {
            self.check_invariants();
        }
    }

    /// Re-files the group's next deadline in the index.
    pub(crate) fn reindex(&mut self, group_id: &str) {
        if let Some(old) = self.deadline_of.remove(group_id) {
            self.deadlines.remove(&(old, group_id.to_owned()));
        }
        if let Some(at) = self.groups.get(group_id).and_then(Group::next_deadline_ms) {
            self.deadline_of.insert(group_id.to_owned(), at);
            self.deadlines.insert((at, group_id.to_owned()));
        }
    }
}
