//! Byte-rate measurement and throttle times, as Kafka's `Rate` over a `SampledStat`
//! (`WindowedSum`) measures them for `ClientQuotaManager`.
//!
//! A window keeps `quota.window.num` samples (plus one, Kafka's "overlapping sample") of
//! `quota.window.size.seconds` each. Recording adds to the current sample, starting the
//! next one once the current is a sample length old. Measuring first resets every sample
//! whose last event is at least `num * size` old, then divides the sum of the samples by
//! the elapsed time since the oldest sample started, counted as at least `num - 1` full
//! samples (so a new client is not throttled for its first burst) and at least 1 ms.
//!
//! A request that takes the measured rate `O` above the quota `T` is throttled for
//! `(O - T) / T * W` ms (Kafka's `QuotaUtils.throttleTime`, rounded), `W` the window size
//! just computed. Kafka does not bound a byte-rate throttle; we bound it by the whole
//! sampled window (`num * size`: after that long every sample behind the violation has
//! expired) and by [`limits::THROTTLE_TIME_MS_MAX`].
//!
//! Time is a parameter (`now_ms`, milliseconds). The tracker keeps at most
//! [`limits::QUOTA_WINDOWS_MAX`] windows; when full it first drops windows idle for a
//! whole window (they would measure zero anyway), and if still full measures the request
//! against a fresh window of its own, so a flood of new client ids costs no memory.

use std::collections::BTreeMap;

use crate::limits;
use crate::quota::{ClientQuotas, QuotaError, QuotaKey, QuotaKind};

/// `quota.window.num` and `quota.window.size.seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaConfig {
    /// `quota.window.num`: samples per window (Kafka's default 11).
    pub window_num: u32,
    /// `quota.window.size.seconds`: length of one sample (Kafka's default 1).
    pub window_size_seconds: u32,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            window_num: limits::DEFAULT_QUOTA_WINDOW_NUM,
            window_size_seconds: limits::DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        }
    }
}

impl QuotaConfig {
    /// Checks both keys against their bounds (Kafka: at least 1).
    pub fn validate(&self) -> Result<(), QuotaError> {
        let keys = [
            (
                "quota.window.num",
                self.window_num,
                limits::QUOTA_WINDOW_NUM_MAX,
                "QUOTA_WINDOW_NUM_MAX",
            ),
            (
                "quota.window.size.seconds",
                self.window_size_seconds,
                limits::QUOTA_WINDOW_SIZE_SECONDS_MAX,
                "QUOTA_WINDOW_SIZE_SECONDS_MAX",
            ),
        ];
        for (key, value, max, limit) in keys {
            if value == 0 || value > max {
                return Err(QuotaError::Config {
                    key,
                    value,
                    max,
                    limit,
                });
            }
        }
        Ok(())
    }

    fn sample_ms(&self) -> i64 {
        i64::from(self.window_size_seconds) * 1000
    }

    /// The whole sampled window, in ms: the longest throttle this config gives.
    pub fn full_window_ms(&self) -> i64 {
        i64::from(self.window_num) * self.sample_ms()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    value: f64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now_ms: i64) -> Self {
        Self {
            value: 0.0,
            start_ms: now_ms,
            last_event_ms: now_ms,
        }
    }
}

/// One sampled window (Kafka's `Rate` over a `WindowedSum`).
#[derive(Debug, Clone, PartialEq)]
pub struct SampledRate {
    samples: Vec<Sample>,
    current: usize,
}

impl SampledRate {
    /// An empty window.
    pub fn new() -> Self {
        Self {
            samples: Vec::new(),
            current: 0,
        }
    }

    /// Adds `value` at `now_ms`.
    pub fn record(&mut self, config: &QuotaConfig, value: f64, now_ms: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        if now_ms - self.samples[self.current].start_ms >= config.sample_ms() {
            self.current = (self.current + 1) % (config.window_num as usize + 1);
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now_ms));
            } else {
                self.samples[self.current] = Sample::new(now_ms);
            }
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.last_event_ms = now_ms;
    }

    fn purge(&mut self, config: &QuotaConfig, now_ms: i64) {
        let expire_ms = config.full_window_ms();
        for sample in &mut self.samples {
            if now_ms - sample.last_event_ms >= expire_ms {
                *sample = Sample::new(now_ms);
            }
        }
    }

    /// Kafka's `Rate.windowSize`: the elapsed time the rate divides by, in ms.
    pub fn window_ms(&mut self, config: &QuotaConfig, now_ms: i64) -> i64 {
        self.purge(config, now_ms);
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .expect("one sample at least");
        let mut elapsed = now_ms - oldest;
        let full = elapsed / config.sample_ms();
        let min_full = i64::from(config.window_num) - 1;
        if full < min_full {
            elapsed += (min_full - full) * config.sample_ms();
        }
        elapsed.max(1)
    }

    /// The measured rate at `now_ms`, per second.
    pub fn measure(&mut self, config: &QuotaConfig, now_ms: i64) -> f64 {
        self.purge(config, now_ms);
        let sum: f64 = self.samples.iter().map(|s| s.value).sum();
        sum / (self.window_ms(config, now_ms) as f64 / 1000.0)
    }

    fn idle(&self, config: &QuotaConfig, now_ms: i64) -> bool {
        self.samples
            .iter()
            .all(|s| now_ms - s.last_event_ms >= config.full_window_ms())
    }
}

