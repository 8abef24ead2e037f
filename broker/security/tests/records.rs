//! Security records: the byte layout of each kind (golden bytes), round trips, strict
//! decoding of bad input, and the state they rebuild: applying the same records gives
//! the same state, and the snapshot rebuilds it.

use sluice_security::acl::{
    AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType,
};
use sluice_security::principal::{KafkaPrincipal, SuperUsers};
use sluice_security::quota::{EntityName, QuotaEntity, QuotaKind};
use sluice_security::records::{DecodeError, SecurityRecord};
use sluice_security::scram::{CredentialLookup, ScramCredential, ScramMechanism};
use sluice_security::state::SecurityState;

fn credential(m: ScramMechanism, password: &str) -> ScramCredential {
    ScramCredential::derive(m, password, b"salt", 4096).unwrap()
}

fn binding(name: &str, op: AclOperation) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern_type: PatternType::Literal,
        },
        entry: AccessControlEntry {
            principal: KafkaPrincipal::user("alice"),
            host: "*".into(),
            operation: op,
            permission_type: AclPermissionType::Allow,
        },
    }
}

fn user_entity(user: &str) -> QuotaEntity {
    QuotaEntity {
        user: Some(EntityName::Named(user.into())),
        client_id: Some(EntityName::Default),
    }
}

fn one_of_each() -> Vec<SecurityRecord> {
    vec![
        SecurityRecord::ScramCredentialUpsert {
            user: "alice".into(),
            credential: credential(ScramMechanism::Sha256, "a"),
        },
        SecurityRecord::ScramCredentialUpsert {
            user: "bob".into(),
            credential: credential(ScramMechanism::Sha512, "b"),
        },
        SecurityRecord::ScramCredentialDelete {
            user: "bob".into(),
            mechanism: ScramMechanism::Sha512,
        },
        SecurityRecord::AclCreate(binding("t", AclOperation::Read)),
        SecurityRecord::AclCreate(binding("u", AclOperation::Write)),
        SecurityRecord::AclDelete(binding("u", AclOperation::Write)),
        SecurityRecord::ClientQuotaSet {
            entity: user_entity("alice"),
            kind: QuotaKind::ProducerByteRate,
            value: 1e6,
        },
        SecurityRecord::ClientQuotaSet {
            entity: user_entity("bob"),
            kind: QuotaKind::ConsumerByteRate,
            value: 2e6,
        },
        SecurityRecord::ClientQuotaRemove {
            entity: user_entity("bob"),
            kind: QuotaKind::ConsumerByteRate,
        },
    ]
}

#[test]
fn layouts_are_as_documented() {
    let del = SecurityRecord::ScramCredentialDelete {
        user: "al".into(),
        mechanism: ScramMechanism::Sha512,
    };
    assert_eq!(del.encode(), [0, 1, 0, 2, b'a', b'l', 2]);
    let acl = SecurityRecord::AclDelete(AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Group,
            name: "g".into(),
            pattern_type: PatternType::Prefixed,
        },
        entry: AccessControlEntry {
            principal: KafkaPrincipal::user("a"),
            host: "*".into(),
            operation: AclOperation::Read,
            permission_type: AclPermissionType::Deny,
        },
    });
    let mut want = vec![0, 3, 3, 0, 1, b'g', 4, 0, 6];
    want.extend_from_slice(b"User:a");
    want.extend_from_slice(&[0, 1, b'*', 3, 2]);
    assert_eq!(acl.encode(), want);
    let quota = SecurityRecord::ClientQuotaRemove {
        entity: QuotaEntity {
            user: Some(EntityName::Default),
            client_id: Some(EntityName::Named("c".into())),
        },
        kind: QuotaKind::ConsumerByteRate,
    };
    assert_eq!(quota.encode(), [0, 5, 1, 2, 0, 1, b'c', 1]);
    let upsert = &one_of_each()[0];
    let bytes = upsert.encode();
    assert_eq!(&bytes[..10], &[0, 0, 0, 5, b'a', b'l', b'i', b'c', b'e', 1]);
    assert_eq!(&bytes[10..14], &4096i32.to_be_bytes());
    assert_eq!(bytes.len(), 14 + (2 + 4) + 2 * (2 + 32));
}

