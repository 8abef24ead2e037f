//! The controller listener's wire format, the one place that touches its socket bytes.
//!
//! A frame is `kind u8 | length u32 (big-endian) | body`: the body is a postcard encoding
//! of the kind's request, or of its answer (`Result<answer, String>`) on the way back. The
//! length is checked against the kind's bound before anything is reserved (the hello's
//! `HELLO_FRAME_BYTES_MAX` until a hello is accepted, then `FRAME_BYTES_MAX`, or
//! `SNAPSHOT_FRAME_BYTES_MAX` for a full snapshot), and the body is read in chunks of
//! `FRAME_READ_CHUNK_BYTES`, so memory grows only with bytes that really arrived.
//!
//! The first frame of every connection is a [`Hello`] naming the cluster id, the sender's
//! node id and its voter list; the listener answers with its own or refuses (another cluster
//! id, another voter list, a bad version),
//! and refuses any other kind before it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::limits::{
    BROKER_FRAME_BYTES_MAX, FRAME_BYTES_MAX, FRAME_READ_CHUNK_BYTES, HELLO_FRAME_BYTES_MAX,
    SNAPSHOT_FRAME_BYTES_MAX,
};
use super::ops::{ControllerOp, ControllerReply, OpError};
use super::types::{SnapshotMeta, Vote};

/// The protocol version a hello carries; a peer with another is refused.
pub(crate) const PROTOCOL_VERSION: u16 = 1;

/// A frame's kind (its first byte); an answer has its request's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Hello = 1,
    AppendEntries = 2,
    Vote = 3,
    FullSnapshot = 4,
    Forward = 5,
    TransferLeader = 6,
    /// A message between brokers' services ([`BrokerMessage`]).
    Broker = 7,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Hello,
            2 => Kind::AppendEntries,
            3 => Kind::Vote,
            4 => Kind::FullSnapshot,
            5 => Kind::Forward,
            6 => Kind::TransferLeader,
            7 => Kind::Broker,
            _ => return None,
        })
    }

    /// The largest body of this kind, and the limit's name, once a hello is accepted.
    const fn bound(self) -> (u32, &'static str) {
        match self {
            Kind::Hello => (HELLO_FRAME_BYTES_MAX, "HELLO_FRAME_BYTES_MAX"),
            Kind::FullSnapshot => (SNAPSHOT_FRAME_BYTES_MAX, "SNAPSHOT_FRAME_BYTES_MAX"),
            Kind::Broker => (BROKER_FRAME_BYTES_MAX, "BROKER_FRAME_BYTES_MAX"),
            _ => (FRAME_BYTES_MAX, "FRAME_BYTES_MAX"),
        }
    }
}

/// A frame that cannot be read; the connection is closed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("controller connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of kind {kind} announces {bytes} bytes, over {limit_name} ({limit})")]
    TooLarge {
        kind: u8,
        bytes: u32,
        limit_name: &'static str,
        limit: u32,
    },
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("frame of kind {0:?} before the peer's hello was accepted")]
    BeforeHello(Kind),
    #[error("frame of kind {got:?} where {expected:?} was expected")]
    Unexpected { got: Kind, expected: Kind },
    #[error("undecodable frame body: {0}")]
    Decode(String),
}

/// The first frame of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hello {
    pub version: u16,
    pub cluster_id: String,
    pub node_id: u64,
    /// `controller.quorum.voters` as the sender has it (`id@address`, by id, comma
    /// separated): a node whose list differs is refused, so a misconfigured voter list is
    /// an error at the first connection, never a split quorum.
    pub voters: String,
}

/// A full snapshot: the leader's vote, the snapshot's meta and its data (the framed image).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SnapshotRequest {
    pub vote: Vote,
    pub meta: SnapshotMeta,
    pub data: Vec<u8>,
}

/// A forwarded operation's answer: the reply and the index it committed at (the
/// forwarding node waits to apply it), or why not.
pub(crate) type ForwardAnswer = Result<(ControllerReply, u64), ForwardRefusal>;

/// Why the listener did not run a forwarded operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ForwardRefusal {
    /// This node does not lead (the leader it knows of, if any): retry there.
    NotLeader { leader_id: Option<u64> },
    /// The controller refused the operation.
    Refused(OpError),
    /// It failed for another reason (its outcome may be unknown).
    Failed(String),
}

/// A forwarded operation.
pub(crate) type ForwardRequest = ControllerOp;

/// One committed offset of a transaction, between brokers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// An offset on the wire as a transaction keeps it.
impl From<TxnOffset> for sluice_txn::PendingOffset {
    fn from(o: TxnOffset) -> Self {
        Self {
            tp: sluice_txn::TopicPartition {
                topic: o.topic,
                partition: o.partition,
            },
            committed_offset: o.offset,
            leader_epoch: o.leader_epoch,
            metadata: o.metadata,
        }
    }
}

