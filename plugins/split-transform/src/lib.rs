//! Split a stream in two by one JSON field: records whose field compares true go to the
//! first output, all others to the second. As a materialized transform,
//!
//! ```text
//! sluice transform deploy orders-split --from orders --plugin split-transform \
//!     --to orders-eu --to orders-rest --param 'field=$.region' --param value=eu
//! ```
//!
//! writes `orders-eu` and `orders-rest`; as a view (one output, the view itself) it keeps
//! the first output's records, so `sluice view create orders-eu --from orders --transform
//! split-transform --param 'field=$.region' --param value=eu` is `orders-eu`. Each record
//! goes out unchanged (key, value, headers, timestamp) but for the routing header
//! `sluice.output` (`Output::keep_to`), which the broker removes.
//!
//! Parameters:
//! - `field` (required): a path such as `$.region` or `$.order.total`;
//! - `value` (required): what the field is compared with, by json-filter's rules: a number
//!   (`10`, `-2.5`) compares numerically with a field that reads as one (`12`, `"12"`),
//!   anything else is text (`"eu"` with its quotes stripped, or a bare `eu`) compared with
//!   the field's bytes as written (escapes not decoded);
//! - `op` (optional, default `==`): `==`, `!=`, `<`, `<=`, `>`, `>=`;
//! - `unparseable` (optional, default `second`): where a record goes whose field cannot be
//!   read (no value, a value that is not JSON, no such field, or `null` there):
//!   `second` (with the records that do not match) or `dead-letter` (the **third** output,
//!   with a header `split.reason` saying why: `no value`, `not JSON: ...`, `no field $.region`).
//!
//! The routing is exactly json-filter's keep decision with the same `field`, `op` and
//! `value`: first output if json-filter keeps the record, else the second (or the third for
//! an unreadable field under `dead-letter`); `tests/vectors.rs` runs json-filter's shared
//! vectors against this plugin. Like json-filter, the field is found by scanning
//! (`sluice_sdk::json::Path`): the rest of the document is not checked, so a malformed
//! document whose field comes before the damage is routed by that field.
//!
//! `dead-letter` is this plugin's own routing, not the broker's failure policy: the broker's
//! dead-letter topic (`--on-error dead-letter`) receives the input records of a batch the
//! plugin **failed** on (a trap, a timeout, a broken contract), with the failure in
//! `sluice.dlq.*` headers. A record this plugin cannot read is not a failure: it is output,
//! written in the same transaction as the rest. Point the third `--to` at the same topic as
//! the broker's dead-letter topic to keep one place for both; as a view, the third output is
//! not the view's, so those records are not shown.

use sluice_sdk::json::{self, Comparison, Path};
use sluice_sdk::{Error, Init, Output, Params, Record, transform};

/// The output of the records whose field compares true.
pub const MATCHED: u32 = 0;
/// The output of every other record (and, by default, of unreadable ones).
pub const OTHERS: u32 = 1;
/// The output of unreadable records under `unparseable=dead-letter`.
pub const DEAD_LETTER: u32 = 2;
/// The header saying why a record went to [`DEAD_LETTER`].
pub const REASON_HEADER: &str = "split.reason";

/// Where a record whose field cannot be read goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unparseable {
    /// With the records that do not match: the second output.
    Second,
    /// To the third output, with a `split.reason` header.
    DeadLetter,
}

/// Where one record goes, and for an unreadable field why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The field compares true: the first output.
    Matched,
    /// The field was read and does not compare true: the second output.
    Others,
    /// The field could not be read (no value, not JSON, missing, `null`).
    Unreadable,
}

/// The split, built once per instance from the parameters.
#[derive(Debug)]
pub struct Split {
    path: Path,
    /// The `field` parameter as written, for reasons.
    field: String,
    comparison: Comparison,
    unparseable: Unparseable,
}

