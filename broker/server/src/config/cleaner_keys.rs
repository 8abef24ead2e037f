//! The text forms of the log cleaner's keys that are not plain numbers: `log.cleanup.policy`
//! (topic `cleanup.policy`) and `log.cleaner.min.cleanable.ratio` (topic
//! `min.cleanable.dirty.ratio`, kept in parts per million). The keys, with the other
//! `log.cleaner.*` defaults of the compaction topic keys, are in `keys.rs`.

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
pub(super) fn parse_ratio_ppm(value: &str) -> Result<u32, String> {
    let ratio: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number"))?;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(format!("{ratio} is not in [0, 1]"));
    }
    Ok((ratio * f64::from(sluice_storage::config::RATIO_PPM_ONE)).round() as u32)
}

/// A ratio in parts per million as Kafka writes it (`0.5`).
pub(super) fn ratio_text(ppm: u32) -> String {
    (f64::from(ppm) / f64::from(sluice_storage::config::RATIO_PPM_ONE)).to_string()
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