#[test]
fn every_kind_round_trips() {
    for record in one_of_each() {
        assert_eq!(record.validate(), Ok(()));
        assert_eq!(
            SecurityRecord::decode(&record.encode()).as_ref(),
            Ok(&record)
        );
    }
}

#[test]
fn validate_refuses_what_decode_refuses() {
    let long = "u".repeat(sluice_security::limits::USER_NAME_BYTES_MAX + 1);
    let too_long = SecurityRecord::ScramCredentialDelete {
        user: long,
        mechanism: ScramMechanism::Sha256,
    };
    assert!(
        too_long
            .validate()
            .unwrap_err()
            .to_string()
            .contains("USER_NAME_BYTES_MAX")
    );
    let empty = SecurityRecord::ScramCredentialDelete {
        user: String::new(),
        mechanism: ScramMechanism::Sha256,
    };
    assert!(empty.validate().is_err());
    let mut weak = credential(ScramMechanism::Sha256, "a");
    weak.iterations = 10;
    let weak = SecurityRecord::ScramCredentialUpsert {
        user: "a".into(),
        credential: weak,
    };
    assert!(
        weak.validate()
            .unwrap_err()
            .to_string()
            .contains("SCRAM_ITERATIONS_MIN")
    );
}

#[test]
fn decode_is_strict() {
    let good = one_of_each()[0].encode();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "truncated"),
        (vec![1, 0], "version 1"),
        (vec![0, 9], "unknown record kind 9"),
        ([good.as_slice(), &[0]].concat(), "1 trailing bytes"),
        (good[..good.len() - 1].to_vec(), "truncated"),
        (vec![0, 1, 0, 1, 0xFF, 1], "not UTF-8"),
        (vec![0, 1, 0, 0, 1], "empty user name"),
        (vec![0, 1, 0, 1, b'a', 3], "unknown mechanism 3"),
        (vec![0, 1, 0xFF, 0xFF], "USER_NAME_BYTES_MAX"),
        (vec![0; 16 * 1024 + 1], "SECURITY_RECORD_BYTES_MAX"),
        (vec![0, 5, 0, 0, 0], "Invalid empty client quota entity"),
        (vec![0, 5, 3, 0, 0], "unknown quota entity tag 3"),
        (vec![0, 5, 1, 0, 7], "unknown quota key 7"),
    ];
    for (bytes, want) in cases {
        let err = SecurityRecord::decode(&bytes).unwrap_err().to_string();
        assert!(err.contains(want), "{bytes:?}: {err} (wanted {want})");
    }
    // Values the live checks refuse are refused on decode too.
    let mut low = good.clone();
    low[10..14].copy_from_slice(&100i32.to_be_bytes());
    assert!(matches!(
        SecurityRecord::decode(&low),
        Err(DecodeError::Invalid(_))
    ));
    let mut any_type = SecurityRecord::AclCreate(binding("t", AclOperation::Read)).encode();
    any_type[2] = ResourceType::Any.code() as u8;
    let err = SecurityRecord::decode(&any_type).unwrap_err();
    assert!(
        err.to_string().contains("Invalid resourceType ANY"),
        "{err}"
    );
    let mut zero = one_of_each()[6].encode();
    let n = zero.len();
    zero[n - 8..].copy_from_slice(&0f64.to_bits().to_be_bytes());
    assert!(
        SecurityRecord::decode(&zero)
            .unwrap_err()
            .to_string()
            .contains("greater than 0")
    );
}

fn rebuilt(records: Vec<SecurityRecord>) -> SecurityState {
    let mut state = SecurityState::new(SuperUsers::parse("User:admin").unwrap(), false);
    assert!(state.load(records).is_empty());
    state
}

#[test]
fn applying_records_rebuilds_the_state() {
    let state = rebuilt(one_of_each());
    assert_eq!(
        state,
        rebuilt(one_of_each()),
        "the same records give the same state"
    );
    assert!(
        state
            .credential("alice", ScramMechanism::Sha256)
            .unwrap()
            .verify_password("a")
    );
    assert!(
        state
            .scram_credential("bob", ScramMechanism::Sha512)
            .is_none(),
        "deleted"
    );
    assert_eq!(state.users().into_keys().collect::<Vec<_>>(), ["alice"]);
    assert_eq!(state.authorizer().len(), 1);
    assert_eq!(state.quotas().len(), 1);
    let decision = state.authorizer().authorize(
        &KafkaPrincipal::user("alice"),
        "h",
        AclOperation::Describe,
        ResourceType::Topic,
        "t",
    );
    assert!(decision.allowed, "READ implies DESCRIBE");

    let snapshot = state.snapshot();
    assert_eq!(
        snapshot.len(),
        3,
        "one record per live credential, binding and quota"
    );
    assert_eq!(rebuilt(snapshot.clone()), state);
    let through_bytes: Vec<SecurityRecord> = snapshot
        .iter()
        .map(|r| SecurityRecord::decode(&r.encode()).unwrap())
        .collect();
    assert_eq!(rebuilt(through_bytes), state);
}

