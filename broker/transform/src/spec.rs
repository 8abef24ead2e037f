//! A transform's spec (what `<data.dir>/transforms/<name>.json` holds), its checks, the
//! `--from-offset` text, and the ids a transform owns in the coordinators.
//!
//! [`TransformSpec::check`] is everything that can be decided from the spec alone; what
//! needs the broker (topics exist and are no views, the plugin's kind and `init`, partition
//! counts against the transaction bound) is the server's, at deploy.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::limits::{
    PLUGIN_NAME_BYTES_MAX, PRINCIPAL_BYTES_MAX, RESERVED_PREFIX, TOPIC_NAME_BYTES_MAX,
    TRANSFORM_COMMIT_INTERVAL_MS_MAX, TRANSFORM_COMMIT_INTERVAL_MS_MIN, TRANSFORM_NAME_BYTES_MAX,
    TRANSFORM_OUTPUTS_MAX, TRANSFORM_PARAM_BYTES_MAX, TRANSFORM_PARAMS_MAX,
    TRANSFORM_SOURCE_PARTITIONS_MAX,
};

/// What happens to the records of a failed plugin call (after bisecting it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Commit the output before the first failed record and stop the partition there.
    #[default]
    Stop,
    /// Drop the failed records, count them, keep running.
    Skip,
    /// Write the failed input records to the dead-letter topic in the same transaction.
    DeadLetter,
}

/// How an output record's partition is chosen ([`crate::partitioning`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Partitioning {
    /// Keyed records by the Java client's murmur2; keyless ones by the source partition.
    #[default]
    Key,
    /// Every record by the source partition (modulo the output's partition count).
    Source,
}

/// Where a transform starts reading, as the operator gave it. `Latest` and `Timestamp` are
/// resolved once, at deploy, into [`TransformSpec::start_offsets`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum FromOffset {
    /// Each partition's log start offset.
    #[default]
    Earliest,
    /// Each partition's log end offset at deploy.
    Latest,
    /// This offset in every partition (clamped to each partition's log start and end).
    Offset(i64),
    /// The first offset at or after this time, in ms since the Unix epoch, per partition.
    Timestamp(i64),
}

/// A `--from-offset` text that is none of `earliest`, `latest`, `N`, `Nms`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--from-offset {0:?}: expected earliest, latest, an offset (0 or more) or epoch milliseconds with an ms suffix (1764547200000ms)"
)]
pub struct FromOffsetError(pub String);

impl FromOffset {
    /// Parses `earliest`, `latest`, an offset (`42`) or epoch milliseconds (`1764547200000ms`).
    /// RFC 3339 times are the CLI's to parse (into `Timestamp`).
    pub fn parse(text: &str) -> Result<Self, FromOffsetError> {
        let number = |digits: &str| {
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse::<i64>().ok())
                .flatten()
        };
        let parsed = match text {
            "earliest" => Some(Self::Earliest),
            "latest" => Some(Self::Latest),
            _ => match text.strip_suffix("ms") {
                Some(ms) => number(ms).map(Self::Timestamp),
                None => number(text).map(Self::Offset),
            },
        };
        parsed.ok_or_else(|| FromOffsetError(text.to_owned()))
    }
}

impl fmt::Display for FromOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Earliest => f.write_str("earliest"),
            Self::Latest => f.write_str("latest"),
            Self::Offset(offset) => write!(f, "{offset}"),
            Self::Timestamp(ms) => write!(f, "{ms}ms"),
        }
    }
}