/// What one broker's services ask of another's, on the controller listener (only brokers of
/// this cluster, after their hello, reach it): a transaction's consumer offsets, which wait in
/// the transaction's coordinator, travel from the group's coordinator and back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerMessage {
    /// From the group's coordinator (which checked the member, KIP-447) to the
    /// transaction's: hold these offsets in the transaction (TxnOffsetCommit's second half).
    HoldTxnOffsets {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        group_id: String,
        offsets: Vec<TxnOffset>,
        /// The transaction protocol v2 (TxnOffsetCommit v5+ adds the group itself).
        protocol_v2: bool,
    },
    /// From the transaction's coordinator to the group's, once the transaction committed:
    /// commit these offsets to the group.
    CommitGroupOffsets {
        group_id: String,
        offsets: Vec<TxnOffset>,
    },
    /// A plugin uploaded to the sender: install these bytes as `name` here too, if their
    /// SHA-256 is `sha256` (compiled here); `replace` an existing version, or only make it.
    InstallPlugin {
        name: String,
        sha256: String,
        bytes: Vec<u8>,
        replace: bool,
    },
    /// A plugin deleted on the sender: delete it here too.
    RemovePlugin { name: String, force: bool },
    /// Records a topic's partitioner plugin routed, on the sender, to a partition this
    /// broker leads (`crate::reroute`): append them as they are (the plugin already placed
    /// them), if this broker leads `partition` of the topic with id `topic_id` at
    /// `leader_epoch`; with `durable` (acks=all), answer once their group commit is done.
    AppendRouted {
        topic: String,
        topic_id: [u8; 16],
        partition: i32,
        leader_epoch: i32,
        records: Vec<u8>,
        durable: bool,
    },
    /// A broker missing a plugin version the metadata image names asks for its bytes: the
    /// answer is [`BrokerReply::Plugin`] if this broker has `name` at `sha256`.
    FetchPlugin { name: String, sha256: String },
    /// An ephemeral view (`sluice consume --filter`) made on the sender, which is this
    /// broker's too (its spec's JSON): the consumer fetches each partition from its leader.
    /// It expires here as there, once idle.
    PutEphemeralView { spec: Vec<u8> },
    /// The ephemeral view is done with (the consumer finished).
    RemoveEphemeralView { name: String },
    /// A materialized transform's runner (it runs where its source partition is led) asks
    /// its transactional id's coordinator, this broker, to carry out `step`
    /// (`crate::transforms::remote`). Only `__sluice_transform/` ids.
    TransformTxn {
        transactional_id: String,
        step: TransformTxnStep,
    },
    /// A runner's transactional output batch for a partition this broker leads: verified
    /// with the transaction's coordinator (KIP-890) and appended with the producer's claim;
    /// with `durable`, answered once it is on disk.
    AppendTransformed {
        topic: String,
        topic_id: [u8; 16],
        partition: i32,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        records: Vec<u8>,
        durable: bool,
    },
    /// A runner's committed position in its transform's group, which this broker
    /// coordinates: answered [`BrokerReply::Offsets`] (none, or the one offset).
    FetchTransformPosition {
        group_id: String,
        topic: String,
        partition: i32,
    },
    /// A transform's group is dropped (delete, restart) by its coordinator, this broker.
    DeleteTransformGroup { group_id: String },
    /// The start offsets of `partitions` of `topic` (which this broker leads) for a
    /// transform's `from_offset` (`earliest`, `latest`, `N`, `Nms`): [`BrokerReply::Offsets`].
    TransformStartOffsets {
        topic: String,
        partitions: Vec<i32>,
        from: String,
    },
    /// The state of the transform runners on this broker (of `name`, or of every
    /// transform): [`BrokerReply::Json`], a map of transform name to partition reports.
    TransformReports { name: Option<String> },
}

/// One transaction step of a transform runner at its coordinator
/// ([`BrokerMessage::TransformTxn`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransformTxnStep {
    /// InitProducerId: answered [`BrokerReply::Producer`] or a code.
    Init { timeout_ms: i32 },
    /// AddPartitionsToTxn.
    AddPartitions {
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    },
    /// AddOffsetsToTxn then TxnOffsetCommit of the source position.
    CommitOffsets {
        producer_id: i64,
        producer_epoch: i16,
        group_id: String,
        offsets: Vec<TxnOffset>,
    },
    /// KIP-890's verification by an output partition's leader (AddPartitionsToTxn's
    /// `verify_only`, which the Kafka listener refuses for these reserved ids): answered
    /// [`BrokerReply::Verified`] or a code.
    Verify {
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    },
    /// EndTxn (commit or abort).
    End {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    },
}

