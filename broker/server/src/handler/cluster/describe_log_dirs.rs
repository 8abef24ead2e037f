//! DescribeLogDirs v0-v5 (v2+ flexible, v0 served as v1; `kafka-log-dirs --describe`,
//! kafka-python's `describe_log_dirs`): the one log dir,
//! `data.dir`, with each partition's size on disk (offset lag 0, no future replicas) and,
//! from v4, the filesystem's total and usable bytes. DESCRIBE on the cluster: without it the
//! answer is CLUSTER_AUTHORIZATION_FAILED (v3+, which has the field) or no dirs at all, as
//! Kafka answers. A null topic list describes every partition. v5 (vendored codec) says
//! whether the dir is cordoned (no new partitions placed on it): never here, the one dir
//! takes every partition.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use std::sync::Arc;

use super::Ctx;
use crate::topics::TopicRegistry;

/// The first version with a top-level error code.
const ERROR_CODE_SINCE: i16 = 3;

/// Answers DescribeLogDirs.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    let mut response = DescribeLogDirsResponse::default();
    if !ctx.auth.cluster(AclOperation::Describe) {
        if version >= ERROR_CODE_SINCE {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        }
        return response;
    }
    let registry = Arc::clone(ctx.topics);
    let described = tokio::task::spawn_blocking(move || describe(&registry, request)).await;
    match described {
        Ok(result) => response.results = vec![result],
        Err(e) => {
            tracing::error!(error = %e, "describe log dirs task failed");
            response.error_code = ResponseError::UnknownServerError.code();
        }
    }
    response
}

/// The data dir's partitions (those asked for, or all), read on the blocking pool.
fn describe(topics: &TopicRegistry, request: DescribeLogDirsRequest) -> DescribeLogDirsResult {
    let mut result = DescribeLogDirsResult::default();
    let data_dir = &topics.config().data_dir;
    result.log_dir = StrBytes::from_string(data_dir.display().to_string());
    let (total, usable) = filesystem_bytes(data_dir).unwrap_or((-1, -1));
    result.total_bytes = total;
    result.usable_bytes = usable;
    let asked: Vec<(String, Option<Vec<i32>>)> = match request.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.topic.0.to_string(), Some(t.partitions)))
            .collect(),
        None => topics
            .topics()
            .iter()
            .map(|t| (t.name.clone(), None))
            .collect(),
    };
    for (name, partitions) in asked {
        let Some(topic) = topics.topic(&name) else {
            continue;
        };
        let mut out = DescribeLogDirsTopic::default();
        for partition in &topic.partitions {
            if partitions
                .as_ref()
                .is_some_and(|p| !p.contains(&partition.index))
            {
                continue;
            }
            let Ok(size) = partition.with_log(|log| log.size_bytes()) else {
                continue;
            };
            let mut p = DescribeLogDirsPartition::default();
            p.partition_index = partition.index;
            p.partition_size = i64::try_from(size).unwrap_or(i64::MAX);
            out.partitions.push(p);
        }
        if !out.partitions.is_empty() {
            out.name = TopicName(StrBytes::from_string(name));
            result.topics.push(out);
        }
    }
    result
}

/// The total and available bytes of the filesystem holding `dir` (statvfs).
fn filesystem_bytes(dir: &std::path::Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string that outlives the call, and `stat` points
    // to writable memory of the struct's size, which statvfs fills on success.
    let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    let block = stat.f_frsize;
    let total = stat.f_blocks.saturating_mul(block);
    let usable = stat.f_bavail.saturating_mul(block);
    Some((
        i64::try_from(total).unwrap_or(i64::MAX),
        i64::try_from(usable).unwrap_or(i64::MAX),
    ))
}
