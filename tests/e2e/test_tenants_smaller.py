"""Multi-tenant authorization: the smaller findings of issue 35 (6). ListOffsets and
OffsetForLeaderEpoch on a view ask the VIEW ACL, as Fetch does (a TOPIC grant on the view's
name discloses nothing, a VIEW grant is enough for `auto.offset.reset`); a plugin's own log
needs ALTER on it (a guest may log the records of every tenant that uses it; DESCRIBE shows
its kind and aggregate statistics only); Kafka's rule that topic names differing only in `.`
and `_` collide holds for topics and views alike.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_messages as km
from plugin_support import wasm
from tenant_support import (  # noqa: F401 (tenants is a fixture)
    TIMEOUT_S,
    admin_call,
    create_topics,
    grant,
    kafka_conf,
    raw_login,
    tenants,
)

TOPIC_AUTHORIZATION_FAILED = 29
INVALID_TOPIC_EXCEPTION = 17


def view_of_a_orders(broker) -> None:
    """tenant-a's topic a-orders with 3 records and its view a-view (a filter keeping all)."""
    create_topics(broker, "tenant-a", "a-orders")
    p = Producer({**kafka_conf(broker, "tenant-a"), "acks": "all"})
    for i in range(3):
        p.produce("a-orders", value=b'{"region": "eu", "n": %d}' % i)
    assert p.flush(TIMEOUT_S) == 0
    assert admin_call(broker, "tenant-a", "PUT", "/v1/plugins/a-filter", raw=wasm("json-filter"))[0] == 200
    status, body = admin_call(broker, "tenant-a", "POST", "/v1/views", {
        "name": "a-view", "source": "a-orders",
        "stages": [{"plugin": "a-filter", "params": {"field": "$.region", "op": "==", "value": "eu"}}],
    })  # fmt: skip
    assert status == 201, body


def offsets_as(broker, user: str, name: str) -> tuple[int, int]:
    """(ListOffsets error, OffsetForLeaderEpoch error) of partition 0 of `name`, as `user`."""
    conn = raw_login(broker, user)
    try:
        [(_, _, list_error, _)] = km.list_offsets(conn, [(name, 0)])
        r = conn.request(23, 2, km.Fields().array([  # OffsetForLeaderEpoch v2
            km.Fields().string(name).array([km.Fields().i32(0).i32(-1).i32(0)])]))  # fmt: skip
        r.i32()  # throttle time
        [[epoch_error]] = r.array(lambda t: (t.string(), t.array(lambda p: p.i16()))[1])
        return list_error, epoch_error
    finally:
        conn.close()


def test_offsets_of_a_view_need_the_view_acl(tenants):
    broker = tenants
    view_of_a_orders(broker)
    # A TOPIC grant that happens to carry the view's name discloses nothing.
    grant(broker, "attacker", "topic", "a-view", "describe,read")
    assert offsets_as(broker, "attacker", "a-view") == (TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED)
    # A VIEW-only reader may list offsets, so auto.offset.reset works for it.
    grant(broker, "tenant-b", "view", "a-view", "read")
    assert offsets_as(broker, "tenant-b", "a-view") == (0, 0)
    c = Consumer({**kafka_conf(broker, "tenant-b"), "group.id": "b-view-reader", "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})  # fmt: skip
    try:
        c.subscribe(["a-view"])
        got = []
        while True:
            m = c.poll(TIMEOUT_S)
            assert m is not None, f"no end of a-view after {got}"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break
            got.append(m.offset())
        assert got == [0, 1, 2]
    finally:
        c.close()


def test_a_plugins_log_needs_alter_on_it(tenants):
    broker = tenants
    view_of_a_orders(broker)
    grant(broker, "tenant-b", "plugin", "a-filter", "describe")
    status, body = admin_call(broker, "tenant-b", "GET", "/v1/plugins/a-filter")
    assert status == 200 and body["name"] == "a-filter", body
    status, body = admin_call(broker, "tenant-b", "GET", "/v1/plugins/a-filter/logs")
    assert status == 403 and "ALTER on PLUGIN" in body["error"], (status, body)
    assert admin_call(broker, "tenant-a", "GET", "/v1/plugins/a-filter/logs")[0] == 200


def test_names_that_differ_only_in_dot_and_underscore_collide(tenants):
    broker = tenants
    create_topics(broker, "tenant-a", "a.metrics")
    admin = AdminClient(kafka_conf(broker, "tenant-a"))
    try:
        admin.create_topics([NewTopic("a_metrics", 1, 1)])["a_metrics"].result(timeout=TIMEOUT_S)
        raise AssertionError("a_metrics was created beside a.metrics")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.TOPIC_EXCEPTION, e
        assert "collides with existing topic: a.metrics" in e.args[0].str(), e
    status, body = admin_call(broker, "tenant-a", "POST", "/v1/topics", {"name": "a_metrics"})
    assert status == 400 and "collides" in str(body), (status, body)
    # A view's name collides the same way.
    view_of_a_orders(broker)
    status, body = admin_call(broker, "tenant-a", "POST", "/v1/views", {
        "name": "a-v.x", "source": "a-orders",
        "stages": [{"plugin": "a-filter", "params": {"field": "$.region", "op": "==", "value": "eu"}}],
    })  # fmt: skip
    assert status == 201, body
    status, body = admin_call(broker, "tenant-a", "POST", "/v1/topics", {"name": "a-v_x"})
    assert status == 400 and "collides with existing topic: a-v.x" in str(body), (status, body)
