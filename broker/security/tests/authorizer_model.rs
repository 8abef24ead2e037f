//! The authorizer against a model: thousands of seeded random binding sets and requests,
//! each decided by `Authorizer::authorize` (map lookups by exact name, `*` and prefixes)
//! and by a brute-force reading of Kafka's rules written here over every binding, with
//! "applies to the resource" taken from the MATCH filter (`ResourcePatternFilter`). The
//! two must agree on every request.

use sluice_security::acl::{
    AccessControlEntry, AclBinding, AclOperation as Op, AclPermissionType as Perm, Authorizer,
    PatternType as Pat, ResourcePattern, ResourcePatternFilter, ResourceType as Res,
};
use sluice_security::principal::{KafkaPrincipal, SuperUsers};
use sluice_security::rng::SplitMix64;

const NAMES: [&str; 6] = ["a", "ab", "abc", "b", "*", "*a"];
const USERS: [&str; 3] = ["alice", "bob", "*"];
const HOSTS: [&str; 2] = ["*", "h1"];
const OPS: [Op; 6] = [
    Op::All,
    Op::Read,
    Op::Write,
    Op::Describe,
    Op::AlterConfigs,
    Op::DescribeConfigs,
];
const TYPES: [Res; 2] = [Res::Topic, Res::Group];

fn pick<T: Copy>(rng: &mut SplitMix64, from: &[T]) -> T {
    from[(rng.next_u64() % from.len() as u64) as usize]
}

fn random_binding(rng: &mut SplitMix64) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: pick(rng, &TYPES),
            name: pick(rng, &NAMES).into(),
            pattern_type: pick(rng, &[Pat::Literal, Pat::Prefixed]),
        },
        entry: AccessControlEntry {
            principal: KafkaPrincipal::user(pick(rng, &USERS)),
            host: pick(rng, &HOSTS).into(),
            operation: pick(rng, &OPS),
            permission_type: pick(rng, &[Perm::Allow, Perm::Deny]),
        },
    }
}

/// Kafka's rules, read literally, over every binding.
fn model(
    bindings: &[AclBinding],
    allow_if_none: bool,
    user: &str,
    host: &str,
    op: Op,
    res: Res,
    name: &str,
) -> bool {
    let filter = ResourcePatternFilter {
        resource_type: res,
        name: Some(name.into()),
        pattern_type: Pat::Match,
    };
    let applicable: Vec<&AclBinding> = bindings
        .iter()
        .filter(|b| filter.matches(&b.pattern))
        .collect();
    if applicable.is_empty() {
        return allow_if_none;
    }
    let matches = |b: &AclBinding| {
        let e = &b.entry;
        let who = e.principal.name == user || e.principal.name == "*";
        let from = e.host == "*" || e.host == host;
        let implied = match op {
            Op::Describe => matches!(e.operation, Op::Read | Op::Write | Op::Delete | Op::Alter),
            Op::DescribeConfigs => e.operation == Op::AlterConfigs,
            _ => false,
        };
        let what = e.operation == Op::All
            || e.operation == op
            || (e.permission_type == Perm::Allow && implied);
        who && from && what
    };
    let hits: Vec<&&AclBinding> = applicable.iter().filter(|b| matches(b)).collect();
    if hits.iter().any(|b| b.entry.permission_type == Perm::Deny) {
        return false;
    }
    !hits.is_empty()
}

#[test]
fn authorizer_agrees_with_the_model() {
    let mut rng = SplitMix64::new(2026);
    for round in 0..300 {
        let allow_if_none = round % 2 == 0;
        let mut authorizer = Authorizer::new(SuperUsers::default(), allow_if_none);
        let mut bindings = Vec::new();
        for _ in 0..(rng.next_u64() % 8) {
            let b = random_binding(&mut rng);
            if authorizer.add(b.clone()).unwrap() {
                bindings.push(b);
            }
        }
        for _ in 0..40 {
            let (user, host) = (
                pick(&mut rng, &["alice", "bob", "carol"]),
                pick(&mut rng, &["h1", "h2"]),
            );
            let op = pick(
                &mut rng,
                &[
                    Op::Read,
                    Op::Write,
                    Op::Describe,
                    Op::DescribeConfigs,
                    Op::AlterConfigs,
                ],
            );
            let (res, name) = (
                pick(&mut rng, &TYPES),
                pick(&mut rng, &["a", "ab", "abcd", "b", "x", "*", "*ab"]),
            );
            let got = authorizer
                .authorize(&KafkaPrincipal::user(user), host, op, res, name)
                .allowed;
            let want = model(&bindings, allow_if_none, user, host, op, res, name);
            assert_eq!(
                got, want,
                "User:{user}@{host} {op} {res}:{name} with {bindings:#?}"
            );
        }
    }
}
