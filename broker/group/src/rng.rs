//! Injected randomness: member ids are `<client_id>-<uuid>` as Kafka makes them, with the
//! UUID drawn from a [`MemberIdRng`] so tests and simulations replay exactly.

use std::fmt;

/// Source of random bits for member ids.
///
/// The server should back this with an OS-seeded generator: member ids act as weak
/// credentials (a guessed id could heartbeat for another member), like Kafka's
/// `UUID.randomUUID`. Tests use [`SplitMix64`] with a fixed seed.
pub trait MemberIdRng: fmt::Debug + Send {
    /// Next 64 random bits.
    fn next_u64(&mut self) -> u64;
}

/// The seeded generator of tests and simulations (`sluice_kafka::rng`).
pub use sluice_kafka::rng::SplitMix64;

impl MemberIdRng for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        SplitMix64::next_u64(self)
    }
}

/// `<client_id>-<uuid v4>`, Kafka's member id shape.
pub(crate) fn new_member_id(client_id: &str, rng: &mut dyn MemberIdRng) -> String {
    let high = (rng.next_u64() & !0xF000) | 0x4000; // version 4
    let low = (rng.next_u64() & !(0b11 << 62)) | (0b10 << 62); // RFC 4122 variant
    format!(
        "{client_id}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xFFFF,
        high & 0xFFFF,
        low >> 48,
        low & 0xFFFF_FFFF_FFFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_id_is_client_id_dash_uuid_v4() {
        let mut rng = SplitMix64::new(7);
        let id = new_member_id("rdkafka", &mut rng);
        let uuid = id.strip_prefix("rdkafka-").unwrap();
        let parts: Vec<&str> = uuid.split('-').collect();
        let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        assert_eq!(lens, [8, 4, 4, 4, 12]);
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(id, new_member_id("rdkafka", &mut rng));
    }

    #[test]
    fn same_seed_same_ids() {
        let a = new_member_id("c", &mut SplitMix64::new(1));
        let b = new_member_id("c", &mut SplitMix64::new(1));
        assert_eq!(a, b);
    }
}
