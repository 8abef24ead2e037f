//! The metadata records: every change to the cluster's metadata is one [`MetadataRecord`],
//! modelled on KRaft's `__cluster_metadata` records, and one Raft entry carries a batch of
//! them ([`encode_batch`], [`decode_batch`]).
//!
//! # Byte layout, version 0 (integers big-endian)
//!
//! ```text
//! record = u8 version = 0, u8 type, the type's fields:
//!   0 ClusterId                 str cluster_id
//!   1 RegisterBroker            i32 node_id, [16] incarnation_id, i32 count, that many
//!                               listeners (str name, str host, u16 port, i16 protocol),
//!                               opt_str rack
//!   2 UnregisterBroker, 3 FenceBroker, 4 UnfenceBroker, 5 BrokerControlledShutdown
//!                               i32 node_id, i64 broker_epoch
//!   6 Topic                     str name, [16] topic_id
//!   7 Partition                 [16] topic_id, i32 partition, ids replicas, ids isr,
//!                               i32 leader, i32 leader_epoch, i32 partition_epoch
//!   8 PartitionChange           [16] topic_id, i32 partition, u8 has_leader [i32 leader],
//!                               u8 has_isr [ids isr]
//!   9 RemoveTopic               [16] topic_id
//!  10 Config                    i8 resource type (Kafka's: 2 topic, 4 broker), str name,
//!                               str key, opt_str value (absent = delete)
//!  11 Security                  bytes: a `sluice_security` SecurityRecord, its own encoding
//!  12 View                      str name, spec      13 RemoveView       str name
//!  14 Transform                 str name, u32 generation, spec
//!  15 RemoveTransform           str name
//!  16 PluginVersion             str name, [32] sha256, u64 size_bytes, u8 kind
//!  17 RemovePlugin              str name
//!  18 ProducerIds               i32 broker_id, i64 broker_epoch, i64 next_producer_id
//!  19 FeatureLevel              str name, i16 level
//! str = u16 length + UTF-8; opt_str = u8 0 | 1 then str; ids = i32 count + that many i32;
//! bytes = u16 length + bytes; spec = u32 length + that many bytes of JSON
//!
//! batch = u8 version = 0, i32 count (1..=BATCH_RECORDS_MAX), then per record: u32 length,
//!         that many bytes
//! ```
//!
//! Decoding is strict, as `sluice_security::records`: the whole input is bounded first
//! ([`limits::RECORD_BYTES_MAX`], [`limits::BATCH_BYTES_MAX`]); every length and count is
//! checked against its named bound and the bytes left before anything is copied; unknown
//! versions, types and codes, bad UTF-8, trailing bytes, and values
//! [`MetadataRecord::validate`] refuses are errors. A decoded record is one that could have
//! been written, and it re-encodes to the same bytes.

use sluice_kafka::bytes::{Limit, ReadError, Reader, Writer};
use sluice_security::records::{DecodeError as SecurityDecodeError, SecurityRecord};

use crate::limits::{self, named};

const VERSION: u8 = 0;
const BATCH_VERSION: u8 = 0;

/// The leader of a partition that has none (Kafka's `NO_LEADER`).
pub const NO_LEADER: i32 = -1;

/// A topic's id (KIP-516): 16 bytes, never all zero (Kafka's `ZERO_UUID` means "none").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicId(pub [u8; 16]);

/// A broker process's incarnation (a UUID drawn at each start): a new one means the old
/// process is gone, whatever its node id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IncarnationId(pub [u8; 16]);

/// A listener's security protocol, by Kafka's id (`SecurityProtocol.java`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecurityProtocol {
    /// 0.
    Plaintext,
    /// 1.
    Ssl,
    /// 2.
    SaslPlaintext,
    /// 3.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's id.
    #[must_use]
    pub const fn id(self) -> i16 {
        match self {
            Self::Plaintext => 0,
            Self::Ssl => 1,
            Self::SaslPlaintext => 2,
            Self::SaslSsl => 3,
        }
    }

    /// The protocol of Kafka's id `id`.
    #[must_use]
    pub const fn from_id(id: i16) -> Option<Self> {
        Some(match id {
            0 => Self::Plaintext,
            1 => Self::Ssl,
            2 => Self::SaslPlaintext,
            3 => Self::SaslSsl,
            _ => return None,
        })
    }
}

/// One advertised listener of a broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Listener {
    /// Its name (`PLAINTEXT`, `CONTROLLER`, ...).
    pub name: String,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: u16,
    /// Its security protocol.
    pub security_protocol: SecurityProtocol,
}

