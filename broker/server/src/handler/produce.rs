//! Produce v3-v8: append each partition's record batches as sent (compressed batches stay
//! compressed), after `records::validate` has checked what the storage engine cannot
//! (client control batches, the records inside compressed batches); the storage engine
//! checks headers, CRCs and uncompressed records at append. A refused batch fails its
//! partition (CORRUPT_MESSAGE or INVALID_RECORD, with `record_errors` from v8), never the
//! request.
//! acks=0 gets no response; acks=-1 waits for the partitions' group commit (one fsync per
//! partition answers every append made before it began, see `group_commit.rs`) when
//! `sluice.acks.all.fsync` is on. Produce v0-v2 are advertised (for old librdkafka's
//! compression, KAFKA-18659) and answered with UNSUPPORTED_VERSION.
//! A topic's validator plugin (`crate::validator`) checks every batch after those checks
//! and before the append (a refused record fails its partition with INVALID_RECORD and
//! `record_errors`, nothing of it appended); then a partitioner plugin re-routes it
//! (`crate::reroute`).
//! Authorization (`crate::authz`): WRITE on the transactional id when one is set
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), WRITE on each topic
//! (TOPIC_AUTHORIZATION_FAILED for that topic's partitions, the others still appended).

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use sluice_security::acl::{AclOperation, ResourceType};

use std::collections::HashSet;
use std::sync::Arc;

use crate::authz;
use crate::broker::append::{Appended, append_one};
use crate::broker::group_commit;
use crate::broker::{Broker, Partition, Topic};
use crate::error::KafkaError;
use crate::wire::{Chunk, ConnectionContext, FrameError, Response};

use super::kip110;

/// A produce whose batches are appended, before its acks=all partitions are durable. The
/// connection appends requests in order and lets the durable waits overlap, so one group
/// fsync can answer several pipelined requests of one producer.
pub struct Staged {
    acks: i16,
    /// A client quota's throttle, answered in `throttle_time_ms`.
    throttle_ms: u32,
    responses: Vec<TopicProduceResponse>,
    waits: Vec<DurableWait>,
}

/// Appends the request's batches (in order with the connection's other requests).
pub async fn append(
    ctx: &ConnectionContext,
    request: ProduceRequest,
    version: i16,
    throttle_ms: u32,
) -> Staged {
    let acks = request.acks;
    let broker = ctx.broker.clone();
    // Kafka's checks: WRITE on the transactional id (if any), then WRITE on each topic.
    let transactional = request.transactional_id.as_ref().map(|t| t.0.to_string());
    if let Some(id) = transactional
        && !authz::allowed(ctx, AclOperation::Write, ResourceType::TransactionalId, &id)
    {
        let errors = error_for_all(
            &request,
            ResponseError::TransactionalIdAuthorizationFailed,
            "Transactional Id authorization failed.",
        );
        return Staged {
            acks,
            throttle_ms,
            responses: errors,
            waits: Vec::new(),
        };
    }
    let denied: HashSet<String> = request
        .topic_data
        .iter()
        .map(|t| t.name.0.as_str())
        .filter(|name| !authz::topic(ctx, AclOperation::Write, name))
        .map(str::to_owned)
        .collect();
    let (responses, waits) = if (-1..=1).contains(&acks) {
        let durable = acks == -1 && broker.config.acks_all_fsync;
        tokio::task::spawn_blocking(move || append_all(&broker, request, version, durable, &denied))
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "produce task failed");
                (Vec::new(), Vec::new())
            })
    } else {
        let errors = error_for_all(
            &request,
            ResponseError::InvalidRequiredAcks,
            "acks must be 0, 1 or -1",
        );
        (errors, Vec::new())
    };
    Staged {
        acks,
        throttle_ms,
        responses,
        waits,
    }
}

impl Staged {
    /// Whether the answer waits for a group commit.
    pub fn waits_for_sync(&self) -> bool {
        !self.waits.is_empty()
    }

    /// Waits for the acks=all partitions to be durable and answers; `None` for acks=0.
    pub async fn finish(mut self) -> Result<Option<ProduceResponse>, FrameError> {
        wait_durable(&mut self.responses, self.waits).await;
        let throttle = i32::try_from(self.throttle_ms).unwrap_or(i32::MAX);
        answer(self.acks, self.responses).map(|r| {
            r.map(|mut r| {
                r.throttle_time_ms = throttle;
                r
            })
        })
    }
}

