//! One member of a group (Kafka's `MemberMetadata`): identity, timeouts, protocols, the
//! current assignment, and the requests it is waiting on.

use bytes::Bytes;

use crate::api::{Protocol, RequestId};
use crate::limits;

/// A group member.
#[derive(Debug, Clone)]
pub struct Member {
    /// `<client_id>-<uuid>`.
    pub id: String,
    /// `group.instance.id` for static members.
    pub instance_id: Option<String>,
    /// Client id from the request header.
    pub client_id: String,
    /// Peer address.
    pub client_host: String,
    /// Session timeout, in ms: without a heartbeat for this long the member is removed.
    pub session_timeout_ms: u64,
    /// Rebalance timeout, in ms: how long a rebalance waits for this member to rejoin.
    pub rebalance_timeout_ms: u64,
    /// Supported protocols in preference order.
    pub protocols: Vec<Protocol>,
    /// Assignment from the last completed SyncGroup.
    pub assignment: Bytes,
    /// The JoinGroup request waiting for the rebalance to complete.
    pub join_request: Option<RequestId>,
    /// The SyncGroup request waiting for the leader's assignment.
    pub sync_request: Option<RequestId>,
    /// Last time the member proved it is alive (heartbeat, join completion, sync, commit).
    pub last_heartbeat_ms: u64,
    /// Joined but never completed a join: dropped after
    /// [`limits::NEW_MEMBER_JOIN_TIMEOUT_MS`] instead of the session timeout.
    pub is_new: bool,
    /// When the member was added, in ms (for the new-member join timeout).
    pub added_ms: u64,
}

impl Member {
    /// Whether the member sent the same protocols (names and metadata, in order).
    pub fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    /// Metadata for `protocol`; empty if the member does not support it.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        let found = self.protocols.iter().find(|p| p.name == protocol);
        found.map(|p| p.metadata.clone()).unwrap_or_default()
    }

    /// The member's vote: its most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        let found = self
            .protocols
            .iter()
            .find(|p| candidates.contains(&p.name.as_str()));
        found.map(|p| p.name.as_str())
    }

    /// When the member expires if nothing happens, in ms. Members waiting in a rebalance
    /// are kept alive by it (the rebalance and sync timeouts handle them), except new
    /// members, which expire after the new-member join timeout.
    pub fn expiry_ms(&self) -> Option<u64> {
        if self.join_request.is_some() {
            return self
                .is_new
                .then_some(self.added_ms + limits::NEW_MEMBER_JOIN_TIMEOUT_MS);
        }
        if self.sync_request.is_some() {
            return None;
        }
        Some(self.last_heartbeat_ms + self.session_timeout_ms)
    }
}
