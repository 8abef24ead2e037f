//! The bounds more than one crate checks, with their unit and why: a name one crate makes
//! must pass the checks of the crates it reaches (a transform's transactional id the
//! transaction coordinator's, its group the group coordinator's). Each crate's own bounds
//! stay in its own `limits.rs`; these are the ones that used to be copied between them.

/// Longest topic name, in bytes: Kafka's own limit (`Topic.MAX_NAME_LENGTH`), which leaves
/// room for `-<partition>` in a 255-byte directory name. Checked by the broker at
/// CreateTopics, by the transaction coordinator on the partitions a transaction names, and
/// by a materialized transform's spec on its source and outputs.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Longest consumer-group id, in bytes. Kafka has none; 255 matches the topic-name bound and
/// keeps offset-record keys small. Longer ids get `INVALID_GROUP_ID` from the group
/// coordinator and from the transaction coordinator (AddOffsetsToTxn, TxnOffsetCommit).
pub const GROUP_ID_BYTES_MAX: usize = 255;

/// Longest `transactional.id`, in bytes. Kafka has none; 255 matches the group-id bound
/// and keeps transaction-log keys small. Longer ids get `INVALID_REQUEST`.
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 255;

/// Longest plugin name, in bytes: it is a file name and a URL path segment. The plugin host
/// refuses longer names at install; a transform spec naming one is refused at deploy.
pub const PLUGIN_NAME_BYTES_MAX: usize = 64;

/// Most parameters a plugin may be given. The plugin host refuses more at `init`; a
/// transform spec with more is refused at deploy.
pub const PLUGIN_PARAMS_MAX: usize = 64;

/// Longest plugin parameter key or value, in bytes (as [`PLUGIN_PARAMS_MAX`]).
pub const PLUGIN_PARAM_BYTES_MAX: usize = 4096;

/// The prefix of a materialized transform's group (`__sluice_transform/<name>`) and
/// transactional ids (`__sluice_transform/<name>/<partition>`). `/` cannot appear in a topic
/// name or a transform name, so these ids never collide with a client's; the group
/// coordinator never expires the offsets of groups under it (a transform's source
/// positions).
pub const TRANSFORM_ID_PREFIX: &str = "__sluice_transform/";

// A topic name is a group id's worth of bytes or less.
const _: () = assert!(TOPIC_NAME_BYTES_MAX <= GROUP_ID_BYTES_MAX);
