//! A filter built against the **released** `sluice:plugin@0.1.0` contract
//! (`wit/released/sluice-plugin@0.1.0.wit`) with wit-bindgen directly, as a plugin built
//! by an older SDK is: the host's tests deploy it to prove rule 4 of `wit/README.md` (a
//! plugin never has to be rebuilt because the broker was upgraded). It keeps records
//! whose value starts with the parameter `prefix` and logs through the 0.1.0 `log`.

#![allow(unsafe_code)]

/// The filter's rule, natively testable.
#[must_use]
pub fn keeps(prefix: &[u8], value: Option<&[u8]>) -> bool {
    value.is_some_and(|v| v.starts_with(prefix))
}

#[cfg(target_arch = "wasm32")]
mod guest {
    use std::cell::RefCell;

    sluice_sdk::wit_bindgen::generate!({
        path: "../../../wit/released/sluice-plugin@0.1.0.wit",
        world: "filter",
        runtime_path: "::sluice_sdk::wit_bindgen::rt",
    });

    use self::exports::sluice::plugin::filter_api::Guest;
    use self::sluice::plugin::host::log;
    use self::sluice::plugin::types::{LogLevel, Param, PluginError, RecordBatch};

    thread_local! {
        static PREFIX: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }

    struct Plugin;

    impl Guest for Plugin {
        fn init(params: Vec<Param>) -> Result<(), PluginError> {
            let mut prefix = None;
            for p in params {
                match p.key.as_str() {
                    "prefix" => prefix = Some(p.value.into_bytes()),
                    other => {
                        return Err(PluginError::InvalidParams(format!(
                            "unknown parameter `{other}`"
                        )));
                    }
                }
            }
            let prefix = prefix.ok_or_else(|| {
                PluginError::InvalidParams("parameter `prefix` is required".into())
            })?;
            log(
                LogLevel::Info,
                "compat-v0-1-filter ready (sluice:plugin@0.1.0)",
            );
            PREFIX.with(|p| *p.borrow_mut() = prefix);
            Ok(())
        }

        fn filter(batch: RecordBatch) -> Result<Vec<u8>, PluginError> {
            let n = batch.offsets.len();
            let mut keep = vec![0u8; n.div_ceil(8)];
            PREFIX.with(|prefix| {
                let prefix = prefix.borrow();
                let mut start = 0usize;
                for i in 0..n {
                    let end = batch.value_ends[i] as usize;
                    let null = batch.value_nulls[i / 8] >> (i % 8) & 1 == 1;
                    let value = (!null).then(|| &batch.value_bytes[start..end]);
                    if super::keeps(&prefix, value) {
                        keep[i / 8] |= 1 << (i % 8);
                    }
                    start = end;
                }
            });
            Ok(keep)
        }
    }

    export!(Plugin);
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_values_with_the_prefix() {
        assert!(super::keeps(b"ok", Some(b"ok-1")));
        assert!(!super::keeps(b"ok", Some(b"no")));
        assert!(!super::keeps(b"ok", None));
    }
}
