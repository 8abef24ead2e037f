//! Find one field of a JSON document without parsing the rest of it.
//!
//! Enough JSON for a partitioner that hashes `$.customer_id`: objects are
//! walked member by member, other values are skipped by scanning; nothing
//! is allocated. A string's bytes are returned as written (escapes are not
//! decoded), other values as their literal text (`42`, `true`, `{...}`).
//!
//! [`check`] is the strict half: it walks a whole document and says whether it is
//! well-formed JSON and what its top-level value is (for validators). [`Comparison`] is
//! json-filter's test of a field against a parameter.

pub mod check;
pub mod compare;
pub use check::{Kind, check};
pub use compare::Comparison;

/// A parsed path: `$.a.b` or `a.b` (object members only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    segments: Vec<String>,
}

impl Path {
    /// # Errors
    /// A message saying what is wrong with the path.
    pub fn parse(path: &str) -> Result<Self, String> {
        let rest = path
            .strip_prefix("$.")
            .or_else(|| path.strip_prefix('$'))
            .unwrap_or(path);
        if rest.is_empty() {
            return Err(format!(
                "path `{path}` names no field; expected e.g. `$.customer_id`"
            ));
        }
        let segments: Vec<String> = rest.split('.').map(str::to_owned).collect();
        if segments.iter().any(String::is_empty) {
            return Err(format!("path `{path}` has an empty segment"));
        }
        Ok(Self { segments })
    }

    /// The field's bytes in `json`, or `None` when the document is not an
    /// object along the path, the field is missing, or it is `null`.
    #[must_use]
    pub fn find<'a>(&self, json: &'a [u8]) -> Option<&'a [u8]> {
        let mut scanner = Scanner::new(json);
        for segment in &self.segments {
            scanner.enter_member(segment.as_bytes())?;
        }
        let value = scanner.value()?;
        (value != b"null").then_some(value)
    }

    /// The field's value as written (a string with its quotes, so its [`Kind`] can be
    /// told), or `None` when missing or `null`, as [`Path::find`].
    #[must_use]
    pub fn find_raw<'a>(&self, json: &'a [u8]) -> Option<&'a [u8]> {
        let mut scanner = Scanner::new(json);
        for segment in &self.segments {
            scanner.enter_member(segment.as_bytes())?;
        }
        let value = scanner.raw_value()?;
        (value != b"null").then_some(value)
    }
}

/// A cursor over a JSON document for plugins that walk one themselves (the
/// `redact` transform rewrites objects with it): whitespace is skipped
/// before every token; strings come back as written (escapes not decoded).
#[derive(Debug, Clone)]
pub struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `bytes`.
    #[must_use]
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// The next token's first byte, without consuming it.
    pub fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.at).copied()
    }

    /// The value that starts here as written: a string with its quotes,
    /// anything else as its literal text.
    pub fn raw_value(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        let start = self.at;
        self.value()?;
        Some(&self.bytes[start..self.at])
    }

    fn skip_ws(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// Consumes `byte` (after whitespace), or `None` if something else is next.
    pub fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// Position the scanner at the value of member `name` of the object
    /// that starts here.
    fn enter_member(&mut self, name: &[u8]) -> Option<()> {
        self.eat(b'{')?;
        loop {
            self.skip_ws();
            if self.bytes.get(self.at) == Some(&b'}') {
                return None;
            }
            let key = self.string()?;
            self.eat(b':')?;
            if key == name {
                return Some(());
            }
            self.value()?;
            self.skip_ws();
            match self.bytes.get(self.at)? {
                b',' => self.at += 1,
                _ => return None,
            }
        }
    }

    /// A string's raw contents; the scanner ends after the closing quote.
    pub fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        loop {
            match *self.bytes.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return Some(&self.bytes[start..self.at - 1]);
                }
                _ => self.at += 1,
            }
        }
    }

    /// Any value: a string's contents, or the literal text of the rest.
    pub fn value(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        let start = self.at;
        match *self.bytes.get(self.at)? {
            b'"' => self.string(),
            b'{' | b'[' => {
                self.skip_nested()?;
                Some(&self.bytes[start..self.at])
            }
            _ => {
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| !b",}] \t\r\n".contains(b))
                {
                    self.at += 1;
                }
                (self.at > start).then(|| &self.bytes[start..self.at])
            }
        }
    }

    fn skip_nested(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.at += 1;
                        return Some(());
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(path: &str, json: &str) -> Option<String> {
        Path::parse(path)
            .unwrap()
            .find(json.as_bytes())
            .map(|v| String::from_utf8(v.to_vec()).unwrap())
    }

    #[test]
    fn finds_top_level_and_nested_fields() {
        let doc = r#" { "a": [1, {"x": "}"}], "s": "q\"uote", "customer_id" : "c-42", "n": {"id": 7, "z": null} } "#;
        assert_eq!(find("$.customer_id", doc).as_deref(), Some("c-42"));
        assert_eq!(find("$.s", doc).as_deref(), Some(r#"q\"uote"#));
        assert_eq!(find("n.id", doc).as_deref(), Some("7"));
        assert_eq!(find("$.a", doc).as_deref(), Some(r#"[1, {"x": "}"}]"#));
        assert_eq!(find("$.n.z", doc), None);
        assert_eq!(find("$.missing", doc), None);
        assert_eq!(find("$.a.b", doc), None);
        let raw = |p: &str| {
            Path::parse(p)
                .unwrap()
                .find_raw(doc.as_bytes())
                .map(Kind::of_raw)
        };
        assert_eq!(raw("$.customer_id"), Some(Kind::String));
        assert_eq!(raw("$.n.id"), Some(Kind::Number));
        assert_eq!(raw("$.a"), Some(Kind::Array));
        assert_eq!(raw("$.n"), Some(Kind::Object));
        assert_eq!(raw("$.n.z"), None);
    }

    #[test]
    fn garbage_is_not_a_match() {
        assert_eq!(find("$.a", "not json"), None);
        assert_eq!(find("$.a", r#"{"a""#), None);
        assert_eq!(find("$.a", ""), None);
        assert!(Path::parse("$").is_err());
        assert!(Path::parse("$.a..b").is_err());
    }
}
