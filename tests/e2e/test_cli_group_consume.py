"""`sluice consume --group` as a real consumer-group member, against a real broker.

Covers:
- two `sluice consume --group` processes on a 4-partition topic: the group splits the
  partitions between them (`sluice group describe --output json` shows both members, two
  partitions each), every record is read exactly once across both, and SIGINT/SIGTERM make
  each commit and leave at once (the group is empty long before the session timeout), and
  `/metrics` shows the group's committed offsets and zero lag per partition;
- a confluent-kafka consumer (`group_member.py`) in the same group, with either one leading
  (computing the assignment): the partitions are rebalanced between it and the CLI, each
  record is read once; when it leaves, the CLI takes all partitions back;
- a kafka-python consumer (its own protocol code, pure Python) in the same group: the CLI
  commits what it read before giving up partitions, so across both every record is read once;
- a member with no partitions, whose idle connection the broker closed
  (`connections.max.idle.ms`), takes over when the other member leaves;
- `-n` stops, commits and leaves; a restarted consumer resumes from the committed offsets;
- a committed offset past the log end is reset to the log start (`auto.offset.reset`), with a
  warning; an explicit `--offset` out of range is an error.

Records are produced to explicit partitions with confluent-kafka. Brokers run with
`group.initial.rebalance.delay.ms=0`; every wait polls with a deadline.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading

import kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import sluice_bin, wait_until
from test_groups import GROUP_SETTINGS
from test_groups import Member as ConfluentMember
from test_metrics import scrape

DEADLINE_S = 60.0
PARTITIONS = 4


class CliMember:
    """A `sluice consume --group --output json` process and the records it printed."""

    def __init__(self, broker, group: str, topic: str, *extra: str):
        self.proc = subprocess.Popen(
            [sluice_bin(), "consume", topic, "--group", group, "--output", "json", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"SLUICE_BROKERS": broker.bootstrap, "PATH": "/usr/bin:/bin"},
        )
        self.records: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            record = json.loads(line)
            with self._lock:
                self.records.append((record["partition"], record["offset"]))

    def seen(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self.records)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=DEADLINE_S)
        self._reader.join(timeout=DEADLINE_S)
        assert rc == 0, f"sluice consume exited {rc}: {self.proc.stderr.read()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE_S)


def sluice_json(broker, *args: str):
    proc = subprocess.run(
        [sluice_bin(), *args, "--brokers", broker.bootstrap, "--output", "json"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"{args}: {proc.stderr.decode()}"
    return json.loads(proc.stdout)


def create_topic(broker, topic: str) -> None:
    sluice_json(broker, "topic", "create", topic, "-p", str(PARTITIONS))


def produce(broker, topic: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(start, start + count):
        p.produce(topic, value=f"v{i}", partition=i % PARTITIONS)
    assert p.flush(30) == 0


def assignments(broker, group: str) -> list[list[int]]:
    """Each member's assigned partitions (sorted), once the group is Stable."""
    doc = sluice_json(broker, "group", "describe", group)
    if doc["state"] != "Stable":
        return []
    return sorted(sorted(a["partition"] for a in m["assignment"]) for m in doc["members"])


def wait_for_split(broker, group: str, members: int) -> list[list[int]]:
    def split():
        parts = assignments(broker, group)
        return parts if len(parts) == members and sum(map(len, parts)) == PARTITIONS else None

    return wait_until(split, DEADLINE_S, f"{members} members sharing {PARTITIONS} partitions")


