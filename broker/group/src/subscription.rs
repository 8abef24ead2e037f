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

/// The protocol type of Kafka consumers; only its metadata is parsed.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The subscribed topics in one member's subscription metadata, `None` if the bytes are
/// not a consumer-protocol subscription.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut r = Cursor { bytes: metadata };
    let version = i16::from_be_bytes(r.take()?);
    if version < 0 {
        return None;
    }
    let count = usize::try_from(i32::from_be_bytes(r.take()?)).ok()?;
    if count > r.bytes.len() / 2 {
        return None; // each topic needs at least its 2-byte length
    }
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let len = usize::try_from(i16::from_be_bytes(r.take()?)).ok()?;
        let raw = r.slice(len)?;
        topics.push(std::str::from_utf8(raw).ok()?.to_owned());
    }
    let user_data_len = i32::from_be_bytes(r.take()?);
    if user_data_len >= 0 {
        r.slice(usize::try_from(user_data_len).ok()?)?;
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

struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn slice(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.slice(N)?.try_into().ok()
    }
}

/// Encodes a version-0 subscription (for tests and simulations).
pub fn encode_subscription_v0(topics: &[&str]) -> Vec<u8> {
    let mut out = 0i16.to_be_bytes().to_vec();
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
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
