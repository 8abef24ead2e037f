//! The Java `.properties` format of `--command-config`, as `java.util.Properties.load` reads
//! it (Kafka's scripts load their `--command-config` with it): one `key=value`, `key: value`
//! or `key value` per logical line; lines whose first non-blank character is `#` or `!` are
//! comments; a line ending in an odd number of backslashes continues on the next one (whose
//! leading blanks are dropped); `\t`, `\n`, `\r`, `\f`, `\uXXXX` and `\` before any other
//! character are escapes in keys and values. Blanks are space, tab and form feed; a value
//! keeps its trailing blanks, as Java's does. The text is UTF-8 (Java reads ISO-8859-1,
//! which only differs outside ASCII).

/// One property of a file and the line it starts on (1-based), for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub number: usize,
    pub key: String,
    pub value: String,
}

const BLANKS: [char; 3] = [' ', '\t', '\x0c'];

/// Every property of `text`, in file order (a key given twice appears twice; the last wins
/// when they are merged). The error names the line.
pub fn parse(text: &str) -> Result<Vec<Line>, String> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut lines = text.split('\n').enumerate();
    let mut out = Vec::new();
    while let Some((index, line)) = lines.next() {
        let number = index + 1;
        let first = line.trim_start_matches(BLANKS);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = first.to_owned();
        while continues(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(BLANKS)),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).map_err(|e| format!("line {number}: {e}"))?;
        let value = unescape(value).map_err(|e| format!("line {number}: {e}"))?;
        out.push(Line { number, key, value });
    }
    Ok(out)
}

/// True when `line` ends in an odd number of backslashes (the last one is not escaped).
fn continues(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// The raw key and value of a logical line (escapes still in them), split as Java does: the
/// key ends at the first unescaped `=`, `:` or blank; then blanks, at most one `=` or `:`,
/// and blanks again are skipped.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    let mut separator = false;
    for (at, c) in line.char_indices() {
        if !escaped && (c == '=' || c == ':' || BLANKS.contains(&c)) {
            key_end = at;
            separator = c == '=' || c == ':';
            break;
        }
        escaped = c == '\\' && !escaped;
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].chars();
    if separator {
        rest.next();
    }
    let mut rest = rest.as_str().trim_start_matches(BLANKS);
    if !separator && rest.starts_with(['=', ':']) {
        rest = rest[1..].trim_start_matches(BLANKS);
    }
    (key, rest)
}

/// `raw` with its escapes replaced.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => out.push(unicode_escape(&mut chars)?),
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// The character of a `\uXXXX` escape (the `\u` already read).
fn unicode_escape(chars: &mut std::str::Chars<'_>) -> Result<char, String> {
    let hex: String = chars.by_ref().take(4).collect();
    let code = u32::from_str_radix(&hex, 16)
        .ok()
        .filter(|_| hex.len() == 4)
        .ok_or_else(|| format!("malformed \\uXXXX escape \\u{hex}"))?;
    char::from_u32(code).ok_or_else(|| {
        format!("\\u{hex} is half of a UTF-16 surrogate pair: write the character itself (UTF-8)")
    })
}

#[cfg(test)]
mod tests {
    use super::{Line, parse};

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|l| (l.key, l.value))
            .collect()
    }

    fn pair(key: &str, value: &str) -> (String, String) {
        (key.to_owned(), value.to_owned())
    }

    #[test]
    fn the_three_separators_and_blanks_around_them() {
        let text = "a=1\nb: 2\nc 3\n  d  =  4\ne\t:\t5\nf = = 6\ng\n";
        assert_eq!(
            pairs(text),
            vec![
                pair("a", "1"),
                pair("b", "2"),
                pair("c", "3"),
                pair("d", "4"),
                pair("e", "5"),
                pair("f", "= 6"),
                pair("g", ""),
            ]
        );
    }

    #[test]
    fn comments_and_blank_lines_are_skipped_and_lines_are_numbered() {
        let text =
            "# a comment\n! another\n\n   \n  # indented comment\nsecurity.protocol=SSL\r\nx=y";
        assert_eq!(
            parse(text).unwrap(),
            vec![
                Line {
                    number: 6,
                    key: "security.protocol".into(),
                    value: "SSL".into()
                },
                Line {
                    number: 7,
                    key: "x".into(),
                    value: "y".into()
                },
            ]
        );
    }

    #[test]
    fn a_trailing_backslash_continues_the_line() {
        let text = "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n    required \\\n    username=\"alice\";\nnext=1\n";
        let parsed = parse(text).unwrap();
        assert_eq!(
            parsed[0].value,
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\";"
        );
        assert_eq!((parsed[1].number, parsed[1].key.as_str()), (4, "next"));
        // Two backslashes are an escaped backslash, not a continuation.
        assert_eq!(
            pairs("path=C:\\\\\nnext=1"),
            vec![pair("path", "C:\\"), pair("next", "1")]
        );
        // A backslash on the last line ends it.
        assert_eq!(pairs("a=b\\"), vec![pair("a", "b")]);
        // A comment line does not continue.
        assert_eq!(pairs("# c \\\na=1"), vec![pair("a", "1")]);
    }

    #[test]
    fn escapes_in_keys_and_values() {
        assert_eq!(
            pairs("my\\ key\\=x = a\\tb\\u00e9\\:\\\\ \n"),
            vec![pair("my key=x", "a\tbé:\\ ")]
        );
        assert_eq!(pairs("k=\\n\\r\\f\\q"), vec![pair("k", "\n\r\x0cq")]);
        let err = parse("ok=1\nk=\\u12").unwrap_err();
        assert!(err.starts_with("line 2:") && err.contains("\\u12"), "{err}");
        let err = parse("k=\\ud83d").unwrap_err();
        assert!(err.contains("surrogate"), "{err}");
    }

    #[test]
    fn a_value_keeps_its_trailing_blanks_and_inner_separators() {
        assert_eq!(
            pairs("sasl.password=p=w:d \nurl = https://h:1/x"),
            vec![
                pair("sasl.password", "p=w:d "),
                pair("url", "https://h:1/x")
            ]
        );
    }
}
