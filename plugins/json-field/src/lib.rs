//! Partition by one field of a JSON value: records with the same
//! `customer_id` land together even when their keys differ.
//!
//! Parameters: `field` (required), a path such as `$.customer_id` or
//! `$.order.customer.id`. The field's bytes (a string's contents as
//! written, or a number's literal) are hashed like a Java client key:
//! `toPositive(murmur2(bytes)) % partitions`, so a producer that keys by
//! the same field agrees with it. Records whose value is missing, not JSON,
//! or lacks the field fall back to the key's murmur2, then to partition 0.

use sluice_sdk::hash::murmur2_partition;
use sluice_sdk::json::Path;
use sluice_sdk::{Error, Init, Params, Record, partitioner};

#[derive(Debug)]
pub struct Field {
    path: Path,
}

impl Init for Field {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["field"])?;
        let field = params.require("field")?;
        let path = Path::parse(field)
            .map_err(|e| Error::invalid_params(format!("parameter `field`: {e}")))?;
        Ok(Self { path })
    }
}

#[partitioner]
pub fn json_field(field: &mut Field, record: &Record<'_>, partition_count: u32) -> u32 {
    let bytes = record
        .value()
        .and_then(|v| field.path.find(v))
        .or_else(|| record.key());
    bytes.map_or(0, |b| murmur2_partition(b, partition_count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn partition_of(field: &str, key: Option<&[u8]>, value: &str, partition_count: u32) -> u32 {
        let mut state = Field::init(&Params::new([("field", field)])).unwrap();
        let mut b = BatchBuilder::new();
        b.push(0, 0, key, Some(value.as_bytes()), &[]);
        json_field(
            &mut state,
            &b.batch().iter().next().unwrap(),
            partition_count,
        )
    }

    #[test]
    fn same_field_same_partition_whatever_the_key() {
        let a = partition_of(
            "$.customer_id",
            Some(b"k1"),
            r#"{"customer_id":"21","n":1}"#,
            3,
        );
        let b = partition_of(
            "$.customer_id",
            Some(b"k2"),
            r#"{"n":2, "customer_id": "21"}"#,
            3,
        );
        // toPositive(murmur2("21")) % 3 = 0 (Kafka's murmur2("21") = -973932308).
        assert_eq!((a, b), (0, 0));
        let nested = partition_of(
            "$.order.customer",
            None,
            r#"{"order":{"customer":"foobar"}}"#,
            10,
        );
        assert_eq!(nested, 6);
    }

    #[test]
    fn missing_field_falls_back_to_the_key() {
        assert_eq!(partition_of("$.customer_id", Some(b"21"), "not json", 3), 0);
        assert_eq!(
            partition_of("$.customer_id", Some(b"abc"), r#"{"other":1}"#, 7),
            4
        );
        assert_eq!(partition_of("$.customer_id", None, "{}", 7), 0);
    }

    #[test]
    fn bad_parameters_are_named() {
        let missing = Field::init(&Params::default()).unwrap_err();
        assert!(
            missing
                .message
                .contains("missing required parameter `field`"),
            "{missing}"
        );
        let bad = Field::init(&Params::new([("field", "$")])).unwrap_err();
        assert!(bad.message.contains("parameter `field`"), "{bad}");
        let unknown = Field::init(&Params::new([("field", "$.a"), ("feild", "x")])).unwrap_err();
        assert!(
            unknown.message.contains("unknown parameter `feild`"),
            "{unknown}"
        );
    }
}
