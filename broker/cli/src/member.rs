//! `sluice consume --group`: a real member of a consumer group, as a Kafka consumer is.
//!
//! JoinGroup v5 with protocol type `consumer` and the standard `ConsumerProtocolSubscription`
//! metadata, offering the `range` and `roundrobin` assignors; the leader computes the
//! assignment (`assignor.rs`) and hands it out with SyncGroup. A background thread with its
//! own connection heartbeats every [`HEARTBEAT_INTERVAL`] while the member is stable; when
//! the coordinator answers REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID
//! it raises a flag that the fetch loop checks between fetches: commit, then rejoin.
//! Commits carry the generation and member id; `leave` sends LeaveGroup.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_kafka::ErrorCode;

use crate::assignor::{self, TopicPartitions};
use crate::client::{Client, error_name};

/// The coordinator drops a member it has not heard from for this long.
const SESSION_TIMEOUT_MS: i32 = 10_000;
/// How long the coordinator waits for every member to rejoin during a rebalance.
const REBALANCE_TIMEOUT_MS: i32 = 30_000;
/// Heartbeat pace: a third of the session timeout or less, as Kafka recommends.
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(1_000);
/// JoinGroup may be held until the slowest member rejoins: up to the largest rebalance
/// timeout in the group (Kafka's default `max.poll.interval.ms` is 300 s), plus slack.
const JOIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(330);
/// Join and sync attempts before giving up (each failure is a rebalance we lost a race to).
const JOIN_ATTEMPTS_MAX: u32 = 50;
/// Wait before retrying when the coordinator is not ready.
const COORDINATOR_RETRY_BACKOFF: Duration = Duration::from_millis(200);

const _: () = assert!(HEARTBEAT_INTERVAL.as_millis() * 3 <= SESSION_TIMEOUT_MS as u128);

/// Kafka error codes the member reacts to (`sluice_kafka`'s one table of Kafka's numbers).
const NONE: i16 = ErrorCode::None.code();
const COORDINATOR_LOAD_IN_PROGRESS: i16 = ErrorCode::CoordinatorLoadInProgress.code();
const COORDINATOR_NOT_AVAILABLE: i16 = ErrorCode::CoordinatorNotAvailable.code();
const NOT_COORDINATOR: i16 = ErrorCode::NotCoordinator.code();
const ILLEGAL_GENERATION: i16 = ErrorCode::IllegalGeneration.code();
const UNKNOWN_MEMBER_ID: i16 = ErrorCode::UnknownMemberId.code();
const REBALANCE_IN_PROGRESS: i16 = ErrorCode::RebalanceInProgress.code();
const MEMBER_ID_REQUIRED: i16 = ErrorCode::MemberIdRequired.code();

/// True for the answers that mean "rejoin the group".
fn needs_rejoin(code: i16) -> bool {
    matches!(
        code,
        ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID | REBALANCE_IN_PROGRESS
    )
}

/// What the fetch loop and the heartbeat thread share.
#[derive(Debug, Default)]
struct Shared {
    /// (member id, generation) while the member is stable; `None` while (re)joining.
    current: Mutex<Option<(String, i32)>>,
    /// Set when the coordinator asked for a rejoin.
    rejoin: AtomicBool,
}

impl Shared {
    fn current(&self) -> Option<(String, i32)> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_current(&self, value: Option<(String, i32)>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = value;
    }
}

/// One member of a consumer group, subscribed to one topic.
#[derive(Debug)]
pub struct Member {
    group: String,
    topic: String,
    member_id: String,
    generation_id: i32,
    /// Partitions of `topic` assigned in the current generation, sorted.
    assigned: Vec<i32>,
    shared: Arc<Shared>,
    /// Dropping the sender stops the heartbeat thread.
    heartbeat_stop: Option<mpsc::Sender<()>>,
    heartbeat: Option<JoinHandle<()>>,
}

