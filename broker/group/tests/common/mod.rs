//! Test harness: drives a [`Coordinator`] the way the server will, with a virtual clock.
//! Responses are collected by request id; persist effects are acknowledged at once unless
//! `manual_persist` is set; `advance` fires every deadline in order. No sleeps anywhere.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use sluice_group::{
    CommitPartition, Coordinator, Effect, ErrorCode, GroupConfig, GroupState, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, LeavingMember,
    OffsetCommitRequest, OffsetRecord, PersistId, Protocol, Request, RequestId, Response,
    SplitMix64, SyncGroupRequest, SyncGroupResponse, TopicPartition, TxnCommitRequest,
};

pub const GROUP: &str = "g";
pub const SESSION_MS: i32 = 10_000;
pub const REBALANCE_MS: i32 = 30_000;

pub struct Harness {
    pub c: Coordinator,
    pub now_ms: u64,
    next_request: u64,
    pub responses: BTreeMap<RequestId, Response>,
    /// Every request answered so far (taken or not).
    pub answered: BTreeSet<RequestId>,
    /// Every record persisted so far, in log order (the internal log).
    pub log: Vec<OffsetRecord>,
    /// Persist batches not yet acknowledged (with `manual_persist`).
    pub unacked: Vec<(PersistId, Vec<OffsetRecord>)>,
    pub manual_persist: bool,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_config(GroupConfig::default())
    }

    pub fn with_config(config: GroupConfig) -> Self {
        let now_ms = 1_000_000;
        let c = Coordinator::new(config, Box::new(SplitMix64::new(42)), now_ms).unwrap();
        Self {
            c,
            now_ms,
            next_request: 0,
            responses: BTreeMap::new(),
            answered: BTreeSet::new(),
            log: Vec::new(),
            unacked: Vec::new(),
            manual_persist: false,
        }
    }

    /// A harness whose groups start rebalancing without the initial delay.
    pub fn no_delay() -> Self {
        Self::with_config(GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        })
    }

    pub fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Respond {
                    request_id,
                    response,
                } => {
                    assert!(
                        self.answered.insert(request_id),
                        "request {request_id:?} answered twice"
                    );
                    self.responses.insert(request_id, response);
                }
                Effect::PersistOffsets { id, records } => {
                    if self.manual_persist {
                        self.unacked.push((id, records));
                    } else {
                        self.log.extend(records);
                        let more = self.c.persisted(id, Ok(()));
                        self.apply(more);
                    }
                }
            }
        }
    }

    pub fn send(&mut self, request: Request) -> RequestId {
        self.next_request += 1;
        let rid = RequestId(self.next_request);
        let effects = self.c.handle(self.now_ms, rid, request);
        self.apply(effects);
        rid
    }

    /// Moves the clock forward by `ms`, firing every deadline on the way, in order.
    pub fn advance(&mut self, ms: u64) {
        let target = self.now_ms + ms;
        while let Some(at) = self.c.next_deadline_ms().filter(|&at| at <= target) {
            self.now_ms = self.now_ms.max(at);
            let effects = self.c.on_tick(self.now_ms);
            self.apply(effects);
        }
        self.now_ms = target;
    }

    /// Asserts every request sent so far was answered.
    pub fn check_all_answered(&self) {
        for n in 1..=self.next_request {
            assert!(
                self.answered.contains(&RequestId(n)),
                "request {n} never answered"
            );
        }
    }

    pub fn take(&mut self, rid: RequestId) -> Option<Response> {
        self.responses.remove(&rid)
    }

    pub fn pending(&self, rid: RequestId) -> bool {
        !self.responses.contains_key(&rid)
    }

    pub fn join_response(&mut self, rid: RequestId) -> JoinGroupResponse {
        match self.take(rid) {
            Some(Response::JoinGroup(r)) => r,
            other => panic!("expected a JoinGroup response for {rid:?}, got {other:?}"),
        }
    }

    pub fn sync_response(&mut self, rid: RequestId) -> SyncGroupResponse {
        match self.take(rid) {
            Some(Response::SyncGroup(r)) => r,
            other => panic!("expected a SyncGroup response for {rid:?}, got {other:?}"),
        }
    }

    pub fn join(&mut self, req: JoinGroupRequest) -> RequestId {
        self.send(Request::JoinGroup(req))
    }

    /// Joins and returns the (immediate) response.
    pub fn join_now(&mut self, req: JoinGroupRequest) -> JoinGroupResponse {
        let rid = self.join(req);
        self.join_response(rid)
    }

    pub fn sync(
        &mut self,
        generation_id: i32,
        member_id: &str,
        assignments: &[(&str, &[u8])],
    ) -> RequestId {
        self.send(Request::SyncGroup(SyncGroupRequest {
            group_id: GROUP.into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| ((*m).to_owned(), Bytes::copy_from_slice(a)))
                .collect(),
        }))
    }

    pub fn heartbeat(&mut self, generation_id: i32, member_id: &str) -> ErrorCode {
        self.heartbeat_static(generation_id, member_id, None)
    }

    pub fn heartbeat_static(
        &mut self,
        generation_id: i32,
        member_id: &str,
        instance: Option<&str>,
    ) -> ErrorCode {
        let rid = self.send(Request::Heartbeat(HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id: instance.map(str::to_owned),
        }));
        match self.take(rid) {
            Some(Response::Heartbeat(r)) => r.error,
            other => panic!("expected a Heartbeat response, got {other:?}"),
        }
    }

    pub fn leave(&mut self, members: &[(&str, Option<&str>)]) -> LeaveGroupResponse {
        let members = members
            .iter()
            .map(|(m, i)| LeavingMember {
                member_id: (*m).to_owned(),
                group_instance_id: i.map(str::to_owned),
            })
            .collect();
        let rid = self.send(Request::LeaveGroup(LeaveGroupRequest {
            group_id: GROUP.into(),
            members,
        }));
        match self.take(rid) {
            Some(Response::LeaveGroup(r)) => r,
            other => panic!("expected a LeaveGroup response, got {other:?}"),
        }
    }

    pub fn commit(
        &mut self,
        generation_id: i32,
        member_id: &str,
        offsets: &[(&str, i32, i64)],
    ) -> RequestId {
        let partitions = offsets
            .iter()
            .map(|(t, p, o)| CommitPartition {
                tp: tp(t, *p),
                offset: *o,
                leader_epoch: 1,
                metadata: Some("meta".into()),
            })
            .collect();
        self.send(Request::OffsetCommit(OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id: None,
            partitions,
        }))
    }

    /// A committed transaction's offsets for `group_id` (leader epoch 1, metadata `txn`).
    pub fn commit_txn(&mut self, group_id: &str, offsets: &[(&str, i32, i64)]) -> RequestId {
        let partitions = offsets
            .iter()
            .map(|(t, p, o)| CommitPartition {
                tp: tp(t, *p),
                offset: *o,
                leader_epoch: 1,
                metadata: Some("txn".into()),
            })
            .collect();
        self.send(Request::CommitTxnOffsets(TxnCommitRequest {
            group_id: group_id.into(),
            partitions,
        }))
    }

    /// Commit errors per partition, in request order (the commit must be answered).
    pub fn commit_errors(&mut self, rid: RequestId) -> Vec<ErrorCode> {
        match self.take(rid) {
            Some(Response::OffsetCommit(r)) => r.partitions.iter().map(|p| p.error).collect(),
            other => panic!("expected an OffsetCommit response, got {other:?}"),
        }
    }

    pub fn fetched(&self, topic: &str, partition: i32) -> i64 {
        let tps = [tp(topic, partition)];
        self.c.fetch_offsets(GROUP, Some(&tps)).unwrap()[0].offset
    }

    pub fn state(&self) -> GroupState {
        self.c.group(GROUP).map_or(GroupState::Dead, |g| g.state())
    }

    pub fn generation(&self) -> i32 {
        self.c.group(GROUP).unwrap().generation()
    }

    /// Runs a full rebalance for dynamic members `names` (first one leads) and returns
    /// their member ids and the generation; assignments are `assign-<index>`.
    pub fn stable_group(&mut self, names: &[&str]) -> (Vec<String>, i32) {
        let rids: Vec<RequestId> = names.iter().map(|n| self.join(member(n))).collect();
        // The initial delay extends once more when several members arrive together.
        for _ in 0..REBALANCE_MS / 1_000 {
            if rids.iter().all(|r| !self.pending(*r)) {
                break;
            }
            self.advance(1_000);
        }
        let responses: Vec<JoinGroupResponse> =
            rids.iter().map(|r| self.join_response(*r)).collect();
        let ids: Vec<String> = responses.iter().map(|r| r.member_id.clone()).collect();
        let generation = responses[0].generation_id;
        let leader = responses[0].leader.clone();
        let assignments: Vec<(String, Vec<u8>)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), format!("assign-{i}").into_bytes()))
            .collect();
        let borrowed: Vec<(&str, &[u8])> = assignments
            .iter()
            .map(|(m, a)| (m.as_str(), a.as_slice()))
            .collect();
        let mut syncs = Vec::new();
        for id in &ids {
            let a = if *id == leader {
                borrowed.as_slice()
            } else {
                &[]
            };
            syncs.push(self.sync(generation, id, a));
        }
        for s in syncs {
            assert_eq!(self.sync_response(s).error, ErrorCode::None);
        }
        assert_eq!(self.state(), GroupState::Stable);
        (ids, generation)
    }
}

pub fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

pub fn protocols(list: &[(&str, &[u8])]) -> Vec<Protocol> {
    list.iter()
        .map(|(n, m)| Protocol {
            name: (*n).into(),
            metadata: Bytes::copy_from_slice(m),
        })
        .collect()
}

/// A dynamic member's first JoinGroup (v3 style: no member id handshake).
pub fn member(client_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: GROUP.into(),
        member_id: String::new(),
        group_instance_id: None,
        client_id: client_id.into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".into(),
        protocols: protocols(&[("range", b"sub")]),
        require_known_member_id: false,
        supports_skip_assignment: false,
    }
}

/// A rejoin of a known member.
pub fn rejoin(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        member_id: member_id.into(),
        ..member("c")
    }
}

/// A static member's JoinGroup.
pub fn static_member(client_id: &str, instance: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_instance_id: Some(instance.into()),
        ..member(client_id)
    }
}