impl Init for Split {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["field", "op", "value", "unparseable"])?;
        let field = params.require("field")?;
        let path = Path::parse(field)
            .map_err(|e| Error::invalid_params(format!("parameter `field`: {e}")))?;
        let comparison =
            Comparison::parse(params.get("op").unwrap_or("=="), params.require("value")?)?;
        let unparseable = match params.get("unparseable").unwrap_or("second") {
            "second" => Unparseable::Second,
            "dead-letter" => Unparseable::DeadLetter,
            other => {
                return Err(Error::invalid_params(format!(
                    "parameter `unparseable` = `{other}` is not `second` or `dead-letter`"
                )));
            }
        };
        Ok(Self {
            path,
            field: field.to_owned(),
            comparison,
            unparseable,
        })
    }
}

impl Split {
    /// Where `record` goes: json-filter's decision, with unreadable fields told apart.
    #[must_use]
    pub fn route(&self, record: &Record<'_>) -> Route {
        let Some(field) = record.value().and_then(|v| self.path.find(v)) else {
            return Route::Unreadable;
        };
        if self.comparison.holds(field) {
            Route::Matched
        } else {
            Route::Others
        }
    }

    /// Why `record`'s field could not be read (only asked for dead-lettered records: the
    /// strict JSON check walks the whole value).
    #[must_use]
    pub fn reason(&self, record: &Record<'_>) -> String {
        let Some(value) = record.value() else {
            return "no value".to_owned();
        };
        match json::check(value) {
            // The checker's message, `not JSON: <what> at byte <n>`: short by construction.
            Err(reason) => reason,
            Ok(_) => format!("no field {}", self.field),
        }
    }
}

