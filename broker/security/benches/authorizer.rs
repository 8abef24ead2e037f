//! What one authorization check costs (no criterion): `Authorizer::authorize` as every
//! Produce and Fetch calls it once per topic, in the default open configuration (no ACL,
//! `allow.everyone.if.no.acl.found`) as the baseline, and with many bindings (a literal
//! ALLOW that matches among 10,000 literal and 1,000 prefixed bindings, and a denial that
//! has to look at all the prefixes). Medians of several repetitions, each of `CALLS` calls.
//!
//! Run: `cargo bench -p sluice-security --bench authorizer` (`-- --reps 9` to change the
//! repetitions).

use std::hint::black_box;
use std::time::Instant;

use sluice_security::acl::{
    AccessControlEntry, AclBinding, AclOperation, AclPermissionType, Authorizer, PatternType,
    ResourcePattern, ResourceType,
};
use sluice_security::principal::{KafkaPrincipal, SuperUsers};

const CALLS: u32 = 200_000;

fn binding(name: String, pattern_type: PatternType, user: &str) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name,
            pattern_type,
        },
        entry: AccessControlEntry {
            principal: KafkaPrincipal::user(user),
            host: "*".into(),
            operation: AclOperation::Write,
            permission_type: AclPermissionType::Allow,
        },
    }
}

/// Nanoseconds per call of `check`, median over `reps`.
fn measure(reps: usize, mut check: impl FnMut() -> bool) -> f64 {
    let mut samples: Vec<f64> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..CALLS {
                black_box(check());
            }
            started.elapsed().as_nanos() as f64 / f64::from(CALLS)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(7);
    let alice = KafkaPrincipal::user("alice");
    let open = Authorizer::new(SuperUsers::default(), true);
    let mut many = Authorizer::new(SuperUsers::default(), false);
    for i in 0..10_000 {
        many.add(binding(
            format!("topic-{i}"),
            PatternType::Literal,
            &format!("user-{}", i % 100),
        ))
        .expect("valid");
    }
    for i in 0..1_000 {
        many.add(binding(
            format!("prefix-{i}-"),
            PatternType::Prefixed,
            "bob",
        ))
        .expect("valid");
    }
    many.add(binding("orders".into(), PatternType::Literal, "alice"))
        .expect("valid");
    let cases: [(&str, &Authorizer, &str, bool); 3] = [
        (
            "no ACLs, allow.everyone (the default)",
            &open,
            "orders",
            true,
        ),
        (
            "11,001 bindings, literal ALLOW matches",
            &many,
            "orders",
            true,
        ),
        (
            "11,001 bindings, no match (denied)",
            &many,
            "prefix-9999-x",
            false,
        ),
    ];
    println!("authorize(): ns per call, median of {reps} x {CALLS} calls");
    let mut baseline = None;
    for (name, authorizer, topic, expect) in cases {
        let ns = measure(reps, || {
            let d = authorizer.authorize(
                &alice,
                "10.0.0.1",
                AclOperation::Write,
                ResourceType::Topic,
                topic,
            );
            assert_eq!(d.allowed, expect, "{name}");
            d.allowed
        });
        let base = *baseline.get_or_insert(ns);
        println!("{name:<42} {ns:>8.1} ns   {:.2}x the default", ns / base);
    }
}
