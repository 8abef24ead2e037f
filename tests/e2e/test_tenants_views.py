"""Multi-tenant authorization: views and transforms act for their owner (issue 35, finding 2).

`tenant-b` is granted READ on `tenant-a`'s topic `a-orders`, makes a view of it (`sluice view
create`) and a transform reading it into its own topic (`sluice transform deploy`), both
through its own filter plugin. When the grant is deleted, `tenant-a`'s new records flow
through neither: a confluent-kafka consumer of the view gets TOPIC_AUTHORIZATION_FAILED (as
does ListOffsets on it), the transform's output read read_committed stays as it was, and
its status (`sluice transform describe`, GET /v1/transforms/{name}) is `unauthorized`,
naming the right its owner lacks; the view's describe says why its fetches are refused. A
restart changes nothing. Granting the right again lets both resume by themselves, each
record through once.

`tenant-a` may delete its topic while they exist (DELETE on it is the only right needed),
but may not delete `tenant-b`'s view or transform itself: deleting the topic removes the
view and the transform reading it, fails the transform writing it (naming the topic), writes
an audit line for each by `tenant-a`, and a topic made again under the name is never read
by them. A view file persisted before owners were recorded asks each reader's own READ on
the source (`tenant_support.py` has the broker and principals).
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import wait_until
from plugin_support import wasm
from tenant_support import (  # noqa: F401 (tenants is a fixture)
    TIMEOUT_S,
    admin_call,
    audit_lines,
    create_topics,
    grant,
    kafka_conf,
    revoke,
    sluice,
    tenants,
)
from test_tenants_smaller import TOPIC_AUTHORIZATION_FAILED, offsets_as

EU = ["--param", "field=$.region", "--param", "op===", "--param", "value=eu"]
POLL_S = 0.2


def eventually(predicate, what: str):
    """`wait_until` at a pace that suits predicates that log in or start a client."""
    return wait_until(predicate, TIMEOUT_S, what, interval_s=POLL_S)


def produce(broker, user: str, topic: str, numbers: range) -> None:
    p = Producer({**kafka_conf(broker, user), "acks": "all"})
    for n in numbers:
        p.produce(topic, value=json.dumps({"region": "eu", "n": n}).encode())
    assert p.flush(TIMEOUT_S) == 0


def numbers(messages) -> list[int]:
    return [json.loads(m.value())["n"] for m in messages]


def consumer(broker, user: str, group: str, **extra) -> Consumer:
    return Consumer({
        **kafka_conf(broker, user), "group.id": group, "auto.offset.reset": "earliest",
        "enable.partition.eof": True, **extra,
    })  # fmt: skip


def read_to_end(c: Consumer, what: str) -> tuple[list, list]:
    """(records, errors) polled until partition 0's end (or an error) is seen."""
    got, errors = [], []
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if not m.error():
            got.append(m)
        elif m.error().code() == KafkaError._PARTITION_EOF:
            return got, errors
        else:
            errors.append(m.error())
            return got, errors
    raise AssertionError(f"{what}: neither the end nor an error within {TIMEOUT_S}s ({numbers(got)})")


def output(broker) -> list[int]:
    """b-out as tenant-b reads it, read_committed, whole."""
    c = consumer(broker, "tenant-b", "b-out-reader", **{"isolation.level": "read_committed"})
    try:
        c.assign([TopicPartition("b-out", 0, 0)])
        got, errors = read_to_end(c, "b-out")
        assert errors == [], errors
        return numbers(got)
    finally:
        c.close()


def transform(broker, user: str = "tenant-b", name: str = "b-copy") -> dict:
    status, body = admin_call(broker, user, "GET", f"/v1/transforms/{name}")
    assert status == 200, (status, body)
    return body


def view_and_transform_of_a_orders(broker) -> None:
    """a-orders (tenant-a's, records 0-2), READ on it granted to tenant-b, and tenant-b's
    view b-view and transform b-copy (into b-out) of it through tenant-b's plugin b-filter."""
    create_topics(broker, "tenant-a", "a-orders")
    produce(broker, "tenant-a", "a-orders", range(3))
    create_topics(broker, "tenant-b", "b-out")
    assert admin_call(broker, "tenant-b", "PUT", "/v1/plugins/b-filter", raw=wasm("json-filter"))[0] == 200
    grant(broker, "tenant-b", "topic", "a-orders", "read")
    sluice(broker, "tenant-b", "view", "create", "b-view", "--from", "a-orders", "--filter", "b-filter", *EU)
    sluice(broker, "tenant-b", "transform", "deploy", "b-copy", "--from", "a-orders", "--plugin", "b-filter",
           "--to", "b-out", *EU)  # fmt: skip
    eventually(lambda: output(broker) == [0, 1, 2], "the transform's first output")


