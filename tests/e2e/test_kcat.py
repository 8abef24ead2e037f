"""kcat (Debian's kcat 1.7.1 on librdkafka 2.0.2) against a real broker.

Covers: metadata listing (`-L`, `-L -J`), producing lines with keys (`-P -K:`), headers and
each compression codec (`-z`: librdkafka 2.0.2 compresses only if the broker advertises
Produce v0, see KAFKA-18659),
consuming them back with offsets, keys, timestamps and headers (`-C -e -f ...`, `-J`), offset
queries (`-Q -t topic:partition:timestamp` with -1/-2 and a real timestamp), and `-o`
beginning/end/absolute/relative starts. Topics are auto-created by the producer (the broker
default), with `num.partitions` set so the partition count is ours, not a guess.

Each kcat call runs as a subprocess with a timeout; its exit code and output are asserted.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

import kafka_wire as kw
from kafka_wire import KafkaConnection

KCAT_TIMEOUT_S = 60
PARTITIONS = 3


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    kcat_bin = shutil.which("kcat")
    assert kcat_bin, "kcat is not installed (tests/run installs it)"
    proc = subprocess.run(
        [kcat_bin, "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=KCAT_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def produce_lines(bootstrap: str, topic: str, partition: int, lines: list[str], *extra: str):
    kcat(bootstrap, "-P", "-t", topic, "-p", str(partition), "-K:", *extra, stdin="\n".join(lines) + "\n")


def consume(bootstrap: str, topic: str, partition: int, *args: str, fmt: str = "%o|%k|%s\\n") -> list[str]:
    out = kcat(bootstrap, "-C", "-q", "-t", topic, "-p", str(partition), "-e", "-f", fmt, *args)
    return out.splitlines()


def query_offset(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    out = kcat(bootstrap, "-Q", "-t", f"{topic}:{partition}:{timestamp}")
    match = re.search(rf"^{re.escape(topic)} \[{partition}\] offset (-?\d+)$", out, re.M)
    assert match, f"unexpected -Q output: {out!r}"
    return int(match.group(1))


@pytest.fixture
def kbroker(broker_factory):
    return broker_factory({"num.partitions": str(PARTITIONS)})


@pytest.fixture
def filled_topic(kbroker, topic_name):
    """Ten keyed records on partition 1 of an auto-created topic."""
    lines = [f"key-{i}:value-{i}" for i in range(10)]
    produce_lines(kbroker.bootstrap, topic_name, 1, lines)
    return topic_name


def test_metadata_listing_text(kbroker, filled_topic):
    out = kcat(kbroker.bootstrap, "-L")
    assert re.search(r"^ 1 brokers:$", out, re.M), out
    assert re.search(rf"broker \d+ at 127\.0\.0\.1:{kbroker.port}\b", out), out
    assert f'topic "{filled_topic}" with {PARTITIONS} partitions:' in out, out
    for p in range(PARTITIONS):
        assert re.search(rf"partition {p}, leader \d+, replicas: \d+, isrs: \d+", out), out


def test_metadata_listing_json(kbroker, filled_topic):
    meta = json.loads(kcat(kbroker.bootstrap, "-L", "-J"))
    assert [b["name"] for b in meta["brokers"]] == [f"127.0.0.1:{kbroker.port}"]
    broker_id = meta["brokers"][0]["id"]
    assert meta["controllerid"] == broker_id
    topics = {t["topic"]: t for t in meta["topics"]}
    assert filled_topic in topics
    partitions = topics[filled_topic]["partitions"]
    assert sorted(p["partition"] for p in partitions) == list(range(PARTITIONS))
    for p in partitions:
        assert p["leader"] == broker_id
        assert [r["id"] for r in p["replicas"]] == [broker_id]
        assert [r["id"] for r in p["isrs"]] == [broker_id]


def test_metadata_for_one_topic(kbroker, filled_topic):
    meta = json.loads(kcat(kbroker.bootstrap, "-L", "-J", "-t", filled_topic))
    assert [t["topic"] for t in meta["topics"]] == [filled_topic]
    assert "error" not in meta["topics"][0], meta


def test_produce_keys_and_consume_with_offsets(kbroker, filled_topic):
    rows = consume(kbroker.bootstrap, filled_topic, 1, "-o", "beginning")
    assert rows == [f"{i}|key-{i}|value-{i}" for i in range(10)]
    # Other partitions got nothing.
    assert consume(kbroker.bootstrap, filled_topic, 0, "-o", "beginning") == []


def test_consume_start_offsets(kbroker, filled_topic):
    bootstrap = kbroker.bootstrap
    assert consume(bootstrap, filled_topic, 1, "-o", "end") == []
    assert consume(bootstrap, filled_topic, 1, "-o", "7") == [f"{i}|key-{i}|value-{i}" for i in (7, 8, 9)]
    assert consume(bootstrap, filled_topic, 1, "-o", "-2") == [f"{i}|key-{i}|value-{i}" for i in (8, 9)]
    assert consume(bootstrap, filled_topic, 1, "-o", "beginning", "-c", "3") == [
        f"{i}|key-{i}|value-{i}" for i in range(3)
    ]


CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_compressed_produce(kbroker, topic_name, codec):
    lines = [f"k{i}:{'repetitive payload ' * (i % 9)}{i}" for i in range(200)]
    produce_lines(kbroker.bootstrap, topic_name, 0, lines, "-z", codec)
    rows = consume(kbroker.bootstrap, topic_name, 0, "-o", "beginning")
    assert rows == [f"{i}|{line.replace(':', '|', 1)}" for i, line in enumerate(lines)]
    # kcat really compressed (librdkafka silently sends plain batches when its feature probe
    # of the broker's ApiVersions says the codec is unsupported), and the broker stored the
    # batches as sent. librdkafka may still send a batch plain when compressing it would not
    # shrink it, hence "some batch", not "every batch".
    with KafkaConnection(kbroker.bootstrap) as conn:
        fetched = conn.fetch(topic_name, 0, 0, version=11)
    codecs = kw.batch_compression_codecs(fetched.records)
    assert CODEC_IDS[codec] in codecs and set(codecs) <= {0, CODEC_IDS[codec]}, codecs


def test_appends_continue_after_existing_offsets(kbroker, filled_topic):
    produce_lines(kbroker.bootstrap, filled_topic, 1, ["late-a:A", "late-b:B"])
    assert consume(kbroker.bootstrap, filled_topic, 1, "-o", "10") == ["10|late-a|A", "11|late-b|B"]


def test_headers_timestamps_and_json_consume(kbroker, topic_name):
    before_ms = int(time.time() * 1000)
    produce_lines(kbroker.bootstrap, topic_name, 0, ["k:v"], "-H", "h1=one", "-H", "h2=two")
    after_ms = int(time.time() * 1000)
    out = kcat(kbroker.bootstrap, "-C", "-q", "-t", topic_name, "-p", "0", "-o", "beginning", "-e", "-J")
    messages = [json.loads(line) for line in out.splitlines()]
    assert len(messages) == 1, out
    msg = messages[0]
    assert (msg["topic"], msg["partition"], msg["offset"]) == (topic_name, 0, 0)
    assert (msg["key"], msg["payload"]) == ("k", "v")
    assert msg["headers"] == ["h1", "one", "h2", "two"]
    assert msg["tstype"] == "create"
    assert before_ms - 1000 <= msg["ts"] <= after_ms + 1000


def test_query_offsets_beginning_end_and_timestamp(kbroker, filled_topic):
    bootstrap = kbroker.bootstrap
    assert query_offset(bootstrap, filled_topic, 1, -2) == 0
    assert query_offset(bootstrap, filled_topic, 1, -1) == 10
    assert query_offset(bootstrap, filled_topic, 0, -1) == 0

    first_ts = [int(row) for row in consume(bootstrap, filled_topic, 1, "-o", "beginning", fmt="%T\\n")]
    assert len(first_ts) == 10
    boundary_ms = max(first_ts) + 1
    # Records produced from now on carry CreateTime >= boundary_ms.
    wait_for_clock_ms(boundary_ms)
    produce_lines(bootstrap, filled_topic, 1, ["new-0:n0", "new-1:n1"])
    assert query_offset(bootstrap, filled_topic, 1, boundary_ms) == 10
    assert query_offset(bootstrap, filled_topic, 1, min(first_ts)) == 0
    # Past the newest timestamp there is no such offset: Kafka answers -1.
    assert query_offset(bootstrap, filled_topic, 1, int(time.time() * 1000) + 3_600_000) == -1
    assert query_offset(bootstrap, filled_topic, 1, -1) == 12


def wait_for_clock_ms(target_ms: int, timeout_s: float = 5.0):
    deadline = time.monotonic() + timeout_s
    while int(time.time() * 1000) < target_ms:
        assert time.monotonic() < deadline, "wall clock did not advance"
        time.sleep(0.001)
