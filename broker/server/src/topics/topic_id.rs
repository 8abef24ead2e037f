//! Topic ids (KIP-516): a random UUID chosen when a topic is created and kept in its
//! `topic.json`. Clients of the consumer group protocol (KIP-848) name assigned partitions
//! by topic id, and learn ids from Metadata v10+. A topic created before ids existed (no
//! `topic_id` in its file) and a view get an id derived from their name, stable across
//! restarts.

pub use uuid::Uuid;

use crate::random::OsRng;

/// A fresh random id (version 4) for a new topic (`random.rs`).
pub fn new_topic_id() -> Uuid {
    let mut bytes = [0u8; 16];
    OsRng::fill(&mut bytes).expect("getrandom(2) failed");
    non_zero(uuid::Builder::from_random_bytes(bytes).into_uuid())
}

/// The id of a topic without a stored one, or of a view: FNV-1a 64 of the name under two
/// offset bases, shaped as a version-4 UUID.
pub fn derived_topic_id(name: &str) -> Uuid {
    const BASES: [u64; 2] = [0xcbf2_9ce4_8422_2325, 0x8422_2325_cbf2_9ce4];
    let mut bytes = [0u8; 16];
    for (chunk, base) in bytes.chunks_mut(8).zip(BASES) {
        let hash = name.bytes().fold(base, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        chunk.copy_from_slice(&hash.to_le_bytes());
    }
    non_zero(uuid::Builder::from_random_bytes(bytes).into_uuid())
}

/// Parses a stored id (`topic_id` in topic.json); `None` for an absent or damaged one.
pub fn parse_topic_id(text: &str) -> Option<Uuid> {
    Uuid::try_parse(text).ok().filter(|id| !id.is_nil())
}

/// Kafka reserves the zero UUID ("no topic id"); the version bits already make it
/// impossible here, checked in pairs.
fn non_zero(id: Uuid) -> Uuid {
    assert!(!id.is_nil(), "a version-4 UUID is never nil");
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        assert_eq!(derived_topic_id("orders"), derived_topic_id("orders"));
        assert_ne!(derived_topic_id("orders"), derived_topic_id("orders2"));
        assert_eq!(derived_topic_id("orders").get_version_num(), 4);
    }

    #[test]
    fn new_ids_differ_and_roundtrip() {
        let (a, b) = (new_topic_id(), new_topic_id());
        assert_ne!(a, b);
        assert_eq!(parse_topic_id(&a.to_string()), Some(a));
        assert_eq!(parse_topic_id("not-a-uuid"), None);
    }
}