def test_a_revoked_grant_stops_the_view_and_the_transform_until_it_is_granted_again(tenants):
    broker = tenants
    view_and_transform_of_a_orders(broker)
    reader = consumer(broker, "tenant-b", "b-view-reader")
    reader.subscribe(["b-view"])
    got, errors = read_to_end(reader, "b-view")
    assert (numbers(got), errors) == ([0, 1, 2], [])
    reader.commit(asynchronous=False)

    revoke(broker, "tenant-b", "topic", "a-orders", "read")
    # tenant-b's own reads of a-orders are refused...
    direct = consumer(broker, "tenant-b", "b-direct")
    direct.subscribe(["a-orders"])
    got, errors = read_to_end(direct, "a-orders as tenant-b")
    direct.close()
    assert got == [] and [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    # ...and so are its reads through the view and the transform, from now on.
    state = eventually(lambda: (t := transform(broker))["state"] == "unauthorized" and t, "b-copy to stop")
    assert 'READ on TOPIC "a-orders"' in state["reason"] and "User:tenant-b" in state["reason"], state
    produce(broker, "tenant-a", "a-orders", range(3, 5))
    check_refused(broker, reader)

    # A restart: the owners are persisted, the checks hold.
    reader.close()
    broker.restart()
    reader = consumer(broker, "tenant-b", "b-view-reader")
    reader.subscribe(["b-view"])
    eventually(lambda: transform(broker)["state"] == "unauthorized", "b-copy to stop after the restart")
    check_refused(broker, reader)

    # The grant again: both resume by themselves, each record through once.
    grant(broker, "tenant-b", "topic", "a-orders", "read")
    eventually(lambda: output(broker) == [0, 1, 2, 3, 4], "b-copy to resume")
    resumed = transform(broker)
    assert resumed["state"] == "running" and resumed["reason"] is None, resumed
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < 2:
        assert time.monotonic() < deadline, f"b-view after the grant: only {numbers(got)}"
        # Errors the consumer met before the grant may still be in its queue.
        more, errors = read_to_end(reader, "b-view after the grant")
        assert all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors), errors
        got += more
    assert numbers(got) == [3, 4]
    reader.close()
    status, body = admin_call(broker, "tenant-b", "GET", "/v1/views/b-view")
    assert status == 200 and body["refused"] is None and body["owner"] == "User:tenant-b", body


def check_refused(broker, reader: Consumer) -> None:
    """tenant-a's records 3 and 4 reach neither the view's reader nor the transform's output,
    and both say why."""
    got, errors = read_to_end(reader, "b-view after the revocation")
    assert got == [] and [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], (numbers(got), errors)
    assert offsets_as(broker, "tenant-b", "b-view") == (TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED)
    status, body = admin_call(broker, "tenant-b", "GET", "/v1/views/b-view")
    assert status == 200 and 'READ on TOPIC "a-orders"' in body["refused"], body
    described = sluice(broker, "tenant-b", "view", "describe", "b-view").stdout
    assert "fetches refused" in described and "a-orders" in described, described
    # The transform is stopped with its source's new records unread: lag, no output.
    stopped = eventually(lambda: (t := transform(broker))["lag"] == 2 and t, "the new records as lag")
    assert stopped["state"] == "unauthorized", stopped
    assert [p["state"] for p in stopped["partitions"]] == ["unauthorized"], stopped
    assert output(broker) == [0, 1, 2]
    text = sluice(broker, "tenant-b", "transform", "describe", "b-copy").stdout
    assert "unauthorized" in text and 'lacks READ on TOPIC "a-orders"' in text, text
    metrics = sluice_metrics(broker)
    assert 'sluice_transform_partitions{transform="b-copy",state="unauthorized"} 1' in metrics, metrics


def sluice_metrics(broker) -> str:
    status, text = admin_call(broker, "admin", "GET", "/metrics")
    assert status == 200, text
    return text


