//! Failed logins, counted per (source address, user name): past `LOGIN_FAILURES_PER_USER_MAX`
//! failures within `LOGIN_FAILURE_WINDOW_MS`, that user's next attempts from that address are
//! refused without being checked until the window ends. Online guessing of one account stays
//! slow, and a client retrying a wrong password never locks out the other users on its host
//! (behind a NAT, a Kubernetes node or a shared application host that is everyone): a login
//! is never refused because of another user's failures. A success does not reset the count
//! (an attacker holding the password of an account must not be able to clear it).
//!
//! Memory is bounded twice: at most `LOGIN_FAILURE_ENTRIES_MAX` (address, user) windows in
//! all, and at most `LOGIN_FAILURE_USERS_PER_SOURCE_MAX` user names per address, so one
//! address spraying user names can only push out its own windows. When a bound is reached
//! an expired window goes first, then the oldest window still under its limit, and a window
//! that is refusing logins only when every window is. User names are cut to
//! `LOGIN_FAILURE_USER_KEY_BYTES_MAX` bytes for the key.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::limits::{
    LOGIN_FAILURE_ENTRIES_MAX, LOGIN_FAILURE_USER_KEY_BYTES_MAX,
    LOGIN_FAILURE_USERS_PER_SOURCE_MAX, LOGIN_FAILURE_WINDOW_MS, LOGIN_FAILURES_PER_USER_MAX,
};

#[derive(Debug, Clone, Copy)]
struct Window {
    started_ms: i64,
    failures: u32,
}

impl Window {
    fn expired(&self, now_ms: i64) -> bool {
        now_ms >= self.started_ms.saturating_add(LOGIN_FAILURE_WINDOW_MS)
    }

    fn refusing(&self, now_ms: i64) -> bool {
        !self.expired(now_ms) && self.failures >= LOGIN_FAILURES_PER_USER_MAX
    }

    /// Eviction order: expired first, then under the limit, then refusing; oldest first.
    fn eviction_rank(&self, now_ms: i64) -> (u8, i64) {
        let class = if self.expired(now_ms) {
            0
        } else if self.refusing(now_ms) {
            2
        } else {
            1
        };
        (class, self.started_ms)
    }
}

/// The (address, user name) failure windows.
#[derive(Debug, Default)]
pub struct LoginLimiter {
    /// Per address, its users' windows.
    sources: Mutex<HashMap<String, HashMap<String, Window>>>,
}

/// The key of `user`: cut to `LOGIN_FAILURE_USER_KEY_BYTES_MAX` bytes at a char boundary.
fn user_key(user: &str) -> &str {
    if user.len() <= LOGIN_FAILURE_USER_KEY_BYTES_MAX {
        return user;
    }
    let mut end = LOGIN_FAILURE_USER_KEY_BYTES_MAX;
    while !user.is_char_boundary(end) {
        end -= 1;
    }
    &user[..end]
}

type Sources = HashMap<String, HashMap<String, Window>>;

impl LoginLimiter {
    /// `Err(retry_after_ms)` if `user` has used up its failures from `host` in the current
    /// window.
    pub fn check(&self, host: &str, user: &str, now_ms: i64) -> Result<(), i64> {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        match sources
            .get(host)
            .and_then(|users| users.get(user_key(user)))
        {
            Some(w) if w.refusing(now_ms) => Err(w.started_ms + LOGIN_FAILURE_WINDOW_MS - now_ms),
            _ => Ok(()),
        }
    }

