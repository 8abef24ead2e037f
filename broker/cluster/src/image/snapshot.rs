//! The image's snapshot: bounded, checksummed, and made of the same records the log holds,
//! so restoring one is replaying records (the brokers excepted: their epochs are Raft
//! indexes, which a record does not carry, so they are written as they are).
//!
//! ```text
//! u8[4] magic "SLMI", u8 version = 0, u64 last_applied_index,
//! u32 body length, u32 crc32c of the body, body:
//!   i32 broker count (<= BROKERS_MAX), per broker: registration (as in RegisterBroker),
//!       i64 broker_epoch, u8 flags (1 fenced, 2 in controlled shutdown)
//!   i32 record count (<= SNAPSHOT_RECORDS_MAX), per record: u32 length, the record
//! ```
//!
//! The whole snapshot is at most [`limits::SNAPSHOT_BYTES_MAX`], checked before anything is
//! read; the checksum before the body is parsed.

use sluice_kafka::bytes::{Reader, Writer};

use super::{BrokerState, MetadataImage, Refusal};
use crate::limits::{self, named};
use crate::records::{
    self, ConfigResourceType, DecodeError, MetadataRecord, PartitionRecord, get_registration,
    put_registration,
};

const MAGIC: &[u8; 4] = b"SLMI";
const VERSION: u8 = 0;
const HEADER_BYTES: usize = 4 + 1 + 8 + 4 + 4;
const FENCED: u8 = 1;
const SHUTTING_DOWN: u8 = 2;

/// A snapshot that cannot be restored.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SnapshotError {
    /// Over [`limits::SNAPSHOT_BYTES_MAX`], or shorter than its header.
    #[error("snapshot of {0} bytes is not within its header and SNAPSHOT_BYTES_MAX ({max} bytes)", max = limits::SNAPSHOT_BYTES_MAX)]
    Size(usize),
    /// Not a metadata snapshot, or a version this build does not read.
    #[error("not a version 0 metadata snapshot (magic or version)")]
    Header,
    /// The body's length or crc32c is not the header's.
    #[error("snapshot body damaged: length or crc32c mismatch")]
    Checksum,
    /// A field or record does not decode.
    #[error("snapshot: {0}")]
    Decode(#[from] DecodeError),
    /// A record does not apply (the snapshot was not written by an image).
    #[error("snapshot record {position} refused: {refusal}")]
    Refused {
        /// Its position among the records.
        position: usize,
        /// Why.
        refusal: Refusal,
    },
    /// The image is over [`limits::SNAPSHOT_BYTES_MAX`] (writing).
    #[error("the image's snapshot is over SNAPSHOT_BYTES_MAX ({max} bytes)", max = limits::SNAPSHOT_BYTES_MAX)]
    TooLarge,
}

impl From<sluice_kafka::bytes::ReadError> for SnapshotError {
    fn from(e: sluice_kafka::bytes::ReadError) -> Self {
        Self::Decode(e.into())
    }
}

impl MetadataImage {
    /// The snapshot of the whole image (module docs).
    ///
    /// # Errors
    /// [`SnapshotError::TooLarge`] past [`limits::SNAPSHOT_BYTES_MAX`] (the image's own
    /// bounds keep it well under).
    pub fn snapshot_bytes(&self) -> Result<Vec<u8>, SnapshotError> {
        let mut body = Writer::with_capacity(4096);
        body.count_i32(self.brokers.len());
        for broker in self.brokers.values() {
            put_registration(&mut body, &broker.registration);
            let flags = if broker.fenced { FENCED } else { 0 }
                | if broker.in_controlled_shutdown {
                    SHUTTING_DOWN
                } else {
                    0
                };
            body.i64(broker.broker_epoch).u8(flags);
        }
        let records = self.snapshot_records();
        body.count_i32(records.len());
        for record in &records {
            let bytes = record.encode();
            body.count_u32(bytes.len()).raw(&bytes);
            if body.as_slice().len() > limits::SNAPSHOT_BYTES_MAX {
                return Err(SnapshotError::TooLarge);
            }
        }
        let body = body.into_bytes();
        if HEADER_BYTES + body.len() > limits::SNAPSHOT_BYTES_MAX {
            return Err(SnapshotError::TooLarge);
        }
        let mut w = Writer::with_capacity(HEADER_BYTES + body.len());
        w.raw(MAGIC).u8(VERSION).u64(self.last_applied_index);
        w.count_u32(body.len())
            .u32(crc32c::crc32c(&body))
            .raw(&body);
        Ok(w.into_bytes())
    }

