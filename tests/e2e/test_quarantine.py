"""Startup never depends on one bad topic: damaged topics are quarantined, the rest serve.

Covers (docs/durability.md, "Quarantined topics"): a broker stopped cleanly has three of its
topics damaged on disk (a garbage `topic.json`; `"partitions": -1`; one partition whose
segment file is replaced by a directory) and a persisted view over a damaged topic, then
starts on the same data dir. It starts; the healthy topic and the healthy partition of the
damaged one still consume their records and take new ones (confluent-kafka); the damaged
ones are listed in Metadata with leader -1 and LEADER_NOT_AVAILABLE, Produce/Fetch to them
get KAFKA_STORAGE_ERROR and CreateTopics of their names TOPIC_ALREADY_EXISTS (raw wire);
`sluice topic list|describe` and `GET /v1/topics/{name}` report them offline with a reason
naming the damaged path; `/metrics` counts them; every damaged file and directory is
byte-identical after the start; and deleting them (DeleteTopics, the CLI, the admin API)
works, after which the names can be created again and the next start has none quarantined.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from confluent_kafka import KafkaError

import kafka_messages as km
import kafka_wire as kw
from clients import Record, admin, admin_op, consume_partition, create_topic, produce_all, producer
from conftest import sluice_bin, wait_until
from kafka_wire import KafkaConnection

KAFKA_STORAGE_ERROR = 56
TOPIC_ALREADY_EXISTS = 36
RECORDS = 200
SEGMENT = "00000000000000000000.log"


def http(broker, method: str, path: str, body: dict | None = None) -> tuple[int, dict | str]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(broker.admin_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def gauge(broker, name: str) -> float:
    status, text = http(broker, "GET", "/metrics")
    assert status == 200, text
    lines = [line for line in text.splitlines() if line.startswith(name + " ")]
    assert len(lines) == 1, f"{name} not exposed once in /metrics"
    return float(lines[0].split()[1])


def sluice_json(broker, *args: str) -> dict:
    proc = subprocess.run(
        [sluice_bin(), *args, "--brokers", broker.bootstrap, "--output", "json"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"{args}: rc={proc.returncode} {proc.stderr.decode()}"
    return json.loads(proc.stdout)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under `root`, by relative path."""
    return {
        str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))
    } | {".": None}


def records(tag: str) -> list[Record]:
    return [Record(f"{tag}-k{i}".encode(), f"{tag}-v{i}".encode() * 5) for i in range(RECORDS)]


def assert_reads_back(bootstrap: str, topic: str, partition: int, sent: list[Record]):
    got = consume_partition(bootstrap, topic, partition, len(sent))
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (i, r.key, r.value) for i, r in enumerate(sent)
    ], f"{topic}-{partition} changed"


