//! The log cleaner's broker keys, with Kafka's names: `log.cleanup.policy` and the
//! `log.cleaner.*` defaults of the compaction topic keys, how long the cleaner sleeps when
//! nothing is cleanable (`log.cleaner.backoff.ms`) and the bound on its offset map
//! (`log.cleaner.dedupe.buffer.size`).

use super::{BrokerConfig, parse_bytes, parse_ms, ranged};

/// `cleanup.policy` / `log.cleanup.policy` in Kafka's spelling.
#[must_use]
pub fn policy_name(policy: sluice_storage::CleanupPolicy) -> &'static str {
    match policy {
        sluice_storage::CleanupPolicy::Delete => "delete",
        sluice_storage::CleanupPolicy::Compact => "compact",
        sluice_storage::CleanupPolicy::CompactDelete => "compact,delete",
    }
}

/// Parses `delete`, `compact`, or both comma-separated in either order.
pub fn parse_policy(value: &str) -> Result<sluice_storage::CleanupPolicy, String> {
    let mut parts: Vec<&str> = value.split(',').map(str::trim).collect();
    parts.sort_unstable();
    parts.dedup();
    match parts.as_slice() {
        ["delete"] => Ok(sluice_storage::CleanupPolicy::Delete),
        ["compact"] => Ok(sluice_storage::CleanupPolicy::Compact),
        ["compact", "delete"] => Ok(sluice_storage::CleanupPolicy::CompactDelete),
        _ => Err(format!(
            "{value:?} is not a cleanup policy (delete, compact, or compact,delete)"
        )),
    }
}

/// Parses a ratio in [0, 1] (`0.5`) into parts per million.
fn parse_ratio_ppm(value: &str) -> Result<u32, String> {
    let ratio: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number"))?;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(format!("{ratio} is not in [0, 1]"));
    }
    Ok((ratio * f64::from(sluice_storage::config::RATIO_PPM_ONE)).round() as u32)
}

fn ratio_text(ppm: u32) -> String {
    (f64::from(ppm) / f64::from(sluice_storage::config::RATIO_PPM_ONE)).to_string()
}

impl BrokerConfig {
    /// Sets one of these keys; `None` for any other key.
    pub(super) fn set_cleaner_key(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let result = match key {
            "log.cleanup.policy" => parse_policy(value).map(|p| self.log_cleanup_policy = p),
            "log.cleaner.min.cleanable.ratio" => {
                parse_ratio_ppm(value).map(|v| self.log_cleaner_min_cleanable_ratio_ppm = v)
            }
            "log.cleaner.min.compaction.lag.ms" => ranged(parse_ms(value), 0, i64::MAX)
                .map(|v| self.log_cleaner_min_compaction_lag_ms = v),
            "log.cleaner.max.compaction.lag.ms" => ranged(parse_ms(value), 1, i64::MAX)
                .map(|v| self.log_cleaner_max_compaction_lag_ms = v),
            "log.cleaner.delete.retention.ms" => ranged(parse_ms(value), 0, i64::MAX)
                .map(|v| self.log_cleaner_delete_retention_ms = v),
            "log.cleaner.backoff.ms" => {
                ranged(parse_ms(value), 1, i64::MAX).map(|v| self.log_cleaner_backoff_ms = v as u64)
            }
            "log.cleaner.dedupe.buffer.size" => ranged(
                parse_bytes(value),
                crate::limits::CLEANER_DEDUPE_BUFFER_BYTES_MIN as i64,
                i64::MAX,
            )
            .map(|v| self.log_cleaner_dedupe_buffer_bytes = v as u64),
            _ => return None,
        };
        Some(result)
    }

    /// One of these keys' value in text form; `None` for any other key.
    pub(super) fn get_cleaner_key(&self, key: &str) -> Option<String> {
        Some(match key {
            "log.cleanup.policy" => policy_name(self.log_cleanup_policy).to_owned(),
            "log.cleaner.min.cleanable.ratio" => {
                ratio_text(self.log_cleaner_min_cleanable_ratio_ppm)
            }
            "log.cleaner.min.compaction.lag.ms" => {
                self.log_cleaner_min_compaction_lag_ms.to_string()
            }
            "log.cleaner.max.compaction.lag.ms" => {
                self.log_cleaner_max_compaction_lag_ms.to_string()
            }
            "log.cleaner.delete.retention.ms" => self.log_cleaner_delete_retention_ms.to_string(),
            "log.cleaner.backoff.ms" => self.log_cleaner_backoff_ms.to_string(),
            "log.cleaner.dedupe.buffer.size" => self.log_cleaner_dedupe_buffer_bytes.to_string(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_and_ratios_parse_in_kafka_spelling() {
        use sluice_storage::CleanupPolicy::*;
        assert_eq!(parse_policy("compact"), Ok(Compact));
        assert_eq!(parse_policy("delete, compact"), Ok(CompactDelete));
        assert_eq!(parse_policy("compact,delete"), Ok(CompactDelete));
        assert!(parse_policy("compcat").is_err());
        assert_eq!(parse_ratio_ppm("0.01"), Ok(10_000));
        assert!(parse_ratio_ppm("1.5").is_err());
        assert_eq!(ratio_text(500_000), "0.5");
    }
}
