"""The file-descriptor budget (issue 38) against a real broker over TCP, its RLIMIT_NOFILE
lowered to 1,500 (soft and hard, through `prlimit`): CreateTopics fills the budget
(partitions x 1 + max.connections + sluice.segment.files.open.max + 256 reserved) and then
answers POLICY_VIOLATION naming sluice.partitions.max and the descriptor limit, creating
nothing; the broker still accepts max.connections connections; the first partition (many
sealed segments, read from offset 0 through a segment file cache of 8) and the last one
produce and fetch; a restart opens every partition and serves the same records; a limit
too low for the partitions on disk refuses to start, naming the keys.
"""

from __future__ import annotations

import re
from pathlib import Path

import kafka_messages as km
import kafka_wire as kw
import pytest
from conftest import Broker
from kafka_wire import KafkaConnection

NOFILE = 1500
CONNECTIONS = 200
SEGMENT_FILES = 8
RESERVED = 256  # BROKER_DESCRIPTORS_RESERVED
FIT = NOFILE - CONNECTIONS - SEGMENT_FILES - RESERVED  # one descriptor per partition
TOPIC_PARTITIONS = 50


class LimitedBroker(Broker):
    """A broker whose process starts under `prlimit --nofile=N:N`."""

    nofile = NOFILE

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--", *super().command()]


@pytest.fixture
def limited(tmp_path: Path):
    (tmp_path / "data").mkdir()
    settings = {
        "max.connections": str(CONNECTIONS),
        "sluice.segment.files.open.max": str(SEGMENT_FILES),
        "log.segment.bytes": "1024",  # the first partition rolls many segments
        "auto.create.topics.enable": "false",
    }
    broker = LimitedBroker(tmp_path / "data", tmp_path / "broker.log", settings, {})
    yield broker
    if broker.is_running():
        broker.stop()


def fill(conn: KafkaConnection, prefix: str) -> list[str]:
    """Creates 50-partition topics until one is refused; returns the created ones."""
    created = []
    while len(created) * TOPIC_PARTITIONS + TOPIC_PARTITIONS <= FIT:
        name = f"{prefix}-{len(created)}"
        assert km.create_topics(conn, [(name, TOPIC_PARTITIONS)])[name][0] == kw.NONE, name
        created.append(name)
    refused = f"{prefix}-refused"
    error, message = km.create_topics(conn, [(refused, TOPIC_PARTITIONS)])[refused]
    assert error == kw.POLICY_VIOLATION, (error, message)
    assert "sluice.partitions.max" in message and f"limit (RLIMIT_NOFILE, ulimit -n) of {NOFILE}" in message, message
    assert f"at most {FIT} partitions fit" in message, message
    assert conn.metadata_topic_errors([refused]) == {refused: kw.UNKNOWN_TOPIC_OR_PARTITION}
    # What is left fits exactly; one more does not.
    rest = FIT - len(created) * TOPIC_PARTITIONS
    last = f"{prefix}-last"
    assert km.create_topics(conn, [(last, rest)])[last][0] == kw.NONE
    one_more = f"{prefix}-one-more"
    assert km.create_topics(conn, [(one_more, 1)])[one_more][0] == kw.POLICY_VIOLATION
    return [*created, last]


def produce_and_check(conn: KafkaConnection, first: str, last: tuple[str, int]):
    for i in range(40):  # ~100 bytes each into 1 KiB segments: several sealed segments
        batch = kw.record_batch([f"first-{i}".encode() * 4])
        assert conn.produce(first, 0, batch).error_code == kw.NONE
    assert conn.produce(last[0], last[1], kw.record_batch([b"last"])).error_code == kw.NONE
    check(conn, first, last)


def check(conn: KafkaConnection, first: str, last: tuple[str, int]):
    offset, seen = 0, []
    while offset < 40:
        fetched = conn.fetch(first, 0, offset)
        assert fetched.error_code == kw.NONE
        values = kw.batch_record_values(fetched.records)
        assert values, f"nothing at {offset}"
        seen += [v for o, v in values if o >= offset]
        offset = values[-1][0] + 1
    assert seen == [f"first-{i}".encode() * 4 for i in range(40)]
    assert kw.batch_record_values(conn.fetch(last[0], last[1], 0).records) == [(0, b"last")]


def metric(broker: Broker, name: str) -> int:
    import urllib.request

    text = urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10).read().decode()
    match = re.search(rf"^{name} (\d+)$", text, re.M)
    assert match, f"{name} not in /metrics"
    return int(match.group(1))


def test_create_topics_stops_at_the_descriptor_budget_and_the_broker_keeps_serving(limited):
    broker = limited.start()
    with KafkaConnection(broker.bootstrap) as conn:
        topics = fill(conn, "fd")
        first, last = topics[0], (topics[-1], FIT - (len(topics) - 1) * TOPIC_PARTITIONS - 1)
        produce_and_check(conn, first, last)
    # Every connection max.connections allows still gets a descriptor (one is the admin
    # scrape's, opened and closed below).
    conns = [KafkaConnection(broker.bootstrap) for _ in range(CONNECTIONS - 2)]
    try:
        for c in conns[:: CONNECTIONS // 10]:
            assert c.api_versions().error_code == kw.NONE
        assert metric(broker, "sluice_descriptors_limit") == NOFILE
        assert metric(broker, "sluice_descriptors_open") < NOFILE - RESERVED // 2
        assert metric(broker, "sluice_segment_files_open") <= SEGMENT_FILES
    finally:
        for c in conns:
            c.close()
    broker.restart()
    with KafkaConnection(broker.bootstrap) as conn:
        check(conn, first, last)
        refused = "after-restart"
        assert km.create_topics(conn, [(refused, 1)])[refused][0] == kw.POLICY_VIOLATION

    # The same data dir under a lower limit: refused at start, naming the keys.
    broker.stop()
    broker.nofile = NOFILE - 100
    with pytest.raises(AssertionError, match="exited"):
        broker.start()
    log = broker.log_path.read_text()
    assert "refusing to start" in log and "max.connections (200)" in log and "sluice.partitions.max" in log
    broker.nofile = NOFILE
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        check(conn, first, last)
