"""Multi-tenant authorization: plugins (issue 35, findings 4 and 5). An attacker with cluster
CREATE (Kafka's usual "may create topics" grant) tries to take over `tenant-a`'s validator
and partitioner through the admin API, and to bind a topic of its own to `tenant-a`'s
plugins through the admin API and the Kafka protocol. Each is refused: replacing a plugin
needs ALTER on it (cluster CREATE only makes new names), binding one needs READ on it on
every path. The victim's plugin bytes and its produce behaviour are unchanged, and every
change and refusal is an audit line naming its principal (`tenant_support.py` has the
broker and principals).
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from plugin_support import wasm
from tenant_support import (  # noqa: F401 (tenants is a fixture)
    SHARED_TOPIC,
    TIMEOUT_S,
    admin_call,
    audit_lines,
    create_topics,
    grant,
    kafka_conf,
    tenants,
)


def produce(conf: dict, topic: str, value: bytes) -> KafkaError | None:
    reports = []
    p = Producer({**conf, "message.timeout.ms": 10_000, "acks": "all", "retries": 0})
    p.produce(topic, value=value, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(TIMEOUT_S) == 0
    return reports[0]


def deploy(broker, user: str, name: str, built: str) -> tuple[int, object]:
    return admin_call(broker, user, "PUT", f"/v1/plugins/{name}", raw=wasm(built))


def victim_setup(broker) -> str:
    """tenant-a's validator (json-validator requiring $.id) on its topic; the plugin's sha256."""
    status, body = deploy(broker, "tenant-a", "a-validator", "json-validator")
    assert status == 200, body
    assert deploy(broker, "tenant-a", "a-router", "murmur2")[0] == 200
    status, body = admin_call(broker, "tenant-a", "POST", "/v1/topics", {
        "name": "a-orders", "partitions": 1,
        "configs": {"sluice.validator": "a-validator", "sluice.validator.params": "required=$.id"},
    })  # fmt: skip
    assert status == 201, body
    return admin_call(broker, "tenant-a", "GET", "/v1/plugins/a-validator")[1]["sha256"]


def test_cluster_create_makes_new_plugins_but_never_replaces_one(tenants):
    broker = tenants
    sha = victim_setup(broker)
    grant(broker, "attacker", "cluster", "", "create")
    # Replacing tenant-a's validator (same kind, so only authorization stops it): refused.
    status, body = deploy(broker, "attacker", "a-validator", "record-policy-validator")
    assert status == 403 and "ALTER on PLUGIN" in body["error"], (status, body)
    assert admin_call(broker, "tenant-a", "GET", "/v1/plugins/a-validator")[1]["sha256"] == sha
    # The validator still does its job on tenant-a's topic.
    a = kafka_conf(broker, "tenant-a")
    assert produce(a, "a-orders", b'{"name": "no id"}').code() == KafkaError.INVALID_RECORD
    assert produce(a, "a-orders", b'{"id": 1}') is None
    # CREATE on the cluster still makes a plugin of a new name; replacing it needs ALTER.
    assert deploy(broker, "attacker", "x-tool", "json-validator")[0] == 200
    assert deploy(broker, "attacker", "x-tool", "record-policy-validator")[0] == 403
    # The owner replaces its own plugin.
    assert deploy(broker, "tenant-a", "a-validator", "json-validator")[0] == 200
    audit = audit_lines(broker)
    assert any("plugin.deploy plugin a-validator by User:attacker from 127.0.0.1: refused" in line for line in audit), audit
    assert any("plugin.deploy plugin a-validator by User:tenant-a from 127.0.0.1: done" in line for line in audit), audit
    assert any("plugin.deploy plugin x-tool by User:attacker" in line and ": done" in line for line in audit), audit


def test_binding_a_plugin_needs_read_on_it_over_the_admin_api_and_the_kafka_protocol(tenants):
    broker = tenants
    victim_setup(broker)
    grant(broker, "attacker", "cluster", "", "create")
    grant(broker, "attacker", "topic", SHARED_TOPIC, "alter_configs")
    # Admin API: a new topic bound to tenant-a's validator, and the shared topic re-bound to
    # tenant-a's partitioner.
    status, body = admin_call(broker, "attacker", "POST", "/v1/topics",
                              {"name": "x-steal", "configs": {"sluice.validator": "a-validator"}})  # fmt: skip
    assert status == 403 and "READ on PLUGIN \"a-validator\"" in body["error"], (status, body)
    status, body = admin_call(broker, "attacker", "PATCH", f"/v1/topics/{SHARED_TOPIC}",
                              {"set": {"sluice.partitioner": "a-router"}})  # fmt: skip
    assert status == 403 and "READ on PLUGIN \"a-router\"" in body["error"], (status, body)
    # Without a plugin the same calls pass: the plugin is what was refused.
    status, body = admin_call(broker, "attacker", "POST", "/v1/topics", {"name": "x-own", "configs": {}})
    assert status == 201, body
    # The Kafka protocol refuses the same bindings.
    admin = AdminClient(kafka_conf(broker, "attacker"))
    new = NewTopic("x-steal-2", num_partitions=1, replication_factor=1, config={"sluice.validator": "a-validator"})
    try:
        admin.create_topics([new])["x-steal-2"].result(timeout=TIMEOUT_S)
        raise AssertionError("CreateTopics bound another tenant's plugin")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e
    resource = ConfigResource("topic", SHARED_TOPIC, set_config={"sluice.partitioner": "a-router"})
    try:
        admin.alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
        raise AssertionError("AlterConfigs bound another tenant's plugin")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e
    topics = admin_call(broker, "admin", "GET", "/v1/topics")[1]["topics"]
    names = {t["name"] for t in topics}
    assert "x-steal" not in names and "x-steal-2" not in names, names
    shared = admin_call(broker, "admin", "GET", f"/v1/topics/{SHARED_TOPIC}")[1]
    assert shared["overrides"] == {}, shared


def test_acl_and_plugin_changes_are_audit_lines_with_their_principal(tenants):
    broker = tenants
    victim_setup(broker)
    assert admin_call(broker, "tenant-a", "DELETE", "/v1/plugins/a-router")[0] == 204
    audit = audit_lines(broker)
    # The fixture's grants, made over the Kafka protocol by the super user.
    assert any("acl.create acl TOPIC:PREFIXED:a- by User:admin from 127.0.0.1: done (ALLOW User:tenant-a ALL" in line
               for line in audit), audit  # fmt: skip
    assert any("plugin.delete plugin a-router by User:tenant-a" in line for line in audit), audit
    assert all("sluice::audit" in line for line in audit if "audit: " in line), audit
