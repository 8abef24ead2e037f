//! The authorizer's rules, one table per rule, each row a (principal, host, operation,
//! resource) and the decision Kafka's StandardAuthorizer gives: super users, deny over
//! allow (across literal, prefixed and wildcard bindings), implied operations, prefixed
//! patterns, the `*` resource, `User:*` and host `*`, and
//! `allow.everyone.if.no.acl.found`; then DescribeAcls/DeleteAcls through filters.

use sluice_security::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation as Op,
    AclPermissionType as Perm, Authorizer, PatternType as Pat, ResourcePattern,
    ResourceType as Res, Rule,
};
use sluice_security::principal::{KafkaPrincipal, SuperUsers};

/// A binding from `"<type> <pattern> <name> <principal> <host> <operation> <permission>"`,
/// e.g. `"topic literal orders User:alice * read allow"`.
fn acl(spec: &str) -> AclBinding {
    let f: Vec<&str> = spec.split(' ').collect();
    assert_eq!(f.len(), 7, "{spec}");
    AclBinding {
        pattern: ResourcePattern {
            resource_type: Res::parse(f[0]).unwrap(),
            name: f[2].into(),
            pattern_type: Pat::parse(f[1]).unwrap(),
        },
        entry: AccessControlEntry {
            principal: KafkaPrincipal::parse(f[3]).unwrap(),
            host: f[4].into(),
            operation: Op::parse(f[5]).unwrap(),
            permission_type: Perm::parse(f[6]).unwrap(),
        },
    }
}

fn authorizer(acls: &[AclBinding], allow_if_none: bool) -> Authorizer {
    let mut a = Authorizer::new(
        SuperUsers::parse("User:admin;User:ops").unwrap(),
        allow_if_none,
    );
    for b in acls {
        assert!(a.add(b.clone()).unwrap(), "{b:?} is new");
    }
    a
}

/// (user, host, operation, resource type, resource name, allowed?)
type Row<'a> = (&'a str, &'a str, Op, Res, &'a str, bool);

fn check(a: &Authorizer, rows: &[Row]) {
    for &(user, host, op, res, name, want) in rows {
        let d = a.authorize(&KafkaPrincipal::user(user), host, op, res, name);
        assert_eq!(
            d.allowed, want,
            "User:{user} from {host} {op} {res}:{name} -> {d:?}"
        );
    }
}

#[test]
fn super_users_are_allowed_everything() {
    let deny_all = acl("topic literal * User:* * all deny");
    let a = authorizer(&[deny_all], false);
    check(
        &a,
        &[
            ("admin", "1.2.3.4", Op::Write, Res::Topic, "t", true),
            (
                "ops",
                "1.2.3.4",
                Op::Alter,
                Res::Cluster,
                "kafka-cluster",
                true,
            ),
            ("alice", "1.2.3.4", Op::Write, Res::Topic, "t", false),
        ],
    );
    let d = a.authorize(
        &KafkaPrincipal::user("admin"),
        "h",
        Op::Read,
        Res::Topic,
        "t",
    );
    assert_eq!(d.rule, Rule::SuperUser);
}

#[test]
fn deny_beats_allow_across_pattern_types() {
    let rows_for = |deny: AclBinding| {
        let allow = acl("topic literal orders User:alice * read allow");
        let allow_prefix = acl("topic prefixed ord User:alice * read allow");
        let allow_star = acl("topic literal * User:* * read allow");
        authorizer(&[allow, allow_prefix, allow_star, deny], false)
    };
    let denies = [
        acl("topic literal orders User:alice * read deny"),
        acl("topic prefixed or User:alice * read deny"),
        acl("topic prefixed orders User:* * read deny"),
        acl("topic literal * User:alice * all deny"),
        acl("topic prefixed o User:alice 10.0.0.1 read deny"),
    ];
    for deny in denies {
        let a = rows_for(deny.clone());
        let d = a.authorize(
            &KafkaPrincipal::user("alice"),
            "10.0.0.1",
            Op::Read,
            Res::Topic,
            "orders",
        );
        assert!(!d.allowed, "{deny:?}");
        assert_eq!(d.rule, Rule::Acl(deny.clone()), "the deny is the reason");
        // The deny only covers what it names: another topic the allows reach stays allowed.
        let other = a.authorize(
            &KafkaPrincipal::user("alice"),
            "10.0.0.2",
            Op::Read,
            Res::Topic,
            "x",
        );
        assert_eq!(other.allowed, deny.pattern.name != "*", "{deny:?}");
    }
}

