//! Produce into a topic with a validator plugin (`sluice.validator`): before anything of a
//! partition entry is appended, each of its record batches is decoded (decompressed if
//! needed, bounded by `VALIDATOR_DECOMPRESSED_BYTES_MAX`) and handed to the plugin once as
//! a columnar batch. A step the produce handler calls, like `reroute`; the batches are
//! appended exactly as the client sent them when every record passes.
//!
//! What the partition's response says (docs/plugins.md, "Validators"):
//! - every record passes: nothing changes, the append goes on;
//! - the plugin refuses records: INVALID_RECORD, the plugin's reason for each refused record
//!   in `record_errors` (KIP-467; the index counts the records of the entry, which is the
//!   index in its batch when the entry is one batch, as clients send it), at most
//!   `VALIDATOR_RECORD_ERRORS_MAX` of them, and nothing of the entry appended;
//! - the plugin fails (trap, timeout, memory, broken contract): POLICY_VIOLATION and nothing
//!   appended under `sluice.validator.on.failure = reject` (the default); under `allow`, the
//!   entry is appended unvalidated and the failure logged and counted in the plugin's stats;
//! - no instance could be had in time: REQUEST_TIMED_OUT, which clients retry.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use sluice_storage::batch::iter_batches;

use sluice_plugin_host::Registry;

use crate::error::KafkaError;
use crate::limits;
use crate::plugins::{TopicValidator, call_error};
use crate::records::{self, CodecError, DecompressLimit};
use crate::topic_config::{self, ValidatorFailure};
use crate::topics::Topic;

/// How far a produced batch may decompress before the validator sees it.
const DECOMPRESS_LIMIT: DecompressLimit = DecompressLimit {
    bytes: limits::VALIDATOR_DECOMPRESSED_BYTES_MAX,
    name: "VALIDATOR_DECOMPRESSED_BYTES_MAX",
};

/// Runs the topic's validator over one partition entry's batches; `Ok` lets the append go on.
pub(crate) fn check(
    plugins: &Registry,
    topic: &Topic,
    validator: &TopicValidator,
    index: i32,
    records: &Bytes,
) -> Result<(), KafkaError> {
    let handle = validator.handle(plugins)?;
    let name = &topic.name;
    let invalid = |e: CodecError| records::kafka_error(name, index, e);
    let mut refused = KafkaError::new(ResponseError::InvalidRecord, String::new());
    let mut refused_count = 0usize;
    let mut seen = 0usize;
    records::with_columns(|columns| {
        for item in iter_batches(records) {
            let (header, bytes) = item.map_err(|e| invalid(CodecError::Invalid(e)))?;
            if header.is_control() {
                continue; // refused from clients by `records::validate::produced`
            }
            columns.clear();
            let decoded = records::decode(bytes, columns, DECOMPRESS_LIMIT).map_err(invalid)?;
            let verdict = handle.validate(columns);
            let passed = verdict.as_ref().ok().map(|r| decoded.len() - r.len());
            validator.stats.record(decoded.len(), passed);
            let refusals = match verdict {
                Ok(refusals) => refusals,
                Err(e) => {
                    let failure = call_error(name, "validator", &e);
                    if failure.code == ResponseError::PolicyViolation
                        && topic_config::validator_failure(&topic.overrides)
                            == ValidatorFailure::Allow
                    {
                        tracing::warn!(topic = %name, partition = index, plugin = handle.plugin(), "validator failed; appending unvalidated (sluice.validator.on.failure=allow): {e}");
                        return Ok(());
                    }
                    return Err(failure);
                }
            };
            for r in refusals {
                refused_count += 1;
                if refused.record_errors.len() < limits::VALIDATOR_RECORD_ERRORS_MAX {
                    let at = i32::try_from(seen + r.index as usize).unwrap_or(i32::MAX);
                    refused.record_errors.push((at, r.reason));
                }
            }
            seen += decoded.len();
        }
        Ok::<_, KafkaError>(())
    })?;
    if refused_count == 0 {
        return Ok(());
    }
    let first = refused
        .record_errors
        .first()
        .map(|(i, reason)| format!("record {i}: {reason}"))
        .unwrap_or_default();
    refused.message = format!(
        "topic {name}: validator {} refused {refused_count} of {seen} records, nothing was appended; {first}",
        handle.plugin()
    );
    Err(refused)
}
