//! Every bound the metadata records, the image and the controller enforce, with its unit and
//! why. A record past a bound is refused at decode with an error naming the bound; the
//! controller refuses a request that would write one (`INVALID_REQUEST` or the Kafka code
//! of the field) before it writes anything.

use sluice_kafka::bytes::Limit;

/// Longest topic name, in bytes: Kafka's own (`sluice_kafka::limits`).
pub use sluice_kafka::limits::TOPIC_NAME_BYTES_MAX;

/// Longest plugin name, in bytes: a file name and a URL segment (`sluice_kafka::limits`).
pub use sluice_kafka::limits::PLUGIN_NAME_BYTES_MAX;

/// Largest encoded metadata record, in bytes. The largest records are a view or transform
/// with a spec at [`SPEC_BYTES_MAX`]; everything else is well under 64 KiB.
pub const RECORD_BYTES_MAX: usize = 512 * 1024;

/// Most records in one batch (one Raft entry). A CreateTopics of one topic with
/// [`PARTITIONS_PER_TOPIC_MAX`] partitions and [`CONFIGS_PER_RESOURCE_MAX`] configs fits;
/// a controller decision never writes more (it refuses the request first).
pub const BATCH_RECORDS_MAX: usize = 20_000;

/// Largest encoded batch, in bytes: what one Raft entry may carry (openraft sends entries
/// whole in AppendEntries, so this also bounds one replication message's entry).
pub const BATCH_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Largest snapshot of the whole image, in bytes (docs/design/cluster-brief.md §4a: "for example 256 MiB").
/// A restore refuses a larger one before reading it.
pub const SNAPSHOT_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Longest cluster id, in bytes. Kafka's are 22 characters (a base64 UUID); room to spare.
pub const CLUSTER_ID_BYTES_MAX: usize = 64;

/// Most registered brokers. A bound on the image, far above any cluster Sluice targets.
pub const BROKERS_MAX: usize = 1024;

/// Most listeners one broker registers (PLAINTEXT, SSL, SASL_*, CONTROLLER, internal ones).
pub const LISTENERS_MAX: usize = 16;

/// Longest listener name or host, in bytes (a DNS name is at most 253).
pub const LISTENER_FIELD_BYTES_MAX: usize = 255;

/// Longest `broker.rack`, in bytes.
pub const RACK_BYTES_MAX: usize = 255;

/// Most topics in the image.
pub const TOPICS_MAX: usize = 100_000;

/// Most partitions of one topic. Kafka has no hard cap; this keeps one topic's creation
/// within one batch ([`BATCH_RECORDS_MAX`]).
pub const PARTITIONS_PER_TOPIC_MAX: usize = 10_000;

/// Most partitions in the image, over all topics.
pub const PARTITIONS_MAX: usize = 200_000;

/// Most replicas of one partition (Kafka's replication factor is an i16; real ones are 1-5).
pub const REPLICAS_MAX: usize = 32;

/// Longest config key, in bytes (Kafka's keys are under 64).
pub const CONFIG_KEY_BYTES_MAX: usize = 255;

/// Longest config value, in bytes (a `sluice.validator` parameter list, a long regex).
pub const CONFIG_VALUE_BYTES_MAX: usize = 32 * 1024;

/// Most config entries on one resource (a topic, a broker, the cluster default).
pub const CONFIGS_PER_RESOURCE_MAX: usize = 1000;

/// Most resources with configs (every topic plus brokers).
pub const CONFIG_RESOURCES_MAX: usize = TOPICS_MAX + BROKERS_MAX + 1;

/// Longest view or transform name, in bytes (a file name today).
pub const OBJECT_NAME_BYTES_MAX: usize = 249;

/// Largest view or transform spec (its JSON), in bytes.
pub const SPEC_BYTES_MAX: usize = 256 * 1024;

/// Most views, most transforms, most plugins (each).
pub const OBJECTS_MAX: usize = 10_000;

/// Largest plugin component a version record may name, in bytes (the bytes themselves never
/// enter the metadata log). Matches the plugin host's upload bound in spirit: 512 MiB.
pub const PLUGIN_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// Longest feature name (`metadata.version`, `sluice.records`), in bytes.
pub const FEATURE_NAME_BYTES_MAX: usize = 64;

/// Most features.
pub const FEATURES_MAX: usize = 64;

/// Producer ids handed out per AllocateProducerIds (KIP-730's block size, Kafka's 1000).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Kafka's `broker.session.timeout.ms` default, in milliseconds (9 s): a broker not heard
/// from for longer is fenced.
pub const DEFAULT_BROKER_SESSION_TIMEOUT_MS: i64 = 9_000;

/// Kafka's `leader.imbalance.check.interval.seconds` default, in milliseconds (5 min): how
/// often the controller moves leadership back to preferred replicas
/// (`auto.leader.rebalance.enable`).
pub const DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS: i64 = 300_000;

/// Kafka's `leader.imbalance.per.broker.percentage` default: a broker's preferred
/// partitions are moved back to it once more than this share of them is led elsewhere.
pub const DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: u32 = 10;

/// A topic config the controller reads: Kafka's `unclean.leader.election.enable`. When
/// `true`, a partition whose in-sync replicas are all gone is led by any live replica (its
/// ISR becomes that replica alone): available again, at the price of the records only the
/// lost ISR had.
pub const UNCLEAN_LEADER_ELECTION_KEY: &str = "unclean.leader.election.enable";

