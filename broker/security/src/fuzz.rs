//! Entry points for the cargo-fuzz targets in `tests/fuzz/` (docs/security.md, "Fuzzing"):
//! they run this crate's own decoders and parsers on untrusted bytes and must never
//! panic, whatever the input. They also replay the committed corpus under `cargo test`.

use std::sync::OnceLock;

use crate::plain;
use crate::principal::SuperUsers;
use crate::records::SecurityRecord;
use crate::rng::SplitMix64;
use crate::sasl::SaslError;
use crate::scram::messages::{ClientFinal, ClientFirst};
use crate::scram::{ScramClient, ScramCredential, ScramMechanism, ScramServer};
use crate::state::SecurityState;

/// `security_records`: the input is a sequence of records, each a u16 big-endian length
/// and that many bytes. Each decodes strictly; those that decode are applied in order;
/// then the snapshot must rebuild the same state, and every record must re-encode to the
/// bytes it came from.
pub fn security_records(data: &[u8]) {
    let mut state = SecurityState::new(SuperUsers::default(), false);
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let body = &rest[2..];
        let (record, tail) = body.split_at(len.min(body.len()));
        rest = tail;
        if let Ok(decoded) = SecurityRecord::decode(record) {
            assert_eq!(
                decoded.encode(),
                record,
                "a decoded record re-encodes to its bytes"
            );
            let _ = state.apply(decoded);
        }
    }
    let mut rebuilt = SecurityState::new(SuperUsers::default(), false);
    assert!(
        rebuilt.load(state.snapshot()).is_empty(),
        "a snapshot applies cleanly"
    );
    assert_eq!(rebuilt, state, "the snapshot rebuilds the state");
}

/// `sasl_messages`: the first byte picks the parser (0 SCRAM client-first, 1 SCRAM
/// client-final, 2 PLAIN, 3 a whole SCRAM exchange whose two messages are split at the
/// first NUL, 4 `super.users`, 5 the SCRAM client reading a server's first and final
/// messages, split at the first NUL); the rest is the message.
pub fn sasl_messages(data: &[u8]) {
    let Some((&selector, message)) = data.split_first() else {
        return;
    };
    match selector % 6 {
        0 => {
            let _ = ClientFirst::parse(message);
        }
        1 => {
            let _ = ClientFinal::parse(message);
        }
        2 => {
            let _ = plain::authenticate(message, &lookup);
        }
        3 => scram_exchange(message),
        5 => scram_client(message),
        _ => {
            let _ = std::str::from_utf8(message).map(SuperUsers::parse);
        }
    }
}

/// `User:user` with password `pencil`, derived once per mechanism (4096 iterations is
/// too slow to pay per input).
fn lookup(user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
    static CREDENTIALS: OnceLock<[ScramCredential; 2]> = OnceLock::new();
    let all = CREDENTIALS.get_or_init(|| {
        ScramMechanism::ALL
            .map(|m| ScramCredential::derive(m, "pencil", b"salt", 4096).expect("valid"))
    });
    (user == "user")
        .then(|| all.iter().find(|c| c.mechanism == mechanism).cloned())
        .flatten()
}

fn scram_client(message: &[u8]) {
    let (first, last) = match message.iter().position(|&b| b == 0) {
        Some(at) => (&message[..at], &message[at + 1..]),
        None => (message, &[][..]),
    };
    let mut client = ScramClient::new(
        ScramMechanism::Sha256,
        "user",
        "pencil",
        "rOprNGfwEbeRWgbNEkqO",
    );
    if client.final_message(first).is_ok() {
        let _ = client.verify_server_final(last);
    }
}

fn scram_exchange(message: &[u8]) {
    let (first, last) = match message.iter().position(|&b| b == 0) {
        Some(at) => (&message[..at], &message[at + 1..]),
        None => (message, &[][..]),
    };
    let mut rng = SplitMix64::new(1);
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    if server.evaluate(first, &mut rng, &lookup).is_ok() {
        let _ = server.evaluate(last, &mut rng, &lookup);
    }
    // Whatever happened, the exchange is over: another message is out of state.
    let after = server.evaluate(b"", &mut rng, &lookup);
    assert!(
        matches!(after, Err(SaslError::IllegalState { .. })),
        "{after:?}"
    );
}

