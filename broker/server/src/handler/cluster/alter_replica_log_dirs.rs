//! AlterReplicaLogDirs v1-v2 (`kafka-reassign-partitions --reassignment-json-file` with
//! `log_dirs`, Admin.alterReplicaLogDirs): move replicas between a broker's log dirs. This
//! broker has one log dir, `data.dir` (DescribeLogDirs names it), so the answers are Kafka's
//! `ReplicaManager.alterReplicaLogDirs` with one dir: a destination that is not it is
//! LOG_DIR_NOT_FOUND; a partition this broker does not have is UNKNOWN_TOPIC_OR_PARTITION;
//! a partition already in it is NONE (nothing moves). ALTER on the cluster, else every
//! partition is CLUSTER_AUTHORIZATION_FAILED, as Kafka answers. v1 is v0 renumbered (Kafka 4
//! dropped v0, KIP-896); v2 is flexible.

use std::path::Path;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers AlterReplicaLogDirs.
pub fn handle(ctx: &Ctx<'_>, request: &AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse {
    let allowed = ctx.auth.cluster(AclOperation::Alter);
    let data_dir = &ctx.config.data_dir;
    let mut response = AlterReplicaLogDirsResponse::default();
    for dir in &request.dirs {
        let here = is_this_dir(data_dir, dir.path.as_str());
        for topic in &dir.topics {
            let mut out = AlterReplicaLogDirTopicResult::default();
            out.topic_name = topic.name.clone();
            for &partition in &topic.partitions {
                let error = if !allowed {
                    ResponseError::ClusterAuthorizationFailed.code()
                } else if !here {
                    ResponseError::LogDirNotFound.code()
                } else if ctx
                    .topics
                    .partition(topic.name.0.as_str(), partition)
                    .is_none()
                {
                    ResponseError::UnknownTopicOrPartition.code()
                } else {
                    0
                };
                let mut result = AlterReplicaLogDirPartitionResult::default();
                result.partition_index = partition;
                result.error_code = error;
                out.partitions.push(result);
            }
            response.results.push(out);
        }
    }
    response
}

/// Whether `path` names the data dir: the same path, or the same directory once both are
/// made canonical (a symlink, `..`, a trailing slash).
fn is_this_dir(data_dir: &Path, path: &str) -> bool {
    let asked = Path::new(path);
    if asked == data_dir {
        return true;
    }
    match (asked.canonicalize(), data_dir.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
