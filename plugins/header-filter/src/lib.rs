//! Keep records that carry a header, optionally with a given value.
//!
//! Parameters: `name` (required), the header's name (case-sensitive, as
//! Kafka's header keys are); `value` (optional): keep only records where a
//! header of that name has exactly this value (any of them, when a record
//! repeats the header). Without `value`, the header's presence is enough.

use sluice_sdk::{Error, Init, Params, Record, filter};

#[derive(Debug)]
pub struct Wanted {
    name: Vec<u8>,
    value: Option<Vec<u8>>,
}

impl Init for Wanted {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["name", "value"])?;
        let name = params.require("name")?;
        if name.is_empty() {
            return Err(Error::invalid_params("parameter `name` is empty"));
        }
        Ok(Self {
            name: name.as_bytes().to_vec(),
            value: params.get("value").map(|v| v.as_bytes().to_vec()),
        })
    }
}

#[filter]
pub fn header_filter(wanted: &mut Wanted, record: &Record<'_>) -> bool {
    record.headers().iter().any(|(name, value)| {
        name == wanted.name.as_slice() && wanted.value.as_deref().is_none_or(|w| w == value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    type Headers<'a> = &'a [(&'a [u8], &'a [u8])];

    fn kept(params: &[(&str, &str)], records: &[Headers<'_>]) -> Vec<bool> {
        let mut state = Wanted::init(&Params::new(params.iter().copied())).unwrap();
        let mut b = BatchBuilder::new();
        for (i, headers) in records.iter().enumerate() {
            b.push(i as i64, 0, None, Some(b"v"), headers);
        }
        b.batch()
            .iter()
            .map(|r| header_filter(&mut state, &r))
            .collect()
    }

    #[test]
    fn presence_and_value() {
        let records: [Headers<'_>; 5] = [
            &[(b"tenant", b"acme")],
            &[(b"trace", b"1"), (b"tenant", b"globex")],
            &[(b"tenant", b"globex"), (b"tenant", b"acme")],
            &[(b"Tenant", b"acme")],
            &[],
        ];
        assert_eq!(
            kept(&[("name", "tenant")], &records),
            [true, true, true, false, false]
        );
        assert_eq!(
            kept(&[("name", "tenant"), ("value", "acme")], &records),
            [true, false, true, false, false]
        );
        assert_eq!(
            kept(&[("name", "tenant"), ("value", "")], &records),
            [false; 5]
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = Wanted::init(&Params::default()).unwrap_err();
        assert!(e.message.contains("`name`"), "{e}");
        let e = Wanted::init(&Params::new([("name", "")])).unwrap_err();
        assert!(e.message.contains("`name` is empty"), "{e}");
        let e = Wanted::init(&Params::new([("name", "a"), ("val", "b")])).unwrap_err();
        assert!(e.message.contains("unknown parameter `val`"), "{e}");
    }
}