#[test]
fn later_records_win_and_a_refusal_changes_nothing() {
    let mut records = one_of_each();
    records.push(SecurityRecord::ScramCredentialUpsert {
        user: "alice".into(),
        credential: credential(ScramMechanism::Sha256, "new"),
    });
    records.push(SecurityRecord::AclCreate(binding("t", AclOperation::Read)));
    let state = rebuilt(records);
    let c = state.credential("alice", ScramMechanism::Sha256).unwrap();
    assert!(c.verify_password("new") && !c.verify_password("a"));
    assert_eq!(
        state.authorizer().len(),
        1,
        "a duplicate binding is kept once"
    );

    let mut refused = state.clone();
    let bad = SecurityRecord::ClientQuotaSet {
        entity: user_entity("x"),
        kind: QuotaKind::ProducerByteRate,
        value: -1.0,
    };
    assert!(refused.apply(bad).is_err());
    assert_eq!(refused, state, "a refused record changes nothing");
}

/// A seeded random history of every record kind over a few users, names and entities.
fn random_history(creds: &[ScramCredential; 2], seed: u64, len: usize) -> Vec<SecurityRecord> {
    use sluice_security::rng::SplitMix64;
    let mut rng = SplitMix64::new(seed);
    let users = ["alice", "bob", "carol"];
    let ops = [AclOperation::Read, AclOperation::Write, AclOperation::All];
    (0..len)
        .map(|_| {
            let r = rng.next_u64();
            let user = users[(r >> 8) as usize % users.len()].to_owned();
            let credential = creds[(r >> 16) as usize % 2].clone();
            let b = binding(&user, ops[(r >> 24) as usize % ops.len()]);
            let kind = if r >> 32 & 1 == 0 {
                QuotaKind::ProducerByteRate
            } else {
                QuotaKind::ConsumerByteRate
            };
            match r % 6 {
                0 => SecurityRecord::ScramCredentialUpsert { user, credential },
                1 => SecurityRecord::ScramCredentialDelete {
                    user,
                    mechanism: credential.mechanism,
                },
                2 => SecurityRecord::AclCreate(b),
                3 => SecurityRecord::AclDelete(b),
                4 => SecurityRecord::ClientQuotaSet {
                    entity: user_entity(&user),
                    kind,
                    value: (r >> 40) as f64 + 1.0,
                },
                _ => SecurityRecord::ClientQuotaRemove {
                    entity: user_entity(&user),
                    kind,
                },
            }
        })
        .collect()
}

#[test]
fn random_histories_replay_and_compact() {
    // Derived once: 4096 rounds per credential is the slow part of this test.
    let creds = [
        credential(ScramMechanism::Sha256, "a"),
        credential(ScramMechanism::Sha512, "b"),
    ];
    for seed in 0..50 {
        let history = random_history(&creds, seed, 60);
        let state = rebuilt(history.clone());
        let decoded: Vec<SecurityRecord> = history
            .iter()
            .map(|r| SecurityRecord::decode(&r.encode()).unwrap())
            .collect();
        assert_eq!(
            rebuilt(decoded),
            state,
            "seed {seed}: replaying the bytes gives the same state"
        );
        let snapshot = state.snapshot();
        assert_eq!(
            rebuilt(snapshot.clone()),
            state,
            "seed {seed}: the snapshot rebuilds the state"
        );
        let mut continued = history.clone();
        continued.extend(random_history(&creds, seed + 1000, 20));
        let mut compacted = snapshot;
        compacted.extend(random_history(&creds, seed + 1000, 20));
        assert_eq!(
            rebuilt(compacted),
            rebuilt(continued),
            "seed {seed}: a compacted log keeps its future"
        );
    }
}
