//! The file-descriptor budget: what the broker may hold open against `RLIMIT_NOFILE`.
//!
//! Needed = partitions × `DESCRIPTORS_PER_PARTITION` (each holds its active segment's
//! `.log`) + `sluice.segment.files.open.max` (the `FileCache` of sealed segments) +
//! `max.connections` (one socket each) + `BROKER_DESCRIPTORS_RESERVED` (listeners, the
//! internal logs, plugins, certificates, the runtime). At start the soft limit is raised to
//! the hard one; a data dir whose partitions do not fit refuses to start (opening them would
//! run out part way, and clients would find no descriptor left), and CreateTopics,
//! CreatePartitions and auto-creation past the budget are POLICY_VIOLATION before anything
//! is created.

use crate::config::BrokerConfig;
use crate::limits::{
    BROKER_DESCRIPTORS_RESERVED, CONNECTIONS_SHARE_PERCENT, SEGMENT_FILES_SHARE_PERCENT,
};
use sluice_storage::limits::DESCRIPTORS_PER_PARTITION;

/// The budget, computed once at start from the config and the process limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorBudget {
    /// The soft `RLIMIT_NOFILE` after raising it.
    pub limit: u64,
    /// Descriptors held whatever the partition count.
    pub fixed: u64,
    /// `max.connections`, part of `fixed` (named in messages).
    pub connections: u64,
    /// `sluice.segment.files.open.max`, part of `fixed`.
    pub segment_files: u64,
}

impl DescriptorBudget {
    /// The budget under `limit` descriptors: `max.connections` and
    /// `sluice.segment.files.open.max`, each at most its share of the limit
    /// (`CONNECTIONS_SHARE_PERCENT`, `SEGMENT_FILES_SHARE_PERCENT`).
    #[must_use]
    pub fn new(config: &BrokerConfig, limit: u64) -> DescriptorBudget {
        let share = |percent: u64| (limit / 100).saturating_mul(percent).max(1);
        let connections = u64::from(config.max_connections).min(share(CONNECTIONS_SHARE_PERCENT));
        let segment_files =
            u64::from(config.segment_files_open_max).min(share(SEGMENT_FILES_SHARE_PERCENT));
        DescriptorBudget {
            limit,
            fixed: connections + segment_files + BROKER_DESCRIPTORS_RESERVED,
            connections,
            segment_files,
        }
    }

    /// The budget of this process, its soft limit raised to the hard one first; a lowered
    /// connection or segment-cache bound is logged.
    #[must_use]
    pub fn of_process(config: &BrokerConfig) -> DescriptorBudget {
        let budget = DescriptorBudget::new(config, raise_nofile_limit());
        if budget.connections < u64::from(config.max_connections)
            || budget.segment_files < u64::from(config.segment_files_open_max)
        {
            tracing::warn!(
                limit = budget.limit,
                connections = budget.connections,
                segment_files = budget.segment_files,
                "the descriptor limit (ulimit -n) is low: max.connections and sluice.segment.files.open.max are \
                 lowered to fit it (raise the hard limit to serve more)"
            );
        }
        budget
    }

    /// Partitions that fit.
    #[must_use]
    pub fn partitions_max(&self) -> u64 {
        self.limit.saturating_sub(self.fixed) / DESCRIPTORS_PER_PARTITION
    }

    /// Descriptors `partitions` partitions need with everything else.
    #[must_use]
    pub fn needed(&self, partitions: u64) -> u64 {
        partitions
            .saturating_mul(DESCRIPTORS_PER_PARTITION)
            .saturating_add(self.fixed)
    }

    /// Why `partitions` do not fit, naming every key a user can change; `None` if they do.
    #[must_use]
    pub fn refusal(&self, partitions: u64) -> Option<String> {
        let needed = self.needed(partitions);
        (needed > self.limit).then(|| {
            format!(
                "{partitions} partitions need {needed} file descriptors, above the descriptor \
                 limit (RLIMIT_NOFILE, ulimit -n) of {}: {DESCRIPTORS_PER_PARTITION} per \
                 partition + max.connections ({}) + sluice.segment.files.open.max ({}) + \
                 {BROKER_DESCRIPTORS_RESERVED} reserved; at most {} partitions fit. Raise the \
                 limit, or lower max.connections or sluice.partitions.max",
                self.limit,
                self.connections,
                self.segment_files,
                self.partitions_max()
            )
        })
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the soft limit then in
/// force (logged). `u64::MAX` when unlimited.
pub fn raise_nofile_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read RLIMIT_NOFILE");
        return 1024; // Linux's usual default soft limit: the budget errs low
    }
    if limit.rlim_cur < limit.rlim_max {
        let wanted = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) } == 0 {
            tracing::info!(
                from = limit.rlim_cur,
                to = limit.rlim_max,
                "raised the descriptor limit (RLIMIT_NOFILE) to the hard limit"
            );
            limit.rlim_cur = limit.rlim_max;
        } else {
            tracing::warn!(soft = limit.rlim_cur, hard = limit.rlim_max, error = %std::io::Error::last_os_error(), "could not raise RLIMIT_NOFILE");
        }
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return u64::MAX;
    }
    limit.rlim_cur
}

/// Descriptors this process holds now (entries of `/proc/self/fd`), where Linux tells.
#[must_use]
pub fn open_descriptors() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory's own descriptor is one of them.
    Some((entries.count() as u64).saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_connections: u32, segment_files_open_max: u32) -> BrokerConfig {
        BrokerConfig {
            max_connections,
            segment_files_open_max,
            ..BrokerConfig::default()
        }
    }

    #[test]
    fn partitions_fit_under_the_limit_less_connections_cache_and_reserve() {
        let budget = DescriptorBudget::new(&config(1_000, 100), 5_000);
        let fit = 5_000 - 1_000 - 100 - BROKER_DESCRIPTORS_RESERVED;
        assert_eq!(budget.partitions_max(), fit / DESCRIPTORS_PER_PARTITION);
        assert_eq!(budget.refusal(budget.partitions_max()), None);
        let refusal = budget.refusal(budget.partitions_max() + 1).unwrap();
        for key in [
            "max.connections (1000)",
            "sluice.segment.files.open.max (100)",
            "sluice.partitions.max",
            "5000",
        ] {
            assert!(refusal.contains(key), "{refusal}");
        }
    }

    #[test]
    fn a_low_limit_lowers_the_connections_and_the_cache_and_still_fits_partitions() {
        // A hard `ulimit -n` of 1,024 with the defaults (10,000 connections, 512 files):
        // half for connections, a tenth for the cache, the rest for partitions.
        let budget = DescriptorBudget::new(&config(10_000, 512), 1_024);
        assert_eq!((budget.connections, budget.segment_files), (500, 100));
        assert!(budget.partitions_max() >= 100, "{budget:?}");
        assert!(budget.refusal(budget.partitions_max() + 1).is_some());
        assert!(budget.needed(budget.partitions_max()) <= 1_024);
        assert_eq!(
            DescriptorBudget::new(&config(1, 1), u64::MAX).refusal(u64::MAX),
            None
        );
    }

    #[test]
    fn the_process_limit_is_raised_to_the_hard_one() {
        let soft = raise_nofile_limit();
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: reads into the struct we pass.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        assert_eq!(limit.rlim_cur, limit.rlim_max);
        assert!(soft == limit.rlim_cur || soft == u64::MAX);
        assert!(open_descriptors().is_some_and(|n| n >= 3 && n < soft));
    }
}