def test_damaged_topics_are_quarantined_and_the_rest_serve(broker, topic_name):
    good, garbage, negative, segment = (f"{topic_name}-{s}" for s in ("good", "garbage", "negative", "segment"))
    for name in (good, garbage, negative, segment):
        create_topic(broker.bootstrap, name, partitions=2)
    sent = {}
    p = producer(broker.bootstrap)
    for name in (good, garbage, negative, segment):
        for partition in (0, 1):
            sent[name, partition] = records(f"{name}-{partition}")
            produce_all(p, name, sent[name, partition], partition=partition)
    broker.stop()

    topics = broker.data_dir / "topics"
    (topics / garbage / "topic.json").write_bytes(b"{\"name\": \x00 not json")
    meta = json.loads((topics / negative / "topic.json").read_text())
    meta["partitions"] = -1
    (topics / negative / "topic.json").write_text(json.dumps(meta))
    bad_segment = topics / segment / "1" / SEGMENT
    bad_segment.unlink()
    bad_segment.mkdir()
    (bad_segment / "not-a-segment").write_bytes(b"x")
    view = f"{garbage}-view"
    view_file = broker.data_dir / "views" / f"{view}.json"
    view_file.write_text(json.dumps({"name": view, "source": garbage, "stages": [{"plugin": "absent"}]}))
    damaged = {name: topics / name for name in (garbage, negative)} | {segment: topics / segment / "1"}
    before = {name: snapshot(path) for name, path in damaged.items()} | {"topic.json": (topics / segment / "topic.json").read_bytes()}

    broker.start()

    # The healthy topic and the healthy partition serve, with their data, and take more.
    for partition in (0, 1):
        assert_reads_back(broker.bootstrap, good, partition, sent[good, partition])
    assert_reads_back(broker.bootstrap, segment, 0, sent[segment, 0])
    more = records("after")
    delivered = produce_all(producer(broker.bootstrap), good, more, partition=1)
    assert [d.offset for d in delivered] == list(range(RECORDS, 2 * RECORDS))
    produce_all(producer(broker.bootstrap), segment, more[:10], partition=0)

    # Metadata: offline partitions have no leader.
    listed = admin(broker.bootstrap).list_topics(timeout=30).topics
    for name, offline in ((garbage, [0, 1]), (negative, [0, 1]), (segment, [1])):
        parts = listed[name].partitions
        assert sorted(parts) == [0, 1], f"{name}: {sorted(parts)}"
        for i in offline:
            assert parts[i].leader == -1, f"{name}-{i} has leader {parts[i].leader}"
            assert parts[i].error.code() == KafkaError.LEADER_NOT_AVAILABLE, f"{name}-{i}: {parts[i].error}"
    assert listed[segment].partitions[0].leader == 0 and listed[segment].partitions[0].error is None

    # Produce/Fetch: KAFKA_STORAGE_ERROR; CreateTopics: the name is taken.
    with KafkaConnection(broker.bootstrap) as conn:
        for name, partition in ((garbage, 0), (negative, 1), (segment, 1)):
            produced = conn.produce(name, partition, kw.record_batch([b"lost?"]))
            assert produced.error_code == KAFKA_STORAGE_ERROR, f"produce {name}-{partition}: {produced}"
            fetched = conn.fetch(name, partition, 0)
            assert fetched.error_code == KAFKA_STORAGE_ERROR, f"fetch {name}-{partition}: {fetched}"
        created = km.create_topics(conn, [(garbage, 1), (segment, 1)])
        assert {n: c for n, (c, _) in created.items()} == {garbage: TOPIC_ALREADY_EXISTS, segment: TOPIC_ALREADY_EXISTS}

    # The CLI and the admin API say which topic is offline and why, naming the path.
    expected_path = {
        garbage: str(topics / garbage / "topic.json"),
        negative: str(topics / negative / "topic.json"),
        segment: str(bad_segment),
    }
    listed_cli = {t["topic"]: t for t in sluice_json(broker, "topic", "list")["topics"]}
    assert listed_cli[good] == {"topic": good, "partitions": 2}, "healthy rows are unchanged"
    for name, path in expected_path.items():
        assert listed_cli[name]["online"] is False, listed_cli[name]
        assert path in listed_cli[name]["error"], listed_cli[name]
        described = sluice_json(broker, "topic", "describe", name)
        assert described["online"] is False and path in described["error"], described
        status, shown = http(broker, "GET", f"/v1/topics/{name}")
        assert status == 200 and shown["online"] is False and path in shown["error"], shown
    assert "-1 partitions" in listed_cli[negative]["error"]
    described = sluice_json(broker, "topic", "describe", segment)
    rows = {r["partition"]: r for r in described["partitions"]}
    assert rows[0]["error"] is None and rows[0]["log_end_offset"] == RECORDS + 10
    assert rows[1]["error"] == "LeaderNotAvailable" and rows[1]["log_end_offset"] is None
    status, shown = http(broker, "GET", f"/v1/topics/{segment}")
    assert [p.get("error") is None for p in shown["partitions"]] == [True, False], shown
    assert gauge(broker, "sluice_topics_quarantined") == 3
    assert gauge(broker, "sluice_partitions_offline") == 5
    assert str(bad_segment) in broker.log_path.read_text()

    # Nothing damaged was touched by the start or by the refused requests.
    after = {name: snapshot(path) for name, path in damaged.items()} | {"topic.json": (topics / segment / "topic.json").read_bytes()}
    assert after == before
    assert view_file.exists()

    # The way out: delete them by each of the three paths; as for any topic, its views go with it.
    status, body = http(broker, "DELETE", f"/v1/topics/{garbage}")
    assert status == 200 and body["views_deleted"] == [view], body
    assert not view_file.exists()
    assert http(broker, "GET", f"/v1/views/{view}")[0] == 404
    assert admin_op(broker.bootstrap, "delete_topics", [negative]) == {negative: None}
    assert sluice_json(broker, "topic", "delete", segment)["deleted"][0]["topic"] == segment
    for name in (garbage, negative, segment):
        wait_until(lambda n=name: not (topics / n).exists(), 30, f"{name}'s directory to be removed")
    assert gauge(broker, "sluice_topics_quarantined") == 0
    create_topic(broker.bootstrap, garbage, partitions=1)
    produce_all(producer(broker.bootstrap), garbage, more[:5])
    assert_reads_back(broker.bootstrap, garbage, 0, more[:5])

    broker.restart()
    assert gauge(broker, "sluice_topics_quarantined") == 0
    assert_reads_back(broker.bootstrap, good, 1, sent[good, 1] + more)
    assert_reads_back(broker.bootstrap, garbage, 0, more[:5])
