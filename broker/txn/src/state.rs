//! [`TxnState`]: the states of a transaction, with Kafka's names and ids.

/// A transactional id's state (Kafka's `TransactionState`, less the transient
/// `PrepareEpochFence`, which is never persisted).
///
/// ```text
/// Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
///   ▲                                    │  └──EndTxn(abort), timeout,──▶ PrepareAbort ──markers──▶ CompleteAbort
///   └──InitProducerId (epoch bump)───────┘      InitProducerId
/// Complete* ──AddPartitions──▶ Ongoing;  Empty/Complete* ──expiry──▶ Dead (tombstone)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction since the last InitProducerId.
    Empty,
    /// A transaction has partitions or offsets added.
    Ongoing,
    /// EndTxn(commit) is persisted; commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId is persisted; abort markers are
    /// being written.
    PrepareAbort,
    /// The last transaction committed; its markers are written.
    CompleteCommit,
    /// The last transaction aborted; its markers are written.
    CompleteAbort,
    /// The transactional id expired (only in a record being applied; never held).
    Dead,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 7] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
    ];

    /// Kafka's name, as DescribeTransactions and ListTransactions report it.
    pub const fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
        }
    }

    /// The state with Kafka's name (ListTransactions state filters), if any.
    pub fn from_name(name: &str) -> Option<TxnState> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Kafka's byte id of the state (`TransactionState.id`), as written in records.
    pub const fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
        }
    }

    /// The state with the byte id, if any.
    pub fn from_id(id: i8) -> Option<TxnState> {
        Self::ALL.into_iter().find(|s| s.id() == id)
    }

    /// No transaction in progress: InitProducerId bumps the epoch, AddPartitions starts a
    /// new transaction, and the id may expire.
    pub const fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// Markers are being written.
    pub const fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        for s in TxnState::ALL {
            assert_eq!(TxnState::from_name(s.name()), Some(s));
            assert_eq!(TxnState::from_id(s.id()), Some(s));
        }
        assert_eq!(TxnState::from_name("PrepareEpochFence"), None);
        assert_eq!(TxnState::from_id(7), None);
    }
}