impl Member {
    /// Joins `group` subscribed to `topic` and starts heartbeating.
    pub fn join(client: &mut Client, group: &str, topic: &str) -> anyhow::Result<Self> {
        let heartbeat_client = client.another()?.reconnecting();
        let shared = Arc::new(Shared::default());
        let (stop_tx, stop_rx) = mpsc::channel();
        let thread_shared = Arc::clone(&shared);
        let thread_group = group.to_owned();
        let heartbeat = std::thread::Builder::new()
            .name("heartbeat".into())
            .spawn(move || {
                heartbeat_loop(heartbeat_client, &thread_group, &thread_shared, &stop_rx)
            })
            .context("starting the heartbeat thread")?;
        let mut member = Self {
            group: group.to_owned(),
            topic: topic.to_owned(),
            member_id: String::new(),
            generation_id: -1,
            assigned: Vec::new(),
            shared,
            heartbeat_stop: Some(stop_tx),
            heartbeat: Some(heartbeat),
        };
        member.rejoin(client)?;
        Ok(member)
    }

    /// The partitions of the topic this member owns now.
    pub fn assigned(&self) -> &[i32] {
        &self.assigned
    }

    /// True once the coordinator asked this member to rejoin.
    pub fn rejoin_needed(&self) -> bool {
        self.shared.rejoin.load(Ordering::Relaxed)
    }

    /// JoinGroup then SyncGroup until a generation is stable with this member in it.
    pub fn rejoin(&mut self, client: &mut Client) -> anyhow::Result<()> {
        self.shared.set_current(None);
        self.shared.rejoin.store(false, Ordering::Relaxed);
        for _ in 0..JOIN_ATTEMPTS_MAX {
            let joined = self.send_join(client)?;
            match joined.error_code {
                NONE => {}
                MEMBER_ID_REQUIRED => {
                    self.member_id = joined.member_id.to_string();
                    continue;
                }
                UNKNOWN_MEMBER_ID => {
                    self.member_id.clear();
                    continue;
                }
                REBALANCE_IN_PROGRESS => continue,
                COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => {
                    std::thread::sleep(COORDINATOR_RETRY_BACKOFF);
                    continue;
                }
                code => bail!("JoinGroup {}: {}", self.group, error_name(code)),
            }
            self.member_id = joined.member_id.to_string();
            self.generation_id = joined.generation_id;
            let assignments = if joined.leader == joined.member_id {
                leader_assignments(client, &joined)?
            } else {
                Vec::new()
            };
            match self.send_sync(client, assignments)? {
                Ok(assignment) => {
                    self.assigned = assignment.get(&self.topic).cloned().unwrap_or_default();
                    self.assigned.sort_unstable();
                    self.shared
                        .set_current(Some((self.member_id.clone(), self.generation_id)));
                    return Ok(());
                }
                Err(UNKNOWN_MEMBER_ID) => self.member_id.clear(),
                Err(code) if needs_rejoin(code) => {}
                Err(code) => bail!("SyncGroup {}: {}", self.group, error_name(code)),
            }
        }
        bail!(
            "could not join group {} in {JOIN_ATTEMPTS_MAX} attempts (members keep joining and leaving)",
            self.group
        )
    }