impl Default for SampledRate {
    fn default() -> Self {
        Self::new()
    }
}

/// The throttle for a measured `rate` against `quota` over `window_ms`, bounded (module docs).
pub fn throttle_time_ms(config: &QuotaConfig, rate: f64, quota: f64, window_ms: i64) -> u32 {
    if rate <= quota {
        return 0;
    }
    let ms = ((rate - quota) / quota * window_ms as f64).round();
    let bound = config
        .full_window_ms()
        .min(i64::from(limits::THROTTLE_TIME_MS_MAX));
    (ms.min(bound as f64)).max(0.0) as u32
}

/// The windows of every quota key in use, per kind.
#[derive(Debug, Clone, Default)]
pub struct QuotaTracker {
    config: QuotaConfig,
    windows: BTreeMap<(QuotaKind, QuotaKey), SampledRate>,
}

impl QuotaTracker {
    /// A tracker for a validated config.
    pub fn new(config: QuotaConfig) -> Result<Self, QuotaError> {
        config.validate()?;
        Ok(Self {
            config,
            windows: BTreeMap::new(),
        })
    }

    /// Number of windows held.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Records `bytes` for a request at `now_ms` and returns its throttle time in ms
    /// (0 when no quota applies or the rate stays within it). Kafka's
    /// `recordAndGetThrottleTimeMs`.
    pub fn record(
        &mut self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        bytes: u64,
        now_ms: i64,
    ) -> u32 {
        let Some((key, quota)) = quotas.resolve(kind, user, client_id) else {
            return 0;
        };
        let config = self.config;
        let mut fresh = SampledRate::new();
        let window = self.window(kind, key, now_ms).unwrap_or(&mut fresh);
        window.record(&config, bytes as f64, now_ms);
        let rate = window.measure(&config, now_ms);
        let window_ms = window.window_ms(&config, now_ms);
        throttle_time_ms(&config, rate, quota, window_ms)
    }

    /// Takes back bytes recorded for a request that was throttled and answered empty
    /// (Kafka's `unrecordQuotaSensor`, used for Fetch).
    pub fn unrecord(
        &mut self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        bytes: u64,
        now_ms: i64,
    ) {
        let Some((key, _)) = quotas.resolve(kind, user, client_id) else {
            return;
        };
        let config = self.config;
        if let Some(window) = self.windows.get_mut(&(kind, key)) {
            window.record(&config, -(bytes as f64), now_ms);
        }
    }

    /// The most bytes one response may carry without being throttled for sure (Kafka's
    /// `getMaxValueInQuotaWindow`: `quota * (num - 1) * size`); `None` without a quota.
    pub fn max_value_in_quota_window(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
    ) -> Option<f64> {
        let (_, quota) = quotas.resolve(kind, user, client_id)?;
        let span =
            f64::from(self.config.window_num - 1) * f64::from(self.config.window_size_seconds);
        Some(quota * span)
    }

    /// Drops windows idle for a whole window (the server may call this now and then).
    pub fn expire(&mut self, now_ms: i64) {
        let config = self.config;
        self.windows.retain(|_, w| !w.idle(&config, now_ms));
    }

    fn window(&mut self, kind: QuotaKind, key: QuotaKey, now_ms: i64) -> Option<&mut SampledRate> {
        let id = (kind, key);
        if !self.windows.contains_key(&id) && self.windows.len() >= limits::QUOTA_WINDOWS_MAX {
            self.expire(now_ms);
            if self.windows.len() >= limits::QUOTA_WINDOWS_MAX {
                return None;
            }
        }
        Some(self.windows.entry(id).or_default())
    }
}