/// Bounds on `broker.session.timeout.ms`, in milliseconds: below 100 ms every GC pause
/// fences; above an hour a dead broker keeps its partitions offline for too long.
pub const BROKER_SESSION_TIMEOUT_MS_MIN: i64 = 100;
/// See [`BROKER_SESSION_TIMEOUT_MS_MIN`].
pub const BROKER_SESSION_TIMEOUT_MS_MAX: i64 = 3_600_000;

/// The named forms of the bounds the decoder checks, for its errors.
pub(crate) mod named {
    use super::*;

    pub const CLUSTER_ID: Limit = Limit::new("CLUSTER_ID_BYTES_MAX", CLUSTER_ID_BYTES_MAX);
    pub const LISTENERS: Limit = Limit::new("LISTENERS_MAX", LISTENERS_MAX);
    pub const LISTENER_FIELD: Limit =
        Limit::new("LISTENER_FIELD_BYTES_MAX", LISTENER_FIELD_BYTES_MAX);
    pub const RACK: Limit = Limit::new("RACK_BYTES_MAX", RACK_BYTES_MAX);
    pub const TOPIC_NAME: Limit = Limit::new("TOPIC_NAME_BYTES_MAX", TOPIC_NAME_BYTES_MAX);
    pub const REPLICAS: Limit = Limit::new("REPLICAS_MAX", REPLICAS_MAX);
    pub const CONFIG_KEY: Limit = Limit::new("CONFIG_KEY_BYTES_MAX", CONFIG_KEY_BYTES_MAX);
    pub const CONFIG_VALUE: Limit = Limit::new("CONFIG_VALUE_BYTES_MAX", CONFIG_VALUE_BYTES_MAX);
    pub const OBJECT_NAME: Limit = Limit::new("OBJECT_NAME_BYTES_MAX", OBJECT_NAME_BYTES_MAX);
    pub const SPEC: Limit = Limit::new("SPEC_BYTES_MAX", SPEC_BYTES_MAX);
    pub const PLUGIN_NAME: Limit = Limit::new("PLUGIN_NAME_BYTES_MAX", PLUGIN_NAME_BYTES_MAX);
    pub const FEATURE_NAME: Limit = Limit::new("FEATURE_NAME_BYTES_MAX", FEATURE_NAME_BYTES_MAX);
    pub const SECURITY_RECORD: Limit = Limit::new(
        "SECURITY_RECORD_BYTES_MAX",
        sluice_security::limits::SECURITY_RECORD_BYTES_MAX,
    );
    pub const RECORD: Limit = Limit::new("RECORD_BYTES_MAX", RECORD_BYTES_MAX);
    pub const BATCH_RECORDS: Limit = Limit::new("BATCH_RECORDS_MAX", BATCH_RECORDS_MAX);
    pub const BROKERS: Limit = Limit::new("BROKERS_MAX", BROKERS_MAX);
    pub const SNAPSHOT_RECORDS: Limit = Limit::new("SNAPSHOT_RECORDS_MAX", SNAPSHOT_RECORDS_MAX);
}

/// Most records in a snapshot: every partition, topic, config, object and feature, plus the
/// security state's records, with room to spare.
pub const SNAPSHOT_RECORDS_MAX: usize = 4 * PARTITIONS_MAX;

// A spec-carrying record (name, spec, a few fixed fields) fits in one record.
const _: () = assert!(SPEC_BYTES_MAX + OBJECT_NAME_BYTES_MAX + 64 < RECORD_BYTES_MAX);
// A security record travels inside one metadata record.
const _: () = assert!(sluice_security::limits::SECURITY_RECORD_BYTES_MAX + 16 < RECORD_BYTES_MAX);
// A config value and key fit a record.
const _: () = assert!(
    CONFIG_VALUE_BYTES_MAX + CONFIG_KEY_BYTES_MAX + TOPIC_NAME_BYTES_MAX < RECORD_BYTES_MAX
);
// One topic's creation (topic record, partitions, configs) fits one batch.
const _: () = assert!(1 + PARTITIONS_PER_TOPIC_MAX + CONFIGS_PER_RESOURCE_MAX <= BATCH_RECORDS_MAX);
// One record fits a batch; a batch fits u32 lengths; a snapshot fits u32 lengths.
const _: () = assert!(RECORD_BYTES_MAX < BATCH_BYTES_MAX);
const _: () = assert!(SNAPSHOT_BYTES_MAX <= u32::MAX as usize);
// Lengths written with u16 prefixes fit them.
const _: () = assert!(CONFIG_VALUE_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(sluice_security::limits::SECURITY_RECORD_BYTES_MAX <= u16::MAX as usize);
// A partition count fits Kafka's i32 and the whole image's bound.
const _: () = assert!(PARTITIONS_PER_TOPIC_MAX <= PARTITIONS_MAX);
const _: () = assert!(
    BROKER_SESSION_TIMEOUT_MS_MIN <= DEFAULT_BROKER_SESSION_TIMEOUT_MS
        && DEFAULT_BROKER_SESSION_TIMEOUT_MS <= BROKER_SESSION_TIMEOUT_MS_MAX
);
