//! Each plugin's own log: what its guest wrote through the WIT `log` import, kept per plugin
//! name (across version swaps) in a bounded ring, so `sluice plugin logs NAME` and the admin
//! API can read it back without searching the broker's log. Two limits keep a guest from
//! flooding it: the per-call budget (`LOG_MESSAGES_PER_CALL_MAX`, in `state.rs`) and a
//! per-plugin rate (`LOG_LINES_PER_SECOND_MAX`, a token bucket here). What either cuts is
//! counted in `dropped`.
//!
//! Every line is numbered (`seq`, from 1, never reused for a name while the broker runs): a
//! reader asks for the lines after the last one it saw, and learns from `first_seq` whether
//! the ring dropped some it never read.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::bindings::LogLevel;
use crate::limits;

/// One line a plugin logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Position in this plugin's log, from 1.
    pub seq: u64,
    /// Wall-clock ms since the epoch when the host received it.
    pub time_ms: i64,
    /// `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// sha256 of the plugin version that wrote it (the first 12 hex digits).
    pub version: String,
    /// The message, cut at `LOG_MESSAGE_BYTES_MAX`.
    pub message: String,
}

/// What a read returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    /// The lines after the asked position, oldest first, at most the asked number.
    pub lines: Vec<LogLine>,
    /// The oldest line still kept (0 when none was ever logged); a reader whose position is
    /// below it missed the lines between.
    pub first_seq: u64,
    /// The `seq` to ask after next time: the last line returned, or the asked position.
    pub next_after: u64,
    /// Messages cut by the per-call budget or the rate limit since the plugin was loaded.
    pub dropped: u64,
}

/// The name of a WIT log level.
pub fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
    }
}

#[derive(Debug)]
struct Ring {
    lines: VecDeque<LogLine>,
    last_seq: u64,
    dropped: u64,
    /// Token bucket: lines that may be taken now (refilled at the rate, capped at a second's
    /// worth) and when it was last refilled.
    tokens: f64,
    refilled_ms: i64,
}

impl Default for Ring {
    fn default() -> Self {
        Self {
            lines: VecDeque::new(),
            last_seq: 0,
            dropped: 0,
            // A full bucket: a new plugin may log a second's worth at once.
            tokens: f64::from(limits::LOG_LINES_PER_SECOND_MAX),
            refilled_ms: i64::MIN,
        }
    }
}

/// One plugin's log.
#[derive(Debug, Default)]
pub struct PluginLog {
    ring: Mutex<Ring>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl PluginLog {
    /// Keeps a line unless the rate limit says no (then it is counted as dropped). Returns
    /// whether it was kept, so the caller copies only kept lines to the broker's log.
    pub(crate) fn push(&self, level: LogLevel, version: &str, message: String) -> bool {
        self.push_at(now_ms(), level, version, message)
    }

    fn push_at(&self, time_ms: i64, level: LogLevel, version: &str, message: String) -> bool {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let rate = f64::from(limits::LOG_LINES_PER_SECOND_MAX);
        let elapsed_s = time_ms.saturating_sub(ring.refilled_ms).max(0) as f64 / 1000.0;
        ring.tokens = (ring.tokens + elapsed_s * rate).min(rate);
        ring.refilled_ms = time_ms;
        if ring.tokens < 1.0 {
            ring.dropped += 1;
            return false;
        }
        ring.tokens -= 1.0;
        ring.last_seq += 1;
        let line = LogLine {
            seq: ring.last_seq,
            time_ms,
            level: level_name(level),
            version: version.chars().take(12).collect(),
            message,
        };
        if ring.lines.len() == limits::LOG_LINES_KEPT_MAX {
            ring.lines.pop_front();
        }
        ring.lines.push_back(line);
        true
    }

    /// Counts messages the per-call budget cut.
    pub(crate) fn count_dropped(&self, messages: u64) {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .dropped += messages;
    }

    /// Up to `max` lines after position `after` (0: from the oldest kept).
    pub fn read(&self, after: u64, max: usize) -> LogPage {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let lines: Vec<LogLine> = ring
            .lines
            .iter()
            .filter(|l| l.seq > after)
            .take(max.min(limits::LOG_LINES_KEPT_MAX))
            .cloned()
            .collect();
        LogPage {
            first_seq: ring.lines.front().map_or(0, |l| l.seq),
            next_after: lines.last().map_or(after, |l| l.seq),
            dropped: ring.dropped,
            lines,
        }
    }
}

/// The logs of every plugin name the engine has made instances for. A name's log lives as
/// long as the plugin is installed (the registry drops it on delete), so the map is bounded
/// by the registry's plugin count.
#[derive(Debug, Default)]
pub struct PluginLogs {
    by_name: Mutex<HashMap<String, Arc<PluginLog>>>,
}

impl PluginLogs {
    /// The log of `name`, made on first use.
    pub(crate) fn of(&self, name: &str) -> Arc<PluginLog> {
        self.by_name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    /// The log of `name` if one was made.
    pub fn get(&self, name: &str) -> Option<Arc<PluginLog>> {
        self.by_name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Forgets `name`'s log (the plugin was deleted).
    pub(crate) fn remove(&self, name: &str) {
        self.by_name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_lines_and_numbers_them() {
        let log = PluginLog::default();
        let total = limits::LOG_LINES_KEPT_MAX + 10;
        // One line a second: well under the rate.
        for i in 0..total {
            let at = i64::try_from(i).unwrap() * 1000;
            assert!(log.push_at(at, LogLevel::Info, "abcdef0123456789", format!("line {i}")));
        }
        let page = log.read(0, usize::MAX);
        assert_eq!(page.lines.len(), limits::LOG_LINES_KEPT_MAX);
        assert_eq!(page.first_seq, 11, "the oldest ten were pushed out");
        assert_eq!(page.lines[0].message, "line 10");
        assert_eq!(page.lines[0].version, "abcdef012345");
        assert_eq!(page.next_after, u64::try_from(total).unwrap());
        let after = log.read(page.next_after - 2, 10);
        assert_eq!(after.lines.len(), 2);
        assert_eq!(log.read(page.next_after, 10).lines, Vec::new());
    }

    #[test]
    fn a_flood_is_cut_to_the_rate_and_counted() {
        let log = PluginLog::default();
        let kept = (0..1000)
            .filter(|i| log.push_at(5_000, LogLevel::Warn, "v", format!("{i}")))
            .count();
        let rate = usize::try_from(limits::LOG_LINES_PER_SECOND_MAX).unwrap();
        assert!(kept <= rate, "{kept} lines in one instant");
        let page = log.read(0, usize::MAX);
        assert_eq!(page.dropped, 1000 - u64::try_from(kept).unwrap());
        // A second later the bucket has refilled.
        assert!(log.push_at(6_000, LogLevel::Warn, "v", "again".into()));
        log.count_dropped(3);
        assert_eq!(
            log.read(0, 0).dropped,
            1000 - u64::try_from(kept).unwrap() + 3
        );
    }
}
