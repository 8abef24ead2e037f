"""Consumer groups with real clients against a real broker.

Covers:
- three confluent-kafka consumers (subprocesses, `group_member.py`) in one group on a
  6-partition topic: every partition assigned exactly once; one closes cleanly and its
  partitions move within a rebalance (well before the session timeout); one is SIGKILLed and
  its partitions move after the session timeout; every produced record is consumed at least
  once and none is skipped;
- committed offsets survive a broker restart (and a SIGKILL right after the commit was
  acknowledged: commits are fsynced): a new consumer in the group resumes there;
- kcat's balanced consumer (`-G`);
- a cooperative-sticky group: the second member takes partitions incrementally, the first
  keeps the rest without giving them up;
- a static member (`group.instance.id`) that restarts within its session timeout gets its
  partitions back without a rebalance of the others;
- kafka-python (pure Python, its own protocol versions): two group consumers split a topic,
  commit, and its admin client lists, describes and reads the group's offsets;
- `sluice group list | describe | reset-offsets` with `--output json` parsed here, including
  the refusal to reset a group that has members.

Brokers run with `group.initial.rebalance.delay.ms=0` and a small minimum session timeout so
the suite is fast; every wait polls with a deadline.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import kafka
from confluent_kafka import Consumer, KafkaError, TopicPartition

from clients import Record, create_topic, produce_all, producer
from conftest import sluice_bin, wait_until

HERE = Path(__file__).resolve().parent
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
SESSION_TIMEOUT_MS = 4000
DEADLINE_S = 60.0


class Member:
    """A `group_member.py` subprocess and the events it printed."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config: str):
        extra = [f"{k.replace('_', '.')}={v}" for k, v in config.items()]
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "group_member.py"), bootstrap, group, topic, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._lock:
                self.events.append(event)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def assignment(self) -> set[int] | None:
        assigned = [e for e in self.snapshot() if e["event"] == "assigned"]
        return set(assigned[-1]["partitions"]) if assigned else None

    def assignments_seen(self) -> int:
        return sum(1 for e in self.snapshot() if e["event"] == "assigned")

    def consumed(self) -> set[tuple[int, int]]:
        return {(e["partition"], e["offset"]) for e in self.snapshot() if e["event"] == "record"}

    def errors(self) -> list[dict]:
        return [e for e in self.snapshot() if e["event"] == "error"]

    def close(self):
        """SIGTERM: the script closes its consumer (commit + LeaveGroup) and exits."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=DEADLINE_S) == 0
        self._reader.join(timeout=DEADLINE_S)
        assert self.snapshot()[-1]["event"] == "closed"

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=DEADLINE_S)

    def stop_quietly(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE_S)


def exact_cover(members: list[Member], partitions: int) -> bool:
    """True when the members' latest assignments split all partitions exactly once."""
    seen: list[int] = []
    for m in members:
        a = m.assignment()
        if a is None:
            return False
        seen.extend(a)
    return sorted(seen) == list(range(partitions))


