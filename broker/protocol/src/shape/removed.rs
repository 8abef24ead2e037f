//! Hand-written shapes of the request versions Kafka 4.x removed from its message specs but
//! Sluice still serves (or, Produce v0-v2, advertises and refuses after decoding) for old
//! clients, through [`crate::compat`]. Every other shape comes from the vendored specs; these
//! are the only second copy of a layout, so they are kept small: each is Kafka 3.9's spec of
//! that version, written out field by field (none is flexible). A test checks that each sits
//! below its spec's `validVersions`, so none shadows a spec'd version.

use kafka_protocol::messages::ApiKey;

use super::Field::{self, Bytes, Fixed, Str};
use super::array;

/// The (API, versions) shaped here.
pub(super) const VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 2),
    (ApiKey::CreateTopics, 0, 1),
    (ApiKey::DeleteTopics, 0, 0),
    (ApiKey::DescribeConfigs, 0, 0),
    (ApiKey::DescribeLogDirs, 0, 0),
    (ApiKey::OffsetCommit, 1, 1),
];

const I8: Field = Fixed(1);
const I16: Field = Fixed(2);
const I32: Field = Fixed(4);
const I64: Field = Fixed(8);

/// The body of a version listed in [`VERSIONS`].
pub(super) fn shape(key: ApiKey, version: i16) -> Option<Vec<Field>> {
    Some(match (key, version) {
        // acks, timeout, topics [name, partitions [index, records]].
        (ApiKey::Produce, 0..=2) => vec![I16, I32, array(vec![Str, array(vec![I32, Bytes])])],
        // topics [name, partitions, replication factor, assignments [index, broker ids],
        // configs [name, value]], timeout, (v1) validate only.
        (ApiKey::CreateTopics, 0..=1) => {
            let topic = vec![
                Str,
                I32,
                I16,
                array(vec![I32, array(vec![I32])]),
                array(vec![Str, Str]),
            ];
            let mut body = vec![array(topic), I32];
            if version == 1 {
                body.push(I8);
            }
            body
        }
        // topic names, timeout.
        (ApiKey::DeleteTopics, 0) => vec![array(vec![Str]), I32],
        // resources [type, name, config names].
        (ApiKey::DescribeConfigs, 0) => vec![array(vec![I8, Str, array(vec![Str])])],
        // topics [name, partitions] (v1's layout).
        (ApiKey::DescribeLogDirs, 0) => vec![array(vec![Str, array(vec![I32])])],
        // group, generation, member, topics [name, partitions [index, offset, commit
        // timestamp, metadata]].
        (ApiKey::OffsetCommit, 1) => vec![
            Str,
            I32,
            Str,
            array(vec![Str, array(vec![I32, I64, I64, Str])]),
        ],
        _ => return None,
    })
}
