//! Turn CSV lines into JSON objects: `eu,42` with `columns=region,total`
//! becomes `{"region":"eu","total":"42"}`.
//!
//! Parameters:
//! - `columns` (required): the column names, comma-separated;
//! - `delimiter` (optional, default `,`): one ASCII character; `\t` (the
//!   two characters) means a tab.
//!
//! Each value is one line (a trailing `\r\n` or `\n` is ignored). Fields
//! may be quoted as in RFC 4180 (`"a, b"`, `""` for a quote inside).
//! Every field becomes a JSON string (no type guessing: `007` stays
//! `"007"`); a line with fewer fields than columns gets `null` for the
//! missing ones; fields past the last column are ignored. Tombstones pass
//! unchanged; key, headers, offset and timestamp are kept.

use sluice_sdk::{Error, Init, Output, Params, Record, transform};

#[derive(Debug)]
pub struct Csv {
    /// Each column name, already JSON-encoded with its quotes and colon.
    columns: Vec<Vec<u8>>,
    delimiter: u8,
}

impl Init for Csv {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["columns", "delimiter"])?;
        let names: Vec<&str> = params
            .require("columns")?
            .split(',')
            .map(str::trim)
            .collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(Error::invalid_params(
                "parameter `columns` has an empty column name",
            ));
        }
        let columns = names
            .iter()
            .map(|n| {
                let mut encoded = Vec::new();
                json_string(n.as_bytes(), &mut encoded);
                encoded.push(b':');
                encoded
            })
            .collect();
        let delimiter = match params.get("delimiter").unwrap_or(",") {
            "\\t" => b'\t',
            d if d.len() == 1 && d.is_ascii() && d != "\"" => d.as_bytes()[0],
            other => {
                return Err(Error::invalid_params(format!(
                    "parameter `delimiter` = `{other}` is not one ASCII character (other than `\"`)"
                )));
            }
        };
        Ok(Self { columns, delimiter })
    }
}

#[transform]
pub fn csv_to_json(csv: &mut Csv, record: &Record<'_>, out: &mut Output) {
    let Some(line) = record.value() else {
        out.keep(record);
        return;
    };
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut json = Vec::with_capacity(line.len() * 2 + 16);
    json.push(b'{');
    let mut fields = Fields {
        line,
        at: Some(0),
        delimiter: csv.delimiter,
    };
    let mut field = Vec::new();
    for (i, column) in csv.columns.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        json.extend_from_slice(column);
        if fields.next_into(&mut field) {
            json_string(&field, &mut json);
        } else {
            json.extend_from_slice(b"null");
        }
    }
    json.push(b'}');
    let headers: Vec<_> = record.headers().iter().collect();
    out.push_at(record.timestamp, record.key(), Some(&json), &headers);
}

/// The fields of one line, RFC 4180 quoting.
struct Fields<'a> {
    line: &'a [u8],
    /// Where the next field starts; `None` after the last one.
    at: Option<usize>,
    delimiter: u8,
}

impl Fields<'_> {
    /// Unquote the next field into `field`; false when there is none.
    fn next_into(&mut self, field: &mut Vec<u8>) -> bool {
        let Some(mut i) = self.at else {
            return false;
        };
        field.clear();
        let quoted = self.line.get(i) == Some(&b'"');
        if quoted {
            i += 1;
        }
        while let Some(&b) = self.line.get(i) {
            match b {
                b'"' if quoted && self.line.get(i + 1) == Some(&b'"') => {
                    field.push(b'"');
                    i += 2;
                    continue;
                }
                b'"' if quoted => {
                    // The closing quote; anything up to the delimiter is kept.
                    i += 1;
                    while let Some(&c) = self.line.get(i) {
                        if c == self.delimiter {
                            break;
                        }
                        field.push(c);
                        i += 1;
                    }
                    break;
                }
                d if d == self.delimiter && !quoted => break,
                _ => field.push(b),
            }
            i += 1;
        }
        self.at = (i < self.line.len()).then_some(i + 1);
        true
    }
}

/// `bytes` as a JSON string (quotes included); bytes that are not UTF-8
/// become U+FFFD so the output is always valid JSON.
fn json_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn run(params: &[(&str, &str)], values: &[Option<&[u8]>]) -> Vec<Option<String>> {
        let mut state = Csv::init(&Params::new(params.iter().copied())).unwrap();
        let mut b = BatchBuilder::new();
        for (i, v) in values.iter().enumerate() {
            b.push(i as i64, 5, None, *v, &[]);
        }
        let mut out = Output::new();
        for (i, r) in b.batch().iter().enumerate() {
            out.begin(i);
            csv_to_json(&mut state, &r, &mut out);
        }
        out.builder()
            .batch()
            .iter()
            .map(|r| r.value().map(|v| String::from_utf8(v.to_vec()).unwrap()))
            .collect()
    }

    #[test]
    fn lines_become_objects() {
        let values: [Option<&[u8]>; 6] = [
            Some(b"eu,42,007\n"),
            Some(b"\"a, b\",\"say \"\"hi\"\"\",x\r\n"),
            Some(b"us"),
            Some(b"ap,1,2,3,4"),
            Some(b",,"),
            None,
        ];
        let got = run(&[("columns", "region, total,id")], &values);
        let expected = [
            Some(r#"{"region":"eu","total":"42","id":"007"}"#),
            Some(r#"{"region":"a, b","total":"say \"hi\"","id":"x"}"#),
            Some(r#"{"region":"us","total":null,"id":null}"#),
            Some(r#"{"region":"ap","total":"1","id":"2"}"#),
            Some(r#"{"region":"","total":"","id":""}"#),
            None,
        ];
        assert_eq!(got, expected.map(|e| e.map(str::to_owned)));
    }

    #[test]
    fn other_delimiters_and_escapes() {
        let values: [Option<&[u8]>; 2] = [Some(b"a\\b\tc\x01d"), Some(&[0xff, b';', b'x'])];
        let got = run(&[("columns", "p,q"), ("delimiter", "\\t")], &values);
        assert_eq!(got[0].as_deref(), Some(r#"{"p":"a\\b","q":"c\u0001d"}"#));
        let got = run(&[("columns", "p,q"), ("delimiter", ";")], &values[1..]);
        assert_eq!(got[0].as_deref(), Some("{\"p\":\"\u{fffd}\",\"q\":\"x\"}"));
    }

    #[test]
    fn bad_parameters_are_named() {
        let err = |p: &[(&str, &str)]| Csv::init(&Params::new(p.iter().copied())).unwrap_err();
        assert!(err(&[]).message.contains("`columns`"));
        assert!(
            err(&[("columns", "a,,b")])
                .message
                .contains("empty column name")
        );
        let e = err(&[("columns", "a"), ("delimiter", "::")]);
        assert!(e.message.contains("`delimiter` = `::`"), "{e}");
    }
}
