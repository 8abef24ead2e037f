//! Strict JSON well-formedness (RFC 8259), for validators that must refuse what is not
//! JSON: every token is checked (string escapes, numbers, literals), nesting is bounded by
//! [`DEPTH_MAX`], nothing is allocated. The value's kind is returned so a caller can insist
//! on an object.

/// Deepest nesting of arrays and objects accepted: deeper documents are refused rather
/// than walked (the check is iterative, so this bounds its memory, not the stack).
pub const DEPTH_MAX: usize = 128;

/// What a well-formed document's top-level value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

impl Kind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Number => "number",
            Self::Bool => "boolean",
            Self::Null => "null",
        }
    }

    /// The kind of a value as written (as [`super::Path::find_raw`] returns it), told by
    /// its first byte; the value is not checked.
    #[must_use]
    pub fn of_raw(value: &[u8]) -> Self {
        match value.first() {
            Some(b'"') => Self::String,
            Some(b'{') => Self::Object,
            Some(b'[') => Self::Array,
            Some(b't' | b'f') => Self::Bool,
            Some(b'n') => Self::Null,
            _ => Self::Number,
        }
    }
}

/// Checks that `bytes` is exactly one well-formed JSON value (whitespace around it
/// allowed) and says what it is.
///
/// # Errors
/// What is wrong and at which byte.
pub fn check(bytes: &[u8]) -> Result<Kind, String> {
    let mut c = Checker { bytes, at: 0 };
    let kind = c.document()?;
    c.ws();
    if c.at != bytes.len() {
        return Err(c.error("unexpected data after the value"));
    }
    Ok(kind)
}

struct Checker<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Checker<'_> {
    fn error(&self, what: &str) -> String {
        format!("not JSON: {what} at byte {}", self.at)
    }

    fn ws(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes.get(self.at).copied()
    }

    /// The whole document, iteratively: `stack` holds the open containers (`true` for an
    /// object), bounded by `DEPTH_MAX`.
    fn document(&mut self) -> Result<Kind, String> {
        let mut stack = [false; DEPTH_MAX];
        let mut depth = 0;
        let mut top = None;
        loop {
            // A value is expected here (after `[`, `,`, `:` or at the start).
            let kind = match self.peek() {
                Some(b'{' | b'[') => {
                    if depth == DEPTH_MAX {
                        return Err(self.error(&format!("nesting deeper than {DEPTH_MAX}")));
                    }
                    let object = self.bytes[self.at] == b'{';
                    self.at += 1;
                    top.get_or_insert(if object { Kind::Object } else { Kind::Array });
                    stack[depth] = object;
                    depth += 1;
                    let close = if object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.at += 1;
                        depth -= 1;
                    } else {
                        if object {
                            self.member_key()?;
                        }
                        continue;
                    }
                    None
                }
                Some(_) => Some(self.scalar()?),
                None => return Err(self.error("a value is missing")),
            };
            if let Some(kind) = kind {
                top.get_or_insert(kind);
            }
            // After a value: close containers or go on to the next element.
            loop {
                if depth == 0 {
                    return Ok(top.unwrap_or(Kind::Null));
                }
                let object = stack[depth - 1];
                match self.peek() {
                    Some(b',') => {
                        self.at += 1;
                        if object {
                            self.member_key()?;
                        }
                        break;
                    }
                    Some(b'}') if object => {
                        self.at += 1;
                        depth -= 1;
                    }
                    Some(b']') if !object => {
                        self.at += 1;
                        depth -= 1;
                    }
                    _ => return Err(self.error("expected `,` or the end of the container")),
                }
            }
        }
    }

    /// `"key":` of an object member.
    fn member_key(&mut self) -> Result<(), String> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a member name"));
        }
        self.string()?;
        if self.peek() != Some(b':') {
            return Err(self.error("expected `:`"));
        }
        self.at += 1;
        Ok(())
    }

    fn scalar(&mut self) -> Result<Kind, String> {
        match self.bytes[self.at] {
            b'"' => self.string().map(|()| Kind::String),
            b't' => self.literal(b"true", Kind::Bool),
            b'f' => self.literal(b"false", Kind::Bool),
            b'n' => self.literal(b"null", Kind::Null),
            b'-' | b'0'..=b'9' => self.number().map(|()| Kind::Number),
            _ => Err(self.error("unexpected character")),
        }
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> Result<Kind, String> {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(kind)
        } else {
            Err(self.error("unknown literal"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Result<(), String> {
        if self.bytes[self.at] == b'-' {
            self.at += 1;
        }
        match self.bytes.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("a number needs digits")),
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(self.error("a fraction needs digits"));
            }
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.bytes.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("an exponent needs digits"));
            }
        }
        Ok(())
    }

    /// A string: escapes checked, control characters refused, UTF-8 checked.
    fn string(&mut self) -> Result<(), String> {
        self.at += 1;
        let start = self.at;
        loop {
            match self.bytes.get(self.at) {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => {
                    self.at += 1;
                    match self.bytes.get(self.at) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.at += 1;
                        }
                        Some(b'u') => {
                            let hex = self.bytes.get(self.at + 1..self.at + 5);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return Err(self.error("bad \\u escape"));
                            }
                            self.at += 5;
                        }
                        _ => return Err(self.error("bad escape")),
                    }
                }
                Some(0..=0x1f) => return Err(self.error("a control character in a string")),
                Some(_) => self.at += 1,
            }
        }
        if std::str::from_utf8(&self.bytes[start..self.at]).is_err() {
            return Err(self.error("a string that is not UTF-8"));
        }
        self.at += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_json_and_says_what_it_is() {
        for (doc, kind) in [
            (
                r#" {"a": [1, -2.5e3, true, null, {"b": "\u00e9\n"}], "c": {}} "#,
                Kind::Object,
            ),
            ("[]", Kind::Array),
            (r#""x""#, Kind::String),
            ("0", Kind::Number),
            ("false", Kind::Bool),
            ("null", Kind::Null),
            ("[[[]],[]]", Kind::Array),
        ] {
            assert_eq!(check(doc.as_bytes()), Ok(kind), "{doc}");
        }
    }

    #[test]
    fn refuses_what_is_not_json() {
        for doc in [
            "",
            " ",
            "{",
            "}",
            "[1,]",
            "{\"a\":}",
            "{\"a\" 1}",
            "{a:1}",
            "01",
            "1.",
            "-",
            "1e",
            "tru",
            "nul",
            "\"open",
            "\"bad \\x\"",
            "\"\\u12\"",
            "[1] 2",
            "{\"a\":1,}",
            "[1 2]",
            "\"tab\there\"",
            "{\"a\":1]",
            "[1}",
            "not json",
        ] {
            assert!(check(doc.as_bytes()).is_err(), "{doc:?} accepted");
        }
        assert!(check(b"\"\xff\"").is_err());
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = "[".repeat(DEPTH_MAX) + &"]".repeat(DEPTH_MAX);
        assert_eq!(check(ok.as_bytes()), Ok(Kind::Array));
        let deep = "[".repeat(DEPTH_MAX + 1) + &"]".repeat(DEPTH_MAX + 1);
        assert!(
            check(deep.as_bytes())
                .unwrap_err()
                .contains("nesting deeper")
        );
    }
}