/// What a broker message is answered with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerReply {
    /// Kafka's error code (0: done).
    Code(i16),
    /// A plugin's component bytes ([`BrokerMessage::FetchPlugin`]).
    Plugin(Vec<u8>),
    /// A transactional producer's id and epoch ([`TransformTxnStep::Init`]).
    Producer {
        producer_id: i64,
        producer_epoch: i16,
    },
    /// Offsets ([`BrokerMessage::FetchTransformPosition`],
    /// [`BrokerMessage::TransformStartOffsets`]).
    Offsets(Vec<TxnOffset>),
    /// A JSON document ([`BrokerMessage::TransformReports`]).
    Json(Vec<u8>),
    /// Each partition's verification: topic, partition, error code
    /// ([`TransformTxnStep::Verify`]).
    Verified(Vec<(String, i32, i16)>),
}

/// A broker message's answer, or why it could not be handled.
pub type BrokerAnswer = Result<BrokerReply, String>;

/// Encodes `value` as a body.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    postcard::to_allocvec(value).map_err(|e| WireError::Decode(e.to_string()))
}

/// Decodes a body, all of it.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    let (value, rest) =
        postcard::take_from_bytes(body).map_err(|e| WireError::Decode(e.to_string()))?;
    if !rest.is_empty() {
        return Err(WireError::Decode(format!("{} trailing bytes", rest.len())));
    }
    Ok(value)
}

/// Writes one frame.
pub(crate) async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    kind: Kind,
    body: &[u8],
) -> Result<(), WireError> {
    let (limit, limit_name) = kind.bound();
    let bytes = u32::try_from(body.len()).unwrap_or(u32::MAX);
    if bytes > limit {
        return Err(WireError::TooLarge {
            kind: kind as u8,
            bytes,
            limit_name,
            limit,
        });
    }
    let mut frame = Vec::with_capacity(5 + body.len());
    frame.push(kind as u8);
    frame.extend_from_slice(&bytes.to_be_bytes());
    frame.extend_from_slice(body);
    writer.write_all(&frame).await?;
    writer.flush().await?;
    Ok(())
}

/// Reads one frame: its kind and body. Before the hello (`hello_done` false) only a hello
/// is accepted, within `HELLO_FRAME_BYTES_MAX`.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    hello_done: bool,
) -> Result<(Kind, Vec<u8>), WireError> {
    let mut head = [0u8; 5];
    reader.read_exact(&mut head).await?;
    let kind = Kind::from_byte(head[0]).ok_or(WireError::UnknownKind(head[0]))?;
    if !hello_done && kind != Kind::Hello {
        return Err(WireError::BeforeHello(kind));
    }
    let bytes = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let (limit, limit_name) = kind.bound();
    if bytes > limit {
        return Err(WireError::TooLarge {
            kind: head[0],
            bytes,
            limit_name,
            limit,
        });
    }
    let mut body = Vec::with_capacity((bytes as usize).min(FRAME_READ_CHUNK_BYTES));
    let read = reader.take(u64::from(bytes)).read_to_end(&mut body).await?;
    if read != bytes as usize {
        return Err(WireError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok((kind, body))
}

/// Reads the answer to a request of `kind`: its body decoded as `Result<T, String>`.
pub(crate) async fn read_answer<R: AsyncRead + Unpin, T: DeserializeOwned>(
    reader: &mut R,
    kind: Kind,
) -> Result<Result<T, String>, WireError> {
    let (got, body) = read_frame(reader, true).await?;
    if got != kind {
        return Err(WireError::Unexpected {
            got,
            expected: kind,
        });
    }
    decode(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frame_round_trips_and_oversized_or_early_frames_are_refused() {
        let hello = Hello {
            version: PROTOCOL_VERSION,
            cluster_id: "c1".into(),
            node_id: 3,
            voters: "3@127.0.0.1:9093".into(),
        };
        let mut buf = Vec::new();
        write_frame(&mut buf, Kind::Hello, &encode(&hello).unwrap())
            .await
            .unwrap();
        let (kind, body) = read_frame(&mut buf.as_slice(), false).await.unwrap();
        assert_eq!(kind, Kind::Hello);
        assert_eq!(decode::<Hello>(&body).unwrap(), hello);

        let mut vote = vec![Kind::Vote as u8];
        vote.extend_from_slice(&1u32.to_be_bytes());
        vote.push(0);
        let early = read_frame(&mut vote.as_slice(), false).await;
        assert!(matches!(early, Err(WireError::BeforeHello(Kind::Vote))));

        let mut huge = vec![Kind::Hello as u8];
        huge.extend_from_slice(&(HELLO_FRAME_BYTES_MAX + 1).to_be_bytes());
        let refused = read_frame(&mut huge.as_slice(), false).await;
        assert!(
            matches!(
                refused,
                Err(WireError::TooLarge {
                    limit_name: "HELLO_FRAME_BYTES_MAX",
                    ..
                })
            ),
            "{refused:?}"
        );
        let mut lying = vec![Kind::Vote as u8];
        lying.extend_from_slice(&FRAME_BYTES_MAX.to_be_bytes());
        let short = read_frame(&mut lying.as_slice(), true).await;
        assert!(matches!(short, Err(WireError::Io(_))), "{short:?}");
    }
}