    /// The image a snapshot holds: equal to the image that wrote it.
    ///
    /// # Errors
    /// [`SnapshotError`]; nothing is half-restored (a new image is built).
    pub fn from_snapshot(bytes: &[u8]) -> Result<Self, SnapshotError> {
        if bytes.len() < HEADER_BYTES || bytes.len() > limits::SNAPSHOT_BYTES_MAX {
            return Err(SnapshotError::Size(bytes.len()));
        }
        let mut r = Reader::new(bytes);
        let magic: [u8; 4] = r.array("magic")?;
        let version = r.u8("version")?;
        if &magic != MAGIC || version != VERSION {
            return Err(SnapshotError::Header);
        }
        let last_applied_index = r.u64("last applied index")?;
        let len = r.u32("body length")? as usize;
        let crc = r.u32("body crc32c")?;
        if len != r.remaining() {
            return Err(SnapshotError::Checksum);
        }
        let body = r.take("body", len)?;
        if crc32c::crc32c(body) != crc {
            return Err(SnapshotError::Checksum);
        }
        let mut image = Self::new();
        let mut r = Reader::new(body);
        image.restore_brokers(&mut r)?;
        // A record is at least a u32 length, a version and a type.
        let count = r.count_i32("snapshot records", named::SNAPSHOT_RECORDS, 6)?;
        for position in 0..count {
            let record = records::get_framed_record(&mut r)?;
            image
                .apply_record(last_applied_index, &record)
                .map_err(|refusal| SnapshotError::Refused { position, refusal })?;
        }
        r.finish()?;
        image.last_applied_index = last_applied_index;
        Ok(image)
    }

    fn restore_brokers(&mut self, r: &mut Reader<'_>) -> Result<(), SnapshotError> {
        // A broker is at least a node id, an incarnation, a count, a rack flag, an epoch
        // and flags.
        let count = r.count_i32("brokers", named::BROKERS, 4 + 16 + 4 + 1 + 8 + 1)?;
        for _ in 0..count {
            let registration = get_registration(r)?;
            let broker_epoch = r.i64("broker epoch")?;
            let flags = r.u8("broker flags")?;
            let record = MetadataRecord::RegisterBroker(registration);
            record.validate()?;
            let MetadataRecord::RegisterBroker(registration) = record else {
                unreachable!("built just above")
            };
            let known = self.brokers.last_key_value().map(|(&id, _)| id);
            if flags & !(FENCED | SHUTTING_DOWN) != 0
                || broker_epoch < 0
                || known.is_some_and(|id| id >= registration.node_id)
            {
                return Err(DecodeError::Invalid(format!(
                    "snapshot broker {}: flags {flags}, epoch {broker_epoch}, or out of order",
                    registration.node_id
                ))
                .into());
            }
            let state = BrokerState {
                broker_epoch,
                fenced: flags & FENCED != 0,
                in_controlled_shutdown: flags & SHUTTING_DOWN != 0,
                registration,
            };
            self.brokers.insert(state.registration.node_id, state);
        }
        Ok(())
    }

    /// Records that rebuild everything but the brokers from an empty image, in an order
    /// that applies (a topic before its partitions and configs).
    fn snapshot_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        if let Some(cluster_id) = &self.cluster_id {
            out.push(MetadataRecord::ClusterId {
                cluster_id: cluster_id.clone(),
            });
        }
        out.extend(
            self.features
                .iter()
                .map(|(name, &level)| MetadataRecord::FeatureLevel {
                    name: name.clone(),
                    level,
                }),
        );
        for topic in self.topics.values() {
            out.push(MetadataRecord::Topic {
                name: topic.name.clone(),
                topic_id: topic.topic_id,
            });
            out.extend(topic.partitions.iter().map(|(&partition, p)| {
                MetadataRecord::Partition(PartitionRecord {
                    topic_id: topic.topic_id,
                    partition,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                })
            }));
        }
        for (resource, entries) in &self.configs {
            debug_assert!(
                resource.resource_type != ConfigResourceType::Topic
                    || self.topic_ids.contains_key(&resource.name)
            );
            out.extend(entries.iter().map(|(key, value)| MetadataRecord::Config {
                resource: resource.clone(),
                key: key.clone(),
                value: Some(value.clone()),
            }));
        }
        out.extend(
            self.security
                .snapshot()
                .into_iter()
                .map(MetadataRecord::Security),
        );
        self.object_records(&mut out);
        out
    }

    fn object_records(&self, out: &mut Vec<MetadataRecord>) {
        out.extend(self.views.iter().map(|(name, spec)| MetadataRecord::View {
            name: name.clone(),
            spec: spec.clone(),
        }));
        out.extend(
            self.transforms
                .iter()
                .map(|(name, t)| MetadataRecord::Transform {
                    name: name.clone(),
                    generation: t.generation,
                    spec: t.spec.clone(),
                }),
        );
        out.extend(
            self.plugins
                .values()
                .cloned()
                .map(MetadataRecord::PluginVersion),
        );
        out.extend(self.producer_ids.map(MetadataRecord::ProducerIds));
    }
}
