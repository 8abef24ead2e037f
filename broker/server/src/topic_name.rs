//! Topic names: Kafka's rules for a name a client or operator may create (the characters,
//! the length, `TOPIC_NAME_BYTES_MAX`), and Kafka's internal topics, whose names Sluice
//! refuses because it keeps their state in logs of its own (clients would mistake a topic by
//! either name for Kafka's). Views are topics too and follow the same rules.

use kafka_protocol::ResponseError;

use crate::error::KafkaError;
use crate::limits;

/// Kafka's internal topic of committed offsets. Sluice keeps them in its own log
/// (`crate::group`'s offsets log under `<data.dir>/consumer-offsets/`), not in a topic.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's internal topic of transaction state. Sluice keeps it in its own log
/// (`crate::txn`, `<data.dir>/transaction-state/`), not in a topic.
pub const TRANSACTION_TOPIC: &str = "__transaction_state";

/// Kafka's topic name rules: 1..=249 chars of `[a-zA-Z0-9._-]`, not `.` or `..`; neither
/// of Kafka's internal topics.
pub fn validate(name: &str) -> Result<(), KafkaError> {
    let invalid = |why: &str| {
        KafkaError::new(
            ResponseError::InvalidTopicException,
            format!("topic name {name:?} {why}"),
        )
    };
    if name.is_empty() || name == "." || name == ".." {
        return Err(invalid("is not allowed"));
    }
    if name == OFFSETS_TOPIC {
        return Err(invalid(
            "is Kafka's internal offsets topic; Sluice keeps committed offsets in data.dir/consumer-offsets/",
        ));
    }
    if name == TRANSACTION_TOPIC {
        return Err(invalid(
            "is Kafka's internal transaction topic; Sluice keeps transaction state in data.dir/transaction-state/",
        ));
    }
    if name.len() > limits::TOPIC_NAME_BYTES_MAX {
        return Err(invalid(&format!(
            "is longer than {} bytes",
            limits::TOPIC_NAME_BYTES_MAX
        )));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(invalid("has characters outside [a-zA-Z0-9._-]"));
    }
    Ok(())
}