/// The seed corpus, made from real encodings: `(target, name, bytes)`. Written to
/// `tests/fuzz/corpus/<target>/seed-<name>` by `cargo run -p sluice-security --example
/// fuzz_seeds -- tests/fuzz/corpus`, and checked against the committed files by
/// `tests/fuzz_corpus.rs`. Deterministic (fixed salts and seeds).
pub fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, record) in seed_records() {
        out.push(("security_records", name, framed(&[record])));
    }
    let all: Vec<SecurityRecord> = seed_records().into_iter().map(|(_, r)| r).collect();
    out.push(("security_records", "all-kinds", framed(&all)));
    let sasl: [(&str, u8, &[u8]); 8] = [
        ("scram-client-first", 0, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"),
        ("scram-client-first-authzid-ext", 0, b"n,a=us=2Cer,n=us=2Cer,r=abc,tokenauth=true"),
        ("scram-client-final", 1, b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        ("plain", 2, b"\0user\0pencil"),
        ("plain-authzid", 2, b"user\0user\0pencil"),
        ("scram-exchange", 3, b"n,,n=user,r=abc\0c=biws,r=abc,p=AAAA"),
        ("super-users", 4, b"User:admin;User:ops"),
        ("scram-client-reads-server", 5, b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096\0v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
    ];
    for (name, selector, message) in sasl {
        out.push(("sasl_messages", name, [&[selector][..], message].concat()));
    }
    out
}

fn framed(records: &[SecurityRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        let bytes = record.encode();
        out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

fn seed_records() -> Vec<(&'static str, SecurityRecord)> {
    use crate::acl::ResourceType;
    use crate::acl::{
        AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType,
        ResourcePattern,
    };
    use crate::principal::KafkaPrincipal;
    use crate::quota::{EntityName, QuotaEntity, QuotaKind};
    let credential =
        ScramCredential::derive(ScramMechanism::Sha512, "pencil", b"salt", 4096).expect("valid");
    let binding = AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: "orders-".into(),
            pattern_type: PatternType::Prefixed,
        },
        entry: AccessControlEntry {
            principal: KafkaPrincipal::user("alice"),
            host: "*".into(),
            operation: AclOperation::Read,
            permission_type: AclPermissionType::Allow,
        },
    };
    let entity = QuotaEntity {
        user: Some(EntityName::Named("alice".into())),
        client_id: Some(EntityName::Default),
    };
    vec![
        (
            "scram-upsert",
            SecurityRecord::ScramCredentialUpsert {
                user: "user".into(),
                credential,
            },
        ),
        (
            "scram-delete",
            SecurityRecord::ScramCredentialDelete {
                user: "user".into(),
                mechanism: ScramMechanism::Sha256,
            },
        ),
        ("acl-create", SecurityRecord::AclCreate(binding.clone())),
        ("acl-delete", SecurityRecord::AclDelete(binding)),
        (
            "quota-set",
            SecurityRecord::ClientQuotaSet {
                entity: entity.clone(),
                kind: QuotaKind::ProducerByteRate,
                value: 1_048_576.0,
            },
        ),
        (
            "quota-remove",
            SecurityRecord::ClientQuotaRemove {
                entity,
                kind: QuotaKind::ProducerByteRate,
            },
        ),
        (
            "token",
            SecurityRecord::DelegationToken(crate::tokens::DelegationToken {
                token_id: "dGhpcyBpcyBhIHRva2Vu".into(),
                owner: KafkaPrincipal::user("alice"),
                requester: KafkaPrincipal::user("alice"),
                renewers: vec![KafkaPrincipal::user("bob")],
                issue_ms: 1_700_000_000_000,
                expiry_ms: 1_700_086_400_000,
                max_ms: 1_700_604_800_000,
            }),
        ),
        (
            "token-remove",
            SecurityRecord::DelegationTokenRemove {
                token_id: "dGhpcyBpcyBhIHRva2Vu".into(),
            },
        ),
    ]
}