/// What a broker registers with (KRaft's `RegisterBrokerRecord`, less the epoch: the image
/// gives the registration the Raft index of its entry as its broker epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// `node.id`.
    pub node_id: i32,
    /// This process's incarnation.
    pub incarnation_id: IncarnationId,
    /// Its advertised listeners, names distinct.
    pub listeners: Vec<Listener>,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
}

/// A partition's whole state (KRaft's `PartitionRecord`): written when the partition is
/// created, and by snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRecord {
    /// Its topic.
    pub topic_id: TopicId,
    /// Its index.
    pub partition: i32,
    /// The assigned replicas, in preference order, distinct.
    pub replicas: Vec<i32>,
    /// The in-sync replicas: a non-empty subset of the replicas.
    pub isr: Vec<i32>,
    /// The leader: one of the ISR, or [`NO_LEADER`].
    pub leader: i32,
    /// The leader epoch: grows by one at every change of leadership.
    pub leader_epoch: i32,
    /// The partition epoch: grows by one at every change.
    pub partition_epoch: i32,
}

/// A change to a partition (KRaft's `PartitionChangeRecord`). Applying it bumps the
/// partition epoch; a `leader` (even the same one: a new incarnation is a new leadership)
/// also bumps the leader epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionChange {
    /// Its topic.
    pub topic_id: TopicId,
    /// Its index.
    pub partition: i32,
    /// A new leadership, if any.
    pub leader: Option<i32>,
    /// A new ISR, if any.
    pub isr: Option<Vec<i32>>,
}

/// What a config belongs to, by Kafka's `ConfigResource.Type` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigResourceType {
    /// 2: a topic, named by its name.
    Topic,
    /// 4: a broker, named by its node id in decimal, or "" for the cluster default.
    Broker,
}

impl ConfigResourceType {
    /// Kafka's code.
    #[must_use]
    pub const fn code(self) -> i8 {
        match self {
            Self::Topic => 2,
            Self::Broker => 4,
        }
    }
}

/// A config's resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigResource {
    /// Its type.
    pub resource_type: ConfigResourceType,
    /// Its name.
    pub name: String,
}

/// What a plugin is for (`sluice_plugin_host`'s kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PluginKind {
    /// 0: picks a record's partition at produce.
    Partitioner,
    /// 1: keeps or drops records at fetch.
    Filter,
    /// 2: maps records (views and materialized transforms).
    Transform,
    /// 3: refuses records at produce.
    Validator,
}

impl PluginKind {
    const ALL: [Self; 4] = [
        Self::Partitioner,
        Self::Filter,
        Self::Transform,
        Self::Validator,
    ];

    const fn code(self) -> u8 {
        self as u8
    }
}

/// One installed plugin version: its digest and size, never its bytes (they travel between
/// brokers by digest, outside the metadata log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginVersion {
    /// Its name.
    pub name: String,
    /// SHA-256 of its component bytes.
    pub sha256: [u8; 32],
    /// Its component's size, in bytes.
    pub size_bytes: u64,
    /// Its kind.
    pub kind: PluginKind,
}

/// A block of producer ids given to a broker (KIP-730's `ProducerIdsRecord`): the block is
/// `[next_producer_id - PRODUCER_ID_BLOCK_SIZE, next_producer_id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdsRecord {
    /// The broker it went to.
    pub broker_id: i32,
    /// That broker's epoch when it asked.
    pub broker_epoch: i64,
    /// The first id of the next block.
    pub next_producer_id: i64,
}

