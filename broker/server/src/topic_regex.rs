//! Subscription regexes of consumer groups (KIP-848's `SubscribedTopicRegex`, Java's
//! `subscribe(SubscriptionPattern)`): RE2 syntax, as Kafka's RE2/J, matched against whole
//! topic names. Compiled programs are cached, a bounded number, since every topic change
//! matches every regex again.

use std::collections::HashMap;
use std::sync::Mutex;

use regex::Regex;

use crate::limits;

/// The [`sluice_group::TopicMatcher`] the coordinator runs with.
#[derive(Debug, Default)]
pub struct RegexMatcher {
    /// Regex text -> its compiled, anchored program (`None`: it does not compile).
    /// At most [`limits::SUBSCRIPTION_REGEXES_CACHED_MAX`]; cleared when full.
    cache: Mutex<HashMap<String, Option<Regex>>>,
}

impl RegexMatcher {
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
