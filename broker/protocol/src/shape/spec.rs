//! Kafka's request message specs (`messages/*Request.json`, vendored from Kafka 4.4.0),
//! resolved once into a [`Field`] list per (API, version).
//!
//! A spec is JSON with `//` line comments. Each field names the versions it exists in
//! (`versions`), may be null in (`nullableVersions`) and is tagged in (`taggedVersions`,
//! `tag`); the message says which versions are flexible (`flexibleVersions`: compact lengths
//! and a tagged-field section after every struct). A field's type is a primitive, `[]T` (an
//! array of a primitive or a struct), or a struct named by the field: defined inline by its
//! `fields`, or elsewhere in the same spec (`commonStructs`, or another field's inline
//! definition).

use std::collections::HashMap;

use serde::Deserialize;

use super::{Element, Field, TaggedField};
use crate::limits::SPEC_STRUCT_DEPTH_MAX;

/// `specs!["ProduceRequest", ..]`: each `messages/<name>.json`, embedded.
macro_rules! specs {
    ($($name:literal),* $(,)?) => {
        [$((concat!($name, ".json"), include_str!(concat!("../../messages/", $name, ".json")))),*]
    };
}

/// Every vendored request spec, embedded: (file name, text). `messages/README.md` says how to
/// refresh them; a test checks this list names every file there.
const SPECS: &[(&str, &str)] = &specs![
    "AddOffsetsToTxnRequest",
    "AddPartitionsToTxnRequest",
    "AddRaftVoterRequest",
    "AllocateProducerIdsRequest",
    "AlterClientQuotasRequest",
    "AlterConfigsRequest",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionRequest",
    "AlterReplicaLogDirsRequest",
    "AlterShareGroupOffsetsRequest",
    "AlterUserScramCredentialsRequest",
    "ApiVersionsRequest",
    "AssignReplicasToDirsRequest",
    "BeginQuorumEpochRequest",
    "BrokerHeartbeatRequest",
    "BrokerRegistrationRequest",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupHeartbeatRequest",
    "ControlledShutdownRequest",
    "ControllerRegistrationRequest",
    "CreateAclsRequest",
    "CreateDelegationTokenRequest",
    "CreatePartitionsRequest",
    "CreateTopicsRequest",
    "DeleteAclsRequest",
    "DeleteGroupsRequest",
    "DeleteRecordsRequest",
    "DeleteShareGroupOffsetsRequest",
    "DeleteShareGroupStateRequest",
    "DeleteTopicsRequest",
    "DescribeAclsRequest",
    "DescribeClientQuotasRequest",
    "DescribeClusterRequest",
    "DescribeConfigsRequest",
    "DescribeDelegationTokenRequest",
    "DescribeGroupsRequest",
    "DescribeLogDirsRequest",
    "DescribeProducersRequest",
    "DescribeQuorumRequest",
    "DescribeShareGroupOffsetsRequest",
    "DescribeTopicPartitionsRequest",
    "DescribeTransactionsRequest",
    "DescribeUserScramCredentialsRequest",
    "ElectLeadersRequest",
    "EndQuorumEpochRequest",
    "EndTxnRequest",
    "EnvelopeRequest",
    "ExpireDelegationTokenRequest",
    "FetchRequest",
    "FetchSnapshotRequest",
    "FindCoordinatorRequest",
    "GetTelemetrySubscriptionsRequest",
    "HeartbeatRequest",
    "IncrementalAlterConfigsRequest",
    "InitProducerIdRequest",
    "InitializeShareGroupStateRequest",
    "JoinGroupRequest",
    "LeaderAndIsrRequest",
    "LeaveGroupRequest",
    "ListConfigResourcesRequest",
    "ListGroupsRequest",
    "ListOffsetsRequest",
    "ListPartitionReassignmentsRequest",
    "ListTransactionsRequest",
    "MetadataRequest",
    "OffsetCommitRequest",
    "OffsetDeleteRequest",
    "OffsetFetchRequest",
    "OffsetForLeaderEpochRequest",
    "ProduceRequest",
    "PushTelemetryRequest",
    "ReadShareGroupStateRequest",
    "ReadShareGroupStateSummaryRequest",
    "RemoveRaftVoterRequest",
    "RenewDelegationTokenRequest",
    "SaslAuthenticateRequest",
    "SaslHandshakeRequest",
    "ShareAcknowledgeRequest",
    "ShareFetchRequest",
    "ShareGroupDescribeRequest",
    "ShareGroupHeartbeatRequest",
    "StopReplicaRequest",
    "StreamsGroupDescribeRequest",
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupTopologyDescriptionUpdateRequest",
    "SyncGroupRequest",
    "TxnOffsetCommitRequest",
    "UnregisterBrokerRequest",
    "UnregisterControllerRequest",
    "UpdateFeaturesRequest",
    "UpdateMetadataRequest",
    "UpdateRaftVoterRequest",
    "VoteRequest",
    "WriteShareGroupStateRequest",
    "WriteTxnMarkersRequest",
];

