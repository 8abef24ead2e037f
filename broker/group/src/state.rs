//! The classic group states (Kafka's `GroupState`), and which moves between them are legal;
//! and the states of a consumer-protocol (KIP-848) group.
//!
//! ```text
//!            join                      all joined / timeout          leader's SyncGroup
//!   Empty ─────────▶ PreparingRebalance ─────────────▶ CompletingRebalance ─────────▶ Stable
//!     ▲                 │   ▲    ▲                            │                         │
//!     │  no members left│   │    └──── join / leave / expiry ─┘                         │
//!     └─────────────────┘   └───────────── join (new or changed) / leave / expiry ──────┘
//!   Empty ──DeleteGroups / all offsets expired──▶ Dead (removed)
//! ```

use std::fmt;

/// A group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; may hold committed offsets.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment in SyncGroup.
    CompletingRebalance,
    /// Assignment distributed; members heartbeat.
    Stable,
    /// Deleted; only seen in DescribeGroups for groups that do not exist.
    Dead,
}

impl GroupState {
    /// Kafka's name, as in DescribeGroups and ListGroups v4.
    pub const fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Whether `self -> to` is a legal move (Kafka's `validPreviousStates`).
    pub const fn can_move_to(self, to: GroupState) -> bool {
        use GroupState::{CompletingRebalance, Dead, Empty, PreparingRebalance, Stable};
        matches!(
            (self, to),
            (Stable | CompletingRebalance | Empty, PreparingRebalance)
                | (PreparingRebalance, CompletingRebalance | Empty)
                | (CompletingRebalance, Stable)
                | (
                    Empty | Stable | PreparingRebalance | CompletingRebalance,
                    Dead
                )
        )
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A consumer-protocol group's state as ListGroups and ConsumerGroupDescribe name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The target assignment is behind the group epoch (never seen here: the target is
    /// computed in the same step that bumps the epoch).
    Assigning,
    /// Some member is not yet at the target.
    Reconciling,
    /// Every member is at the target epoch with its whole target.
    Stable,
}

impl ConsumerGroupState {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::Stable => "Stable",
        }
    }
}