    /// Counts a failure of `user` from `host`; returns the failures in its current window.
    pub fn record_failure(&self, host: &str, user: &str, now_ms: i64) -> u32 {
        let key = user_key(user);
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let known = sources
            .get(host)
            .is_some_and(|users| users.contains_key(key));
        if !known {
            make_room(&mut sources, host, now_ms);
        }
        let window = sources
            .entry(host.to_owned())
            .or_default()
            .entry(key.to_owned())
            .or_insert(Window {
                started_ms: now_ms,
                failures: 0,
            });
        if window.expired(now_ms) {
            *window = Window {
                started_ms: now_ms,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
        window.failures
    }

    /// (address, user) windows remembered now.
    pub fn len(&self) -> usize {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.values().map(HashMap::len).sum()
    }

    /// Whether no window is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Frees one slot for a new window of `host` when a bound is reached: the address's own
/// windows when it holds `LOGIN_FAILURE_USERS_PER_SOURCE_MAX`, else anyone's.
fn make_room(sources: &mut Sources, host: &str, now_ms: i64) {
    let own = sources.get(host).map_or(0, HashMap::len);
    if own >= LOGIN_FAILURE_USERS_PER_SOURCE_MAX {
        if let Some(users) = sources.get_mut(host) {
            evict_one(users, now_ms);
        }
        return;
    }
    let total: usize = sources.values().map(HashMap::len).sum();
    if total < LOGIN_FAILURE_ENTRIES_MAX {
        return;
    }
    sources.retain(|_, users| {
        users.retain(|_, w| !w.expired(now_ms));
        !users.is_empty()
    });
    let total: usize = sources.values().map(HashMap::len).sum();
    if total < LOGIN_FAILURE_ENTRIES_MAX {
        return;
    }
    let victim = sources
        .iter()
        .filter_map(|(h, users)| {
            let rank = users.values().map(|w| w.eviction_rank(now_ms)).min()?;
            Some((rank, h.clone()))
        })
        .min()
        .map(|(_, h)| h);
    if let Some(victim) = victim
        && let Some(users) = sources.get_mut(&victim)
    {
        evict_one(users, now_ms);
        if users.is_empty() {
            sources.remove(&victim);
        }
    }
}

/// Removes the window of `users` that goes first (`Window::eviction_rank`).
fn evict_one(users: &mut HashMap<String, Window>, now_ms: i64) {
    let first = users
        .iter()
        .min_by_key(|(_, w)| w.eviction_rank(now_ms))
        .map(|(u, _)| u.clone());
    if let Some(first) = first {
        users.remove(&first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_refused_from_an_address_after_its_failures_until_the_window_ends() {
        let limiter = LoginLimiter::default();
        for i in 1..=LOGIN_FAILURES_PER_USER_MAX {
            assert_eq!(limiter.check("10.0.0.1", "alice", 1_000), Ok(()));
            assert_eq!(limiter.record_failure("10.0.0.1", "alice", 1_000), i);
        }
        assert_eq!(
            limiter.check("10.0.0.1", "alice", 2_000),
            Err(LOGIN_FAILURE_WINDOW_MS - 1_000)
        );
        // Another user on the same address, and the same user elsewhere, are not affected.
        assert_eq!(limiter.check("10.0.0.1", "bob", 2_000), Ok(()));
        assert_eq!(limiter.check("10.0.0.2", "alice", 2_000), Ok(()));
        // The window ends: the user may try again, and its count starts over.
        let later = 1_000 + LOGIN_FAILURE_WINDOW_MS;
        assert_eq!(limiter.check("10.0.0.1", "alice", later), Ok(()));
        assert_eq!(limiter.record_failure("10.0.0.1", "alice", later), 1);
    }

    #[test]
    fn long_user_names_share_one_bounded_key() {
        let limiter = LoginLimiter::default();
        let long = "é".repeat(LOGIN_FAILURE_USER_KEY_BYTES_MAX);
        let longer = format!("{long}x");
        for _ in 0..LOGIN_FAILURES_PER_USER_MAX {
            limiter.record_failure("h", &long, 0);
        }
        assert!(limiter.check("h", &longer, 1).is_err());
        let sources = limiter.sources.lock().unwrap();
        let key = sources["h"].keys().next().unwrap();
        assert!(key.len() <= LOGIN_FAILURE_USER_KEY_BYTES_MAX);
    }

    #[test]
    fn one_address_spraying_user_names_only_pushes_out_its_own_windows() {
        let limiter = LoginLimiter::default();
        for _ in 0..LOGIN_FAILURES_PER_USER_MAX {
            limiter.record_failure("victim-host", "alice", 0);
        }
        for i in 0..LOGIN_FAILURE_ENTRIES_MAX + 10 {
            limiter.record_failure("sprayer", &format!("u{i}"), 1);
        }
        assert!(limiter.check("victim-host", "alice", 2).is_err());
        let sources = limiter.sources.lock().unwrap();
        assert_eq!(sources["sprayer"].len(), LOGIN_FAILURE_USERS_PER_SOURCE_MAX);
    }

    #[test]
    fn the_table_is_bounded_and_refusing_windows_go_last() {
        let limiter = LoginLimiter::default();
        for _ in 0..LOGIN_FAILURES_PER_USER_MAX {
            limiter.record_failure("h-locked", "alice", 0);
        }
        for i in 0..LOGIN_FAILURE_ENTRIES_MAX + 10 {
            limiter.record_failure(&format!("h{i}"), "bob", 1 + i as i64);
        }
        assert_eq!(limiter.len(), LOGIN_FAILURE_ENTRIES_MAX);
        // The oldest windows under their limit were forgotten; the refusing one was kept.
        assert!(limiter.check("h-locked", "alice", 100).is_err());
        let sources = limiter.sources.lock().unwrap();
        assert!(!sources.contains_key("h0"));
        assert!(sources.contains_key(&format!("h{}", LOGIN_FAILURE_ENTRIES_MAX + 9)));
    }
}