def test_the_owner_deletes_its_topic_and_the_views_and_transforms_over_it_go(tenants):
    broker = tenants
    view_and_transform_of_a_orders(broker)
    # tenant-a's own transform writing into a-orders, from a-events.
    create_topics(broker, "tenant-a", "a-events")
    assert admin_call(broker, "tenant-a", "PUT", "/v1/plugins/a-filter", raw=wasm("json-filter"))[0] == 200
    sluice(broker, "tenant-a", "transform", "deploy", "a-mirror", "--from", "a-events", "--plugin", "a-filter",
           "--to", "a-orders", *EU)  # fmt: skip

    # tenant-a may not delete tenant-b's view or transform itself.
    for path in ["/v1/views/b-view", "/v1/transforms/b-copy"]:
        status, body = admin_call(broker, "tenant-a", "DELETE", path)
        assert status == 403, (path, status, body)
    refused = sluice(broker, "tenant-a", "view", "delete", "b-view", check=False)
    assert refused.returncode != 0 and "DELETE on VIEW" in refused.stderr, refused.stderr

    # Deleting its topic needs only DELETE on it, over the Kafka protocol.
    admin = AdminClient(kafka_conf(broker, "tenant-a"))
    assert admin.delete_topics(["a-orders"], operation_timeout=30)["a-orders"].result(timeout=TIMEOUT_S) is None

    status, body = admin_call(broker, "tenant-b", "GET", "/v1/views/b-view")
    assert status == 404, body
    eventually(lambda: admin_call(broker, "tenant-b", "GET", "/v1/transforms/b-copy")[0] == 404, "b-copy removed")
    produce(broker, "tenant-a", "a-events", range(1))
    mirror = eventually(
        lambda: (t := transform(broker, "tenant-a", "a-mirror"))["state"] == "failed" and t, "a-mirror to fail"
    )
    assert '"a-orders"' in mirror["reason"] and "was deleted" in mirror["reason"], mirror
    audit = audit_lines(broker)
    by = "by User:tenant-a from 127.0.0.1: done"
    expected = [
        f"view.delete view b-view {by} (its source topic a-orders was deleted",
        f"transform.delete transform b-copy {by} (its source topic a-orders was deleted",
        f"transform.fail transform a-mirror {by} (topic a-orders, which it writes, was deleted",
    ]
    for line in expected:
        assert any(line in a for a in audit), (line, audit)

    # A topic made again under the name (tenant-b's literal READ grant still applies to it)
    # is never read by the old view or transform, also after a restart.
    create_topics(broker, "tenant-a", "a-orders")
    produce(broker, "tenant-a", "a-orders", range(100, 103))
    broker.restart()
    assert admin_call(broker, "tenant-b", "GET", "/v1/views/b-view")[0] == 404
    assert admin_call(broker, "tenant-b", "GET", "/v1/transforms/b-copy")[0] == 404
    status, body = admin_call(broker, "tenant-b", "GET", "/v1/views")
    assert status == 200 and body["views"] == [], body
    assert output(broker) == [0, 1, 2]


def test_a_view_persisted_before_owners_were_recorded_asks_each_readers_own_read(tenants):
    """The safe reading of an old view file (no `owner`): a reader needs READ on the source
    itself, so a VIEW grant alone shares nothing its holder could not read anyway."""
    broker = tenants
    create_topics(broker, "tenant-a", "a-orders")
    produce(broker, "tenant-a", "a-orders", range(3))
    assert admin_call(broker, "tenant-a", "PUT", "/v1/plugins/a-filter", raw=wasm("json-filter"))[0] == 200
    sluice(broker, "tenant-a", "view", "create", "a-old", "--from", "a-orders", "--filter", "a-filter", *EU)
    broker.stop()
    spec_file = broker.data_dir / "views" / "a-old.json"
    spec = json.loads(spec_file.read_text())
    assert (spec.pop("owner"), spec.pop("owner_host")) == ("User:tenant-a", "127.0.0.1"), spec
    spec_file.write_text(json.dumps(spec))
    broker.start()
    status, body = admin_call(broker, "tenant-a", "GET", "/v1/views/a-old")
    assert status == 200 and body["owner"] is None, body

    def read_as(user: str, group: str) -> tuple[list[int], list]:
        c = consumer(broker, user, group)
        c.subscribe(["a-old"])
        try:
            got, errors = read_to_end(c, f"a-old as {user}")
            return numbers(got), [e.code() for e in errors]
        finally:
            c.close()

    grant(broker, "tenant-b", "view", "a-old", "read")
    assert read_as("tenant-b", "b-old-reader") == ([], [KafkaError.TOPIC_AUTHORIZATION_FAILED])
    assert read_as("tenant-a", "a-old-reader") == ([0, 1, 2], [])
    grant(broker, "tenant-b", "topic", "a-orders", "read")
    assert read_as("tenant-b", "b-old-reader") == ([0, 1, 2], [])
