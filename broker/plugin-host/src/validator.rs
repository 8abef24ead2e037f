//! Validator calls (produce time, WIT 0.2.0): the same instance discipline as every kind
//! (own `Store`, deadline and memory limit per call, discarded on any error: `call.rs`);
//! what is a validator's own is its call and the check of the guest's refusals: indexes in
//! range, in order, none twice, reasons cut at `VALIDATOR_REASON_BYTES_MAX`. The pooled
//! handle is [`crate::Validator`].

use wasmtime::Store;

use crate::batch::ColumnarBatch;
use crate::bindings::{Param, Rejection, ValidatorBindings};
use crate::call::{GuestResult, Instance, Kind};
use crate::compile::{KindPre, PluginVersion};
use crate::error::CallError;
use crate::limits;
use crate::state::HostState;

/// One refused record of a batch: its index in the batch and the plugin's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub index: u32,
    pub reason: String,
}

/// The validator kind (WIT world `validator`, from 0.2.0).
#[derive(Debug)]
pub enum ValidatorKind {}

impl Kind for ValidatorKind {
    type Bindings = ValidatorBindings;
    const NAME: &'static str = "validator";

    fn instantiate(
        version: &PluginVersion,
        store: &mut Store<HostState>,
    ) -> Option<wasmtime::Result<ValidatorBindings>> {
        match &version.pre {
            KindPre::Validator(pre) => Some(pre.instantiate(store)),
            _ => None,
        }
    }

    fn init(
        b: &ValidatorBindings,
        store: &mut Store<HostState>,
        params: &[Param],
    ) -> GuestResult<()> {
        b.sluice_plugin_validator_api().call_init(store, params)
    }
}

/// One live, initialised instance of a validator plugin. Not shared: callers check one
/// out of a [`crate::Validator`] handle.
pub type ValidatorInstance = Instance<ValidatorKind>;

impl Instance<ValidatorKind> {
    /// The records of `batch` the plugin refuses (empty: all accepted).
    ///
    /// # Errors
    /// A trap, a timeout, memory exhaustion, a guest error, or an answer that breaks the
    /// contract. The instance must be dropped afterwards.
    pub fn validate(&mut self, batch: &ColumnarBatch) -> Result<Vec<Refusal>, CallError> {
        let rejections = self.call(|b, store| {
            b.sluice_plugin_validator_api()
                .call_validate(store, &batch.columns)
        })?;
        check_rejections(rejections, batch.len()).map_err(|message| self.contract(message))
    }
}

/// The guest's refusals, checked: each index names a record of the batch, in increasing
/// order (so none twice); reasons are cut at `VALIDATOR_REASON_BYTES_MAX`.
pub(crate) fn check_rejections(
    rejections: Vec<Rejection>,
    records: usize,
) -> Result<Vec<Refusal>, String> {
    let mut last = None;
    rejections
        .into_iter()
        .map(|Rejection { index, mut reason }| {
            if index as usize >= records {
                return Err(format!(
                    "refused record {index} of a batch of {records} records"
                ));
            }
            if last.is_some_and(|l| index <= l) {
                return Err(format!(
                    "refused record {index} after record {}: refusals must be in increasing order",
                    last.unwrap_or_default()
                ));
            }
            last = Some(index);
            if reason.len() > limits::VALIDATOR_REASON_BYTES_MAX {
                let mut cut = limits::VALIDATOR_REASON_BYTES_MAX;
                while !reason.is_char_boundary(cut) {
                    cut -= 1;
                }
                reason.truncate(cut);
            }
            Ok(Refusal { index, reason })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(index: u32, reason: &str) -> Rejection {
        Rejection {
            index,
            reason: reason.to_owned(),
        }
    }

    #[test]
    fn refusals_must_name_records_in_order() {
        assert_eq!(
            check_rejections(vec![r(0, "a"), r(2, "b")], 3).unwrap(),
            [
                Refusal {
                    index: 0,
                    reason: "a".into()
                },
                Refusal {
                    index: 2,
                    reason: "b".into()
                }
            ]
        );
        assert!(check_rejections(vec![r(3, "x")], 3).is_err());
        assert!(check_rejections(vec![r(1, "x"), r(1, "y")], 3).is_err());
        assert!(check_rejections(vec![r(2, "x"), r(1, "y")], 3).is_err());
        assert!(check_rejections(Vec::new(), 0).unwrap().is_empty());
    }

    #[test]
    fn long_reasons_are_cut_on_a_char_boundary() {
        let long = "é".repeat(limits::VALIDATOR_REASON_BYTES_MAX);
        let out = check_rejections(vec![r(0, &long)], 1).unwrap();
        assert!(out[0].reason.len() <= limits::VALIDATOR_REASON_BYTES_MAX);
        assert!(out[0].reason.chars().all(|c| c == 'é'));
    }
}