/// The response, or `None` for acks=0. A failed acks=0 produce closes the connection, as
/// Kafka does: there is no response to carry the error, and the client notices a close.
fn answer(
    acks: i16,
    responses: Vec<TopicProduceResponse>,
) -> Result<Option<ProduceResponse>, FrameError> {
    let mut response = ProduceResponse::default();
    response.responses = responses;
    if acks != 0 {
        return Ok(Some(response));
    }
    let failed = response
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .find(|p| p.error_code != 0);
    match failed {
        None => Ok(None),
        Some(p) => Err(FrameError::AcksZeroFailed(format!(
            "partition {} error {}: {}",
            p.index,
            p.error_code,
            p.error_message.as_deref().unwrap_or("")
        ))),
    }
}

/// An acks=all partition append waiting for the group commit: where its response is, and
/// the offset the partition's durable offset must reach.
struct DurableWait {
    topic: usize,
    slot: usize,
    partition: Arc<Partition>,
    end_offset: i64,
}

/// Appends every partition's batches (no fsync); with `durable`, also returns what the
/// group commit must cover before the response goes out.
fn append_all(
    broker: &Broker,
    mut request: ProduceRequest,
    version: i16,
    durable: bool,
    denied: &HashSet<String>,
) -> (Vec<TopicProduceResponse>, Vec<DurableWait>) {
    let mut waits = Vec::new();
    let topic_data = std::mem::take(&mut request.topic_data);
    drop(request); // its transactional id shares the frame's buffer
    let responses = topic_data
        .into_iter()
        .enumerate()
        .map(|(topic_slot, topic)| {
            let name = topic.name.0.to_string();
            drop(topic.name); // shares the frame's buffer with the records
            let known = broker.topic(&name);
            let compacted = known.as_deref().is_some_and(|t| {
                crate::topic_config::cleanup_policy(&broker.config, &t.overrides).compacts()
            });
            let mut out = TopicProduceResponse::default();
            out.partition_responses = topic
                .partition_data
                .into_iter()
                .enumerate()
                .map(|(slot, p)| {
                    if denied.contains(&name) {
                        return partition_response(
                            p.index,
                            Err(KafkaError::new(
                                ResponseError::TopicAuthorizationFailed,
                                "Topic authorization failed.",
                            )),
                        );
                    }
                    let index = p.index;
                    let result =
                        append_partition(broker, &name, known.as_deref(), compacted, version, p);
                    if let (true, Ok((_, appended))) = (durable, &result) {
                        for (partition, end_offset) in appended {
                            waits.push(DurableWait {
                                topic: topic_slot,
                                slot,
                                partition: Arc::clone(partition),
                                end_offset: *end_offset,
                            });
                        }
                    }
                    let result = result.map(|(a, _)| a);
                    partition_response(index, result)
                })
                .collect();
            out.name = TopicName(StrBytes::from_string(name));
            out
        })
        .collect();
    (responses, waits)
}

/// One partition entry of a Produce request: the checks Kafka makes (KIP-110, the records
/// inside the batches), the topic's validator plugin, then the append, through the topic's
/// partitioner plugin when it has one. Returns the partition's answer and every append made.
fn append_partition(
    broker: &Broker,
    name: &str,
    topic: Option<&Topic>,
    compacted: bool,
    version: i16,
    p: PartitionProduceData,
) -> Result<crate::reroute::Rerouted, KafkaError> {
    if let Some(r) = &p.records {
        kip110::check_produce(r, version)?;
        crate::records::validate::produced(r, compacted)?;
        if let Some((t, v)) = topic.and_then(|t| Some((t, t.plugins.validator.as_deref()?))) {
            crate::validator::check(broker, t, v, p.index, r)?;
        }
    }
    match topic.and_then(|t| Some((t, t.plugins.partitioner.as_deref()?))) {
        Some((t, tp)) => crate::reroute::append(broker, t, tp, p.index, p.records),
        None => append_one(broker, name, p.index, p.records).map(|a| {
            let appended = vec![(Arc::clone(&a.partition), a.end_offset)];
            (a, appended)
        }),
    }
}

/// Waits for the group commit of every acks=all append (all partitions' syncs are requested
/// first, so they run side by side); a failed one turns its response into the error.
async fn wait_durable(responses: &mut [TopicProduceResponse], waits: Vec<DurableWait>) {
    for wait in &waits {
        group_commit::request_sync(&wait.partition);
    }
    for wait in waits {
        if let Err(e) = group_commit::wait_durable(&wait.partition, wait.end_offset).await {
            let response = &mut responses[wait.topic].partition_responses[wait.slot];
            *response = partition_response(response.index, Err(e));
        }
    }
}

