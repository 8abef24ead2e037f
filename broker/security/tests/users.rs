//! AlterUserScramCredentials and DescribeUserScramCredentials decisions: Kafka's codes
//! and messages per user, the records they produce, and that applying those records
//! gives a state a SCRAM or PLAIN login accepts.

use sluice_security::plain;
use sluice_security::principal::SuperUsers;
use sluice_security::scram::ScramMechanism;
use sluice_security::state::SecurityState;
use sluice_security::users::{self, Deletion, Upsertion};

fn upsert(user: &str, mechanism: ScramMechanism, password: &str, iterations: i32) -> Upsertion {
    let salt = b"salt".to_vec();
    let salted_password = mechanism.hi(password.as_bytes(), &salt, iterations.max(1) as u32);
    Upsertion {
        user: user.into(),
        mechanism: mechanism.type_code(),
        iterations,
        salt,
        salted_password,
    }
}

fn state_with(upserts: &[Upsertion]) -> SecurityState {
    let mut state = SecurityState::new(SuperUsers::default(), false);
    let (results, records) = users::alter(&state, &[], upserts);
    assert!(results.iter().all(|r| r.error_code == 0), "{results:?}");
    assert!(state.load(records).is_empty());
    state
}

#[test]
fn upserted_credentials_authenticate() {
    let state = state_with(&[upsert("alice", ScramMechanism::Sha256, "pw", 4096)]);
    assert_eq!(
        plain::authenticate(b"\0alice\0pw", &state),
        Ok("alice".into())
    );
    assert!(plain::authenticate(b"\0alice\0nope", &state).is_err());
}

#[test]
fn alter_errors_are_kafkas() {
    let state = state_with(&[
        upsert("alice", ScramMechanism::Sha256, "pw", 4096),
        upsert("dup", ScramMechanism::Sha256, "pw", 4096),
    ]);
    let sha256 = ScramMechanism::Sha256.type_code();
    let deletions = [
        Deletion {
            user: "alice".into(),
            mechanism: sha256,
        },
        Deletion {
            user: "bob".into(),
            mechanism: sha256,
        },
        Deletion {
            user: "".into(),
            mechanism: sha256,
        },
        Deletion {
            user: "dup".into(),
            mechanism: sha256,
        },
        Deletion {
            user: "dup".into(),
            mechanism: sha256,
        },
    ];
    let upsertions = [
        upsert("alice", ScramMechanism::Sha512, "pw", 4096),
        upsert("carol", ScramMechanism::Sha512, "pw", 4095),
        upsert("dave", ScramMechanism::Sha512, "pw", 16385),
        Upsertion {
            mechanism: 0,
            ..upsert("erin", ScramMechanism::Sha512, "pw", 4096)
        },
        upsert("frank", ScramMechanism::Sha512, "pw", 16384),
    ];
    let (results, records) = users::alter(&state, &deletions, &upsertions);
    let got: Vec<(&str, i16, Option<&str>)> = results
        .iter()
        .map(|r| (r.user.as_str(), r.error_code, r.error_message.as_deref()))
        .collect();
    let twice = Some("A user credential cannot be altered twice in the same request");
    assert_eq!(
        got,
        [
            ("frank", 0, None),
            ("", 93, Some("Username must not be empty")),
            ("alice", 92, twice),
            (
                "bob",
                91,
                Some("Attempt to delete a user credential that does not exist")
            ),
            ("carol", 93, Some("Too few iterations")),
            ("dave", 93, Some("Too many iterations")),
            ("dup", 92, twice),
            ("erin", 33, Some("Unknown SCRAM mechanism")),
        ]
    );
    assert_eq!(records.len(), 1, "only frank's upsertion is written");
    // Kafka checks a deletion before its duplicate: the first of two for a user with no
    // credential is already an error, and the second is skipped.
    let missing = Deletion {
        user: "zed".into(),
        mechanism: sha256,
    };
    let (results, _) = users::alter(&state, &[missing.clone(), missing], &[]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].error_code, 91);
}

#[test]
fn deletion_and_replacement() {
    let mut state = state_with(&[upsert("alice", ScramMechanism::Sha256, "old", 4096)]);
    let (results, records) = users::alter(
        &state,
        &[],
        &[upsert("alice", ScramMechanism::Sha256, "new", 8192)],
    );
    assert_eq!(results[0].error_code, 0);
    state.load(records);
    assert_eq!(
        plain::authenticate(b"\0alice\0new", &state),
        Ok("alice".into())
    );
    let del = Deletion {
        user: "alice".into(),
        mechanism: ScramMechanism::Sha256.type_code(),
    };
    let (results, records) = users::alter(&state, &[del], &[]);
    assert_eq!(results[0].error_code, 0);
    state.load(records);
    assert_eq!(state.credential_count(), 0);
}

#[test]
fn a_bad_salted_password_is_refused_naming_why() {
    let state = state_with(&[]);
    let short = Upsertion {
        salted_password: vec![0; 10],
        ..upsert("a", ScramMechanism::Sha512, "pw", 4096)
    };
    let no_salt = Upsertion {
        salt: Vec::new(),
        ..upsert("b", ScramMechanism::Sha512, "pw", 4096)
    };
    let (results, records) = users::alter(&state, &[], &[short, no_salt]);
    assert!(records.is_empty());
    assert_eq!(results[0].error_code, 93);
    assert!(
        results[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("salted password of 10 bytes")
    );
    assert!(
        results[1]
            .error_message
            .as_deref()
            .unwrap()
            .contains("SCRAM_SALT_BYTES_MIN")
    );
    let debug = format!("{:?}", upsert("a", ScramMechanism::Sha512, "pw", 4096));
    assert!(!debug.contains("salted_password"), "{debug}");
}

#[test]
fn describe_is_kafkas() {
    let state = state_with(&[
        upsert("alice", ScramMechanism::Sha256, "pw", 4096),
        upsert("bob", ScramMechanism::Sha512, "pw", 8192),
    ]);
    let all = users::describe(&state, None);
    let summary: Vec<(&str, Vec<(ScramMechanism, u32)>)> = all
        .iter()
        .map(|d| (d.user.as_str(), d.credentials.clone()))
        .collect();
    assert_eq!(
        summary,
        [
            ("alice", vec![(ScramMechanism::Sha256, 4096)]),
            ("bob", vec![(ScramMechanism::Sha512, 8192)])
        ]
    );
    assert_eq!(
        users::describe(&state, Some(&[])),
        all,
        "an empty list is every user"
    );
    let named = users::describe(&state, Some(&["bob".into(), "zed".into(), "bob".into()]));
    let got: Vec<(&str, i16, Option<&str>)> = named
        .iter()
        .map(|d| (d.user.as_str(), d.error_code, d.error_message.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "bob",
                92,
                Some(
                    "Cannot describe SCRAM credentials for the same user twice in a single request: bob"
                )
            ),
            (
                "zed",
                91,
                Some("Attempt to describe a user credential that does not exist: zed")
            ),
        ]
    );
}
