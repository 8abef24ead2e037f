//! The coordinator task: feeds the pure coordinator one call at a time, carries out its
//! effects (answers to waiting handlers, batches to the writer) and runs its one timer. The
//! writer cleans the offsets log in place (`CompactedLog::clean_if_due`).

use std::collections::HashMap;
use std::time::Duration;

use sluice_group::{
    Coordinator, Effect, ErrorCode, GroupConfig, OffsetDeleteResult, OffsetRecord, PersistId,
    RequestId, Response,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::writer::{self, WriterDone, WriterJob};
use super::{Command, OffsetsLog};
use crate::clock::SharedClock;
use crate::error::ServerError;
use crate::limits;
use crate::random::OsRng;

/// Every topic's partition count (`Broker::topic_shapes`).
type TopicShapes = std::collections::BTreeMap<String, i32>;

/// What regex subscriptions may match: the ACL check, and the security state's change
/// counter (`SecurityStore::changes`), after which every regex resolves again.
pub struct Access {
    pub describe: crate::topic_regex::DescribeCheck,
    pub changes: watch::Receiver<u64>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access").finish_non_exhaustive()
    }
}

/// Per-group DeleteGroups results, and where to send them.
type DeleteResults = Vec<(String, ErrorCode)>;
type DeleteReply = oneshot::Sender<DeleteResults>;

/// The coordinator task's state.
struct Task {
    coordinator: Coordinator,
    /// Handlers waiting for an answer, by the id the coordinator echoes.
    waiting: HashMap<RequestId, oneshot::Sender<Response>>,
    /// DeleteGroups answers waiting for their tombstones to be appended.
    deleting: HashMap<PersistId, (DeleteReply, DeleteResults)>,
    /// OffsetDelete answers waiting for their tombstones to be appended.
    deleting_offsets: HashMap<PersistId, (oneshot::Sender<OffsetDeleteResult>, OffsetDeleteResult)>,
    next_request_id: u64,
    /// Batches sent to the writer and not yet acknowledged.
    in_flight: usize,
    /// Bounded; a full queue fails the batch (retriable) rather than blocking the task.
    writer: mpsc::Sender<WriterJob>,
    /// The broker's clock (`crate::clock`).
    clock: SharedClock,
}

/// Coordinator time: the broker's clock, as the unsigned ms the pure coordinator takes.
fn coordinator_ms(clock: &SharedClock) -> u64 {
    u64::try_from(clock.now_ms()).unwrap_or(0)
}

/// Starts the writer and the coordinator task.
pub fn spawn(
    config: GroupConfig,
    log: OffsetsLog,
    records: Vec<OffsetRecord>,
    commands: mpsc::Receiver<Command>,
    (mut topics, access): (watch::Receiver<TopicShapes>, Option<Access>),
    clock: SharedClock,
) -> Result<JoinHandle<()>, ServerError> {
    let now = coordinator_ms(&clock);
    let mut coordinator = Coordinator::new(config, Box::new(OsRng), now)
        .map_err(|e| ServerError::Config(crate::error::ConfigError::Inconsistent(e.to_string())))?;
    coordinator.load(now, records);
    let (matcher, acl_changes) = match access {
        Some(a) => (
            crate::topic_regex::RegexMatcher::authorized(a.describe),
            Some(a.changes),
        ),
        None => (crate::topic_regex::RegexMatcher::default(), None),
    };
    coordinator.set_topic_matcher(Box::new(matcher));
    coordinator.update_topics(now, topics.borrow_and_update().clone());
    let (writer_tx, writer_rx) = mpsc::channel(limits::OFFSETS_WRITES_QUEUED_MAX);
    let (done_tx, done_rx) = mpsc::channel(limits::OFFSETS_WRITES_QUEUED_MAX);
    let writer_task = tokio::spawn(writer::run(log, writer_rx, done_tx));
    let task = Task {
        coordinator,
        waiting: HashMap::new(),
        deleting: HashMap::new(),
        deleting_offsets: HashMap::new(),
        next_request_id: 0,
        in_flight: 0,
        writer: writer_tx,
        clock,
    };
    Ok(tokio::spawn(async move {
        task.run(commands, done_rx, (topics, acl_changes)).await;
        if let Err(e) = writer_task.await {
            tracing::error!(error = %e, "offsets-log writer failed");
        }
    }))
}