    fn send_join(&self, client: &mut Client) -> anyhow::Result<JoinGroupResponse> {
        let metadata = subscription_bytes(&self.topic)?;
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(self.group.clone()));
        request.session_timeout_ms = SESSION_TIMEOUT_MS;
        request.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
        request.member_id = StrBytes::from_string(self.member_id.clone());
        request.protocol_type = StrBytes::from_static_str("consumer");
        request.protocols = [assignor::RANGE, assignor::ROUND_ROBIN]
            .into_iter()
            .map(|name| {
                let mut protocol = JoinGroupRequestProtocol::default();
                protocol.name = StrBytes::from_static_str(name);
                protocol.metadata = metadata.clone();
                protocol
            })
            .collect();
        client.send_with_timeout(&request, 5, JOIN_REQUEST_TIMEOUT)
    }

    /// SyncGroup v3: this member's assignment (topic -> partitions), or the error code.
    fn send_sync(
        &self,
        client: &mut Client,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> anyhow::Result<Result<TopicPartitions, i16>> {
        let mut request = SyncGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(self.group.clone()));
        request.generation_id = self.generation_id;
        request.member_id = StrBytes::from_string(self.member_id.clone());
        request.assignments = assignments;
        let synced = client.send_with_timeout(&request, 3, JOIN_REQUEST_TIMEOUT)?;
        if synced.error_code != NONE {
            return Ok(Err(synced.error_code));
        }
        let mut assignment = TopicPartitions::new();
        for (topic, partition) in crate::group::decode_assignment(&synced.assignment) {
            assignment.entry(topic).or_default().push(partition);
        }
        Ok(Ok(assignment))
    }

    /// Commits `offsets` (partition -> next offset to read) in this generation; false when
    /// the coordinator refused it because of a rebalance (which flags a rejoin).
    pub fn commit(
        &self,
        client: &mut Client,
        offsets: &BTreeMap<i32, i64>,
    ) -> anyhow::Result<bool> {
        if offsets.is_empty() {
            return Ok(true);
        }
        let keyed = offsets
            .iter()
            .map(|(&p, &o)| ((self.topic.clone(), p), o))
            .collect();
        let refused = crate::group::commit_as(
            client,
            &self.group,
            self.generation_id,
            &self.member_id,
            &keyed,
        )?;
        match refused {
            None => Ok(true),
            Some((_, code)) if needs_rejoin(code) => {
                self.shared.rejoin.store(true, Ordering::Relaxed);
                Ok(false)
            }
            Some(((topic, partition), code)) => bail!(
                "committing {topic}-{partition} for group {}: {}",
                self.group,
                error_name(code)
            ),
        }
    }

    /// Stops heartbeating and sends LeaveGroup, so the others rebalance at once.
    pub fn leave(mut self, client: &mut Client) -> anyhow::Result<()> {
        self.stop_heartbeat();
        if self.member_id.is_empty() {
            return Ok(());
        }
        let mut identity = MemberIdentity::default();
        identity.member_id = StrBytes::from_string(self.member_id.clone());
        let mut request = LeaveGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(self.group.clone()));
        request.members = vec![identity];
        let left = client.send(&request, 3)?;
        // UNKNOWN_MEMBER_ID: the coordinator already dropped us; nothing left to leave.
        let code = left
            .members
            .first()
            .map_or(left.error_code, |m| m.error_code)
            .max(left.error_code);
        if code != NONE && code != UNKNOWN_MEMBER_ID {
            bail!("LeaveGroup {}: {}", self.group, error_name(code));
        }
        Ok(())
    }

    fn stop_heartbeat(&mut self) {
        drop(self.heartbeat_stop.take());
        if let Some(handle) = self.heartbeat.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop_heartbeat();
    }
}

/// Heartbeats while a generation is current, until the stop channel closes.
fn heartbeat_loop(mut client: Client, group: &str, shared: &Shared, stop: &mpsc::Receiver<()>) {
    loop {
        match stop.recv_timeout(HEARTBEAT_INTERVAL) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some((member_id, generation_id)) = shared.current() else {
            continue;
        };
        let mut request = HeartbeatRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        request.generation_id = generation_id;
        request.member_id = StrBytes::from_string(member_id.clone());
        match client.send(&request, 3) {
            Ok(response) if needs_rejoin(response.error_code) => {
                // Only if the generation is still the one we beat for.
                if shared.current() == Some((member_id, generation_id)) {
                    shared.rejoin.store(true, Ordering::Relaxed);
                }
            }
            Ok(_) => {}
            Err(e) => eprintln!("warning: heartbeat for group {group} failed: {e:#}"),
        }
    }
}