impl TryFrom<String> for FromOffset {
    type Error = FromOffsetError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl From<FromOffset> for String {
    fn from(from: FromOffset) -> Self {
        from.to_string()
    }
}

/// A materialized transform, as persisted (docs/design/materialized-transforms.md,
/// "Durable state"). Counters and per-partition state are not here: they live in memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformSpec {
    /// The transform's name: a topic name's characters, at most [`TRANSFORM_NAME_BYTES_MAX`].
    pub name: String,
    /// The source topic.
    pub source: String,
    /// The transform (or filter) plugin.
    pub plugin: String,
    /// The plugin's parameters, in the order given.
    pub params: Vec<(String, String)>,
    /// The output topics, in `--to` order: a record's output index points here.
    pub outputs: Vec<String>,
    /// Where failed input records go under [`OnError::DeadLetter`].
    pub dead_letter_topic: Option<String>,
    /// The failure policy.
    pub on_error: OnError,
    /// How output partitions are chosen.
    pub partitioning: Partitioning,
    /// The longest a transaction stays open while records flow, in milliseconds.
    pub commit_interval_ms: i64,
    /// `--from-offset` as given.
    pub from_offset: FromOffset,
    /// Where each source partition starts when its group has no committed offset, resolved
    /// at deploy (index: the source partition). A partition added later starts at its log
    /// start offset.
    pub start_offsets: Vec<i64>,
    /// Paused by the operator: runners do not read; kept across restarts.
    pub paused: bool,
    /// Bumped by every `restart`.
    pub generation: u32,
    /// A partitioner plugin placing every output record (with its parameters), instead of
    /// [`TransformSpec::partitioning`]; an output topic's own `sluice.partitioner` is used
    /// when this is `None`.
    #[serde(default)]
    pub partitioner: Option<String>,
    /// The partitioner's parameters, in the order given.
    #[serde(default)]
    pub partitioner_params: Vec<(String, String)>,
    /// The principal that deployed it (`User:alice`): the transform reads, calls and writes
    /// with this principal's rights, checked as it runs.
    pub principal: String,
    /// The address the principal deployed it from: the host its ACLs are matched against.
    /// `None` in specs written before hosts were recorded (only ACLs for every host apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_host: Option<String>,
    /// The source topic's id when deployed: a topic deleted and made again under the same
    /// name has a new id, and the transform never reads it. `None` in specs written before
    /// ids were recorded (the server fills it in when it loads one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_topic_id: Option<String>,
    /// When it was deployed, in ms since the Unix epoch.
    pub created_ms: i64,
}

/// Why a spec is refused; each names the limit and its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A name (of the transform or a topic) breaks the topic-name rules.
    #[error("{what} {name:?} {why}")]
    Name {
        /// Which name: "transform name", "source topic", "output topic", "dead-letter topic".
        what: &'static str,
        /// The name as given (cut to the limit plus a few bytes).
        name: String,
        /// What is wrong, with the limit.
        why: String,
    },
    /// The plugin name is empty or too long.
    #[error("plugin name {0:?} must be 1 to {PLUGIN_NAME_BYTES_MAX} bytes")]
    Plugin(String),
    /// No outputs, or more than the limit.
    #[error(
        "a transform has 1 to {TRANSFORM_OUTPUTS_MAX} outputs (TRANSFORM_OUTPUTS_MAX), not {0}"
    )]
    OutputCount(usize),
    /// The same output topic twice.
    #[error("output topic {0:?} is given twice")]
    DuplicateOutput(String),
    /// An output is the source topic.
    #[error("output topic {0:?} is the source topic: a transform cannot write its own source")]
    OutputIsSource(String),
    /// `dead-letter` without a topic.
    #[error("--on-error dead-letter needs --dead-letter-topic")]
    DeadLetterMissing,
    /// A dead-letter topic without the `dead-letter` policy.
    #[error("--dead-letter-topic {0:?} is given but --on-error is not dead-letter")]
    DeadLetterUnused(String),
    /// The dead-letter topic is the source.
    #[error("dead-letter topic {0:?} is the source topic")]
    DeadLetterIsSource(String),
    /// The commit interval is out of bounds.
    #[error(
        "commit.interval.ms {0} is outside {TRANSFORM_COMMIT_INTERVAL_MS_MIN}..={TRANSFORM_COMMIT_INTERVAL_MS_MAX} (TRANSFORM_COMMIT_INTERVAL_MS_MIN, TRANSFORM_COMMIT_INTERVAL_MS_MAX)"
    )]
    CommitInterval(i64),
    /// Too many parameters.
    #[error("{0} parameters; at most {TRANSFORM_PARAMS_MAX} (TRANSFORM_PARAMS_MAX)")]
    ParamCount(usize),
    /// A parameter key or value too long, or an empty key.
    #[error(
        "parameter {0:?}: keys are 1 to {TRANSFORM_PARAM_BYTES_MAX} bytes and values at most {TRANSFORM_PARAM_BYTES_MAX} (TRANSFORM_PARAM_BYTES_MAX)"
    )]
    ParamBytes(String),
    /// The same parameter key twice.
    #[error("parameter {0:?} is given twice")]
    DuplicateParam(String),
    /// A negative offset in `--from-offset` or a resolved start offset.
    #[error("{what} {value} is negative")]
    NegativeOffset {
        /// "--from-offset" or "start offset of partition N".
        what: String,
        /// The value.
        value: i64,
    },
    /// More source partitions than the limit, or none.
    #[error(
        "the source has {0} partitions; a transform reads 1 to {TRANSFORM_SOURCE_PARTITIONS_MAX} (TRANSFORM_SOURCE_PARTITIONS_MAX)"
    )]
    SourcePartitions(usize),
    /// The principal is empty or too long.
    #[error("principal must be 1 to {PRINCIPAL_BYTES_MAX} bytes (PRINCIPAL_BYTES_MAX)")]
    Principal,
}