/// One change to the cluster's metadata (module docs for the bytes).
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataRecord {
    /// The cluster's id: the first record of the log.
    ClusterId {
        /// The id (`sluice cluster format --cluster-id`).
        cluster_id: String,
    },
    /// A broker registers (a new incarnation of its node id): fenced until it catches up.
    RegisterBroker(BrokerRegistration),
    /// A broker leaves the cluster.
    UnregisterBroker {
        /// Its node id.
        node_id: i32,
        /// The registration it ends.
        broker_epoch: i64,
    },
    /// A broker is fenced (session expired, or it asked): it leads nothing.
    FenceBroker {
        /// Its node id.
        node_id: i32,
        /// The registration fenced.
        broker_epoch: i64,
    },
    /// A broker caught up with the metadata log and may lead again.
    UnfenceBroker {
        /// Its node id.
        node_id: i32,
        /// The registration unfenced.
        broker_epoch: i64,
    },
    /// A broker asked for a controlled shutdown: its leaderships move away.
    BrokerControlledShutdown {
        /// Its node id.
        node_id: i32,
        /// The registration shutting down.
        broker_epoch: i64,
    },
    /// A topic is created.
    Topic {
        /// Its name.
        name: String,
        /// Its id.
        topic_id: TopicId,
    },
    /// A partition is created (or restored from a snapshot).
    Partition(PartitionRecord),
    /// A partition's leader or ISR changes.
    PartitionChange(PartitionChange),
    /// A topic is deleted, with its partitions and configs.
    RemoveTopic {
        /// Its id.
        topic_id: TopicId,
    },
    /// A config is set (`value` present) or deleted.
    Config {
        /// Whose config.
        resource: ConfigResource,
        /// The key.
        key: String,
        /// The value, or `None` to delete it.
        value: Option<String>,
    },
    /// A SCRAM, ACL, quota or delegation-token change, as `sluice_security` writes it.
    Security(SecurityRecord),
    /// A view is created or replaced.
    View {
        /// Its name.
        name: String,
        /// Its spec, JSON (the server's `ViewSpec`).
        spec: Vec<u8>,
    },
    /// A view is removed.
    RemoveView {
        /// Its name.
        name: String,
    },
    /// A materialized transform is deployed or redeployed.
    Transform {
        /// Its name.
        name: String,
        /// Its generation: grows by one at each deploy of the name.
        generation: u32,
        /// Its spec, JSON (`sluice_transform`'s `TransformSpec`).
        spec: Vec<u8>,
    },
    /// A transform is removed.
    RemoveTransform {
        /// Its name.
        name: String,
    },
    /// A plugin version is installed.
    PluginVersion(PluginVersion),
    /// A plugin is removed.
    RemovePlugin {
        /// Its name.
        name: String,
    },
    /// A block of producer ids is allocated.
    ProducerIds(ProducerIdsRecord),
    /// A feature's level (`metadata.version` gates new record types in rolling upgrades).
    FeatureLevel {
        /// The feature.
        name: String,
        /// Its level.
        level: i16,
    },
}

/// A record or batch that cannot be decoded, or a record that may not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input is over a byte bound (named).
    #[error("{what} of {len} bytes is over {} ({} bytes)", limit.name, limit.max)]
    TooLong {
        /// A record or a batch.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The bound.
        limit: Limit,
    },
    /// A field is cut short, over its bound (named), or not UTF-8; or bytes remain.
    #[error("metadata record: {0}")]
    Read(#[from] ReadError),
    /// A version this build does not read.
    #[error("metadata {what} version {version} is not supported (this build reads version 0)")]
    UnknownVersion {
        /// A record or a batch.
        what: &'static str,
        /// The version read.
        version: u8,
    },
    /// A type or code this build does not know.
    #[error("metadata record has unknown {what} {value}")]
    Unknown {
        /// Which field.
        what: &'static str,
        /// Its value.
        value: i64,
    },
    /// A value no controller writes (an empty name, an ISR outside the replicas, ...).
    #[error("metadata record holds an invalid value: {0}")]
    Invalid(String),
    /// The carried security record is refused by `sluice_security`.
    #[error("metadata record: {0}")]
    Security(#[from] SecurityDecodeError),
}

mod codec;
mod validate;

pub(crate) use codec::{get_registration, put_registration};
pub use validate::{valid_object_name, valid_topic_name};

impl MetadataRecord {
    /// The checks a record must pass to be written; [`MetadataRecord::decode`] refuses
    /// exactly what this refuses.
    ///
    /// # Errors
    /// The first check that fails, naming the bound or the value.
    pub fn validate(&self) -> Result<(), DecodeError> {
        validate::record(self)
    }

    /// The record's bytes (module docs). The record must pass [`MetadataRecord::validate`]
    /// (asserted: writing an unchecked record is our bug).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        if let Err(e) = self.validate() {
            panic!("encoding an invalid metadata record: {e}");
        }
        let mut w = Writer::with_capacity(64);
        w.u8(VERSION);
        codec::encode_fields(self, &mut w);
        let bytes = w.into_bytes();
        assert!(
            bytes.len() <= limits::RECORD_BYTES_MAX,
            "an encoded metadata record over RECORD_BYTES_MAX"
        );
        bytes
    }

    /// Decodes one record, strictly (module docs).
    ///
    /// # Errors
    /// [`DecodeError`], naming the field and the bound.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() > limits::RECORD_BYTES_MAX {
            return Err(DecodeError::TooLong {
                what: "metadata record",
                len: bytes.len(),
                limit: named::RECORD,
            });
        }
        let mut r = Reader::new(bytes);
        let version = r.u8("version")?;
        if version != VERSION {
            return Err(DecodeError::UnknownVersion {
                what: "record",
                version,
            });
        }
        let record = codec::decode_fields(&mut r)?;
        r.finish()?;
        record.validate()?;
        Ok(record)
    }
}

