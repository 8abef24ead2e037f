//! The metadata quorum's openraft type configuration, and the seam to the metadata image:
//! [`MetadataApply`], which the state machine calls and `sluice-cluster`'s image will
//! implement (this module never depends on that crate).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::limits::ENTRY_PAYLOAD_BYTES_MAX;

/// The application data of one Raft entry: an encoded batch of metadata records, opaque
/// here. At most [`ENTRY_PAYLOAD_BYTES_MAX`] bytes, however it is made (deserializing one
/// from a peer checks the bound too).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<u8>")]
pub struct MetadataPayload(Vec<u8>);

impl TryFrom<Vec<u8>> for MetadataPayload {
    type Error = PayloadTooLarge;

    fn try_from(bytes: Vec<u8>) -> Result<Self, PayloadTooLarge> {
        MetadataPayload::new(bytes)
    }
}

/// A payload over [`ENTRY_PAYLOAD_BYTES_MAX`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "metadata payload of {bytes} bytes exceeds ENTRY_PAYLOAD_BYTES_MAX ({ENTRY_PAYLOAD_BYTES_MAX})"
)]
pub struct PayloadTooLarge {
    pub bytes: usize,
}

impl MetadataPayload {
    /// The payload, refused above [`ENTRY_PAYLOAD_BYTES_MAX`].
    pub fn new(bytes: Vec<u8>) -> Result<Self, PayloadTooLarge> {
        if bytes.len() > ENTRY_PAYLOAD_BYTES_MAX {
            return Err(PayloadTooLarge { bytes: bytes.len() });
        }
        Ok(MetadataPayload(bytes))
    }

    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for MetadataPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MetadataPayload({} bytes)", self.0.len())
    }
}

impl fmt::Display for MetadataPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes of metadata records", self.0.len())
    }
}

/// What applying one entry answered: its index and the image's reply (empty for blank and
/// membership entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyResponse {
    pub index: u64,
    pub reply: Vec<u8>,
}

/// A voter or learner of the metadata quorum: where its controller listener is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerNode {
    /// `host:port` of the node's CONTROLLER listener.
    pub controller_addr: String,
}

impl fmt::Display for ControllerNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "controller at {}", self.controller_addr)
    }
}

openraft::declare_raft_types!(
    /// The metadata quorum's types: node ids are `u64` (a fresh one per data-dir
    /// incarnation, never the Kafka `node.id`: openraft's "never reuse a node id" rule),
    /// terms `u64`, openraft's default (advanced) leader ids.
    pub MetaTypes:
        D = MetadataPayload,
        R = ApplyResponse,
        NodeId = u64,
        Node = ControllerNode,
);

/// openraft's types for this configuration, by the names the module uses.
pub type LogId = openraft::type_config::alias::LogIdOf<MetaTypes>;
pub type Vote = openraft::type_config::alias::VoteOf<MetaTypes>;
pub type Entry = openraft::type_config::alias::EntryOf<MetaTypes>;
pub type Membership = openraft::Membership<u64, ControllerNode>;
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<MetaTypes>;
pub type SnapshotMeta = openraft::type_config::alias::SnapshotMetaOf<MetaTypes>;

/// A snapshot the image refused to restore.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata snapshot refused: {0}")]
pub struct RestoreError(pub String);

/// The metadata image as the state machine drives it. Implemented by the image built from
/// `sluice-cluster`'s records; calls are made under the state machine's lock, in log order,
/// each entry exactly once after a restore.
pub trait MetadataApply: Send + 'static {
    /// Applies the payload of the committed entry at `index`; returns the reply for the
    /// writer (`client_write`'s response). Invalid records are the image's to reject in its
    /// reply: an entry that committed must apply.
    fn apply(&mut self, index: u64, payload: &[u8]) -> Vec<u8>;

    /// The whole image, encoded (at most `SNAPSHOT_BYTES_MAX`; a larger one fails the
    /// snapshot, naming the limit).
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the image with a snapshot's, taken after the entry at `index` (`None`: the
    /// empty image before any entry).
    fn restore(&mut self, index: Option<u64>, bytes: &[u8]) -> Result<(), RestoreError>;
}
