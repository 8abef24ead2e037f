"""The `sluice` operator CLI end to end against a real broker, as scripts use it.

Each command runs as a subprocess with `--output json` and the test parses what it prints:
topic create/list/describe/delete, produce (stdin and --file, keys, headers, compression),
consume (offsets, timestamps, -n, --group, -f templates, --grep), cluster info, and the
exit codes (1 operation failed, 2 usage, 3 no broker). Records produced by the CLI are read
back with confluent-kafka and vice versa, so the CLI and real clients agree on the wire.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request

from confluent_kafka import Consumer, Producer

import kafka_messages as km
from conftest import sluice_bin
from kafka_wire import KafkaConnection


def sluice(broker, *args: str, stdin: bytes = b"", check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sluice_bin(), *args, "--brokers", broker.bootstrap],
        input=stdin,
        capture_output=True,
        timeout=60,
    )
    if check:
        assert proc.returncode == 0, f"{args}: rc={proc.returncode} {proc.stderr.decode()}"
    return proc


def sluice_json(broker, *args: str, stdin: bytes = b""):
    return json.loads(sluice(broker, *args, "--output", "json", stdin=stdin).stdout)


def consume_json(broker, *args: str) -> list[dict]:
    out = sluice(broker, "consume", *args, "--output", "json").stdout.decode()
    return [json.loads(line) for line in out.splitlines()]


def test_topic_lifecycle(broker, topic_name):
    created = sluice_json(broker, "topic", "create", topic_name, "-p", "4", "-c", "retention.ms=600000")
    assert created["created"][0]["topic"] == topic_name
    topics = sluice_json(broker, "topic", "list")["topics"]
    assert {"topic": topic_name, "partitions": 4} in topics
    described = sluice_json(broker, "topic", "describe", topic_name)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2, 3]
    assert described["configs"]["retention.ms"] == {"value": "600000", "default": False}
    assert described["configs"]["cleanup.policy"]["default"] is True

    again = sluice(broker, "topic", "create", topic_name, check=False)
    assert again.returncode == 1
    assert "TopicAlreadyExists" in again.stderr.decode()

    sluice_json(broker, "topic", "delete", topic_name)
    assert topic_name not in [t["topic"] for t in sluice_json(broker, "topic", "list")["topics"]]


def test_produce_stdin_and_file_then_read_with_confluent_kafka(broker, topic_name, tmp_path):
    sluice(broker, "topic", "create", topic_name, "-p", "3")
    lines = "".join(f"user{i % 7}|payload {i}\n" for i in range(300)).encode()
    summary = sluice_json(broker, "produce", topic_name, "-K", "|", "-H", "origin=cli", "-z", "gzip", stdin=lines)
    assert summary["records"] == 300
    path = tmp_path / "more.txt"
    path.write_text("".join(f"file {i}\n" for i in range(200)))
    summary = sluice_json(broker, "produce", topic_name, "--file", str(path), "-z", "snappy")
    assert summary["records"] == 200
    assert summary["records_per_second"] > 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verify", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    seen = []
    try:
        while len(seen) < 500:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(seen)} records arrived"
            assert msg.error() is None, msg.error()
            seen.append(msg)
    finally:
        consumer.close()
    keyed = [m for m in seen if m.key() is not None]
    assert len(keyed) == 300
    assert all(dict(m.headers())["origin"] == b"cli" for m in keyed)
    # One partition per key: the CLI partitions keyed records like the Java client (murmur2).
    by_key = {}
    for m in keyed:
        by_key.setdefault(m.key(), set()).add(m.partition())
    assert all(len(parts) == 1 for parts in by_key.values())


def test_consume_records_from_confluent_kafka(broker, topic_name):
    sluice(broker, "topic", "create", topic_name, "-p", "1")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4"})
    for i in range(50):
        producer.produce(topic_name, key=f"k{i}", value=f"v{i}", headers=[("h", b"x")])
    assert producer.flush(30) == 0

    records = consume_json(broker, topic_name, "-e")
    assert [r["value"] for r in records] == [f"v{i}" for i in range(50)]
    assert records[3] | {"timestamp": 0} == {
        "topic": topic_name,
        "partition": 0,
        "offset": 3,
        "timestamp": 0,
        "key": "k3",
        "value": "v3",
        "headers": {"h": "x"},
    }
    assert [r["offset"] for r in consume_json(broker, topic_name, "-o", "45", "-e")] == [45, 46, 47, 48, 49]
    assert len(consume_json(broker, topic_name, "-n", "5")) == 5
    start = records[10]["timestamp"]
    assert consume_json(broker, topic_name, "--from-timestamp", str(start), "-n", "1")[0]["offset"] <= 10

    text = sluice(broker, "consume", topic_name, "-e", "--grep", "v4", "-f", "%p:%o %k=%s %h\\n").stdout.decode()
    assert text.splitlines()[:2] == ["0:4 k4=v4 h=x", "0:40 k40=v40 h=x"]


def test_consume_with_a_group_resumes_and_shows_in_group_describe(broker, topic_name):
    sluice(broker, "topic", "create", topic_name, "-p", "2")
    sluice(broker, "produce", topic_name, stdin="".join(f"r{i}\n" for i in range(40)).encode())
    first = consume_json(broker, topic_name, "-g", "cli-readers", "-n", "15")
    assert len(first) == 15
    group = sluice_json(broker, "group", "describe", "cli-readers")
    assert sum(o["lag"] for o in group["offsets"]) == 25, group
    rest = consume_json(broker, topic_name, "-g", "cli-readers", "-e")
    assert len(rest) == 25
    assert {(r["partition"], r["offset"]) for r in first}.isdisjoint({(r["partition"], r["offset"]) for r in rest})


def test_group_list_and_describe_show_a_consumer_protocol_group(broker, topic_name):
    sluice(broker, "topic", "create", topic_name, "-p", "3")
    with KafkaConnection(broker.bootstrap) as conn:
        error, member_id, epoch = km.consumer_group_join(conn, f"{topic_name}-848", topic_name)
        assert (error, epoch) == (0, 1), (error, member_id, epoch)
        listed = {g["group"]: g for g in sluice_json(broker, "group", "list")["groups"]}
        assert listed[f"{topic_name}-848"] == {
            "group": f"{topic_name}-848", "type": "consumer", "protocol_type": "consumer", "state": "Stable", "members": 1,
        }  # fmt: skip
        described = sluice_json(broker, "group", "describe", f"{topic_name}-848")
        assert (described["type"], described["protocol"]) == ("consumer", "uniform")
        [member] = described["members"]
        assert member["member_id"] == member_id and member["member_epoch"] == 1
        assert sorted(a["partition"] for a in member["assignment"]) == [0, 1, 2]
        with urllib.request.urlopen(f"{broker.admin_url}/v1/groups/{topic_name}-848") as answer:
            admin = json.load(answer)
        assert (admin["type"], admin["state"], admin["group_epoch"]) == ("consumer", "Stable", 1)
        assert sorted(a["partition"] for a in admin["members"][0]["assignment"]) == [0, 1, 2]


def test_cluster_info(broker):
    info = sluice_json(broker, "cluster", "info")
    assert info["cluster_id"]
    assert info["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": broker.port}]
    apis = {a["api"] for a in info["apis"]}
    assert {"Produce", "Fetch", "Metadata", "JoinGroup"} <= apis


def test_exit_codes_and_errors_that_say_what_to_do(broker, topic_name):
    missing = sluice(broker, "consume", topic_name, "-e", check=False)
    assert missing.returncode == 1
    assert f"sluice topic create {topic_name}" in missing.stderr.decode()
    usage = sluice(broker, "topic", "create", check=False)
    assert usage.returncode == 2
    nobody = subprocess.run(
        [sluice_bin(), "topic", "list", "--brokers", "127.0.0.1:1"], capture_output=True, timeout=60
    )
    assert nobody.returncode == 3
    assert "sluice serve" in nobody.stderr.decode()


def test_alter_config_survives_restart_and_matches_confluent_kafka(broker, topic_name):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    sluice(broker, "topic", "create", topic_name, "-c", "retention.ms=3600000")
    sluice_json(broker, "topic", "alter-config", topic_name, "--set", "retention.bytes=1048576")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    broker.restart()
    configs = sluice_json(broker, "topic", "describe", topic_name)["configs"]
    assert configs["retention.bytes"] == {"value": "1048576", "default": False}
    assert configs["retention.ms"]["default"] is True