/// The bytes of one Raft entry's records (module docs).
///
/// # Errors
/// [`DecodeError::Read`] (`TooMany`) for no records or more than
/// [`limits::BATCH_RECORDS_MAX`]; [`DecodeError::TooLong`] past [`limits::BATCH_BYTES_MAX`].
/// Every record must pass [`MetadataRecord::validate`] (asserted, as [`MetadataRecord::encode`]).
pub fn encode_batch(records: &[MetadataRecord]) -> Result<Vec<u8>, DecodeError> {
    if records.is_empty() || records.len() > limits::BATCH_RECORDS_MAX {
        return Err(ReadError::TooMany {
            what: "records in a batch (1 at least)",
            count: records.len(),
            limit: named::BATCH_RECORDS,
        }
        .into());
    }
    let mut w = Writer::with_capacity(64 * records.len());
    w.u8(BATCH_VERSION).count_i32(records.len());
    for record in records {
        let bytes = record.encode();
        w.count_u32(bytes.len()).raw(&bytes);
        if w.as_slice().len() > limits::BATCH_BYTES_MAX {
            return Err(batch_too_long(w.as_slice().len()));
        }
    }
    Ok(w.into_bytes())
}

/// `records` as one or more batches, each within [`limits::BATCH_RECORDS_MAX`] and
/// [`limits::BATCH_BYTES_MAX`], in order: for a decision too large for one Raft entry (a
/// broker that leads tens of thousands of partitions is fenced). Atomicity holds within an
/// entry only; every record the controller writes is valid on its own, the fence before the
/// leadership moves, so a failover between entries leaves a state the next controller
/// finishes (it fences and moves again).
///
/// # Panics
/// If a record is invalid (as [`MetadataRecord::encode`]).
#[must_use]
pub fn encode_batches(records: &[MetadataRecord]) -> Vec<Vec<u8>> {
    let mut batches = Vec::new();
    let mut current: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 0;
    let flush = |current: &mut Vec<Vec<u8>>, batches: &mut Vec<Vec<u8>>| {
        if current.is_empty() {
            return;
        }
        let mut w = Writer::with_capacity(5 + current.iter().map(|r| 4 + r.len()).sum::<usize>());
        w.u8(BATCH_VERSION).count_i32(current.len());
        for record in current.drain(..) {
            w.count_u32(record.len()).raw(&record);
        }
        batches.push(w.into_bytes());
    };
    for record in records {
        let encoded = record.encode();
        let full = current.len() == limits::BATCH_RECORDS_MAX
            || 5 + bytes + 4 + encoded.len() > limits::BATCH_BYTES_MAX;
        if full {
            flush(&mut current, &mut batches);
            bytes = 0;
        }
        bytes += 4 + encoded.len();
        current.push(encoded);
    }
    flush(&mut current, &mut batches);
    batches
}

/// Decodes one Raft entry's records, strictly (module docs).
///
/// # Errors
/// [`DecodeError`], naming the field and the bound.
pub fn decode_batch(bytes: &[u8]) -> Result<Vec<MetadataRecord>, DecodeError> {
    if bytes.len() > limits::BATCH_BYTES_MAX {
        return Err(batch_too_long(bytes.len()));
    }
    let mut r = Reader::new(bytes);
    let version = r.u8("batch version")?;
    if version != BATCH_VERSION {
        return Err(DecodeError::UnknownVersion {
            what: "batch",
            version,
        });
    }
    // A record is at least a u32 length, a version and a type.
    let count = r.count_i32("records in a batch", named::BATCH_RECORDS, 6)?;
    if count == 0 {
        return Err(DecodeError::Invalid("an empty batch".into()));
    }
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        records.push(get_framed_record(&mut r)?);
    }
    r.finish()?;
    Ok(records)
}

/// One record after its u32 length (batches and snapshots).
pub(crate) fn get_framed_record(r: &mut Reader<'_>) -> Result<MetadataRecord, DecodeError> {
    let len = r.u32("record length")? as usize;
    if len > limits::RECORD_BYTES_MAX {
        return Err(DecodeError::TooLong {
            what: "metadata record",
            len,
            limit: named::RECORD,
        });
    }
    MetadataRecord::decode(r.take("record", len)?)
}

fn batch_too_long(len: usize) -> DecodeError {
    DecodeError::TooLong {
        what: "metadata batch",
        len,
        limit: Limit::new("BATCH_BYTES_MAX", limits::BATCH_BYTES_MAX),
    }
}

#[cfg(test)]
mod tests;