def produce_spread(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> set[tuple[int, int]]:
    p = producer(bootstrap)
    out = set()
    for partition in range(partitions):
        recs = [Record(key=None, value=f"{tag}-{partition}-{i}".encode()) for i in range(per_partition)]
        out |= {(d.partition, d.offset) for d in produce_all(p, topic, recs, partition=partition)}
    return out


def test_three_consumers_share_partitions_and_survive_close_and_kill(broker_factory, topic_name):
    broker = broker_factory(settings=GROUP_SETTINGS)
    create_topic(broker.bootstrap, topic_name, partitions=6)
    produced = produce_spread(broker.bootstrap, topic_name, 6, 20, "before")
    group = f"{topic_name}-g"
    members = [Member(broker.bootstrap, group, topic_name, session_timeout_ms=SESSION_TIMEOUT_MS) for _ in range(3)]
    try:
        wait_until(
            lambda: exact_cover(members, 6) and all(len(m.assignment()) == 2 for m in members),
            DEADLINE_S,
            "three members with two partitions each",
        )
        wait_until(
            lambda: produced <= set().union(*(m.consumed() for m in members)), DEADLINE_S, "the first records consumed"
        )

        closing, killed, survivor = members
        closed_at = time.monotonic()
        closing.close()
        rest = [killed, survivor]
        wait_until(lambda: exact_cover(rest, 6), DEADLINE_S, "the closed member's partitions to move")
        moved_after_s = time.monotonic() - closed_at
        assert moved_after_s < SESSION_TIMEOUT_MS / 1000, f"a clean close took {moved_after_s:.1f}s to rebalance"

        produced |= produce_spread(broker.bootstrap, topic_name, 6, 10, "middle")
        wait_until(
            lambda: produced <= set().union(*(m.consumed() for m in members)), DEADLINE_S, "records after the close"
        )

        killed_at = time.monotonic()
        killed.kill()
        wait_until(lambda: exact_cover([survivor], 6), DEADLINE_S, "the killed member's partitions to move")
        moved_after_s = time.monotonic() - killed_at
        # The survivor's heartbeat learns of the rebalance only after the session expired.
        assert moved_after_s >= SESSION_TIMEOUT_MS / 1000 * 0.8, f"moved after {moved_after_s:.1f}s"

        produced |= produce_spread(broker.bootstrap, topic_name, 6, 10, "after")
        wait_until(
            lambda: produced <= set().union(*(m.consumed() for m in members)), DEADLINE_S, "every record consumed"
        )
        consumed = set().union(*(m.consumed() for m in members))
        assert consumed == produced, f"consumed offsets never produced: {sorted(consumed - produced)[:5]}"
        assert not any(m.errors() for m in members), [m.errors() for m in members]
    finally:
        for m in members:
            m.stop_quietly()


def group_consumer(bootstrap: str, group: str, **config) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 500,
    }
    conf.update(config)
    return Consumer(conf)


def poll_values(c: Consumer, count: int) -> list[tuple[int, int, bytes]]:
    got = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} records"
        msg = c.poll(0.2)
        if msg is None or msg.error():
            assert msg is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            continue
        got.append((msg.partition(), msg.offset(), msg.value()))
    return got


def test_committed_offsets_survive_a_restart(broker_factory, topic_name):
    broker = broker_factory(settings=GROUP_SETTINGS)
    create_topic(broker.bootstrap, topic_name, partitions=3)
    produce_spread(broker.bootstrap, topic_name, 3, 10, "old")
    group = f"{topic_name}-g"
    c = group_consumer(broker.bootstrap, group)
    c.subscribe([topic_name])
    assert len(poll_values(c, 30)) == 30
    c.commit(asynchronous=False)
    c.close()

    produce_spread(broker.bootstrap, topic_name, 3, 5, "new")
    broker.restart()

    c = group_consumer(broker.bootstrap, group)
    committed = c.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=30)
    assert [tp.offset for tp in committed] == [10, 10, 10]
    c.subscribe([topic_name])
    got = poll_values(c, 15)
    c.close()
    assert sorted((p, o) for p, o, _ in got) == [(p, o) for p in range(3) for o in range(10, 15)]
    assert all(v.startswith(b"new-") for _, _, v in got)


def test_an_acknowledged_commit_survives_sigkill(broker_factory, topic_name):
    broker = broker_factory(settings=GROUP_SETTINGS)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    group = f"{topic_name}-g"
    c = group_consumer(broker.bootstrap, group)
    offsets = [TopicPartition(topic_name, p, 7 + p) for p in range(2)]
    c.commit(offsets=offsets, asynchronous=False)
    c.close()
    broker.kill()
    broker.start()
    c = group_consumer(broker.bootstrap, group)
    committed = c.committed([TopicPartition(topic_name, p) for p in range(2)], timeout=30)
    c.close()
    assert [tp.offset for tp in committed] == [7, 8]


