"""The admin HTTP API and `/metrics` after a known workload.

N records go in with confluent-kafka and come out with a confluent-kafka group consumer that
commits; then `/metrics` is scraped and parsed (Prometheus text format) and its counters must
match: records and bytes in and out per partition, log end offsets, segment bytes, produce and
fetch latency histograms, and the group's lag (0 once everything is committed, N after more
is produced). The same after the `sluice` CLI produces and reads a topic once: records and
bytes out equal records and bytes in exactly; the connections gauge follows raw connections
opened and closed. Also `/health`, `/ready`, the `/v1` topic and group resources, JSON errors, and
the bearer token.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request

from confluent_kafka import Consumer, Producer

from conftest import sluice_bin, wait_until

import kafka_wire as kw
from kafka_wire import KafkaConnection

DEADLINE_S = 30.0
# Label values are quoted and may hold any character (`}` too), with `\\`, `\"` and `\n` escaped.
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})? (\S+)$')


def http(broker, method: str, path: str, body: dict | None = None, token: str | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(broker.admin_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(broker) -> dict[str, float]:
    """Every sample of `/metrics`, keyed by `name{labels}` exactly as exposed."""
    status, text = http(broker, "GET", "/metrics")
    assert status == 200, text
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples


def test_metrics_match_a_known_workload(broker, topic_name):
    n_per_partition = 500
    status, body = http(broker, "POST", "/v1/topics", {"name": topic_name, "partitions": 2})
    assert status == 201, body
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for partition in (0, 1):
        for i in range(n_per_partition):
            producer.produce(topic_name, value=f"value-{partition}-{i}".encode(), partition=partition)
    assert producer.flush(DEADLINE_S) == 0

    group = f"{topic_name}-metrics"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic_name])
    consumed = 0
    try:
        while consumed < 2 * n_per_partition:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None, msg and msg.error()
            consumed += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    m = scrape(broker)
    for partition in (0, 1):
        labels = f'{{topic="{topic_name}",partition="{partition}"}}'
        size = m[f"sluice_partition_size_bytes{labels}"]
        assert m[f"sluice_partition_records_in_total{labels}"] == n_per_partition
        assert m[f"sluice_partition_log_end_offset{labels}"] == n_per_partition
        assert m[f"sluice_partition_log_start_offset{labels}"] == 0
        assert m[f"sluice_partition_bytes_in_total{labels}"] == size
        # Every record was fetched at least once (a consumer may re-fetch after a rebalance).
        assert m[f"sluice_partition_records_out_total{labels}"] >= n_per_partition
        assert m[f"sluice_partition_bytes_out_total{labels}"] >= size
        group_labels = f'{{group="{group}",topic="{topic_name}",partition="{partition}"}}'
        assert m[f"sluice_group_committed_offset{group_labels}"] == n_per_partition
        assert m[f"sluice_group_lag{group_labels}"] == 0
    for api in ("Produce", "Fetch", "Metadata", "OffsetCommit"):
        count = m[f'sluice_request_duration_seconds_count{{api="{api}"}}']
        assert count >= 1, api
        assert m[f'sluice_request_duration_seconds_bucket{{api="{api}",le="+Inf"}}'] == count
    assert m["sluice_connections_accepted_total"] >= 2

    # More records: the group's lag shows them.
    producer.produce(topic_name, value=b"late", partition=1)
    assert producer.flush(DEADLINE_S) == 0
    lag_labels = f'{{group="{group}",topic="{topic_name}",partition="1"}}'
    wait_until(lambda: scrape(broker)[f"sluice_group_lag{lag_labels}"] == 1, DEADLINE_S, "lag 1")
    status, body = http(broker, "GET", f"/v1/groups/{group}")
    assert status == 200, body
    described = json.loads(body)
    assert described["total_lag"] == 1
    assert {(o["partition"], o["committed_offset"]) for o in described["offsets"]} == {
        (0, n_per_partition),
        (1, n_per_partition),
    }


def test_metrics_after_the_cli_produces_and_consumes(broker, topic_name):
    def sluice(*args: str, stdin: bytes = b"") -> str:
        proc = subprocess.run(
            [sluice_bin(), *args, "--brokers", broker.bootstrap, "--output", "json"],
            input=stdin,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        return proc.stdout.decode()

    n = 250
    sluice("topic", "create", topic_name, "-p", "1")
    before = scrape(broker)
    summary = json.loads(sluice("produce", topic_name, stdin="".join(f"line {i}\n" for i in range(n)).encode()))
    assert summary["records"] == n
    assert len(sluice("consume", topic_name, "-e").splitlines()) == n
    m = scrape(broker)
    labels = f'{{topic="{topic_name}",partition="0"}}'
    size = m[f"sluice_partition_size_bytes{labels}"]
    assert m[f"sluice_partition_records_in_total{labels}"] == n
    assert m[f"sluice_partition_records_out_total{labels}"] == n
    assert m[f"sluice_partition_bytes_in_total{labels}"] == size
    assert m[f"sluice_partition_bytes_out_total{labels}"] == size
    assert m[f"sluice_partition_log_end_offset{labels}"] == n
    for api in ("Produce", "Fetch", "Metadata", "ListOffsets"):
        key = f'sluice_request_duration_seconds_count{{api="{api}"}}'
        assert m[key] > before[key], api
    # topic create, produce, consume: one connection each (the scrapes are HTTP).
    assert m["sluice_connections_accepted_total"] - before["sluice_connections_accepted_total"] >= 2


def test_connections_gauge_follows_open_connections(broker):
    base = scrape(broker)
    conns = [KafkaConnection(broker.bootstrap) for _ in range(5)]
    try:
        wait_until(
            lambda: scrape(broker)["sluice_connections_open"] == base["sluice_connections_open"] + 5,
            DEADLINE_S,
            "5 more open connections",
        )
        accepted = scrape(broker)["sluice_connections_accepted_total"]
        assert accepted == base["sluice_connections_accepted_total"] + 5
    finally:
        for c in conns:
            c.close()
    wait_until(
        lambda: scrape(broker)["sluice_connections_open"] == base["sluice_connections_open"],
        DEADLINE_S,
        "the connections to close",
    )


def test_admin_resources_health_and_errors(broker, topic_name):
    assert http(broker, "GET", "/health") == (200, '{"status":"ok"}')
    assert http(broker, "GET", "/ready")[0] == 200
    status, body = http(broker, "POST", "/v1/topics", {"name": topic_name, "configs": {"retention.ms": "nope"}})
    assert status == 400, body
    assert set(json.loads(body)) == {"error", "code"}
    status, body = http(broker, "POST", "/v1/topics", {"name": topic_name, "partitions": 3})
    assert status == 201, body
    status, body = http(broker, "GET", f"/v1/topics/{topic_name}")
    assert status == 200
    topic = json.loads(body)
    assert topic["partition_count"] == 3
    assert [p["log_end_offset"] for p in topic["partitions"]] == [0, 0, 0]
    status, body = http(broker, "GET", "/v1/topics")
    assert topic_name in [t["name"] for t in json.loads(body)["topics"]]
    assert http(broker, "DELETE", f"/v1/topics/{topic_name}")[0] == 200
    status, body = http(broker, "DELETE", f"/v1/topics/{topic_name}")
    assert status == 404
    assert json.loads(body)["code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    status, body = http(broker, "GET", "/v1/groups/nobody")
    assert status == 404, body
    assert json.loads(body)["code"] == "GROUP_ID_NOT_FOUND"


def test_bearer_token(broker_factory):
    broker = broker_factory(settings={"admin.token": "letmein"})
    assert http(broker, "GET", "/health")[0] == 200
    status, body = http(broker, "GET", "/metrics")
    assert status == 401
    assert json.loads(body)["code"] == "UNAUTHORIZED"
    assert http(broker, "GET", "/metrics", token="wrong")[0] == 401
    assert http(broker, "GET", "/metrics", token="letmein")[0] == 200


def test_client_software_gauge_counts_what_api_versions_named(broker):
    """KIP-511: a connection counts as unknown/unknown until an ApiVersions v3+ names its
    software; a name outside Kafka's pattern is INVALID_REQUEST and changes nothing."""
    label = 'sluice_client_software_connections{clientSoftwareName="%s",clientSoftwareVersion="%s"}'
    named = label % ("sluice-e2e", "4.4.0")

    def api_versions_v3(conn, name: str, version: str) -> int:
        body = kw.compact_string(name) + kw.compact_string(version) + kw.NO_TAGGED_FIELDS
        return conn.request(kw.API_API_VERSIONS, 3, body).i16()

    with KafkaConnection(broker.bootstrap) as conn:
        assert api_versions_v3(conn, "bad name", "1") == kw.INVALID_REQUEST
        assert api_versions_v3(conn, "sluice-e2e", "4.4.0") == kw.NONE
        wait_until(lambda: scrape(broker).get(named) == 1, DEADLINE_S, "the named connection counted")
    wait_until(lambda: named not in scrape(broker), DEADLINE_S, "the named connection uncounted")
