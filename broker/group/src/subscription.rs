//! The topics a `consumer` group subscribes to, read from its members' protocol metadata,
//! so offsets of topics no group member consumes any more can expire while the group is
//! Stable (Kafka's `computeSubscribedTopics`).
//!
//! Like Kafka, this reads only the version-0 prefix of `ConsumerProtocolSubscription`,
//! which every later version starts with (non-flexible encoding, big-endian):
//! ```text
//! i16 version
//! i32 topic_count, then topic_count x (i16 len, len bytes UTF-8)
//! i32 user_data_len (-1 = null), then user_data_len bytes
//! ... (owned partitions, generation, rack in later versions: ignored)
//! ```

use std::collections::BTreeSet;

use sluice_kafka::bytes::{Limit, Reader, Writer};

/// The protocol type of Kafka consumers; only its metadata is parsed.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The subscribed topics in one member's subscription metadata, `None` if the bytes are
/// not a consumer-protocol subscription.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    // Topics are bounded by their i16 length and the bytes; how many, by the bytes (each
    // needs at least its 2-byte length).
    const TOPIC: Limit = Limit::new("an i16 length", i16::MAX as usize);
    const TOPICS: Limit = Limit::new("an i32 count", i32::MAX as usize);
    let mut r = Reader::new(metadata);
    let version = r.i16("version").ok()?;
    if version < 0 {
        return None;
    }
    let count = r.count_i32("topics", TOPICS, 2).ok()?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        topics.push(r.str_i16("topic", TOPIC).ok()?);
    }
    let user_data_len = r.i32("user data length").ok()?;
    if user_data_len >= 0 {
        r.take("user data", usize::try_from(user_data_len).ok()?)
            .ok()?;
    }
    Some(topics)
}

/// The union of all members' subscriptions, `None` if any member's metadata is unreadable.
pub(crate) fn union<'a>(metadata: impl Iterator<Item = &'a [u8]>) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for m in metadata {
        all.extend(subscribed_topics(m)?);
    }
    Some(all)
}

/// Encodes a version-0 subscription (for tests and simulations).
pub fn encode_subscription_v0(topics: &[&str]) -> Vec<u8> {
    let mut w = Writer::new();
    w.i16(0).count_i32(topics.len());
    for t in topics {
        w.str_i16(t);
    }
    w.i32(-1);
    w.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_v0_prefix_of_any_version() {
        let v0 = encode_subscription_v0(&["a", "bc"]);
        assert_eq!(
            subscribed_topics(&v0),
            Some(vec!["a".to_owned(), "bc".to_owned()])
        );
        let mut v3 = v0.clone();
        v3[1] = 3;
        v3.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7, 0xFF, 0xFF]); // owned, generation, rack
        assert_eq!(subscribed_topics(&v3).unwrap().len(), 2);
    }

    #[test]
    fn rejects_what_is_not_a_subscription() {
        assert_eq!(subscribed_topics(b"sub"), None);
        assert_eq!(
            subscribed_topics(&[0, 0, 0x7F, 0xFF, 0xFF, 0xFF]),
            None,
            "count beyond the bytes"
        );
        assert_eq!(subscribed_topics(&[0xFF, 0xFF]), None, "negative version");
        let mut no_user_data = encode_subscription_v0(&["a"]);
        no_user_data.truncate(no_user_data.len() - 4);
        assert_eq!(subscribed_topics(&no_user_data), None);
        let a = encode_subscription_v0(&["a"]);
        let b = encode_subscription_v0(&["b"]);
        assert_eq!(union([&a[..], &b[..]].into_iter()).unwrap().len(), 2);
        assert_eq!(union([&a[..], &b"x"[..]].into_iter()), None);
    }
}