/// The id of the batch a call's effects hand to the writer, if any.
fn persist_id(effects: &[Effect]) -> Option<PersistId> {
    effects.iter().find_map(|e| match e {
        Effect::PersistOffsets { id, .. } => Some(*id),
        Effect::Respond { .. } => None,
    })
}

impl Task {
    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut done: mpsc::Receiver<WriterDone>,
        (mut topics, acl_changes): (watch::Receiver<TopicShapes>, Option<watch::Receiver<u64>>),
    ) {
        let mut topics_open = true;
        // The topics of the last shapes: one that is gone was deleted, and its committed
        // offsets go with it, however it was deleted (a client, the admin API, or, in a
        // cluster, another broker: each broker's coordinator cleans its own groups).
        let mut known: std::collections::BTreeSet<String> =
            topics.borrow().keys().cloned().collect();
        let acls_watched = acl_changes.is_some();
        let mut acls = acl_changes.unwrap_or_else(|| watch::channel(0).1);
        loop {
            let sleep = self.sleep_duration();
            tokio::select! {
                command = commands.recv() => match command {
                    None | Some(Command::Shutdown) => break,
                    Some(command) => self.on_command(command),
                },
                Some(result) = done.recv() => self.on_written(result),
                changed = topics.changed(), if topics_open => match changed {
                    // Consumer groups subscribed to a changed topic get a new target.
                    Ok(()) => {
                        let shapes = topics.borrow_and_update().clone();
                        let now: std::collections::BTreeSet<String> = shapes.keys().cloned().collect();
                        for gone in known.difference(&now) {
                            let effects = self.coordinator.delete_topic_offsets(gone);
                            self.carry_out(effects);
                        }
                        known = now;
                        self.coordinator.update_topics(coordinator_ms(&self.clock), shapes);
                    }
                    Err(_) => topics_open = false,
                },
                // What members may describe changed: regex subscriptions resolve again.
                changed = acls.changed(), if acls_watched => {
                    if changed.is_ok() {
                        acls.borrow_and_update();
                        self.coordinator.resolve_subscriptions_again(coordinator_ms(&self.clock));
                    }
                },
                () = tokio::time::sleep(sleep) => {
                    let effects = self.coordinator.on_tick(coordinator_ms(&self.clock));
                    self.carry_out(effects);
                }
            }
        }
        // Let the appends already handed out finish, so their commits are not lost.
        drop(self.writer);
        while let Some(result) = done.recv().await {
            self.coordinator.persisted(result.id, result.result);
        }
    }

    fn sleep_duration(&self) -> Duration {
        let now = coordinator_ms(&self.clock);
        let wait_ms = self
            .coordinator
            .next_deadline_ms()
            .map_or(limits::GROUP_TIMER_SLEEP_MAX_MS, |at| {
                at.saturating_sub(now)
            })
            .min(limits::GROUP_TIMER_SLEEP_MAX_MS);
        Duration::from_millis(wait_ms)
    }

    fn on_command(&mut self, command: Command) {
        let now = coordinator_ms(&self.clock);
        match command {
            Command::Handle { request, reply } => {
                self.next_request_id += 1;
                let id = RequestId(self.next_request_id);
                self.waiting.insert(id, reply);
                let effects = self.coordinator.handle(now, id, request);
                self.carry_out(effects);
            }
            Command::FetchOffsets {
                group_id,
                member,
                partitions,
                reply,
            } => {
                let checked = member.map_or(Ok(()), |(member_id, epoch)| {
                    self.coordinator
                        .check_member_epoch(&group_id, &member_id, epoch)
                });
                let fetched = checked.and_then(|()| {
                    self.coordinator
                        .fetch_offsets(&group_id, partitions.as_deref())
                });
                reply.send(fetched).ok();
            }
            Command::DescribeConsumerGroups { group_ids, reply } => {
                let described = group_ids
                    .iter()
                    .map(|id| {
                        self.coordinator
                            .consumer_group(id)
                            .cloned()
                            .ok_or(ErrorCode::GroupIdNotFound)
                    })
                    .collect();
                reply.send(described).ok();
            }
            Command::ListGroups { reply } => {
                reply.send(self.coordinator.list_groups()).ok();
            }
            Command::DescribeGroups { group_ids, reply } => {
                let described = group_ids
                    .iter()
                    .map(|id| self.coordinator.describe_group(id))
                    .collect();
                reply.send(described).ok();
            }
            Command::DeleteGroups { group_ids, reply } => self.delete_groups(&group_ids, reply),
            Command::DeleteOffsets {
                group_id,
                partitions,
                reply,
            } => {
                let (result, effects) = self.coordinator.delete_offsets(&group_id, &partitions);
                match persist_id(&effects) {
                    Some(id) => {
                        self.deleting_offsets.insert(id, (reply, result));
                    }
                    None => {
                        reply.send(result).ok();
                    }
                }
                self.carry_out(effects);
            }
            Command::CheckTxnCommit { check, reply } => {
                let (member, partitions) = &*check;
                let checked = self.coordinator.check_txn_offset_commit(member, partitions);
                reply.send(checked).ok();
            }
            Command::DeleteTopic { topic } => {
                let effects = self.coordinator.delete_topic_offsets(&topic);
                self.carry_out(effects);
            }
            Command::Shutdown => {}
        }
    }

    fn delete_groups(
        &mut self,
        group_ids: &[String],
        reply: oneshot::Sender<Vec<(String, ErrorCode)>>,
    ) {
        let (results, effects) = self.coordinator.delete_groups(group_ids);
        match persist_id(&effects) {
            Some(id) => {
                self.deleting.insert(id, (reply, results));
            }
            None => {
                reply.send(results).ok();
            }
        }
        self.carry_out(effects);
    }

    /// Carries out effects in order; a batch the writer cannot take fails at once.
    fn carry_out(&mut self, effects: Vec<Effect>) {
        let mut queue = std::collections::VecDeque::from(effects);
        while let Some(effect) = queue.pop_front() {
            match effect {
                Effect::Respond {
                    request_id,
                    response,
                } => {
                    // The handler may be gone (connection closed): drop the answer.
                    if let Some(reply) = self.waiting.remove(&request_id) {
                        reply.send(response).ok();
                    }
                }
                Effect::PersistOffsets { id, records } => {
                    match self.writer.try_send(WriterJob { id, records }) {
                        Ok(()) => self.in_flight += 1,
                        Err(_) => {
                            tracing::warn!(
                                queued_max = limits::OFFSETS_WRITES_QUEUED_MAX,
                                "offsets-log writer queue full; failing a commit"
                            );
                            self.finish_delete(id, false);
                            queue.extend(
                                self.coordinator
                                    .persisted(id, Err(ErrorCode::CoordinatorNotAvailable)),
                            );
                        }
                    }
                }
            }
        }
    }

    fn on_written(&mut self, WriterDone { id, result }: WriterDone) {
        self.in_flight -= 1;
        self.finish_delete(id, result.is_ok());
        let effects = self.coordinator.persisted(id, result);
        self.carry_out(effects);
    }

    /// Answers a DeleteGroups or OffsetDelete whose tombstones were (or failed to be)
    /// appended; a failure is COORDINATOR_NOT_AVAILABLE for what would have been deleted.
    fn finish_delete(&mut self, id: PersistId, appended: bool) {
        if let Some((reply, mut result)) = self.deleting_offsets.remove(&id) {
            if let (false, Ok(partitions)) = (appended, &mut result) {
                for (_, error) in partitions.iter_mut().filter(|(_, e)| e.is_ok()) {
                    *error = ErrorCode::CoordinatorNotAvailable;
                }
            }
            reply.send(result).ok();
        }
        if let Some((reply, mut results)) = self.deleting.remove(&id) {
            if !appended {
                for (_, error) in &mut results {
                    if error.is_ok() {
                        *error = ErrorCode::CoordinatorNotAvailable;
                    }
                }
            }
            reply.send(results).ok();
        }
    }
}