#[test]
fn implied_operations() {
    let allow = |op: Op| acl(&format!("topic literal t User:alice * {op} allow"));
    let cases = [
        (Op::Read, Op::Describe, true),
        (Op::Write, Op::Describe, true),
        (Op::Delete, Op::Describe, true),
        (Op::Alter, Op::Describe, true),
        (Op::Create, Op::Describe, false),
        (Op::AlterConfigs, Op::DescribeConfigs, true),
        (Op::AlterConfigs, Op::Describe, false),
        (Op::Describe, Op::Read, false),
        (Op::Read, Op::Write, false),
        (Op::All, Op::Write, true),
        (Op::All, Op::IdempotentWrite, true),
        (Op::All, Op::DescribeConfigs, true),
    ];
    for (granted, asked, want) in cases {
        let a = authorizer(&[allow(granted)], false);
        check(&a, &[("alice", "h", asked, Res::Topic, "t", want)]);
    }
    // Implication is for ALLOW only: a DENY of READ does not deny DESCRIBE.
    let deny_read = acl("topic literal t User:alice * read deny");
    let a = authorizer(&[allow(Op::Describe), deny_read], false);
    check(
        &a,
        &[
            ("alice", "h", Op::Describe, Res::Topic, "t", true),
            ("alice", "h", Op::Read, Res::Topic, "t", false),
        ],
    );
}

#[test]
fn prefixed_patterns_match_names_that_start_with_them() {
    let a = authorizer(&[acl("group prefixed app- User:alice * read allow")], false);
    check(
        &a,
        &[
            ("alice", "h", Op::Read, Res::Group, "app-", true),
            ("alice", "h", Op::Read, Res::Group, "app-1", true),
            ("alice", "h", Op::Read, Res::Group, "app", false),
            ("alice", "h", Op::Read, Res::Group, "xapp-1", false),
            ("alice", "h", Op::Read, Res::Topic, "app-1", false),
        ],
    );
    // The last row: a group binding does not apply to a topic of the same name.
    let d = a.authorize(
        &KafkaPrincipal::user("alice"),
        "h",
        Op::Read,
        Res::Topic,
        "app-1",
    );
    assert_eq!(d.rule, Rule::NoAclFound);
}

#[test]
fn wildcards_resource_principal_and_host() {
    let a = authorizer(
        &[
            acl("topic literal * User:alice * write allow"),
            acl("topic literal public User:* * read allow"),
            acl("topic literal lan User:bob 10.0.0.5 read allow"),
            acl("topic prefixed star User:bob * read allow"),
            acl("topic prefixed * User:carol * read allow"),
        ],
        false,
    );
    check(
        &a,
        &[
            ("alice", "h", Op::Write, Res::Topic, "anything", true),
            ("alice", "h", Op::Write, Res::Group, "anything", false),
            ("zed", "h", Op::Read, Res::Topic, "public", true),
            ("zed", "h", Op::Write, Res::Topic, "public", false),
            ("bob", "10.0.0.5", Op::Read, Res::Topic, "lan", true),
            ("bob", "10.0.0.6", Op::Read, Res::Topic, "lan", false),
            // A PREFIXED "*" is an ordinary prefix, not a wildcard.
            ("carol", "h", Op::Read, Res::Topic, "orders", false),
            ("carol", "h", Op::Read, Res::Topic, "*orders", true),
        ],
    );
}

#[test]
fn allow_everyone_if_no_acl_found() {
    let acls = [acl("topic literal guarded User:alice * read allow")];
    for allow_if_none in [false, true] {
        let a = authorizer(&acls, allow_if_none);
        check(
            &a,
            &[
                // No ACL applies to "open": the setting decides.
                ("bob", "h", Op::Write, Res::Topic, "open", allow_if_none),
                // An ACL applies to "guarded" (for someone else): denied either way.
                ("bob", "h", Op::Read, Res::Topic, "guarded", false),
                ("alice", "h", Op::Read, Res::Topic, "guarded", true),
            ],
        );
        let d = a.authorize(
            &KafkaPrincipal::user("bob"),
            "h",
            Op::Read,
            Res::Topic,
            "guarded",
        );
        assert_eq!(d.rule, Rule::NoMatchingAllow);
    }
}

