//! `quorum-state`: the vote, the committed log id and the purge mark of the metadata log,
//! in one small file beside it, replaced whole through `sluice_storage::io::write_durable`
//! (temp file, fsync, rename, fsync the directory) before the call that changed it returns.
//!
//! 80 bytes, big-endian: `"SLQS" | version u16 = 1 | reserved u16 = 0 | flags u8 | reserved
//! [u8; 3] | vote (term u64, node u64) | committed (term u64, node u64, index u64) | purged
//! (term u64, node u64, index u64) | crc u32` (CRC-32C of the bytes before it). Flags: bit 0
//! a vote is present, bit 1 it is committed, bit 2 a committed log id is present, bit 3 a
//! purge mark is present; absent fields are zeros. Parsing is strict: any other length,
//! magic, version, unknown flag, nonzero reserved or absent-but-nonzero field, or a CRC
//! mismatch is an error, never a default.
//!
//! The purge mark is written before the log's start moves (an intent the store completes on
//! open), so it is the authority on `last_purged_log_id`.

use std::io;
use std::path::Path;

use openraft::impls::leader_id_adv::LeaderId;
use sluice_storage::Fs;

use super::types::{LogId, Vote};

pub(crate) const FILE: &str = "quorum-state";
const MAGIC: &[u8; 4] = b"SLQS";
const VERSION: u16 = 1;
const BYTES: usize = 80;
const HAS_VOTE: u8 = 1;
const VOTE_COMMITTED: u8 = 2;
const HAS_COMMITTED: u8 = 4;
const HAS_PURGED: u8 = 8;

/// What `quorum-state` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct QuorumState {
    pub vote: Option<Vote>,
    pub committed: Option<LogId>,
    pub purged: Option<LogId>,
}

impl QuorumState {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut flags = 0u8;
        let mut out = Vec::with_capacity(BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&[0; 2]);
        let vote = self.vote.as_ref().map_or([0, 0], |v| {
            flags |= HAS_VOTE | if v.committed { VOTE_COMMITTED } else { 0 };
            [v.leader_id.term, v.leader_id.node_id]
        });
        let log_id_words = |id: &Option<LogId>| {
            id.as_ref().map_or([0, 0, 0], |id| {
                [id.leader_id.term, id.leader_id.node_id, id.index]
            })
        };
        if self.committed.is_some() {
            flags |= HAS_COMMITTED;
        }
        if self.purged.is_some() {
            flags |= HAS_PURGED;
        }
        out.push(flags);
        out.extend_from_slice(&[0; 3]);
        let words = vote
            .into_iter()
            .chain(log_id_words(&self.committed))
            .chain(log_id_words(&self.purged));
        for word in words {
            out.extend_from_slice(&word.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(out.len(), BYTES, "quorum-state has a fixed size");
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> io::Result<QuorumState> {
        let bad =
            |reason: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{FILE}: {reason}"));
        if bytes.len() != BYTES {
            return Err(bad(&format!("{} bytes, expected {BYTES}", bytes.len())));
        }
        let (body, crc) = bytes.split_at(BYTES - 4);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return Err(bad("CRC mismatch"));
        }
        if &body[..4] != MAGIC || body[4..6] != VERSION.to_be_bytes() {
            return Err(bad("bad magic or version"));
        }
        let flags = body[8];
        if body[6..8] != [0, 0] || body[9..12] != [0; 3] || flags & !0x0f != 0 {
            return Err(bad("nonzero reserved bytes or unknown flags"));
        }
        let words: Vec<u64> = body[12..]
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let present = |flag: u8, words: &[u64]| -> io::Result<bool> {
            let present = flags & flag != 0;
            if !present && words.iter().any(|&w| w != 0) {
                return Err(bad("an absent field is not zero"));
            }
            Ok(present)
        };
        let log_id = |w: &[u64]| {
            LogId::new(
                LeaderId {
                    term: w[0],
                    node_id: w[1],
                },
                w[2],
            )
        };
        let vote = present(HAS_VOTE, &words[0..2])?.then(|| {
            let mut vote = Vote::new(words[0], words[1]);
            vote.committed = flags & VOTE_COMMITTED != 0;
            vote
        });
        if vote.is_none() && flags & VOTE_COMMITTED != 0 {
            return Err(bad("a committed flag without a vote"));
        }
        Ok(QuorumState {
            vote,
            committed: present(HAS_COMMITTED, &words[2..5])?.then(|| log_id(&words[2..5])),
            purged: present(HAS_PURGED, &words[5..8])?.then(|| log_id(&words[5..8])),
        })
    }

    /// Reads `dir/quorum-state`; the default (nothing voted, committed or purged) if absent.
    pub(crate) fn load(fs: &dyn Fs, dir: &Path) -> io::Result<QuorumState> {
        let path = dir.join(FILE);
        if !fs.exists(&path)? {
            return Ok(QuorumState::default());
        }
        let file = fs.open(&path, false)?;
        let len = file.len()?;
        if len != BYTES as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{FILE}: {len} bytes, expected {BYTES}"),
            ));
        }
        let mut bytes = vec![0u8; BYTES];
        file.read_at(&mut bytes, 0)?;
        QuorumState::decode(&bytes)
    }

    /// Replaces `dir/quorum-state` durably.
    pub(crate) fn store(&self, fs: &dyn Fs, dir: &Path) -> io::Result<()> {
        sluice_storage::io::write_durable(fs, &dir.join(FILE), &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_id(term: u64, node_id: u64, index: u64) -> LogId {
        LogId::new(LeaderId { term, node_id }, index)
    }

    #[test]
    fn every_field_roundtrips_and_absent_ones_stay_absent() {
        let mut committed_vote = Vote::new(9, 3);
        committed_vote.committed = true;
        for state in [
            QuorumState::default(),
            QuorumState {
                vote: Some(Vote::new(2, 1)),
                ..QuorumState::default()
            },
            QuorumState {
                vote: Some(committed_vote),
                committed: Some(log_id(9, 3, 41)),
                purged: Some(log_id(u64::MAX, u64::MAX, u64::MAX)),
            },
        ] {
            assert_eq!(QuorumState::decode(&state.encode()).unwrap(), state);
        }
    }

    #[test]
    fn any_flipped_byte_or_other_length_is_refused() {
        let state = QuorumState {
            vote: Some(Vote::new(2, 1)),
            committed: Some(log_id(2, 1, 7)),
            purged: None,
        };
        let bytes = state.encode();
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(QuorumState::decode(&bad).is_err(), "byte {at} flipped");
        }
        assert!(QuorumState::decode(&bytes[..BYTES - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(QuorumState::decode(&longer).is_err());
    }
}
