//! Subscription regexes of consumer groups (KIP-848's `SubscribedTopicRegex`, Java's
//! `subscribe(SubscriptionPattern)`): RE2 syntax, as Kafka's RE2/J, matched against whole
//! topic names. Compiled programs are cached, a bounded number, since every topic change
//! matches every regex again. A member's matches are filtered by its principal's DESCRIBE
//! rights (`may_describe`, asking the broker's ACLs), so a regex never discloses a topic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use regex::Regex;
use sluice_security::principal::KafkaPrincipal;

use crate::limits;

/// Whether a principal (`User:alice`) at a host (`127.0.0.1`) may DESCRIBE a topic.
pub type DescribeCheck = Arc<dyn Fn(&KafkaPrincipal, &str, &str) -> bool + Send + Sync>;

/// The [`sluice_group::TopicMatcher`] the coordinator runs with.
#[derive(Default)]
pub struct RegexMatcher {
    /// Regex text -> its compiled, anchored program (`None`: it does not compile).
    /// At most [`limits::SUBSCRIPTION_REGEXES_CACHED_MAX`]; cleared when full.
    cache: Mutex<HashMap<String, Option<Regex>>>,
    /// The ACL check regex matches pass (`None`: every topic may be described).
    describe: Option<DescribeCheck>,
}

impl std::fmt::Debug for RegexMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegexMatcher")
            .field("authorized", &self.describe.is_some())
            .finish_non_exhaustive()
    }
}

impl RegexMatcher {
    /// A matcher whose matches pass `describe` (the broker's ACLs).
    pub fn authorized(describe: DescribeCheck) -> Self {
        Self {
            cache: Mutex::default(),
            describe: Some(describe),
        }
    }

    fn compiled(&self, regex: &str) -> Option<Regex> {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(compiled) = cache.get(regex) {
            return compiled.clone();
        }
        if cache.len() >= limits::SUBSCRIPTION_REGEXES_CACHED_MAX {
            cache.clear();
        }
        // Anchored: a topic matches only as a whole, as RE2/J's `matches()`.
        let compiled = regex::RegexBuilder::new(&format!("^(?:{regex})$"))
            .size_limit(limits::SUBSCRIPTION_REGEX_PROGRAM_BYTES_MAX)
            .build()
            .ok();
        cache.insert(regex.to_owned(), compiled.clone());
        compiled
    }
}

impl sluice_group::TopicMatcher for RegexMatcher {
    fn is_valid(&self, regex: &str) -> bool {
        self.compiled(regex).is_some()
    }

    fn matches(&self, regex: &str, topic: &str) -> bool {
        self.compiled(regex).is_some_and(|r| r.is_match(topic))
    }

    fn may_describe(&self, principal: &str, client_host: &str, topic: &str) -> bool {
        let Some(describe) = &self.describe else {
            return true;
        };
        // A member whose principal does not parse sees nothing by regex.
        let Ok(principal) = KafkaPrincipal::parse(principal) else {
            return false;
        };
        describe(&principal, client_host.trim_start_matches('/'), topic)
    }
}

#[cfg(test)]
mod tests {
    use sluice_group::TopicMatcher;

    use super::RegexMatcher;

    #[test]
    fn matches_whole_names_and_refuses_what_does_not_compile() {
        let m = RegexMatcher::default();
        assert!(m.matches("orders-.*", "orders-eu"));
        assert!(!m.matches("orders", "orders-eu"), "a prefix is not a match");
        assert!(!m.matches("eu", "orders-eu"));
        assert!(m.matches("a|b", "b"));
        assert!(m.is_valid("orders-[a-z]+"));
        assert!(!m.is_valid("orders-("));
        assert!(!m.matches("orders-(", "orders-("));
    }

    #[test]
    fn the_cache_stays_bounded() {
        let m = RegexMatcher::default();
        for i in 0..(crate::limits::SUBSCRIPTION_REGEXES_CACHED_MAX * 2) {
            assert!(m.matches(&format!("t{i}"), &format!("t{i}")));
        }
        assert!(m.cache.lock().unwrap().len() <= crate::limits::SUBSCRIPTION_REGEXES_CACHED_MAX);
    }
}