#[test]
fn sluice_resources_use_the_same_engine() {
    let a = authorizer(
        &[
            acl("plugin prefixed team-a- User:alice * alter allow"),
            acl("view literal v User:alice * read allow"),
        ],
        false,
    );
    check(
        &a,
        &[
            ("alice", "h", Op::Alter, Res::Plugin, "team-a-router", true),
            (
                "alice",
                "h",
                Op::Describe,
                Res::Plugin,
                "team-a-router",
                true,
            ),
            ("alice", "h", Op::Alter, Res::Plugin, "team-b-router", false),
            ("alice", "h", Op::Read, Res::View, "v", true),
            ("alice", "h", Op::Read, Res::Topic, "v", false),
        ],
    );
}

#[test]
fn add_remove_describe_delete() {
    let b1 = acl("topic literal a User:alice * read allow");
    let b2 = acl("topic prefixed a User:bob * write deny");
    let b3 = acl("group literal g User:alice * read allow");
    let mut a = authorizer(&[b1.clone(), b2.clone(), b3.clone()], false);
    assert_eq!(a.add(b1.clone()), Ok(false), "a duplicate is kept once");
    assert_eq!(a.len(), 3);
    let invalid = acl("any literal a User:alice * read allow");
    assert!(a.add(invalid).is_err());

    let mut by_user = AclBindingFilter::any();
    by_user.entry.principal = Some("User:alice".into());
    assert_eq!(a.describe(&by_user).unwrap(), vec![b1.clone(), b3.clone()]);
    let mut matching = AclBindingFilter::any();
    matching.pattern.resource_type = Res::Topic;
    matching.pattern.name = Some("abc".into());
    matching.pattern.pattern_type = Pat::Match;
    assert_eq!(
        a.describe(&matching).unwrap(),
        vec![b2.clone()],
        "literal a does not apply to abc"
    );

    let gone = a.delete_matching(&by_user).unwrap();
    assert_eq!(gone, vec![b1.clone(), b3]);
    assert_eq!(a.bindings().collect::<Vec<_>>(), vec![b2.clone()]);
    assert!(a.remove(&b2));
    assert!(!a.remove(&b2));
    assert!(a.is_empty());
    let mut unknown = AclBindingFilter::any();
    unknown.entry.permission_type = Perm::Unknown;
    assert!(a.describe(&unknown).is_err());
}

#[test]
fn authorize_by_resource_type() {
    let alice = KafkaPrincipal::user("alice");
    // Each spec is a binding on a transactional id, "<pattern> <name> <principal> <host> <op> <perm>".
    let by_type = |specs: &[&str], allow_if_none: bool| {
        let bindings: Vec<AclBinding> = specs
            .iter()
            .map(|s| acl(&format!("transactional_id {s}")))
            .collect();
        let a = authorizer(&bindings, allow_if_none);
        a.authorize_by_resource_type(&alice, "h", Op::Write, Res::TransactionalId)
    };
    let allow_tx1 = "literal tx-1 User:alice * write allow";
    let cases: &[(&[&str], bool)] = &[
        (&[], false),
        (&[allow_tx1], true),
        (&["literal tx-1 User:alice * read allow"], false),
        (&["literal tx-1 User:alice * all allow"], true),
        (&["literal tx-1 User:* * write allow"], true),
        (&["literal tx-1 User:alice 10.0.0.1 write allow"], false),
        (&[allow_tx1, "literal tx-1 User:alice * write deny"], false),
        (&[allow_tx1, "literal tx-2 User:alice * write deny"], true),
        (
            &[
                "prefixed tx-ab User:alice * write allow",
                "prefixed tx-a User:alice * write deny",
            ],
            false,
        ),
        (
            &[
                "prefixed tx-ab User:alice * write allow",
                "prefixed tx-abc User:alice * write deny",
            ],
            true,
        ),
        (&[allow_tx1, "prefixed tx- User:alice * write deny"], false),
        (&[allow_tx1, "literal * User:alice * write deny"], false),
        (&["literal * User:alice * write allow"], true),
    ];
    for (specs, want) in cases {
        assert_eq!(by_type(specs, false), *want, "{specs:?}");
    }
    assert!(
        by_type(&[], true),
        "no ACL for the type: allow.everyone.if.no.acl.found"
    );
    let topic_only = authorizer(&[acl("topic literal tx-1 User:alice * write allow")], false);
    assert!(!topic_only.authorize_by_resource_type(&alice, "h", Op::Write, Res::TransactionalId));
    let a = authorizer(
        &[acl("transactional_id literal * User:* * all deny")],
        false,
    );
    assert!(a.authorize_by_resource_type(
        &KafkaPrincipal::user("admin"),
        "h",
        Op::Write,
        Res::TransactionalId
    ));
}
