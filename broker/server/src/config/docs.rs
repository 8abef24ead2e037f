//! What each config key means, for DescribeConfigs v3's `documentation`: read from
//! docs/config.md's "Broker keys" and "Topic keys" tables (compiled in), so the reference
//! and the answer cannot drift apart; a test checks every key has its row.

use std::collections::HashMap;
use std::sync::OnceLock;

/// docs/config.md, as built.
const CONFIG_MD: &str = include_str!("../../../../docs/config.md");

/// The meaning of broker key `key` (its row's last column, markdown stripped).
pub fn broker_key(key: &str) -> Option<&'static str> {
    tables().0.get(key).map(String::as_str)
}

/// The meaning of topic key `key`: the broker key it overrides and that key's meaning, or
/// its row's own text.
pub fn topic_key(key: &str) -> Option<&'static str> {
    tables().1.get(key).map(String::as_str)
}

fn tables() -> &'static (HashMap<String, String>, HashMap<String, String>) {
    static TABLES: OnceLock<(HashMap<String, String>, HashMap<String, String>)> = OnceLock::new();
    TABLES.get_or_init(|| {
        let broker: HashMap<String, String> = rows(section("Broker keys"))
            .map(|(key, cells)| (key, plain(cells.last().copied().unwrap_or_default())))
            .collect();
        let topic = rows(section("Topic keys"))
            .map(|(key, cells)| {
                let own = cells.first().copied().unwrap_or_default().trim();
                let overridden = own.strip_prefix('`').and_then(|s| s.strip_suffix('`'));
                let doc = match overridden.and_then(|k| broker.get(k).map(|d| (k, d))) {
                    Some((broker_key, meaning)) => {
                        format!("the topic's override of {broker_key}: {meaning}")
                    }
                    None => plain(own),
                };
                (key, doc)
            })
            .collect();
        (broker, topic)
    })
}

/// The text of `## title` up to the next `## ` heading.
fn section(title: &str) -> &'static str {
    let heading = format!("## {title}\n");
    CONFIG_MD
        .split_once(heading.as_str())
        .map_or("", |(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
}

/// Table rows whose first cell is a `key`: the key and the other cells.
fn rows(text: &'static str) -> impl Iterator<Item = (String, Vec<&'static str>)> {
    text.lines().filter_map(|line| {
        let cells: Vec<&str> = line
            .strip_prefix('|')?
            .strip_suffix('|')?
            .split(" | ")
            .collect();
        let key = cells.first()?.trim().strip_prefix('`')?.strip_suffix('`')?;
        Some((key.to_owned(), cells[1..].to_vec()))
    })
}

/// Markdown to plain text: no backticks, `[text](link)` as text.
fn plain(cell: &str) -> String {
    let mut out = String::with_capacity(cell.len());
    let mut rest = cell.trim();
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out.replace('`', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_broker_and_topic_key_has_its_meaning() {
        for key in crate::config::BROKER_KEYS {
            let doc =
                broker_key(key).unwrap_or_else(|| panic!("{key} has no row in docs/config.md"));
            assert!(!doc.is_empty() && !doc.contains('`'), "{key}: {doc:?}");
        }
        for (key, _) in crate::topic_config::topic_keys() {
            assert!(
                topic_key(key).is_some(),
                "topic key {key} has no row in docs/config.md"
            );
        }
        assert!(
            topic_key("retention.ms")
                .unwrap()
                .starts_with("the topic's override of log.retention.ms: "),
            "{:?}",
            topic_key("retention.ms")
        );
    }

    #[test]
    fn each_topic_row_names_the_broker_key_the_table_says() {
        for (key, cells) in rows(section("Topic keys")) {
            let overridden = cells[0]
                .trim()
                .strip_prefix('`')
                .and_then(|s| s.strip_suffix('`'));
            assert_eq!(
                overridden,
                crate::topic_config::broker_key(&key),
                "docs/config.md's row of topic key {key}"
            );
        }
    }

    #[test]
    fn links_and_code_become_plain_text() {
        assert_eq!(plain(" a `b` ([docs](x.md#y)) c "), "a b (docs) c");
    }
}
