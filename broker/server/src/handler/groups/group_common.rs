//! Helpers shared by the group API handlers: string conversions and the call to the
//! coordinator that gives up at shutdown (a JoinGroup may wait minutes for a rebalance).

use kafka_protocol::protocol::StrBytes;
use sluice_group::{Request, Response};

use super::Ctx;

/// Sends `request` to the coordinator and waits for its answer; `None` when the broker
/// shuts down first or the coordinator is gone (handlers answer COORDINATOR_NOT_AVAILABLE,
/// which clients retry elsewhere or later).
pub async fn call(ctx: &Ctx<'_>, request: Request) -> Option<Response> {
    let mut shutdown = ctx.client.shutdown.clone();
    tokio::select! {
        answer = ctx.groups.call(request) => answer,
        _ = shutdown.wait_for(|stop| *stop) => None,
    }
}

/// A wire string as an owned `String`.
pub fn string(s: &StrBytes) -> String {
    s.to_string()
}

/// A nullable wire string as an owned `Option<String>`.
pub fn opt_string(s: Option<&StrBytes>) -> Option<String> {
    s.map(string)
}