#[transform]
pub fn split(split: &mut Split, record: &Record<'_>, out: &mut Output) {
    match (split.route(record), split.unparseable) {
        (Route::Matched, _) => out.keep_to(MATCHED, record),
        (Route::Others, _) | (Route::Unreadable, Unparseable::Second) => {
            out.keep_to(OTHERS, record);
        }
        (Route::Unreadable, Unparseable::DeadLetter) => {
            let reason = split.reason(record);
            let mut headers: Vec<(&[u8], &[u8])> = record
                .headers()
                .iter()
                .filter(|(name, _)| *name != REASON_HEADER.as_bytes())
                .collect();
            headers.push((REASON_HEADER.as_bytes(), reason.as_bytes()));
            out.push_to(
                DEAD_LETTER,
                record.timestamp,
                record.key(),
                record.value(),
                &headers,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;
    use sluice_sdk::transform::target_of;

    /// What one emitted record looks like: (input index, output, value, `split.reason`).
    type Row = (i64, String, Option<String>, Option<String>);

    fn run(params: &[(&str, &str)], values: &[Option<&str>]) -> Vec<Row> {
        let mut state = Split::init(&Params::new(params.iter().copied())).unwrap();
        let mut b = BatchBuilder::new();
        for (i, v) in values.iter().enumerate() {
            b.push(
                i as i64,
                100 + i as i64,
                Some(b"customer-7"),
                v.map(str::as_bytes),
                &[(b"trace", b"t")],
            );
        }
        let mut out = Output::new();
        for (i, r) in b.batch().iter().enumerate() {
            out.begin(i);
            split(&mut state, &r, &mut out);
        }
        let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
        out.builder()
            .batch()
            .iter()
            .map(|r| {
                assert_eq!(r.key(), Some(&b"customer-7"[..]), "keys are kept");
                assert_eq!(r.header("trace"), Some(&b"t"[..]), "headers are kept");
                assert_eq!(r.timestamp, 100 + r.offset, "timestamps are kept");
                let target = target_of(&r).unwrap().to_string();
                (
                    r.offset,
                    target,
                    text(r.value()),
                    text(r.header(REASON_HEADER)),
                )
            })
            .collect()
    }

    const EU: [(&str, &str); 2] = [("field", "$.region"), ("value", "eu")];

    fn row(i: i64, output: &str, value: Option<&str>, reason: Option<&str>) -> Row {
        (
            i,
            output.to_owned(),
            value.map(str::to_owned),
            reason.map(str::to_owned),
        )
    }

    #[test]
    fn matching_records_go_to_the_first_output_and_the_rest_to_the_second() {
        let values = [
            Some(r#"{"region":"eu","total":10}"#),
            Some(r#"{"region":"us","total":12}"#),
            Some(r#"{"total":3, "region" : "eu"}"#),
            Some(r#"{"region":"EU"}"#),
        ];
        assert_eq!(
            run(&EU, &values),
            [
                row(0, "output 0", values[0], None),
                row(1, "output 1", values[1], None),
                row(2, "output 0", values[2], None),
                row(3, "output 1", values[3], None),
            ]
        );
    }

    const UNREADABLE: [Option<&str>; 5] = [
        None,
        Some("not json"),
        Some(r#"{"other":"eu"}"#),
        Some(r#"{"region":null}"#),
        Some("[1,2]"),
    ];

    #[test]
    fn unreadable_fields_go_to_the_second_output_by_default() {
        let got = run(&EU, &UNREADABLE);
        let outputs: Vec<_> = got
            .iter()
            .map(|r| (r.0, r.1.as_str(), r.3.clone()))
            .collect();
        assert_eq!(
            outputs,
            (0..5).map(|i| (i, "output 1", None)).collect::<Vec<_>>()
        );
        let second = [EU[0], EU[1], ("unparseable", "second")];
        assert_eq!(run(&second, &UNREADABLE), got);
    }

    #[test]
    fn dead_letter_sends_unreadable_fields_to_the_third_output_saying_why() {
        let params = [EU[0], EU[1], ("unparseable", "dead-letter")];
        let mut values = UNREADABLE.to_vec();
        values.push(Some(r#"{"region":"eu"}"#));
        values.push(Some(r#"{"region":"us"}"#));
        let got = run(&params, &values);
        let reasons: Vec<_> = got
            .iter()
            .map(|r| (r.0, r.1.as_str(), r.3.as_deref()))
            .collect();
        assert_eq!(
            reasons,
            [
                (0, "output 2", Some("no value")),
                (1, "output 2", Some("not JSON: unknown literal at byte 0")),
                (2, "output 2", Some("no field $.region")),
                (3, "output 2", Some("no field $.region")),
                (4, "output 2", Some("no field $.region")),
                (5, "output 0", None),
                (6, "output 1", None),
            ]
        );
        assert_eq!(got[1].2.as_deref(), Some("not json"), "the value is kept");
    }

    #[test]
    fn op_compares_like_json_filter() {
        let values = [
            Some(r#"{"total":9.5}"#),
            Some(r#"{"total":10}"#),
            Some(r#"{"total":"11"}"#),
            Some(r#"{"total":"lots"}"#),
        ];
        let outputs = |op: &str| -> Vec<String> {
            let params = [("field", "$.total"), ("op", op), ("value", "10")];
            run(&params, &values).into_iter().map(|r| r.1).collect()
        };
        assert_eq!(
            outputs(">"),
            ["output 1", "output 1", "output 0", "output 1"]
        );
        assert_eq!(
            outputs("<="),
            ["output 0", "output 0", "output 1", "output 1"]
        );
        assert_eq!(
            outputs("=="),
            ["output 1", "output 0", "output 1", "output 1"]
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let err = |p: &[(&str, &str)]| Split::init(&Params::new(p.iter().copied())).unwrap_err();
        let e = err(&[("field", "$.a"), ("value", "1"), ("unparseable", "drop")]);
        assert!(e.message.contains("`unparseable` = `drop`"), "{e}");
        let e = err(&[("value", "1")]);
        assert!(e.message.contains("`field`"), "{e}");
        let e = err(&[("field", "$.a")]);
        assert!(e.message.contains("`value`"), "{e}");
        let e = err(&[("field", "$.a"), ("value", "1"), ("op", "=~")]);
        assert!(e.message.contains("`op` = `=~`"), "{e}");
        let e = err(&[("field", "$.a"), ("value", "1"), ("to", "x")]);
        assert!(e.message.contains("unknown parameter `to`"), "{e}");
    }
}
