//! DescribeUserScramCredentials and AlterUserScramCredentials v0 (KIP-554): users over the
//! wire, decided by `sluice_security::users` (Kafka's `ScramControlManager` rules) and stored
//! as security-log records (fsynced before the answer). Describing needs DESCRIBE on the
//! cluster, altering ALTER on it (Kafka's checks); otherwise CLUSTER_AUTHORIZATION_FAILED.
//! The client sends the salted password, never the password (Kafka's admin client derives it).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;
use sluice_security::users::{self, Deletion, Upsertion};

use super::Ctx;
use crate::audit;

const CLUSTER_DENIED: &str = "Cluster authorization failed.";

/// Answers DescribeUserScramCredentials.
pub fn describe(
    ctx: &Ctx<'_>,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let mut response = DescribeUserScramCredentialsResponse::default();
    if !ctx.auth.cluster(AclOperation::Describe) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        response.error_message = Some(StrBytes::from_static_str(CLUSTER_DENIED));
        return response;
    }
    let names: Option<Vec<String>> = request
        .users
        .map(|users| users.iter().map(|u| u.name.to_string()).collect());
    let described = ctx
        .security
        .store
        .read(|state| users::describe(state, names.as_deref()));
    response.results = described
        .into_iter()
        .map(|d| {
            let mut result = DescribeUserScramCredentialsResult::default();
            result.user = StrBytes::from_string(d.user);
            result.error_code = d.error_code;
            result.error_message = d.error_message.map(StrBytes::from_string);
            result.credential_infos = d
                .credentials
                .into_iter()
                .map(|(mechanism, iterations)| {
                    let mut info = CredentialInfo::default();
                    info.mechanism = mechanism.type_code();
                    info.iterations = i32::try_from(iterations).unwrap_or(i32::MAX);
                    info
                })
                .collect();
            result
        })
        .collect();
    response
}

/// Answers AlterUserScramCredentials.
pub fn alter(
    ctx: &Ctx<'_>,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut response = AlterUserScramCredentialsResponse::default();
    let result = |user: String, code: i16, message: Option<String>| {
        let mut r = AlterUserScramCredentialsResult::default();
        r.user = StrBytes::from_string(user);
        r.error_code = code;
        r.error_message = message.map(StrBytes::from_string);
        r
    };
    let named: Vec<String> = request
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(request.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    if !ctx.auth.cluster(AclOperation::Alter) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let mut seen = std::collections::BTreeSet::new();
        response.results = named
            .into_iter()
            .filter(|u| seen.insert(u.clone()))
            .map(|u| result(u, code, Some(CLUSTER_DENIED.into())))
            .collect();
        return response;
    }
    let deletions: Vec<Deletion> = request
        .deletions
        .iter()
        .map(|d| Deletion {
            user: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    let upsertions: Vec<Upsertion> = request
        .upsertions
        .iter()
        .map(|u| Upsertion {
            user: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    let (results, records) = ctx
        .security
        .store
        .read(|state| users::alter(state, &deletions, &upsertions));
    let stored = ctx.security.store.append(&records);
    if let Err(e) = &stored {
        tracing::warn!(error = %e, "AlterUserScramCredentials: the security log refused the append");
    }
    response.results = results
        .into_iter()
        .map(|r| match (&stored, r.error_code) {
            (Err(e), 0) => result(
                r.user,
                ResponseError::UnknownServerError.code(),
                Some(format!("storing the credential: {e}")),
            ),
            (_, code) => {
                if code == 0 {
                    audit::done(
                        ctx.client.actor(),
                        "user.alter",
                        &format!("user {}", r.user),
                        "SCRAM credentials altered",
                    );
                }
                result(r.user, code, r.error_message)
            }
        })
        .collect();
    response
}
