//! The security log on a temp dir: credentials survive a reopen, and a damaged tail is cut
//! off by the storage engine's recovery, not fatal.

use sluice_security::principal::SuperUsers;
use sluice_security::rng::SplitMix64;
use sluice_security::scram::{ScramCredential, ScramMechanism};

use super::*;

fn upsert(user: &str, password: &str, mechanism: ScramMechanism) -> SecurityRecord {
    let mut rng = SplitMix64::new(7);
    SecurityRecord::ScramCredentialUpsert {
        user: user.into(),
        credential: ScramCredential::generate(mechanism, password, 4096, &mut rng).unwrap(),
    }
}

#[test]
fn credentials_survive_a_reopen_and_verify_their_password() {
    let dir = tempfile::tempdir().unwrap();
    let store = SecurityStore::open(dir.path(), SuperUsers::default(), true).unwrap();
    store
        .append(&[
            upsert("alice", "pw-a", ScramMechanism::Sha256),
            upsert("bob", "pw-b", ScramMechanism::Sha512),
        ])
        .unwrap();
    store
        .append(&[SecurityRecord::ScramCredentialDelete {
            user: "bob".into(),
            mechanism: ScramMechanism::Sha512,
        }])
        .unwrap();
    store.close().unwrap();
    let again = SecurityStore::open(dir.path(), SuperUsers::default(), true).unwrap();
    again.read(|state| {
        assert_eq!(state.credential_count(), 1);
        let alice = state.credential("alice", ScramMechanism::Sha256).unwrap();
        assert!(alice.verify_password("pw-a"));
        assert!(!alice.verify_password("pw-b"));
        assert!(state.credential("bob", ScramMechanism::Sha512).is_none());
    });
}

#[test]
fn a_torn_tail_loses_only_the_unfinished_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = SecurityStore::open(dir.path(), SuperUsers::default(), true).unwrap();
    store
        .append(&[upsert("alice", "pw", ScramMechanism::Sha256)])
        .unwrap();
    drop(store); // no clean close: recovery scans the tail
    let segment = dir
        .path()
        .join(SECURITY_DIR)
        .join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0, 0, 1, 0, 9, 9, 9]); // half a batch header
    std::fs::write(&segment, bytes).unwrap();
    let again = SecurityStore::open(dir.path(), SuperUsers::default(), true).unwrap();
    again.read(|state| assert_eq!(state.credential_count(), 1));
}
