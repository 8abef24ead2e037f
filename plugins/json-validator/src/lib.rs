//! Refuse produced records whose value is not the JSON the topic expects: a schema-like
//! check at produce time (`sluice.validator = json-validator`).
//!
//! Parameters (all optional):
//! - `root`: `object` (the default) refuses any value that is not a JSON object; `any`
//!   accepts any well-formed JSON value.
//! - `required`: comma-separated paths that must be present and not `null`, e.g.
//!   `$.id,$.customer.name`.
//! - `types`: comma-separated `path:type` pairs, the type one of `string`, `number`,
//!   `boolean`, `object`, `array`, e.g. `$.id:number,$.tags:array`; a field that is
//!   present must have it (pair it with `required` to insist on presence too).
//! - `tombstones`: `refuse` (the default) or `allow` records with no value (deletes, for
//!   compacted topics).
//!
//! With no parameters the validator refuses anything that is not a well-formed JSON
//! object. Each refusal says why; the producer sees it in the Produce response's record
//! errors (INVALID_RECORD).

use sluice_sdk::json::{self, Kind, Path};
use sluice_sdk::{Error, Init, Params, Record, validator};

/// The schema, built once per instance from the parameters.
#[derive(Debug)]
pub struct Schema {
    object_only: bool,
    allow_tombstones: bool,
    required: Vec<(String, Path)>,
    types: Vec<(String, Path, Kind)>,
}

fn kind_named(name: &str) -> Option<Kind> {
    Some(match name {
        "string" => Kind::String,
        "number" => Kind::Number,
        "boolean" => Kind::Bool,
        "object" => Kind::Object,
        "array" => Kind::Array,
        _ => return None,
    })
}

fn path(param: &str, text: &str) -> Result<Path, Error> {
    Path::parse(text).map_err(|e| Error::invalid_params(format!("parameter `{param}`: {e}")))
}

fn list(value: Option<&str>) -> impl Iterator<Item = &str> {
    value
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

impl Init for Schema {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["root", "required", "types", "tombstones"])?;
        let object_only = match params.get("root").unwrap_or("object") {
            "object" => true,
            "any" => false,
            other => {
                return Err(Error::invalid_params(format!(
                    "parameter `root` = `{other}` is not `object` or `any`"
                )));
            }
        };
        let allow_tombstones = match params.get("tombstones").unwrap_or("refuse") {
            "refuse" => false,
            "allow" => true,
            other => {
                return Err(Error::invalid_params(format!(
                    "parameter `tombstones` = `{other}` is not `refuse` or `allow`"
                )));
            }
        };
        let required = list(params.get("required"))
            .map(|p| Ok((p.to_owned(), path("required", p)?)))
            .collect::<Result<_, Error>>()?;
        let types = list(params.get("types"))
            .map(|pair| {
                let (p, t) = pair.rsplit_once(':').ok_or_else(|| {
                    Error::invalid_params(format!(
                        "parameter `types`: `{pair}` is not `path:type`"
                    ))
                })?;
                let kind = kind_named(t.trim()).ok_or_else(|| {
                    Error::invalid_params(format!(
                        "parameter `types`: `{t}` is not one of string, number, boolean, object, array"
                    ))
                })?;
                Ok((p.trim().to_owned(), path("types", p.trim())?, kind))
            })
            .collect::<Result<_, Error>>()?;
        Ok(Self {
            object_only,
            allow_tombstones,
            required,
            types,
        })
    }
}

#[validator]
pub fn json_validator(schema: &mut Schema, record: &Record<'_>) -> Result<(), String> {
    let Some(value) = record.value() else {
        return if schema.allow_tombstones {
            Ok(())
        } else {
            Err(
                "a record with no value (tombstone) is refused (tombstones=allow takes them)"
                    .into(),
            )
        };
    };
    let kind = json::check(value)?;
    if schema.object_only && kind != Kind::Object {
        return Err(format!(
            "the value is a JSON {}, not an object",
            kind.as_str()
        ));
    }
    for (name, path) in &schema.required {
        if path.find_raw(value).is_none() {
            return Err(format!("required field {name} is missing or null"));
        }
    }
    for (name, path, want) in &schema.types {
        if let Some(found) = path.find_raw(value) {
            let got = Kind::of_raw(found);
            if got != *want {
                return Err(format!(
                    "field {name} is of type {}, expected {}",
                    got.as_str(),
                    want.as_str()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn verdicts(params: &[(&str, &str)], values: &[Option<&str>]) -> Vec<Result<(), String>> {
        let mut schema = Schema::init(&Params::new(params.iter().copied())).unwrap();
        let mut b = BatchBuilder::new();
        for (i, v) in values.iter().enumerate() {
            b.push(i as i64, 0, None, v.map(str::as_bytes), &[]);
        }
        b.batch()
            .iter()
            .map(|r| json_validator(&mut schema, &r))
            .collect()
    }

    #[test]
    fn by_default_only_json_objects_pass() {
        let v = verdicts(
            &[],
            &[
                Some(r#"{"a":1}"#),
                Some("[1]"),
                Some("not json"),
                Some("{\"a\":"),
                None,
            ],
        );
        assert_eq!(v[0], Ok(()));
        assert_eq!(
            v[1].as_ref().unwrap_err(),
            "the value is a JSON array, not an object"
        );
        assert!(v[2].as_ref().unwrap_err().starts_with("not JSON"));
        assert!(v[3].is_err());
        assert!(v[4].as_ref().unwrap_err().contains("tombstone"));
    }

    #[test]
    fn required_fields_and_types() {
        let params = [
            ("required", "$.id, $.customer.name"),
            ("types", "$.id:number,$.tags:array"),
        ];
        let v = verdicts(
            &params,
            &[
                Some(r#"{"id": 7, "customer": {"name": "ann"}, "tags": []}"#),
                Some(r#"{"id": 7}"#),
                Some(r#"{"id": "7", "customer": {"name": "ann"}}"#),
                Some(r#"{"id": 7, "customer": {"name": null}}"#),
                Some(r#"{"id": 7, "customer": {"name": "b"}, "tags": "x"}"#),
            ],
        );
        assert_eq!(v[0], Ok(()));
        assert_eq!(
            v[1].as_ref().unwrap_err(),
            "required field $.customer.name is missing or null"
        );
        assert_eq!(
            v[2].as_ref().unwrap_err(),
            "field $.id is of type string, expected number"
        );
        assert_eq!(
            v[3].as_ref().unwrap_err(),
            "required field $.customer.name is missing or null"
        );
        assert_eq!(
            v[4].as_ref().unwrap_err(),
            "field $.tags is of type string, expected array"
        );
    }

    #[test]
    fn root_any_and_tombstones_allow() {
        let v = verdicts(
            &[("root", "any"), ("tombstones", "allow")],
            &[Some("[1]"), Some("3"), None, Some("x")],
        );
        assert_eq!(&v[..3], &[Ok(()), Ok(()), Ok(())]);
        assert!(v[3].is_err());
    }

    #[test]
    fn bad_params_are_named() {
        for (params, names) in [
            (&[("root", "list")][..], "root"),
            (&[("types", "$.a")][..], "types"),
            (&[("types", "$.a:date")][..], "types"),
            (&[("required", "$")][..], "required"),
            (&[("tombstones", "maybe")][..], "tombstones"),
            (&[("shape", "x")][..], "shape"),
        ] {
            let e = Schema::init(&Params::new(params.iter().copied())).unwrap_err();
            assert!(e.message.contains(names), "{e:?}");
        }
    }
}