/// One message spec, as much of it as the shape needs (other keys are ignored).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageSpec {
    api_key: i16,
    name: String,
    valid_versions: String,
    /// Absent in a few inter-broker specs: none.
    flexible_versions: Option<String>,
    /// Absent in the specs of APIs Kafka removed (`validVersions` "none").
    #[serde(default)]
    fields: Vec<FieldSpec>,
    #[serde(default)]
    common_structs: Vec<StructSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FieldSpec {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    versions: String,
    nullable_versions: Option<String>,
    tagged_versions: Option<String>,
    tag: Option<u32>,
    #[serde(default)]
    fields: Vec<FieldSpec>,
}

#[derive(Debug, Deserialize)]
struct StructSpec {
    name: String,
    fields: Vec<FieldSpec>,
}

/// A version range of a spec: "0+", "3-7", "5" or "none".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Versions {
    pub min: i16,
    pub max: i16,
}

impl Versions {
    const NONE: Versions = Versions { min: 0, max: -1 };

    fn parse(text: &str) -> Result<Versions, String> {
        let number = |s: &str| {
            s.trim()
                .parse::<i16>()
                .map_err(|e| format!("version range {text:?}: {e}"))
        };
        Ok(match text.trim() {
            "none" => Versions::NONE,
            t if t.ends_with('+') => Versions {
                min: number(&t[..t.len() - 1])?,
                max: i16::MAX,
            },
            t => match t.split_once('-') {
                Some((min, max)) => Versions {
                    min: number(min)?,
                    max: number(max)?,
                },
                None => Versions {
                    min: number(t)?,
                    max: number(t)?,
                },
            },
        })
    }

    fn parse_or_none(text: Option<&String>) -> Result<Versions, String> {
        text.map_or(Ok(Versions::NONE), |t| Versions::parse(t))
    }

    pub fn contains(self, version: i16) -> bool {
        (self.min..=self.max).contains(&version)
    }
}

/// A spec resolved at every version it is valid for.
#[derive(Debug)]
pub(super) struct Resolved {
    pub api_key: i16,
    pub valid: Versions,
    /// The body's fields at `valid.min + i`.
    pub shapes: Vec<Vec<Field>>,
}

/// Every embedded spec, resolved; an error names the spec and what in it is not understood.
pub(super) fn resolve_all() -> Result<Vec<Resolved>, String> {
    SPECS
        .iter()
        .map(|(file, text)| resolve(text).map_err(|e| format!("messages/{file}: {e}")))
        .collect()
}

fn resolve(text: &str) -> Result<Resolved, String> {
    let spec: MessageSpec =
        serde_json::from_str(&strip_comments(text)).map_err(|e| e.to_string())?;
    let valid = Versions::parse(&spec.valid_versions)?;
    let flexible = Versions::parse_or_none(spec.flexible_versions.as_ref())?;
    let mut structs = HashMap::new();
    for common in &spec.common_structs {
        structs.insert(common.name.as_str(), common.fields.as_slice());
        register(&common.fields, &mut structs);
    }
    register(&spec.fields, &mut structs);
    let shapes = (valid.min..=valid.max)
        .map(|version| {
            let at = At {
                version,
                flexible: flexible.contains(version),
                structs: &structs,
            };
            at.body(&spec.fields, 0)
                .map_err(|e| format!("{} v{version}: {e}", spec.name))
        })
        .collect::<Result<_, _>>()?;
    Ok(Resolved {
        api_key: spec.api_key,
        valid,
        shapes,
    })
}

/// Every struct defined inline (a field with `fields`), by its type's name.
fn register<'a>(fields: &'a [FieldSpec], structs: &mut HashMap<&'a str, &'a [FieldSpec]>) {
    for field in fields.iter().filter(|f| !f.fields.is_empty()) {
        let name = field.type_name.trim_start_matches("[]");
        structs.insert(name, &field.fields);
        register(&field.fields, structs);
    }
}

/// Resolving a spec at one version.
struct At<'a> {
    version: i16,
    flexible: bool,
    structs: &'a HashMap<&'a str, &'a [FieldSpec]>,
}

