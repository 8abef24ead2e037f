//! AlterUserScramCredentials and DescribeUserScramCredentials as Kafka decides them
//! (`ScramControlManager.alterCredentials`, `ScramImage.describe`): per-user results with
//! Kafka's codes and messages, and the records to append for the changes accepted.
//!
//! Alter, in Kafka's order: deletions first, then upsertions; a user named twice in one
//! request (whatever the mechanisms) gets DUPLICATE_RESOURCE (92) and no change; an empty
//! user name UNACCEPTABLE_CREDENTIAL (93), an unknown mechanism UNSUPPORTED_SASL_MECHANISM
//! (33); deleting a credential that does not exist RESOURCE_NOT_FOUND (91); an upsertion
//! under 4096 or over 16384 iterations UNACCEPTABLE_CREDENTIAL ("Too few iterations", "Too
//! many iterations"). Ours on top, also UNACCEPTABLE_CREDENTIAL with a message naming the
//! limit: a user name over [`limits::USER_NAME_BYTES_MAX`], an empty or over-long salt, a
//! salted password that is not the mechanism's hash length (Kafka would store a credential
//! no client can use), and more credentials than [`limits::SCRAM_CREDENTIALS_MAX`].
//! Results list accepted deletions, accepted upsertions, then errors, each by user name.

use std::collections::BTreeMap;

use sluice_kafka::ErrorCode;

use crate::limits;
use crate::records::SecurityRecord;
use crate::scram::{CredentialError, ScramCredential, ScramMechanism};
use crate::state::SecurityState;

/// One deletion of AlterUserScramCredentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    /// The user.
    pub user: String,
    /// Kafka's mechanism type code.
    pub mechanism: i8,
}

/// One upsertion of AlterUserScramCredentials (the client sends the salted password).
#[derive(Clone, PartialEq, Eq)]
pub struct Upsertion {
    /// The user.
    pub user: String,
    /// Kafka's mechanism type code.
    pub mechanism: i8,
    /// Hi's iterations.
    pub iterations: i32,
    /// The salt.
    pub salt: Vec<u8>,
    /// `Hi(password, salt, iterations)`.
    pub salted_password: Vec<u8>,
}

impl std::fmt::Debug for Upsertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upsertion")
            .field("user", &self.user)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// One user's result: Kafka's error code (0 for success) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserResult {
    /// The user.
    pub user: String,
    /// The error code.
    pub error_code: i16,
    /// The message, when there is an error.
    pub error_message: Option<String>,
}

/// One user of DescribeUserScramCredentials: its mechanisms and iterations, or an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedUser {
    /// The user.
    pub user: String,
    /// The error code (0 for success).
    pub error_code: i16,
    /// The message, when there is an error.
    pub error_message: Option<String>,
    /// (mechanism, iterations) per stored credential.
    pub credentials: Vec<(ScramMechanism, u32)>,
}

type Outcome<T> = Result<T, (ErrorCode, String)>;

fn check_user_and_mechanism(user: &str, mechanism: i8) -> Outcome<ScramMechanism> {
    if user.is_empty() {
        return Err((
            ErrorCode::UnacceptableCredential,
            "Username must not be empty".into(),
        ));
    }
    if user.len() > limits::USER_NAME_BYTES_MAX {
        let max = limits::USER_NAME_BYTES_MAX;
        let msg = format!(
            "Username of {} bytes is over the limit of {max} bytes (USER_NAME_BYTES_MAX)",
            user.len()
        );
        return Err((ErrorCode::UnacceptableCredential, msg));
    }
    ScramMechanism::from_type_code(mechanism).ok_or((
        ErrorCode::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism".into(),
    ))
}

fn check_upsertion(u: &Upsertion) -> Outcome<ScramCredential> {
    let mechanism = check_user_and_mechanism(&u.user, u.mechanism)?;
    if u.iterations < limits::SCRAM_ITERATIONS_MIN as i32 {
        return Err((
            ErrorCode::UnacceptableCredential,
            "Too few iterations".into(),
        ));
    }
    if u.iterations > limits::SCRAM_ITERATIONS_MAX as i32 {
        return Err((
            ErrorCode::UnacceptableCredential,
            "Too many iterations".into(),
        ));
    }
    ScramCredential::from_salted_password(
        mechanism,
        &u.salted_password,
        &u.salt,
        u.iterations as u32,
    )
    .map_err(|e: CredentialError| (ErrorCode::UnacceptableCredential, e.to_string()))
}

const TWICE: &str = "A user credential cannot be altered twice in the same request";