def test_kcat_balanced_consumer(broker_factory, topic_name):
    kcat_bin = shutil.which("kcat")
    assert kcat_bin, "kcat is not installed (tests/run installs it)"
    broker = broker_factory(settings=GROUP_SETTINGS)
    create_topic(broker.bootstrap, topic_name, partitions=3)
    produce_spread(broker.bootstrap, topic_name, 3, 10, "k")
    group = f"{topic_name}-kcat"
    proc = subprocess.run(
        [
            kcat_bin,
            "-b",
            broker.bootstrap,
            "-G",
            group,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-X",
            f"session.timeout.ms={SESSION_TIMEOUT_MS}",
            "-f",
            "%p %o\\n",
            topic_name,
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert proc.returncode == 0, proc.stderr
    seen = sorted(tuple(map(int, line.split())) for line in proc.stdout.splitlines())
    assert seen == [(p, o) for p in range(3) for o in range(10)]
    # kcat commits on exit: the group resumes at the end.
    described = sluice_group(broker.bootstrap, "describe", group)
    assert {(o["partition"], o["committed_offset"]) for o in described["offsets"]} == {(p, 10) for p in range(3)}


def test_cooperative_sticky_moves_only_what_it_must(broker_factory, topic_name):
    broker = broker_factory(settings=GROUP_SETTINGS)
    create_topic(broker.bootstrap, topic_name, partitions=4)
    group = f"{topic_name}-coop"
    coop = {"partition_assignment_strategy": "cooperative-sticky", "session_timeout_ms": SESSION_TIMEOUT_MS}
    first = Member(broker.bootstrap, group, topic_name, **coop)
    second = None
    try:
        wait_until(lambda: first.assignment() == {0, 1, 2, 3}, DEADLINE_S, "the first member to own everything")
        second = Member(broker.bootstrap, group, topic_name, **coop)
        wait_until(
            lambda: exact_cover([first, second], 4) and len(second.assignment()) == 2,
            DEADLINE_S,
            "an incremental rebalance",
        )
        kept = first.assignment()
        # Every assignment the first member reported held what it kept: it never gave up
        # all its partitions (an eager rebalance would revoke everything first).
        owned_sets = [set(e["partitions"]) for e in first.snapshot() if e["event"] == "assigned"]
        assert all(kept <= s for s in owned_sets), owned_sets
    finally:
        first.stop_quietly()
        if second is not None:
            second.stop_quietly()


def test_a_static_member_keeps_its_partitions_across_a_restart(broker_factory, topic_name):
    broker = broker_factory(settings=GROUP_SETTINGS)
    create_topic(broker.bootstrap, topic_name, partitions=4)
    group = f"{topic_name}-static"
    static = {"session_timeout_ms": 10_000}
    a = Member(broker.bootstrap, group, topic_name, group_instance_id="a", **static)
    b = Member(broker.bootstrap, group, topic_name, group_instance_id="b", **static)
    a2 = None
    try:
        wait_until(lambda: exact_cover([a, b], 4) and len(a.assignment()) == 2, DEADLINE_S, "two static members")
        before_a, before_b = a.assignment(), b.assignment()
        b_rebalances = b.assignments_seen()
        a.close()  # a static member does not send LeaveGroup on close
        a2 = Member(broker.bootstrap, group, topic_name, group_instance_id="a", **static)
        wait_until(lambda: a2.assignment() is not None, DEADLINE_S, "the restarted static member's assignment")
        assert a2.assignment() == before_a
        assert b.assignment() == before_b
        assert b.assignments_seen() == b_rebalances, "the other member was rebalanced"
    finally:
        for m in (a, b, a2):
            if m is not None:
                m.stop_quietly()


def sluice_group(bootstrap: str, *args: str, check: bool = True) -> dict | subprocess.CompletedProcess:
    proc = subprocess.run(
        [sluice_bin(), "group", "--brokers", bootstrap, "--output", "json", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    if not check:
        return proc
    assert proc.returncode == 0, f"sluice group {' '.join(args)}: {proc.stderr}"
    return json.loads(proc.stdout)


def test_sluice_group_cli(broker_factory, topic_name):
    broker = broker_factory(settings=GROUP_SETTINGS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    start_ms = int(time.time() * 1000)
    produce_spread(bootstrap, topic_name, 2, 10, "cli")
    group = f"{topic_name}-cli"
    member = Member(bootstrap, group, topic_name, session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        wait_until(lambda: len(member.consumed()) == 20, DEADLINE_S, "the member to consume everything")

        def committed_all():
            d = sluice_group(bootstrap, "describe", group)
            return d if all(o["committed_offset"] == 10 for o in d["offsets"]) and len(d["offsets"]) == 2 else None

        described = wait_until(committed_all, DEADLINE_S, "auto-commits of every record")
        assert described["state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        [m] = described["members"]
        assert sorted((a["topic"], a["partition"]) for a in m["assignment"]) == [(topic_name, 0), (topic_name, 1)]
        for o in described["offsets"]:
            assert (o["log_end_offset"], o["lag"], o["member_id"]) == (10, 0, m["member_id"])

        listed = {g["group"]: g for g in sluice_group(bootstrap, "list")["groups"]}
        assert listed[group]["state"] == "Stable" and listed[group]["members"] == 1

        refused = sluice_group(bootstrap, "reset-offsets", group, "--topic", topic_name, "--to-earliest", check=False)
        assert refused.returncode != 0 and "active member" in refused.stderr, refused.stderr
    finally:
        member.close()

    def reset(*how: str) -> dict[int, int]:
        sluice_group(bootstrap, "reset-offsets", group, "--topic", topic_name, *how)
        d = sluice_group(bootstrap, "describe", group)
        return {o["partition"]: o["committed_offset"] for o in d["offsets"]}

    assert sluice_group(bootstrap, "describe", group)["state"] == "Empty"
    assert reset("--to-earliest") == {0: 0, 1: 0}
    assert reset("--to-latest") == {0: 10, 1: 10}
    assert reset("--to-offset", "3") == {0: 3, 1: 3}
    assert reset("--to-offset", "999") == {0: 10, 1: 10}
    assert reset("--to-timestamp", str(start_ms - 60_000)) == {0: 0, 1: 0}
    assert reset("--to-latest") == {0: 10, 1: 10}
    assert reset("--to-datetime", "2000-01-01T00:00:00Z") == {0: 0, 1: 0}
    dry = sluice_group(bootstrap, "reset-offsets", group, "--topic", topic_name, "--to-latest", "--dry-run")
    assert dry["dry_run"] is True and {o["new_offset"] for o in dry["offsets"]} == {10}
    assert {o["committed_offset"] for o in sluice_group(bootstrap, "describe", group)["offsets"]} == {0}

    # A consumer of the group now starts from the reset offsets.
    resumed = Member(bootstrap, group, topic_name, session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        wait_until(lambda: len(resumed.consumed()) == 20, DEADLINE_S, "re-consumption from offset 0")
    finally:
        resumed.close()
    text = subprocess.run(
        [sluice_bin(), "group", "--brokers", bootstrap, "describe", group],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert text.returncode == 0 and "LAG" in text.stdout, text.stderr


def test_kafka_python_group_consumers_and_admin(broker_factory, topic_name):
    broker = broker_factory(settings=GROUP_SETTINGS)
    create_topic(broker.bootstrap, topic_name, partitions=4)
    produce_spread(broker.bootstrap, topic_name, 4, 5, "kp")
    group = f"{topic_name}-kp"

    def consumer():
        return kafka.KafkaConsumer(
            topic_name,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=500,
        )

    consumers = [consumer(), consumer()]
    seen: set[tuple[int, int]] = set()
    try:

        def split_and_drained():
            for c in consumers:
                for batch in c.poll(timeout_ms=100).values():
                    seen.update((m.partition, m.offset) for m in batch)
            owned = [{tp.partition for tp in c.assignment()} for c in consumers]
            split = all(len(o) == 2 for o in owned) and set().union(*owned) == {0, 1, 2, 3}
            # `seen` is shared, so a member that took over partitions another had drained
            # has not read them itself yet: commit() would carry nothing for them. Wait
            # until each member's own position is at the end of what it owns.
            return (
                split
                and len(seen) == 20
                and all(c.position(tp, timeout_ms=1000) == 5 for c in consumers for tp in c.assignment())
            )

        wait_until(split_and_drained, DEADLINE_S, "two kafka-python members splitting four partitions")
        for c in consumers:
            c.commit()
    finally:
        for c in consumers:
            c.close()
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert (group, "consumer") in admin.list_consumer_groups()
        [info] = admin.describe_consumer_groups([group])
        assert info.state == "Empty" and info.protocol_type == "consumer"
        offsets = admin.list_consumer_group_offsets(group)
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {p: 5 for p in range(4)}
    finally:
        admin.close()
