//! KIP-951's leader hints: a partition refused NOT_LEADER_OR_FOLLOWER (or, for Fetch,
//! FENCED_LEADER_EPOCH) names its current leader and leader epoch (Produce v10+, Fetch
//! v12+), and the response carries those leaders' endpoints on the client's listener
//! (Produce v10+, Fetch v16+), so a client moves to the new leader without a Metadata
//! round trip. Only in a cluster, and only for a leader the image knows.

use std::collections::BTreeSet;

use super::Ctx;
use crate::topics::Partition;

/// The leader and leader epoch to name for `partition`, if another broker leads it.
pub fn leader_of(partition: &Partition) -> Option<(i32, i32)> {
    let placement = partition.placement()?;
    (placement.leader >= 0 && !placement.here).then_some((placement.leader, placement.leader_epoch))
}

/// A broker as the client's listener advertises it.
pub struct Endpoint {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// The endpoints of `leaders` on the listener the client came in on (live brokers only).
pub fn endpoints(ctx: &Ctx<'_>, leaders: &BTreeSet<i32>) -> Vec<Endpoint> {
    let Some(kraft) = ctx.kraft else {
        return Vec::new();
    };
    if leaders.is_empty() {
        return Vec::new();
    }
    kraft
        .live_brokers(&ctx.client.listener_name)
        .into_iter()
        .filter(|b| leaders.contains(&b.node_id))
        .map(|b| Endpoint {
            node_id: b.node_id,
            host: b.host,
            port: i32::from(b.port),
            rack: b.rack,
        })
        .collect()
}