/// The results and records of one AlterUserScramCredentials request against `state`
/// (module docs). Apply the records to change the state.
pub fn alter(
    state: &SecurityState,
    deletions: &[Deletion],
    upsertions: &[Upsertion],
) -> (Vec<UserResult>, Vec<SecurityRecord>) {
    let mut errors: BTreeMap<String, (ErrorCode, String)> = BTreeMap::new();
    let mut deletes: BTreeMap<String, ScramMechanism> = BTreeMap::new();
    let mut upserts: BTreeMap<String, ScramCredential> = BTreeMap::new();
    for d in deletions {
        if errors.contains_key(&d.user) {
            continue;
        }
        if deletes.remove(&d.user).is_some() {
            errors.insert(d.user.clone(), (ErrorCode::DuplicateResource, TWICE.into()));
            continue;
        }
        let checked = check_user_and_mechanism(&d.user, d.mechanism).and_then(|m| {
            match state.credential(&d.user, m) {
                Some(_) => Ok(m),
                None => Err((
                    ErrorCode::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist".into(),
                )),
            }
        });
        match checked {
            Ok(m) => drop(deletes.insert(d.user.clone(), m)),
            Err(e) => drop(errors.insert(d.user.clone(), e)),
        }
    }
    for u in upsertions {
        if errors.contains_key(&u.user) {
            continue;
        }
        if deletes.remove(&u.user).is_some() || upserts.remove(&u.user).is_some() {
            errors.insert(u.user.clone(), (ErrorCode::DuplicateResource, TWICE.into()));
            continue;
        }
        match check_upsertion(u) {
            Ok(c) => drop(upserts.insert(u.user.clone(), c)),
            Err(e) => drop(errors.insert(u.user.clone(), e)),
        }
    }
    let mut count = state.credential_count() - deletes.len();
    upserts.retain(|user, c| {
        if state.credential(user, c.mechanism).is_some() || count < limits::SCRAM_CREDENTIALS_MAX {
            count += usize::from(state.credential(user, c.mechanism).is_none());
            return true;
        }
        let msg = format!(
            "{} SCRAM credentials are stored, the limit (SCRAM_CREDENTIALS_MAX)",
            limits::SCRAM_CREDENTIALS_MAX
        );
        errors.insert(user.clone(), (ErrorCode::UnacceptableCredential, msg));
        false
    });
    let ok = |user: &String| UserResult {
        user: user.clone(),
        error_code: 0,
        error_message: None,
    };
    let mut results: Vec<UserResult> = deletes.keys().map(ok).collect();
    results.extend(upserts.keys().map(ok));
    results.extend(errors.into_iter().map(|(user, (error, msg))| UserResult {
        user,
        error_code: error.code(),
        error_message: Some(msg),
    }));
    let mut records: Vec<SecurityRecord> = deletes
        .into_iter()
        .map(|(user, mechanism)| SecurityRecord::ScramCredentialDelete { user, mechanism })
        .collect();
    records.extend(
        upserts
            .into_iter()
            .map(|(user, credential)| SecurityRecord::ScramCredentialUpsert { user, credential }),
    );
    (results, records)
}

/// DescribeUserScramCredentials: `None` (or an empty list) describes every user; a
/// named user without credentials gets RESOURCE_NOT_FOUND, one named twice
/// DUPLICATE_RESOURCE (Kafka's messages, the user appended).
pub fn describe(state: &SecurityState, users: Option<&[String]>) -> Vec<DescribedUser> {
    let all = state.users();
    let mut wanted: BTreeMap<String, bool> = BTreeMap::new();
    match users {
        Some(list) if !list.is_empty() => {
            for user in list {
                let twice = wanted.contains_key(user);
                wanted.insert(user.clone(), twice);
            }
        }
        _ => wanted.extend(all.keys().map(|u| ((*u).to_owned(), false))),
    }
    let found = |user: String, credentials: Vec<(ScramMechanism, u32)>| DescribedUser {
        user,
        error_code: 0,
        error_message: None,
        credentials,
    };
    let failed = |user: String, error: ErrorCode, prefix: &str| DescribedUser {
        error_message: Some(format!("{prefix}{user}")),
        user,
        error_code: error.code(),
        credentials: Vec::new(),
    };
    wanted
        .into_iter()
        .map(|(user, twice)| match (twice, all.get(user.as_str())) {
            (true, _) => failed(
                user,
                ErrorCode::DuplicateResource,
                "Cannot describe SCRAM credentials for the same user twice in a single request: ",
            ),
            (false, Some(creds)) => {
                let creds = creds.clone();
                found(user, creds)
            }
            (false, None) => failed(
                user,
                ErrorCode::ResourceNotFound,
                "Attempt to describe a user credential that does not exist: ",
            ),
        })
        .collect()
}
