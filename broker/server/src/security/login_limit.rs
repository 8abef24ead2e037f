//! Failed SASL logins, counted per source address: past `LOGIN_FAILURES_PER_SOURCE_MAX`
//! failures within `LOGIN_FAILURE_WINDOW_MS`, an address's next attempts are refused without
//! being checked until its window ends. A success does not reset the count (an attacker
//! holding one valid account must not be able to clear it). At most
//! `LOGIN_FAILURE_SOURCES_MAX` addresses are remembered; past it the one whose window
//! started first is forgotten.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::limits::{
    LOGIN_FAILURE_SOURCES_MAX, LOGIN_FAILURE_WINDOW_MS, LOGIN_FAILURES_PER_SOURCE_MAX,
};

#[derive(Debug, Clone, Copy)]
struct Window {
    started_ms: i64,
    failures: u32,
}

/// The per-address failure windows.
#[derive(Debug, Default)]
pub struct LoginLimiter {
    sources: Mutex<HashMap<String, Window>>,
}

impl LoginLimiter {
    /// `Err(retry_after_ms)` if `host` has used up its failures in the current window.
    pub fn check(&self, host: &str, now_ms: i64) -> Result<(), i64> {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        match sources.get(host) {
            Some(w)
                if now_ms < w.started_ms + LOGIN_FAILURE_WINDOW_MS
                    && w.failures >= LOGIN_FAILURES_PER_SOURCE_MAX =>
            {
                Err(w.started_ms + LOGIN_FAILURE_WINDOW_MS - now_ms)
            }
            _ => Ok(()),
        }
    }

    /// Counts a failure from `host`; returns the failures in its current window.
    pub fn record_failure(&self, host: &str, now_ms: i64) -> u32 {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        if !sources.contains_key(host) && sources.len() >= LOGIN_FAILURE_SOURCES_MAX {
            sources.retain(|_, w| now_ms < w.started_ms + LOGIN_FAILURE_WINDOW_MS);
            if sources.len() >= LOGIN_FAILURE_SOURCES_MAX
                && let Some(oldest) = sources
                    .iter()
                    .min_by_key(|(_, w)| w.started_ms)
                    .map(|(h, _)| h.clone())
            {
                sources.remove(&oldest);
            }
        }
        let window = sources.entry(host.to_owned()).or_insert(Window {
            started_ms: now_ms,
            failures: 0,
        });
        if now_ms >= window.started_ms + LOGIN_FAILURE_WINDOW_MS {
            *window = Window {
                started_ms: now_ms,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
        window.failures
    }

    /// Addresses remembered now.
    pub fn len(&self) -> usize {
        self.sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no address is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_its_failures_until_the_window_ends() {
        let limiter = LoginLimiter::default();
        for i in 1..=LOGIN_FAILURES_PER_SOURCE_MAX {
            assert_eq!(limiter.check("10.0.0.1", 1_000), Ok(()));
            assert_eq!(limiter.record_failure("10.0.0.1", 1_000), i);
        }
        assert_eq!(
            limiter.check("10.0.0.1", 2_000),
            Err(LOGIN_FAILURE_WINDOW_MS - 1_000)
        );
        // Another address is not affected.
        assert_eq!(limiter.check("10.0.0.2", 2_000), Ok(()));
        // The window ends: the address may try again, and its count starts over.
        let later = 1_000 + LOGIN_FAILURE_WINDOW_MS;
        assert_eq!(limiter.check("10.0.0.1", later), Ok(()));
        assert_eq!(limiter.record_failure("10.0.0.1", later), 1);
    }

    #[test]
    fn the_table_is_bounded() {
        let limiter = LoginLimiter::default();
        for i in 0..LOGIN_FAILURE_SOURCES_MAX + 10 {
            limiter.record_failure(&format!("h{i}"), i as i64);
        }
        assert_eq!(limiter.len(), LOGIN_FAILURE_SOURCES_MAX);
        // The first addresses (oldest windows) were forgotten, the last kept.
        let sources = limiter.sources.lock().unwrap();
        assert!(!sources.contains_key("h0"));
        assert!(sources.contains_key(&format!("h{}", LOGIN_FAILURE_SOURCES_MAX + 9)));
    }
}