/// Checks a name against Kafka's topic-name rules with a byte limit: 1 to `max_bytes` of
/// `a-z A-Z 0-9 . _ -`, not `.` or `..`.
pub fn check_name(what: &'static str, name: &str, max_bytes: usize) -> Result<(), SpecError> {
    let why = if name.is_empty() {
        Some("is empty".to_owned())
    } else if name.len() > max_bytes {
        Some(format!("is longer than {max_bytes} bytes"))
    } else if name == "." || name == ".." {
        Some("is not allowed".to_owned())
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        Some("has characters outside [a-zA-Z0-9._-]".to_owned())
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(SpecError::Name {
            what,
            name: cut(name, max_bytes + 8).to_owned(),
            why,
        }),
    }
}

impl TransformSpec {
    /// The topics this transform writes: its outputs, then its dead-letter topic.
    pub fn written_topics(&self) -> impl Iterator<Item = &str> {
        self.outputs
            .iter()
            .chain(&self.dead_letter_topic)
            .map(String::as_str)
    }

    /// The cycle deploying this transform beside `existing` would close, if any: the names
    /// of the transforms from this one back to it, each writing a topic the next one reads
    /// (records would loop through them forever). The shortest such cycle.
    pub fn cycle<'a>(&'a self, existing: &[&'a TransformSpec]) -> Option<Vec<&'a str>> {
        // Breadth first over "writes the source of"; `parent[i]`: how `existing[i]` was
        // reached (`None`: from this transform).
        let mut parent: Vec<Option<Option<usize>>> = vec![None; existing.len()];
        let mut queue = std::collections::VecDeque::new();
        let feeds = |writer: &TransformSpec, reader: &TransformSpec| {
            writer.written_topics().any(|t| t == reader.source)
        };
        for (i, t) in existing.iter().enumerate() {
            if t.name != self.name && feeds(self, t) {
                parent[i] = Some(None);
                queue.push_back(i);
            }
        }
        while let Some(i) = queue.pop_front() {
            if feeds(existing[i], self) {
                let mut names = vec![existing[i].name.as_str()];
                let mut at = parent[i].flatten();
                while let Some(j) = at {
                    names.push(existing[j].name.as_str());
                    at = parent[j].flatten();
                }
                names.push(self.name.as_str());
                names.reverse();
                names.push(self.name.as_str());
                return Some(names);
            }
            for (j, t) in existing.iter().enumerate() {
                if parent[j].is_none() && t.name != self.name && feeds(existing[i], t) {
                    parent[j] = Some(Some(i));
                    queue.push_back(j);
                }
            }
        }
        None
    }

    /// Everything decidable from the spec alone; the first problem found.
    pub fn check(&self) -> Result<(), SpecError> {
        check_name("transform name", &self.name, TRANSFORM_NAME_BYTES_MAX)?;
        check_name("source topic", &self.source, TOPIC_NAME_BYTES_MAX)?;
        if self.plugin.is_empty() || self.plugin.len() > PLUGIN_NAME_BYTES_MAX {
            return Err(SpecError::Plugin(
                cut(&self.plugin, PLUGIN_NAME_BYTES_MAX + 8).to_owned(),
            ));
        }
        self.check_outputs()?;
        self.check_dead_letter()?;
        let interval = TRANSFORM_COMMIT_INTERVAL_MS_MIN..=TRANSFORM_COMMIT_INTERVAL_MS_MAX;
        if !interval.contains(&self.commit_interval_ms) {
            return Err(SpecError::CommitInterval(self.commit_interval_ms));
        }
        Self::check_params(&self.params)?;
        Self::check_params(&self.partitioner_params)?;
        if let Some(partitioner) = &self.partitioner
            && (partitioner.is_empty() || partitioner.len() > PLUGIN_NAME_BYTES_MAX)
        {
            return Err(SpecError::Plugin(
                cut(partitioner, PLUGIN_NAME_BYTES_MAX + 8).to_owned(),
            ));
        }
        self.check_offsets()?;
        if self.principal.is_empty() || self.principal.len() > PRINCIPAL_BYTES_MAX {
            return Err(SpecError::Principal);
        }
        Ok(())
    }

    fn check_outputs(&self) -> Result<(), SpecError> {
        if self.outputs.is_empty() || self.outputs.len() > TRANSFORM_OUTPUTS_MAX {
            return Err(SpecError::OutputCount(self.outputs.len()));
        }
        for (i, output) in self.outputs.iter().enumerate() {
            check_name("output topic", output, TOPIC_NAME_BYTES_MAX)?;
            if *output == self.source {
                return Err(SpecError::OutputIsSource(output.clone()));
            }
            if self.outputs[..i].contains(output) {
                return Err(SpecError::DuplicateOutput(output.clone()));
            }
        }
        Ok(())
    }

    fn check_dead_letter(&self) -> Result<(), SpecError> {
        match (&self.dead_letter_topic, self.on_error) {
            (None, OnError::DeadLetter) => Err(SpecError::DeadLetterMissing),
            (None, _) => Ok(()),
            (Some(topic), OnError::DeadLetter) => {
                check_name("dead-letter topic", topic, TOPIC_NAME_BYTES_MAX)?;
                if *topic == self.source {
                    return Err(SpecError::DeadLetterIsSource(topic.clone()));
                }
                Ok(())
            }
            (Some(topic), _) => Err(SpecError::DeadLetterUnused(topic.clone())),
        }
    }

    fn check_params(params: &[(String, String)]) -> Result<(), SpecError> {
        if params.len() > TRANSFORM_PARAMS_MAX {
            return Err(SpecError::ParamCount(params.len()));
        }
        for (i, (key, value)) in params.iter().enumerate() {
            if key.is_empty()
                || key.len() > TRANSFORM_PARAM_BYTES_MAX
                || value.len() > TRANSFORM_PARAM_BYTES_MAX
            {
                return Err(SpecError::ParamBytes(cut(key, 64).to_owned()));
            }
            if params[..i].iter().any(|(k, _)| k == key) {
                return Err(SpecError::DuplicateParam(key.clone()));
            }
        }
        Ok(())
    }

    fn check_offsets(&self) -> Result<(), SpecError> {
        if let FromOffset::Offset(value) | FromOffset::Timestamp(value) = self.from_offset
            && value < 0
        {
            let what = "--from-offset".to_owned();
            return Err(SpecError::NegativeOffset { what, value });
        }
        let partitions = self.start_offsets.len();
        if partitions == 0 || partitions > TRANSFORM_SOURCE_PARTITIONS_MAX {
            return Err(SpecError::SourcePartitions(partitions));
        }
        if let Some((partition, &value)) =
            self.start_offsets.iter().enumerate().find(|(_, o)| **o < 0)
        {
            let what = format!("start offset of partition {partition}");
            return Err(SpecError::NegativeOffset { what, value });
        }
        Ok(())
    }

    /// The transform's offsets group: `__sluice_transform/<name>`.
    #[must_use]
    pub fn group_id(&self) -> String {
        group_id(&self.name)
    }

    /// The transactional id of one source partition's runner.
    #[must_use]
    pub fn transactional_id(&self, partition: u32) -> String {
        transactional_id(&self.name, partition)
    }

    /// Where `partition` starts without a committed offset: the resolved start offset, or
    /// `None` for a partition added after deploy (the server uses its log start offset).
    #[must_use]
    pub fn start_offset(&self, partition: u32) -> Option<i64> {
        self.start_offsets.get(partition as usize).copied()
    }
}

/// The offsets group of transform `name`: `__sluice_transform/<name>`.
#[must_use]
pub fn group_id(name: &str) -> String {
    format!("{RESERVED_PREFIX}{name}")
}

/// The metadata a runner commits with its source position: its spec's generation, so a
/// position committed before a `restart` is never taken for one after it, whatever a crash
/// left of the group's offsets.
#[must_use]
pub fn position_metadata(generation: u32) -> String {
    format!("generation={generation}")
}

/// Whether a committed position whose metadata is `metadata` belongs to `generation`: one
/// committed by an earlier generation does not (the runner starts from the spec's start
/// offset instead). Metadata naming no generation (positions committed before generations
/// were recorded, when a restart only deleted the group's offsets) is trusted.
#[must_use]
pub fn position_is_current(metadata: &str, generation: u32) -> bool {
    metadata
        .strip_prefix("generation=")
        .and_then(|g| g.parse::<u32>().ok())
        .is_none_or(|committed| committed >= generation)
}

/// The transactional id of transform `name`'s runner of source `partition`:
/// `__sluice_transform/<name>/<partition>`.
#[must_use]
pub fn transactional_id(name: &str, partition: u32) -> String {
    format!("{RESERVED_PREFIX}{name}/{partition}")
}

/// Whether a group or transactional id is reserved for transforms (clients may not write it).
#[must_use]
pub fn is_reserved(id: &str) -> bool {
    id.starts_with(RESERVED_PREFIX)
}

/// `text` cut to at most `max_bytes`, at a character boundary.
#[must_use]
pub fn cut(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests;
