//! Views: read-only topics whose records are a source topic's, run through a chain of
//! filter and transform plugins when a consumer fetches (`sluice view create orders-eu --from
//! orders --filter json-filter --param field=$.region --param eq=eu`). The stored log is
//! untouched; a view has the source's partitions and offsets (with gaps where records were
//! dropped, as on a compacted topic), so groups, committed offsets, lag, seeking and
//! ListOffsets work unchanged.
//!
//! - this file: [`ViewSpec`] (what a user configures, persisted as
//!   `<data.dir>/views/<name>.json`), the checks on a new view, and binding its plugin chain.
//!   The live view (spec, source topic, the chain bound lazily) is the topic registry's
//!   `crate::topics::ViewTopic`: this module imports nothing from the registry.
//! - `apply.rs`: what Fetch does with the bytes read from the source partition: decode each
//!   batch, one plugin call per stage per batch, re-encode the kept records at their original
//!   offsets (`crate::records`).
//!
//! The registry of views lives in [`crate::topics::TopicRegistry`] beside the topics (one namespace:
//! a view cannot share a topic's name). An ephemeral view (`sluice consume --filter`) is not
//! persisted and is dropped once no fetch has used it for `VIEW_EPHEMERAL_IDLE_MS`; in a
//! cluster the admin API makes it on every live broker too
//! (`TopicRegistry::put_ephemeral_view`).

pub(crate) mod apply;

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};
use sluice_plugin_host::{FailurePolicy, Registry, RegistryError, Stage, View};

use crate::error::KafkaError;
use crate::limits;

pub use apply::{apply, apply_slice};

/// One stage of a view as configured: a filter or transform plugin and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSpec {
    /// Plugin name (`sluice plugin list`).
    pub plugin: String,
    /// Parameters handed to the plugin's `init`.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// `filter` or `transform`, when the creator said which it expects (checked against
    /// the plugin; the plugin's own kind decides what the stage does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A view as configured (the admin API's body, and the persisted file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewSpec {
    /// The view's name; a topic name no topic has.
    pub name: String,
    /// The topic it reads.
    pub source: String,
    /// Filters and transforms, run in order on each fetched batch.
    pub stages: Vec<StageSpec>,
    /// `fail` (the fetch of that partition returns UNKNOWN_SERVER_ERROR, the consumer
    /// retries) or `skip` (the failed batch's records are dropped and counted).
    #[serde(default = "default_on_error")]
    pub on_error: String,
    /// Not persisted; dropped when idle (ad hoc `sluice consume --filter`).
    #[serde(default)]
    pub ephemeral: bool,
    /// The principal that created it (`User:alice`), set by the broker from the admin API's
    /// caller (a value in a request body is replaced). Every fetch asks its current READ on
    /// the source topic and on each stage's plugin (`authz::view_refusal`). `None` in a view
    /// persisted before owners were recorded: each reader then needs READ on the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The address the owner created it from: the host the owner's ACLs are matched against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_host: Option<String>,
}

fn default_on_error() -> String {
    FailurePolicy::Fail.as_str().to_owned()
}

/// The shape checks of a spec that need no plugin: stage count, policy name.
pub(crate) fn check(spec: &ViewSpec) -> Result<FailurePolicy, KafkaError> {
    let invalid = |msg: String| KafkaError::new(ResponseError::InvalidRequest, msg);
    if spec.stages.is_empty() {
        return Err(invalid(format!(
            "view {:?} has no stages: give at least one filter or transform",
            spec.name
        )));
    }
    if spec.stages.len() > limits::VIEW_STAGES_MAX {
        return Err(invalid(format!(
            "view {:?} has {} stages; VIEW_STAGES_MAX is {}",
            spec.name,
            spec.stages.len(),
            limits::VIEW_STAGES_MAX
        )));
    }
    spec.on_error
        .parse()
        .map_err(|e: String| invalid(format!("on_error: {e}")))
}

/// Makes one pooled handle per stage (each plugin's `init` runs once now, so bad parameters
/// are reported here).
pub(crate) fn build(
    registry: &Registry,
    spec: &ViewSpec,
    policy: FailurePolicy,
) -> Result<View, KafkaError> {
    let stages = spec
        .stages
        .iter()
        .enumerate()
        .map(|(i, stage)| {
            let params: Vec<(String, String)> = stage
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let built = registry
                .stage(&stage.plugin, &params)
                .map_err(|e| stage_error(&spec.name, i, &stage.plugin, e))?;
            let actual = match built {
                Stage::Filter(_) => "filter",
                Stage::Transform(_) => "transform",
            };
            match stage.kind.as_deref() {
                Some(expected) if expected != actual => Err(KafkaError::new(
                    ResponseError::InvalidConfig,
                    format!(
                        "view {:?} stage {i}: plugin `{}` is a {actual}, not a {expected} (--{actual} {})",
                        spec.name, stage.plugin, stage.plugin
                    ),
                )),
                _ => Ok(built),
            }
        })
        .collect::<Result<Vec<Stage>, _>>()?;
    Ok(View::new(stages, policy))
}

/// A registry error binding stage `index`, naming the stage and what to do.
fn stage_error(view: &str, index: usize, plugin: &str, e: RegistryError) -> KafkaError {
    let code = match e {
        RegistryError::NotFound(_) => ResponseError::UnknownTopicOrPartition,
        _ => ResponseError::InvalidConfig,
    };
    let message = match &e {
        RegistryError::NotFound(_) => format!(
            "view {view:?} stage {index}: no plugin named `{plugin}` is deployed (sluice plugin deploy {plugin}.wasm)"
        ),
        other => format!("view {view:?} stage {index} (`{plugin}`): {other}"),
    };
    KafkaError::new(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(stages: usize, on_error: &str) -> ViewSpec {
        ViewSpec {
            name: "v".into(),
            source: "t".into(),
            stages: (0..stages)
                .map(|i| StageSpec {
                    plugin: format!("p{i}"),
                    params: BTreeMap::new(),
                    kind: None,
                })
                .collect(),
            on_error: on_error.into(),
            ephemeral: false,
            owner: None,
            owner_host: None,
        }
    }

    #[test]
    fn specs_are_checked_before_any_plugin_is_bound() {
        assert_eq!(check(&spec(1, "skip")).unwrap(), FailurePolicy::Skip);
        let empty = check(&spec(0, "fail")).unwrap_err();
        assert!(empty.message.contains("no stages"), "{}", empty.message);
        let many = check(&spec(limits::VIEW_STAGES_MAX + 1, "fail")).unwrap_err();
        assert!(many.message.contains("VIEW_STAGES_MAX"), "{}", many.message);
        let policy = check(&spec(1, "drop")).unwrap_err();
        assert!(
            policy.message.contains("`fail` or `skip`"),
            "{}",
            policy.message
        );
    }

    #[test]
    fn a_spec_round_trips_through_json_with_defaults() {
        let text = r#"{"name":"v","source":"t","stages":[{"plugin":"f"}]}"#;
        let parsed: ViewSpec = serde_json::from_str(text).unwrap();
        assert_eq!(parsed.on_error, "fail");
        assert!(!parsed.ephemeral);
        assert_eq!(
            parsed.owner, None,
            "a view persisted before owners were recorded"
        );
        assert!(parsed.stages[0].params.is_empty());
        let again: ViewSpec =
            serde_json::from_str(&serde_json::to_string(&parsed).unwrap()).unwrap();
        assert_eq!(again, parsed);
    }
}
