//! Refuse produced records that break a topic's record policy: sizes, a key, headers.
//! Runs at produce time (`sluice.validator = record-policy-validator`), so a producer
//! learns which record broke which rule before anything is appended.
//!
//! Parameters (all optional; no parameters means no limit but the broker's own):
//! - `max.key.bytes`, `max.value.bytes`: the largest key and value, in bytes;
//! - `max.headers`: the most headers one record may carry;
//! - `require.key`: `true` refuses records without a key (`false` by default);
//! - `require.headers`: comma-separated header names every record must carry, e.g.
//!   `trace-id,source`.

use sluice_sdk::{Error, Init, Params, Record, validator};

/// The policy, built once per instance from the parameters.
#[derive(Debug)]
pub struct Policy {
    max_key_bytes: Option<usize>,
    max_value_bytes: Option<usize>,
    max_headers: Option<usize>,
    require_key: bool,
    require_headers: Vec<String>,
}

fn limit(params: &Params, key: &str) -> Result<Option<usize>, Error> {
    params
        .get(key)
        .map(|v| {
            v.trim().parse::<usize>().map_err(|_| {
                Error::invalid_params(format!(
                    "parameter `{key}` = `{v}` is not a whole number of bytes or headers"
                ))
            })
        })
        .transpose()
}

impl Init for Policy {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&[
            "max.key.bytes",
            "max.value.bytes",
            "max.headers",
            "require.key",
            "require.headers",
        ])?;
        Ok(Self {
            max_key_bytes: limit(params, "max.key.bytes")?,
            max_value_bytes: limit(params, "max.value.bytes")?,
            max_headers: limit(params, "max.headers")?,
            require_key: params.parse_or("require.key", false)?,
            require_headers: params
                .get("require.headers")
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }
}

#[validator]
pub fn record_policy(policy: &mut Policy, record: &Record<'_>) -> Result<(), String> {
    let key = record.key();
    if policy.require_key && key.is_none() {
        return Err("a key is required (require.key=true)".into());
    }
    let over = |what: &str, len: usize, max: Option<usize>, param: &str| match max {
        Some(max) if len > max => Err(format!("the {what} is {len} bytes, over {param}={max}")),
        _ => Ok(()),
    };
    over(
        "key",
        key.map_or(0, <[u8]>::len),
        policy.max_key_bytes,
        "max.key.bytes",
    )?;
    let value_len = record.value().map_or(0, <[u8]>::len);
    over(
        "value",
        value_len,
        policy.max_value_bytes,
        "max.value.bytes",
    )?;
    if let Some(max) = policy.max_headers {
        let count = record.headers().len();
        if count > max {
            return Err(format!(
                "the record has {count} headers, over max.headers={max}"
            ));
        }
    }
    for name in &policy.require_headers {
        if record.header(name).is_none() {
            return Err(format!("header `{name}` is required (require.headers)"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    type Rec<'a> = (
        Option<&'a [u8]>,
        Option<&'a [u8]>,
        &'a [(&'a [u8], &'a [u8])],
    );

    fn verdicts(params: &[(&str, &str)], records: &[Rec<'_>]) -> Vec<Result<(), String>> {
        let mut policy = Policy::init(&Params::new(params.iter().copied())).unwrap();
        let mut b = BatchBuilder::new();
        for (i, (k, v, h)) in records.iter().enumerate() {
            b.push(i as i64, 0, *k, *v, h);
        }
        b.batch()
            .iter()
            .map(|r| record_policy(&mut policy, &r))
            .collect()
    }

    #[test]
    fn sizes_keys_and_headers() {
        let params = [
            ("max.key.bytes", "4"),
            ("max.value.bytes", "8"),
            ("max.headers", "2"),
            ("require.key", "true"),
            ("require.headers", "trace"),
        ];
        let trace: &[(&[u8], &[u8])] = &[(b"trace", b"t1")];
        let v = verdicts(
            &params,
            &[
                (Some(b"k1"), Some(b"small"), trace),
                (None, Some(b"v"), trace),
                (Some(b"toolong"), Some(b"v"), trace),
                (Some(b"k"), Some(b"far too long"), trace),
                (Some(b"k"), Some(b"v"), &[]),
                (
                    Some(b"k"),
                    Some(b"v"),
                    &[(b"trace", b"1"), (b"a", b""), (b"b", b"")],
                ),
            ],
        );
        assert_eq!(v[0], Ok(()));
        assert_eq!(
            v[1].as_ref().unwrap_err(),
            "a key is required (require.key=true)"
        );
        assert_eq!(
            v[2].as_ref().unwrap_err(),
            "the key is 7 bytes, over max.key.bytes=4"
        );
        assert_eq!(
            v[3].as_ref().unwrap_err(),
            "the value is 12 bytes, over max.value.bytes=8"
        );
        assert_eq!(
            v[4].as_ref().unwrap_err(),
            "header `trace` is required (require.headers)"
        );
        assert_eq!(
            v[5].as_ref().unwrap_err(),
            "the record has 3 headers, over max.headers=2"
        );
    }

    #[test]
    fn no_params_accept_everything() {
        let v = verdicts(
            &[],
            &[(None, None, &[]), (Some(b"k"), Some(&[0; 4096]), &[])],
        );
        assert_eq!(v, [Ok(()), Ok(())]);
    }

    #[test]
    fn bad_params_are_named() {
        for (k, v) in [
            ("max.value.bytes", "1MB"),
            ("require.key", "yes"),
            ("max", "1"),
        ] {
            let e = Policy::init(&Params::new([(k, v)])).unwrap_err();
            assert!(e.message.contains(k), "{e:?}");
        }
    }
}