def test_two_cli_members_split_the_partitions(broker_factory, topic_name):
    broker = broker_factory(GROUP_SETTINGS)
    create_topic(broker, topic_name)
    produce(broker, topic_name, 0, 200)
    first = CliMember(broker, "split", topic_name)
    second = None
    try:
        assert wait_for_split(broker, "split", 1) == [[0, 1, 2, 3]]
        wait_until(lambda: len(first.seen()) >= 200, DEADLINE_S, "the first member to read 200 records")
        second = CliMember(broker, "split", topic_name)
        assert wait_for_split(broker, "split", 2) == [[0, 1], [2, 3]]
        members = sluice_json(broker, "group", "describe", "split")["members"]
        assert {m["client_id"] for m in members} == {"sluice-cli"}, members
        produce(broker, topic_name, 200, 200)
        wait_until(
            lambda: len(first.seen()) + len(second.seen()) >= 400, DEADLINE_S, "400 records across both members"
        )
        first.stop(signal.SIGINT)
        second.stop()
    finally:
        first.kill()
        if second is not None:
            second.kill()
    everything = first.seen() + second.seen()
    assert len(everything) == len(set(everything)) == 400, "a record was read twice or missed"
    late = {p for p, o in second.seen()}
    assert len(late) == 2 and late.isdisjoint({p for p, o in first.seen() if o >= 50})
    group = sluice_json(broker, "group", "describe", "split")
    assert group["members"] == [] and group["state"] == "Empty", group
    assert sum(o["lag"] for o in group["offsets"]) == 0, group
    metrics = scrape(broker)
    for p in range(PARTITIONS):
        labels = f'group="split",topic="{topic_name}",partition="{p}"'
        assert metrics[f"sluice_group_committed_offset{{{labels}}}"] == 100
        assert metrics[f"sluice_group_lag{{{labels}}}"] == 0


@pytest.mark.parametrize("cli_leads", [True, False], ids=["cli-leader", "confluent-leader"])
def test_cli_and_confluent_kafka_share_a_group(broker_factory, topic_name, cli_leads):
    broker = broker_factory(GROUP_SETTINGS)
    create_topic(broker, topic_name)
    cli = other = None
    try:
        # The first member leads the group and computes the assignment for both.
        if cli_leads:
            cli = CliMember(broker, "mixed", topic_name)
            wait_for_split(broker, "mixed", 1)
            other = ConfluentMember(broker.bootstrap, "mixed", topic_name)
        else:
            other = ConfluentMember(broker.bootstrap, "mixed", topic_name)
            wait_for_split(broker, "mixed", 1)
            cli = CliMember(broker, "mixed", topic_name)
        split = wait_for_split(broker, "mixed", 2)
        assert sorted(map(len, split)) == [2, 2], split
        wait_until(lambda: other.assignment() and len(other.assignment()) == 2, DEADLINE_S, "confluent assignment")
        produce(broker, topic_name, 0, 400)

        def confluent_records():
            return [(e["partition"], e["offset"]) for e in other.snapshot() if e["event"] == "record"]

        wait_until(lambda: len(cli.seen()) + len(confluent_records()) >= 400, DEADLINE_S, "400 records")
        both = cli.seen() + confluent_records()
        assert len(both) == len(set(both)) == 400
        assert {p for p, _ in cli.seen()}.isdisjoint(other.assignment())

        other.proc.send_signal(signal.SIGTERM)
        assert other.proc.wait(timeout=DEADLINE_S) == 0
        assert wait_for_split(broker, "mixed", 1) == [[0, 1, 2, 3]]
        cli.stop()
    finally:
        if cli is not None:
            cli.kill()
        if other is not None and other.proc.poll() is None:
            other.proc.kill()


