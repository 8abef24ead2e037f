"""Client telemetry (KIP-714) with Apache Kafka's Java client 4.4.0, unchanged: its producers
and consumers find GetTelemetrySubscriptions and PushTelemetry in ApiVersions, subscribe,
push their metrics (OTLP, compressed) every `client.telemetry.push.interval.ms` and once more
as they close; the broker shows each client instance in `GET /v1/clients` and its metrics on
`/metrics` (`sluice_client_metric`). On the wire: a push for an instance nobody subscribed is
UNKNOWN_SUBSCRIPTION_ID, and a second subscription request within the push interval is
throttled.
"""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import wait_until
from confluent_kafka import Producer
from java_support import java_classpath, run_driver
from test_metrics import http, scrape

import kafka_wire as kw
from kafka_wire import Fields, KafkaConnection

GET_TELEMETRY_SUBSCRIPTIONS = 71
PUSH_TELEMETRY = 72
UNKNOWN_SUBSCRIPTION_ID = 117
THROTTLING_QUOTA_EXCEEDED = 89


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_classpath()


def clients(broker) -> list[dict]:
    status, body = http(broker, "GET", "/v1/clients")
    assert status == 200, body
    return json.loads(body)["clients"]


def metric_names(broker) -> set[str]:
    samples = scrape(broker)
    return {key.split('metric="', 1)[1].split('"', 1)[0] for key in samples if key.startswith("sluice_client_metric{")}


def test_java_clients_push_their_metrics_and_the_broker_shows_them(broker_factory, topic_name, classpath):
    broker = broker_factory({"client.telemetry.push.interval.ms": "1000"})
    result = run_driver(classpath, "codecs", broker.bootstrap, topic_name, "--records", "50")
    assert all(r["consumed"] == 50 for r in result.values()), result

    # Every Java consumer subscribed and said goodbye with a last push as it closed.
    consumers = [c for c in clients(broker) if c["client_id"].startswith("consumer-")]
    assert len(consumers) == len(result), clients(broker)
    assert all(c["pushes"] >= 1 and c["terminated"] for c in consumers), consumers
    assert {c["principal"] for c in consumers} == {"User:ANONYMOUS"}
    assert any(n.startswith("org.apache.kafka.consumer.") for n in metric_names(broker))
    pushed = consumers

    one = pushed[0]["client_instance_id"]
    status, body = http(broker, "GET", f"/v1/clients/{one}")
    assert status == 200, body
    described = json.loads(body)
    assert described["metrics"] and all("name" in m and "value" in m for m in described["metrics"])
    assert http(broker, "GET", f"/v1/clients/{uuid.uuid4()}")[0] == 404


def test_a_librdkafka_producer_pushes_while_it_runs(broker_factory, topic_name):
    broker = broker_factory({"client.telemetry.push.interval.ms": "1000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-producer"})

    def pushed() -> bool:
        producer.produce(topic_name, b"v")
        producer.poll(0.1)
        return any(c["client_id"] == "telemetry-producer" and c["pushes"] >= 2 for c in clients(broker))

    wait_until(pushed, 60, "two pushes from the librdkafka producer")
    producer.flush(10)
    assert any(n.startswith("org.apache.kafka.producer.") for n in metric_names(broker)), metric_names(broker)


def get_subscriptions(conn: KafkaConnection, instance: bytes) -> tuple[int, bytes, int, int]:
    r = conn.request(GET_TELEMETRY_SUBSCRIPTIONS, 0, Fields().uuid(instance).tagged_fields())
    r.skip_tagged_fields()
    r.i32()  # throttle
    error = r.i16()
    assigned = r.take(16)
    subscription = r.i32()
    r.compact_array(lambda x: x.i8())
    interval = r.i32()
    return error, assigned, subscription, interval


def test_pushes_and_subscriptions_are_checked_on_the_wire(broker_factory):
    broker = broker_factory({"client.telemetry.push.interval.ms": "60000"})
    with KafkaConnection(broker.bootstrap) as conn:
        error, assigned, subscription, interval = get_subscriptions(conn, bytes(16))
        assert (error, interval) == (kw.NONE, 60000)
        assert assigned != bytes(16)
        # Again at once: within the push interval.
        assert get_subscriptions(conn, assigned)[0] == THROTTLING_QUOTA_EXCEEDED

        def push(instance: bytes, sub: int) -> int:
            body = Fields().uuid(instance).i32(sub).bool(False).i8(0).compact_bytes(b"").tagged_fields()
            r = conn.request(PUSH_TELEMETRY, 0, body)
            r.skip_tagged_fields()
            r.i32()
            return r.i16()

        assert push(uuid.uuid4().bytes, subscription) == UNKNOWN_SUBSCRIPTION_ID
        assert push(assigned, subscription + 1) == UNKNOWN_SUBSCRIPTION_ID
        assert push(assigned, subscription) == kw.NONE  # an empty MetricsData
