//! One Raft entry as one record batch of the metadata log (at offset = the entry's index),
//! holding one record, written with the internal logs' codec (`crate::internal_log`).
//!
//! The record's key is the entry header, 26 bytes, big-endian:
//! `version u8 = 1 | kind u8 (0 blank, 1 normal, 2 membership) | term u64 | leader node u64 |
//! index u64`. The term and the leader's node id are the entry's log id (openraft's advanced
//! leader id), kept in the record because the storage engine stamps batches with its own
//! leader epoch; the index repeats the offset and is checked against it on every read.
//! The value: for a normal entry the payload bytes (at most `ENTRY_PAYLOAD_BYTES_MAX`), for a
//! membership entry its JSON (at most `MEMBERSHIP_ENTRY_BYTES_MAX`), none for a blank one.
//! Decoding is strict: a wrong version, kind, length or index is `InvalidData`.

use std::io;

use bytes::Bytes;
use openraft::EntryPayload;
use openraft::impls::leader_id_adv::LeaderId;

use super::limits::{ENTRY_PAYLOAD_BYTES_MAX, MEMBERSHIP_ENTRY_BYTES_MAX};
use super::types::{Entry, LogId, MetadataPayload};

const VERSION: u8 = 1;
const KEY_BYTES: usize = 26;
const KIND_BLANK: u8 = 0;
const KIND_NORMAL: u8 = 1;
const KIND_MEMBERSHIP: u8 = 2;

fn invalid(reason: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason.into())
}

/// The record batch bytes of `entry` (its base offset is assigned by the log on append).
pub(crate) fn encode(entry: &Entry, now_ms: i64) -> io::Result<Vec<u8>> {
    let (kind, value) = match &entry.payload {
        EntryPayload::Blank => (KIND_BLANK, None),
        EntryPayload::Normal(payload) => (KIND_NORMAL, Some(payload.as_bytes().to_vec())),
        EntryPayload::Membership(membership) => {
            let json = serde_json::to_vec(membership).map_err(io::Error::other)?;
            if json.len() > MEMBERSHIP_ENTRY_BYTES_MAX {
                return Err(io::Error::other(format!(
                    "membership of {} bytes exceeds MEMBERSHIP_ENTRY_BYTES_MAX ({MEMBERSHIP_ENTRY_BYTES_MAX})",
                    json.len()
                )));
            }
            (KIND_MEMBERSHIP, Some(json))
        }
    };
    let mut key = Vec::with_capacity(KEY_BYTES);
    key.push(VERSION);
    key.push(kind);
    key.extend_from_slice(&entry.log_id.leader_id.term.to_be_bytes());
    key.extend_from_slice(&entry.log_id.leader_id.node_id.to_be_bytes());
    key.extend_from_slice(&entry.log_id.index.to_be_bytes());
    let record = (Bytes::from(key), value.map(Bytes::from));
    crate::internal_log::encode(&[record], now_ms).map_err(io::Error::other)
}

/// The entries of whole batches read from the metadata log (each batch validated by the
/// storage checks first), each checked to sit at the offset its header names.
pub(crate) fn decode(bytes: Vec<u8>) -> io::Result<Vec<Entry>> {
    let records = crate::internal_log::decode(bytes).map_err(invalid)?;
    records
        .into_iter()
        .map(|r| decode_record(r.offset, r.key.as_deref(), r.value.as_deref()))
        .collect()
}

fn decode_record(offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> io::Result<Entry> {
    let key = key.ok_or_else(|| invalid(format!("entry at {offset}: no key")))?;
    if key.len() != KEY_BYTES || key[0] != VERSION {
        return Err(invalid(format!(
            "entry at {offset}: a {}-byte key of version {:?}",
            key.len(),
            key.first()
        )));
    }
    let word = |at: usize| u64::from_be_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    let (term, node_id, index) = (word(2), word(10), word(18));
    if i64::try_from(index).ok() != Some(offset) {
        return Err(invalid(format!(
            "entry at offset {offset} names index {index}"
        )));
    }
    let log_id = LogId::new(LeaderId { term, node_id }, index);
    let payload = match (key[1], value) {
        (KIND_BLANK, None) => EntryPayload::Blank,
        (KIND_NORMAL, Some(bytes)) if bytes.len() <= ENTRY_PAYLOAD_BYTES_MAX => {
            EntryPayload::Normal(MetadataPayload::new(bytes.to_vec()).map_err(invalid_limit)?)
        }
        (KIND_MEMBERSHIP, Some(json)) if json.len() <= MEMBERSHIP_ENTRY_BYTES_MAX => {
            let membership = serde_json::from_slice(json)
                .map_err(|e| invalid(format!("entry at {offset}: membership: {e}")))?;
            EntryPayload::Membership(membership)
        }
        (kind, value) => {
            return Err(invalid(format!(
                "entry at {offset}: kind {kind} with {:?} value bytes (limits: payload \
                 ENTRY_PAYLOAD_BYTES_MAX {ENTRY_PAYLOAD_BYTES_MAX}, membership \
                 MEMBERSHIP_ENTRY_BYTES_MAX {MEMBERSHIP_ENTRY_BYTES_MAX})",
                value.map(<[u8]>::len)
            )));
        }
    };
    Ok(Entry { log_id, payload })
}

fn invalid_limit(error: super::types::PayloadTooLarge) -> io::Error {
    invalid(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::entry::RaftEntry;
    use std::collections::BTreeSet;

    fn log_id(term: u64, node_id: u64, index: u64) -> LogId {
        LogId::new(LeaderId { term, node_id }, index)
    }

    /// Encodes at offset 0 (a fresh batch's base offset), so only index 0 decodes.
    fn roundtrip(entry: &Entry) -> io::Result<Vec<Entry>> {
        decode(encode(entry, 1_000).unwrap())
    }

    #[test]
    fn every_kind_of_entry_roundtrips_with_its_log_id() {
        let membership =
            super::super::types::Membership::new_with_defaults(vec![BTreeSet::from([1, 2])], []);
        for entry in [
            Entry::new_blank(log_id(3, 7, 0)),
            Entry::new_normal(
                log_id(u64::MAX, 1, 0),
                MetadataPayload::new(b"records".to_vec()).unwrap(),
            ),
            Entry::new_membership(log_id(1, 2, 0), membership),
        ] {
            assert_eq!(roundtrip(&entry).unwrap(), vec![entry]);
        }
    }

    #[test]
    fn an_entry_whose_index_is_not_its_offset_is_invalid_data() {
        let entry = Entry::new_blank(log_id(1, 1, 5));
        let error = roundtrip(&entry).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("names index 5"), "{error}");
    }

    #[test]
    fn a_payload_over_the_limit_is_refused_naming_it() {
        let error = MetadataPayload::new(vec![0; ENTRY_PAYLOAD_BYTES_MAX + 1]).unwrap_err();
        assert!(error.to_string().contains("ENTRY_PAYLOAD_BYTES_MAX"));
        let from_a_peer = serde_json::to_vec(&vec![0u8; ENTRY_PAYLOAD_BYTES_MAX + 1]).unwrap();
        let error = serde_json::from_slice::<MetadataPayload>(&from_a_peer).unwrap_err();
        assert!(
            error.to_string().contains("ENTRY_PAYLOAD_BYTES_MAX"),
            "{error}"
        );
        let at_the_limit = serde_json::to_vec(&vec![7u8; ENTRY_PAYLOAD_BYTES_MAX]).unwrap();
        assert!(serde_json::from_slice::<MetadataPayload>(&at_the_limit).is_ok());
    }
}
