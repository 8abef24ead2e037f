//! The audit trail: every change to who may do what, and to the code that runs inside the
//! broker (plugins, views, transforms, ACLs, users, quotas), and every transaction marker an
//! operator writes (WriteTxnMarkers: `txn.marker`), is one log line at INFO with
//! the target `sluice::audit`, naming the principal, its address, the action, the resource
//! and the outcome. Operators grep the broker log for `audit:` (or filter the JSON log on
//! the target); the lines are written whether the change came over the Kafka protocol or
//! the admin API, and a refusal that says why a change did not happen is one too.
//!
//! Each line reads `audit: <action> <resource> by <principal> from <host>: <outcome>`.
//!
//! Deleting a topic changes what other principals' views and transforms do, so it writes a
//! line for each of them ([`topic_deleted`]), by the principal that deleted the topic.

use sluice_security::principal::KafkaPrincipal;

/// Who made a change: the principal and the address its ACLs matched.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub principal: &'a KafkaPrincipal,
    pub host: &'a str,
}

/// A change that was made. `action` is a dotted verb (`plugin.deploy`, `acl.create`),
/// `resource` names what it changed (`plugin json-validator`), `detail` what it became.
pub fn done(actor: Actor<'_>, action: &str, resource: &str, detail: &str) {
    tracing::info!(
        target: "sluice::audit",
        principal = %actor.principal,
        host = actor.host,
        action,
        resource,
        outcome = "done",
        "audit: {action} {resource} by {} from {}: done ({detail})",
        actor.principal,
        actor.host,
    );
}

/// A change that was refused, and why.
pub fn refused(actor: Actor<'_>, action: &str, resource: &str, reason: &str) {
    tracing::info!(
        target: "sluice::audit",
        principal = %actor.principal,
        host = actor.host,
        action,
        resource,
        outcome = "refused",
        "audit: {action} {resource} by {} from {}: refused ({reason})",
        actor.principal,
        actor.host,
    );
}

/// What deleting `topic` did to the views and transforms that used it: a `view.delete` line
/// per view removed with it, a `transform.delete` line per transform reading it (removed by
/// its service), a `transform.fail` line per transform writing it.
pub fn topic_deleted(
    actor: Actor<'_>,
    topic: &str,
    views: &[String],
    reading: &[String],
    writing: &[String],
) {
    for view in views {
        let why = format!("its source topic {topic} was deleted; the view is removed with it");
        done(actor, "view.delete", &format!("view {view}"), &why);
    }
    for name in reading {
        let why = format!("its source topic {topic} was deleted; the transform is removed with it");
        done(
            actor,
            "transform.delete",
            &format!("transform {name}"),
            &why,
        );
    }
    for name in writing {
        let why = format!(
            "topic {topic}, which it writes, was deleted; it fails until a topic of that name exists and it is resumed"
        );
        done(actor, "transform.fail", &format!("transform {name}"), &why);
    }
}