/// `ConsumerProtocolSubscription` v0 for one topic, with its version prefix.
fn subscription_bytes(topic: &str) -> anyhow::Result<Bytes> {
    let mut subscription = ConsumerProtocolSubscription::default();
    subscription.topics = vec![StrBytes::from_string(topic.to_owned())];
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    subscription.encode(&mut buf, 0)?;
    Ok(buf.freeze())
}

/// The topics in a member's subscription metadata (any version: later versions only append
/// fields, so decoding at our highest known version reads the prefix we need).
fn subscribed_topics(metadata: &Bytes) -> Vec<String> {
    let mut buf = metadata.clone();
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = bytes::Buf::get_i16(&mut buf);
    ConsumerProtocolSubscription::decode(&mut buf, version.clamp(0, 3))
        .map(|s| s.topics.iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

/// `ConsumerProtocolAssignment` v0 with its version prefix.
fn assignment_bytes(assignment: &TopicPartitions) -> anyhow::Result<Bytes> {
    let mut message = ConsumerProtocolAssignment::default();
    message.assigned_partitions = assignment
        .iter()
        .map(|(topic, partitions)| {
            let mut tp = TopicPartition::default();
            tp.topic = TopicName(StrBytes::from_string(topic.clone()));
            tp.partitions = partitions.clone();
            tp
        })
        .collect();
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    message.encode(&mut buf, 0)?;
    Ok(buf.freeze())
}

/// As the leader: every member's assignment under the chosen protocol.
fn leader_assignments(
    client: &mut Client,
    joined: &JoinGroupResponse,
) -> anyhow::Result<Vec<SyncGroupRequestAssignment>> {
    let subscriptions: BTreeMap<String, Vec<String>> = joined
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), subscribed_topics(&m.metadata)))
        .collect();
    let mut topics: Vec<String> = subscriptions.values().flatten().cloned().collect();
    topics.sort_unstable();
    topics.dedup();
    let metadata = crate::common::metadata(client, Some(&topics), false)?;
    let partitions: TopicPartitions = metadata
        .topics
        .iter()
        .filter(|t| t.error_code == NONE)
        .filter_map(|t| {
            let mut ps: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            ps.sort_unstable();
            Some((t.name.as_ref()?.0.to_string(), ps))
        })
        .collect();
    let protocol = joined.protocol_name.as_deref().unwrap_or_default();
    let Some(assignment) = assignor::assign(protocol, &subscriptions, &partitions) else {
        bail!("the group chose assignor {protocol:?}, which sluice does not implement");
    };
    assignment
        .iter()
        .map(|(member, topics)| {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = StrBytes::from_string(member.clone());
            a.assignment = assignment_bytes(topics)?;
            Ok(a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_round_trips_and_reads_later_versions() {
        let bytes = subscription_bytes("orders").unwrap();
        assert_eq!(subscribed_topics(&bytes), vec!["orders".to_owned()]);
        let mut v3 = ConsumerProtocolSubscription::default();
        v3.topics = vec![
            StrBytes::from_static_str("a"),
            StrBytes::from_static_str("b"),
        ];
        v3.generation_id = 7;
        let mut buf = BytesMut::new();
        buf.put_i16(3);
        v3.encode(&mut buf, 3).unwrap();
        assert_eq!(subscribed_topics(&buf.freeze()), vec!["a", "b"]);
        assert!(subscribed_topics(&Bytes::from_static(b"\x00")).is_empty());
    }

    #[test]
    fn assignment_bytes_decode_with_the_describe_decoder() {
        let mut a = TopicPartitions::new();
        a.insert("t".into(), vec![1, 3]);
        let bytes = assignment_bytes(&a).unwrap();
        assert_eq!(
            crate::group::decode_assignment(&bytes),
            vec![("t".to_owned(), 1), ("t".to_owned(), 3)]
        );
    }
}
