//! The coordinator's settings, named after Kafka's broker keys.

use crate::limits;

/// Coordinator settings. Defaults are Kafka's broker defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`.
    pub session_timeout_min_ms: u32,
    /// `group.max.session.timeout.ms`.
    pub session_timeout_max_ms: u32,
    /// `group.initial.rebalance.delay.ms`: how long an empty group's first rebalance waits
    /// for more members (extended while members keep arriving, up to the rebalance timeout).
    pub initial_rebalance_delay_ms: u32,
    /// `group.max.size`: members per group (at most [`limits::GROUP_MEMBERS_MAX`]).
    pub group_max_size: usize,
    /// `offsets.retention.minutes`, in milliseconds.
    pub offsets_retention_ms: u64,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval_ms: u64,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `group.consumer.session.timeout.ms`: a consumer-protocol member that sends no
    /// heartbeat for this long is removed.
    pub consumer_session_timeout_ms: u32,
    /// `group.consumer.heartbeat.interval.ms`: told to consumer-protocol members.
    pub consumer_heartbeat_interval_ms: u32,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            session_timeout_min_ms: limits::DEFAULT_SESSION_TIMEOUT_MIN_MS,
            session_timeout_max_ms: limits::DEFAULT_SESSION_TIMEOUT_MAX_MS,
            initial_rebalance_delay_ms: limits::DEFAULT_INITIAL_REBALANCE_DELAY_MS,
            group_max_size: limits::GROUP_MEMBERS_MAX,
            offsets_retention_ms: limits::DEFAULT_OFFSETS_RETENTION_MS,
            offsets_retention_check_interval_ms:
                limits::DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS,
            offset_metadata_max_bytes: limits::DEFAULT_OFFSET_METADATA_MAX_BYTES,
            consumer_session_timeout_ms: limits::DEFAULT_CONSUMER_SESSION_TIMEOUT_MS,
            consumer_heartbeat_interval_ms: limits::DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS,
        }
    }
}

/// A setting outside what the coordinator supports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `group.min.session.timeout.ms` above `group.max.session.timeout.ms`.
    #[error(
        "group.min.session.timeout.ms ({min} ms) is above group.max.session.timeout.ms ({max} ms)"
    )]
    SessionTimeoutRange {
        /// Configured minimum.
        min: u32,
        /// Configured maximum.
        max: u32,
    },
    /// `group.max.size` is 0 or above the hard limit.
    #[error("group.max.size ({0}) must be 1..={max}", max = limits::GROUP_MEMBERS_MAX)]
    GroupMaxSize(usize),
    /// `offset.metadata.max.bytes` above the hard limit.
    #[error("offset.metadata.max.bytes ({0}) is above the limit of {max} bytes", max = limits::OFFSET_METADATA_BYTES_MAX)]
    OffsetMetadataMaxBytes(usize),
    /// `group.consumer.heartbeat.interval.ms` must be above 0 and below the session timeout.
    #[error(
        "group.consumer.heartbeat.interval.ms ({interval} ms) must be 1..group.consumer.session.timeout.ms ({session} ms)"
    )]
    ConsumerHeartbeatInterval {
        /// Configured interval.
        interval: u32,
        /// Configured session timeout.
        session: u32,
    },
    /// A zero interval would make the retention check spin.
    #[error("offsets.retention.check.interval.ms must be above 0")]
    RetentionCheckInterval,
}

impl GroupConfig {
    /// Checks the settings against each other and the hard limits; nothing is clamped.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.session_timeout_min_ms > self.session_timeout_max_ms {
            return Err(ConfigError::SessionTimeoutRange {
                min: self.session_timeout_min_ms,
                max: self.session_timeout_max_ms,
            });
        }
        if self.group_max_size == 0 || self.group_max_size > limits::GROUP_MEMBERS_MAX {
            return Err(ConfigError::GroupMaxSize(self.group_max_size));
        }
        if self.offset_metadata_max_bytes > limits::OFFSET_METADATA_BYTES_MAX {
            return Err(ConfigError::OffsetMetadataMaxBytes(
                self.offset_metadata_max_bytes,
            ));
        }
        let (interval, session) = (
            self.consumer_heartbeat_interval_ms,
            self.consumer_session_timeout_ms,
        );
        if interval == 0 || interval >= session {
            return Err(ConfigError::ConsumerHeartbeatInterval { interval, session });
        }
        if self.offsets_retention_check_interval_ms == 0 {
            return Err(ConfigError::RetentionCheckInterval);
        }
        Ok(())
    }
}