fn partition_response(
    index: i32,
    result: Result<Appended, KafkaError>,
) -> PartitionProduceResponse {
    let mut out = PartitionProduceResponse::default();
    out.index = index;
    match result {
        Ok(a) => {
            out.base_offset = a.base_offset;
            out.log_append_time_ms = a.log_append_time_ms;
            out.log_start_offset = a.log_start_offset;
        }
        Err(e) => {
            out.error_code = e.code.code();
            out.base_offset = -1;
            out.log_append_time_ms = -1;
            out.log_start_offset = -1;
            out.error_message = Some(StrBytes::from_string(e.message));
            out.record_errors = e
                .record_errors
                .into_iter()
                .map(|(index, reason)| {
                    let mut record = BatchIndexAndErrorMessage::default();
                    record.batch_index = index;
                    record.batch_index_error_message = Some(StrBytes::from_string(reason));
                    record
                })
                .collect();
        }
    }
    out
}

fn error_for_all(
    request: &ProduceRequest,
    code: ResponseError,
    message: &str,
) -> Vec<TopicProduceResponse> {
    request
        .topic_data
        .iter()
        .map(|topic| {
            let mut out = TopicProduceResponse::default();
            out.name = topic.name.clone();
            out.partition_responses = topic
                .partition_data
                .iter()
                .map(|p| partition_response(p.index, Err(KafkaError::new(code, message))))
                .collect();
            out
        })
        .collect()
}

/// Answers Produce v0-v2 with UNSUPPORTED_VERSION for every partition. Their request body is
/// v3's without the leading transactional_id, so it decodes as v3 behind a null one.
pub fn unsupported_old_version(
    frame: Bytes,
    version: i16,
    correlation_id: i32,
) -> Result<Response, FrameError> {
    let mut body = frame;
    kafka_protocol::messages::RequestHeader::decode(
        &mut body,
        ApiKey::Produce.request_header_version(version),
    )
    .map_err(|e| FrameError::Malformed(format!("Produce v{version}: {e}")))?;
    super::shape::check(ApiKey::Produce, version, &body)
        .map_err(|e| FrameError::Malformed(format!("Produce v{version} request: {e}")))?;
    let mut v3 = BytesMut::with_capacity(body.len() + 2);
    v3.extend_from_slice(&(-1i16).to_be_bytes());
    v3.extend_from_slice(&body);
    let request = ProduceRequest::decode(&mut v3.freeze(), 3)
        .map_err(|e| FrameError::Malformed(format!("Produce v{version}: {e}")))?;
    if request.acks == 0 {
        return Ok(Response::default());
    }
    let mut response = ProduceResponse::default();
    response.responses = error_for_all(&request, ResponseError::UnsupportedVersion, "");
    for topic in &mut response.responses {
        for p in &mut topic.partition_responses {
            p.error_message = None;
        }
    }
    encode_old(&response, version, correlation_id)
}

/// ProduceResponse v2 is v3's layout; v1 drops log_append_time; v0 also drops throttle_time.
fn encode_old(
    response: &ProduceResponse,
    version: i16,
    correlation_id: i32,
) -> Result<Response, FrameError> {
    if version == 2 {
        return super::encode(correlation_id, 0, response, 3);
    }
    let mut buf = BytesMut::new();
    put(&mut buf, &correlation_id.to_be_bytes());
    put(&mut buf, &(response.responses.len() as i32).to_be_bytes());
    for topic in &response.responses {
        put(&mut buf, &(topic.name.0.len() as i16).to_be_bytes());
        put(&mut buf, topic.name.0.as_bytes());
        put(
            &mut buf,
            &(topic.partition_responses.len() as i32).to_be_bytes(),
        );
        for p in &topic.partition_responses {
            put(&mut buf, &p.index.to_be_bytes());
            put(&mut buf, &p.error_code.to_be_bytes());
            put(&mut buf, &p.base_offset.to_be_bytes());
        }
    }
    if version == 1 {
        put(&mut buf, &0i32.to_be_bytes());
    }
    Ok(Response {
        chunks: vec![Chunk::Bytes(buf.freeze())],
    })
}

fn put(buf: &mut BytesMut, bytes: &[u8]) {
    buf.extend_from_slice(bytes);
}
