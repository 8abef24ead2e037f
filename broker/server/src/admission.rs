//! What a client must be granted before the broker spends memory on it: a connection slot
//! (`max.connections`: accepting waits for one), a slot of its address
//! (`max.connections.per.ip`: a connection past it is closed at once, as Kafka does), and,
//! for every request frame it sends, bytes of the broker-wide request budget
//! (`queued.max.request.bytes`: a reader waits for room before reading a frame's body, so
//! requests from every connection together hold at most that much; nothing is dropped).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::BrokerConfig;

/// The broker-wide admission state, shared by the listener and every connection.
#[derive(Debug)]
pub struct Admission {
    /// One permit per open connection (`max.connections`).
    pub connections: Arc<Semaphore>,
    /// Open connections per client address. Holds at most one entry per open connection,
    /// so `max.connections` bounds it; an address's entry goes with its last connection.
    per_ip: Mutex<HashMap<IpAddr, u32>>,
    per_ip_max: u32,
    /// Bytes of request frames read and not yet decoded (`queued.max.request.bytes`).
    pub request_bytes: Arc<Semaphore>,
}

impl Admission {
    /// The limits of `config`, with at most `connections_max` connections (the descriptor
    /// budget's share: `crate::descriptors`).
    pub fn new(config: &BrokerConfig, connections_max: u64) -> Arc<Self> {
        let queued = usize::try_from(config.queued_max_request_bytes)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        let connections = u32::try_from(connections_max)
            .unwrap_or(u32::MAX)
            .min(config.max_connections);
        Arc::new(Self {
            connections: Arc::new(Semaphore::new(connections as usize)),
            per_ip: Mutex::new(HashMap::new()),
            // Above max.connections it can never be reached: setting only the total is valid.
            per_ip_max: config.max_connections_per_ip.min(connections),
            request_bytes: Arc::new(Semaphore::new(queued)),
        })
    }

    /// A slot for one more connection from `ip`, or `None` when it has
    /// `max.connections.per.ip` open already.
    pub fn admit_ip(self: &Arc<Self>, ip: IpAddr) -> Option<IpSlot> {
        let mut open = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= self.per_ip_max {
            return None;
        }
        *count += 1;
        Some(IpSlot {
            admission: Arc::clone(self),
            ip,
        })
    }

    /// Connections open from `ip` (tests and metrics).
    pub fn open_from(&self, ip: IpAddr) -> u32 {
        let open = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&ip).copied().unwrap_or(0)
    }
}

/// One connection's share of its address's `max.connections.per.ip`; returned on drop.
#[derive(Debug)]
pub struct IpSlot {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut open = self
            .admission
            .per_ip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// A request frame's share of its connection's read-ahead and of the broker-wide request
/// budget. Dropped once the request is decoded (a Produce: once its records are appended),
/// so a request that then waits (a long-polling Fetch, a JoinGroup until the rebalance)
/// holds no budget; handlers that wait copy what they keep out of the frame.
#[derive(Debug)]
pub struct FrameBudget {
    _connection: OwnedSemaphorePermit,
    _broker: OwnedSemaphorePermit,
}

impl FrameBudget {
    /// Both shares of one frame.
    pub fn new(connection: OwnedSemaphorePermit, broker: OwnedSemaphorePermit) -> Self {
        Self {
            _connection: connection,
            _broker: broker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_share_and_gets_it_back() {
        let config = BrokerConfig {
            max_connections_per_ip: 2,
            ..BrokerConfig::default()
        };
        let admission = Admission::new(&config, u64::MAX);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let a = admission.admit_ip(ip).unwrap();
        let _b = admission.admit_ip(ip).unwrap();
        assert!(admission.admit_ip(ip).is_none(), "third from one address");
        assert!(
            admission.admit_ip(other).is_some(),
            "another address is not affected"
        );
        drop(a);
        assert_eq!(admission.open_from(ip), 1);
        assert!(admission.admit_ip(ip).is_some());
    }
}
