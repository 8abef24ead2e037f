//! Tests of the metadata quorum's storage and Raft wiring (`cargo test -p sluice-server --lib
//! cluster`): openraft's own storage suite (`suite.rs`), restart and crash recovery of the
//! log store and state machine (`restart.rs`), every write and sync of the log store failed
//! and crashed (`fault_sweep.rs`), and three Raft instances over an in-memory
//! network electing a leader and applying a write everywhere, and a learner catching up from
//! a snapshot after a purge (`smoke.rs`); the quorum service over real TCP: election,
//! registration, forwarding with read-your-writes, failover, restart, five voters losing two,
//! another cluster's peer refused (`quorum.rs`).

mod fault_sweep;
mod quorum;
mod restart;
mod smoke;
mod suite;

use super::{MetadataApply, RestoreError};

/// A metadata image for tests: the payloads applied, in order, with their indexes. Its
/// snapshot is `count u32 | count x (index u64, length u32, bytes)`; its reply to an entry
/// is the number of entries applied so far (4 bytes).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct TestImage {
    pub applied: Vec<(u64, Vec<u8>)>,
}

impl MetadataApply for TestImage {
    fn apply(&mut self, index: u64, payload: &[u8]) -> Vec<u8> {
        self.applied.push((index, payload.to_vec()));
        (self.applied.len() as u32).to_be_bytes().to_vec()
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = (self.applied.len() as u32).to_be_bytes().to_vec();
        for (index, bytes) in &self.applied {
            out.extend_from_slice(&index.to_be_bytes());
            out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
            out.extend_from_slice(bytes);
        }
        out
    }

    fn restore(&mut self, _index: Option<u64>, bytes: &[u8]) -> Result<(), RestoreError> {
        let bad = || RestoreError("truncated test image".to_owned());
        let take = |at: &mut usize, n: usize| -> Result<&[u8], RestoreError> {
            let slice = bytes.get(*at..*at + n).ok_or_else(bad)?;
            *at += n;
            Ok(slice)
        };
        let mut at = 0;
        let count = u32::from_be_bytes(take(&mut at, 4)?.try_into().expect("4 bytes"));
        let mut applied = Vec::new();
        for _ in 0..count {
            let index = u64::from_be_bytes(take(&mut at, 8)?.try_into().expect("8 bytes"));
            let len = u32::from_be_bytes(take(&mut at, 4)?.try_into().expect("4 bytes"));
            applied.push((index, take(&mut at, len as usize)?.to_vec()));
        }
        if at != bytes.len() {
            return Err(RestoreError("trailing bytes".to_owned()));
        }
        self.applied = applied;
        Ok(())
    }
}