def test_cli_and_kafka_python_share_a_group(broker_factory, topic_name):
    broker = broker_factory(GROUP_SETTINGS)
    create_topic(broker, topic_name)
    produce(broker, topic_name, 0, 200)
    cli = CliMember(broker, "kp-mixed", topic_name)
    other = None
    seen: list[tuple[int, int]] = []

    def poll_other():
        for batch in other.poll(timeout_ms=100).values():
            seen.extend((m.partition, m.offset) for m in batch)

    try:
        wait_for_split(broker, "kp-mixed", 1)
        wait_until(lambda: len(cli.seen()) >= 200, DEADLINE_S, "the CLI to read the first 200 records")
        other = kafka.KafkaConsumer(
            topic_name,
            bootstrap_servers=broker.bootstrap,
            group_id="kp-mixed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

        def split():
            poll_other()
            return len(other.assignment()) == 2 and len(assignments(broker, "kp-mixed")) == 2

        wait_until(split, DEADLINE_S, "kafka-python and the CLI to share the partitions")
        produce(broker, topic_name, 200, 200)

        def drained():
            poll_other()
            return len(cli.seen()) + len(seen) >= 400

        wait_until(drained, DEADLINE_S, "400 records across both")
        owned = {tp.partition for tp in other.assignment()}
        cli.stop()
    finally:
        cli.kill()
        if other is not None:
            other.close()
    both = cli.seen() + seen
    assert len(both) == len(set(both)) == 400, "a record was read twice or missed"
    assert {p for p, _ in seen} == owned
    assert owned.isdisjoint({p for p, o in cli.seen() if o >= 50})


def test_count_commits_leaves_and_a_restart_resumes(broker_factory, topic_name):
    broker = broker_factory(GROUP_SETTINGS)
    create_topic(broker, topic_name)
    produce(broker, topic_name, 0, 100)
    first = CliMember(broker, "resume", topic_name, "-n", "30")
    assert first.proc.wait(timeout=DEADLINE_S) == 0, first.proc.stderr.read()
    first._reader.join(timeout=DEADLINE_S)
    assert len(first.seen()) == 30
    group = sluice_json(broker, "group", "describe", "resume")
    assert group["members"] == [], "the member did not leave after -n"
    assert sum(o["lag"] for o in group["offsets"]) == 70, group

    rest = CliMember(broker, "resume", topic_name, "-e")
    assert rest.proc.wait(timeout=DEADLINE_S) == 0, rest.proc.stderr.read()
    rest._reader.join(timeout=DEADLINE_S)
    both = first.seen() + rest.seen()
    assert len(both) == len(set(both)) == 100


def test_a_committed_offset_out_of_range_is_reset(broker_factory, topic_name):
    broker = broker_factory(GROUP_SETTINGS)
    sluice_json(broker, "topic", "create", topic_name, "-p", "1")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce(topic_name, value=f"v{i}", partition=0)
    assert p.flush(30) == 0
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "far", "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic_name, 0, 1000)], asynchronous=False)
    committer.close()

    member = CliMember(broker, "far", topic_name, "-e")
    assert member.proc.wait(timeout=DEADLINE_S) == 0
    member._reader.join(timeout=DEADLINE_S)
    assert member.seen() == [(0, o) for o in range(10)]
    assert "out of range" in member.proc.stderr.read()
    group = sluice_json(broker, "group", "describe", "far")
    assert [o["committed_offset"] for o in group["offsets"]] == [10]

    explicit = subprocess.run(
        [sluice_bin(), "consume", topic_name, "-o", "1000", "-n", "1", "--brokers", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert explicit.returncode == 1 and "--offset beginning" in explicit.stderr, explicit.stderr


def test_an_idle_member_reconnects_and_takes_over(broker_factory, topic_name):
    broker = broker_factory(GROUP_SETTINGS | {"connections.max.idle.ms": "2000"})
    sluice_json(broker, "topic", "create", topic_name, "-p", "1")
    busy = CliMember(broker, "idle", topic_name)
    idle = None
    try:
        wait_until(lambda: assignments(broker, "idle") == [[0]], DEADLINE_S, "the first member")
        idle = CliMember(broker, "idle", topic_name)
        wait_until(lambda: assignments(broker, "idle") == [[], [0]], DEADLINE_S, "one member with the partition")
        # Two fetching or heartbeating connections per member, less the idle one's main.
        wait_until(lambda: scrape(broker)["sluice_connections_open"] == 3, DEADLINE_S, "the idle connection closed")
        busy.stop()
        wait_until(lambda: assignments(broker, "idle") == [[0]], DEADLINE_S, "the idle member to take over")
        produce_one = Producer({"bootstrap.servers": broker.bootstrap})
        produce_one.produce(topic_name, value=b"late", partition=0)
        assert produce_one.flush(30) == 0
        wait_until(lambda: idle.seen() == [(0, 0)], DEADLINE_S, "the late record")
        idle.stop()
    finally:
        busy.kill()
        if idle is not None:
            idle.kill()