impl At<'_> {
    /// A struct's (or the body's) fields at this version: the positional ones in order, then
    /// (flexible versions) the tagged-field section with the tags this version knows.
    fn body(&self, fields: &[FieldSpec], depth: usize) -> Result<Vec<Field>, String> {
        if depth > SPEC_STRUCT_DEPTH_MAX {
            return Err(format!(
                "structs nest deeper than {SPEC_STRUCT_DEPTH_MAX} (SPEC_STRUCT_DEPTH_MAX), or refer to themselves"
            ));
        }
        let mut positional = Vec::new();
        let mut tagged = Vec::new();
        for field in fields {
            if !Versions::parse(&field.versions)?.contains(self.version) {
                continue;
            }
            let shape = self
                .field(field, depth)
                .map_err(|e| format!("{}: {e}", field.name))?;
            if Versions::parse_or_none(field.tagged_versions.as_ref())?.contains(self.version) {
                let tag = field
                    .tag
                    .ok_or_else(|| format!("{}: tagged without a tag", field.name))?;
                tagged.push(TaggedField { tag, shape });
            } else {
                positional.push(shape);
            }
        }
        if self.flexible {
            positional.push(Field::Tags(tagged));
        } else if !tagged.is_empty() {
            return Err("tagged fields in a version that is not flexible".into());
        }
        Ok(positional)
    }

    fn field(&self, field: &FieldSpec, depth: usize) -> Result<Field, String> {
        if let Some(element) = field.type_name.strip_prefix("[]") {
            let fields = match primitive(element, self.flexible) {
                Some(primitive) => vec![primitive],
                None => self.body(self.lookup(element, field)?, depth + 1)?,
            };
            let element = Element::new(fields);
            return Ok(if self.flexible {
                Field::CompactArray(element)
            } else {
                Field::Array(element)
            });
        }
        if let Some(primitive) = primitive(&field.type_name, self.flexible) {
            return Ok(primitive);
        }
        let fields = self.body(self.lookup(&field.type_name, field)?, depth + 1)?;
        let nullable = Versions::parse_or_none(field.nullable_versions.as_ref())?;
        Ok(if nullable.contains(self.version) {
            Field::NullableStruct(fields)
        } else {
            Field::Struct(fields)
        })
    }

    fn lookup<'s>(&'s self, name: &str, field: &'s FieldSpec) -> Result<&'s [FieldSpec], String> {
        if !field.fields.is_empty() {
            return Ok(&field.fields);
        }
        self.structs
            .get(name)
            .copied()
            .ok_or_else(|| format!("type {name:?} is neither a primitive nor a struct of the spec"))
    }
}

/// A primitive type's encoding (strings, bytes and records are compact in flexible
/// versions); `None` for a struct.
fn primitive(type_name: &str, flexible: bool) -> Option<Field> {
    Some(match type_name {
        "bool" | "int8" => Field::Fixed(1),
        "int16" | "uint16" => Field::Fixed(2),
        "int32" | "uint32" => Field::Fixed(4),
        "int64" | "float64" => Field::Fixed(8),
        "uuid" => Field::Fixed(16),
        "string" | "bytes" | "records" if flexible => Field::CompactStr,
        "string" => Field::Str,
        "bytes" | "records" => Field::Bytes,
        _ => return None,
    })
}

/// The spec without its `//` line comments (the license header, the version history), which
/// JSON does not allow; `//` inside a string (a URL in an `about`) stays.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut escaped = false;
        let mut end = line.len();
        for (i, c) in line.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if in_string => escaped = true,
                '"' => in_string = !in_string,
                '/' if !in_string && line[i + 1..].starts_with('/') => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        out.push_str(&line[..end]);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_file_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/messages");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".json"))
            .collect();
        files.sort();
        let embedded: Vec<&str> = SPECS.iter().map(|(name, _)| *name).collect();
        assert_eq!(files, embedded);
    }

    #[test]
    fn version_ranges() {
        let v = |min, max| Versions { min, max };
        assert_eq!(Versions::parse("0+"), Ok(v(0, i16::MAX)));
        assert_eq!(Versions::parse("3-7"), Ok(v(3, 7)));
        assert_eq!(Versions::parse("5"), Ok(v(5, 5)));
        assert_eq!(Versions::parse("none"), Ok(Versions::NONE));
        assert!(!Versions::NONE.contains(0));
        assert!(Versions::parse("x+").is_err());
    }

    #[test]
    fn comments_are_stripped_outside_strings_only() {
        let text = "// header\n{ \"about\": \"see http://x\" } // trailing\n";
        assert_eq!(strip_comments(text), "\n{ \"about\": \"see http://x\" } \n");
    }

    #[test]
    fn every_embedded_spec_resolves() {
        let resolved = resolve_all().unwrap();
        assert_eq!(resolved.len(), SPECS.len());
        for spec in &resolved {
            assert_eq!(
                spec.shapes.len(),
                (spec.valid.max - spec.valid.min + 1) as usize
            );
        }
    }

    #[test]
    fn a_self_referring_struct_is_refused() {
        let text = r#"{ "apiKey": 99, "name": "LoopRequest", "validVersions": "0",
            "flexibleVersions": "none", "fields": [
            { "name": "Node", "type": "Node", "versions": "0+", "fields": [
                { "name": "Next", "type": "Node", "versions": "0+" } ] } ] }"#;
        let e = resolve(text).unwrap_err();
        assert!(e.contains("SPEC_STRUCT_DEPTH_MAX"), "{e}");
    }
}
