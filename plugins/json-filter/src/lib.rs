//! Keep records whose JSON value has a field that compares true: the
//! view `$.region == "eu"` is `field=$.region, op===, value="eu"`.
//!
//! Parameters:
//! - `field` (required): a path such as `$.region` or `$.order.total`;
//! - `op` (required): one of `==`, `!=`, `<`, `<=`, `>`, `>=`;
//! - `value` (required): a number (`10`, `-2.5`) compares numerically with
//!   a field that reads as a number (`12`, or a string `"12"`); anything
//!   else is text: `"eu"` (quotes stripped) or a bare `eu`, compared with
//!   the field's bytes as written (a string's contents without its quotes,
//!   escapes not decoded; `true`, `false` as literals), `<` and friends
//!   byte-wise.
//!
//! A record whose value is missing, not JSON, lacks the field, or holds
//! `null` there is dropped, whatever the operator (as SQL's `NULL`).
//! The rest of the document is not parsed: the field is found by scanning
//! (`sluice_sdk::json::Path`), nothing is allocated per record.

use sluice_sdk::json::{Comparison, Path};
use sluice_sdk::{Error, Init, Params, Record, filter};

/// The predicate, built once per instance from the parameters.
#[derive(Debug)]
pub struct Predicate {
    path: Path,
    comparison: Comparison,
}

impl Init for Predicate {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["field", "op", "value"])?;
        let path = Path::parse(params.require("field")?)
            .map_err(|e| Error::invalid_params(format!("parameter `field`: {e}")))?;
        let comparison = Comparison::parse(params.require("op")?, params.require("value")?)?;
        Ok(Self { path, comparison })
    }
}

#[filter]
pub fn json_filter(predicate: &mut Predicate, record: &Record<'_>) -> bool {
    record
        .value()
        .and_then(|v| predicate.path.find(v))
        .is_some_and(|field| predicate.comparison.holds(field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn kept(params: &[(&str, &str)], values: &[Option<&str>]) -> Vec<bool> {
        let mut state = Predicate::init(&Params::new(params.iter().copied())).unwrap();
        let mut b = BatchBuilder::new();
        for (i, v) in values.iter().enumerate() {
            b.push(i as i64, 0, None, v.map(str::as_bytes), &[]);
        }
        b.batch()
            .iter()
            .map(|r| json_filter(&mut state, &r))
            .collect()
    }

    #[test]
    fn string_equality() {
        let values = [
            Some(r#"{"region":"eu","n":1}"#),
            Some(r#"{"n":2, "region" : "eu"}"#),
            Some(r#"{"region":"us"}"#),
            Some(r#"{"other":"eu"}"#),
            Some("not json"),
            Some(r#"{"region":null}"#),
            None,
        ];
        let eq = [("field", "$.region"), ("op", "=="), ("value", "\"eu\"")];
        assert_eq!(
            kept(&eq, &values),
            [true, true, false, false, false, false, false]
        );
        let bare = [("field", "region"), ("op", "=="), ("value", "eu")];
        assert_eq!(kept(&bare, &values), kept(&eq, &values));
        let ne = [("field", "$.region"), ("op", "!="), ("value", "\"eu\"")];
        assert_eq!(
            kept(&ne, &values),
            [false, false, true, false, false, false, false]
        );
    }

    #[test]
    fn numeric_comparisons() {
        let values = [
            Some(r#"{"order":{"total":9.5}}"#),
            Some(r#"{"order":{"total":10}}"#),
            Some(r#"{"order":{"total":"11"}}"#),
            Some(r#"{"order":{"total":1e3}}"#),
            Some(r#"{"order":{"total":"lots"}}"#),
        ];
        let cases = [
            (">", [false, false, true, true, false]),
            (">=", [false, true, true, true, false]),
            ("<", [true, false, false, false, false]),
            ("<=", [true, true, false, false, false]),
            ("==", [false, true, false, false, false]),
            ("!=", [true, false, true, true, false]),
        ];
        for (op, expected) in cases {
            let params = [("field", "$.order.total"), ("op", op), ("value", "10")];
            assert_eq!(kept(&params, &values), expected, "{op}");
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let err =
            |p: &[(&str, &str)]| Predicate::init(&Params::new(p.iter().copied())).unwrap_err();
        let e = err(&[("field", "$.a"), ("op", "=~"), ("value", "1")]);
        assert!(e.message.contains("`op` = `=~`"), "{e}");
        let e = err(&[("field", "$.a"), ("value", "1")]);
        assert!(e.message.contains("`op`"), "{e}");
        let e = err(&[("field", "$"), ("op", "=="), ("value", "1")]);
        assert!(e.message.contains("parameter `field`"), "{e}");
        let e = err(&[("field", "$.a"), ("op", "=="), ("value", "1"), ("x", "")]);
        assert!(e.message.contains("unknown parameter `x`"), "{e}");
    }
}
