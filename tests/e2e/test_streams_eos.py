"""Kafka Streams 4.4.0 at `processing.guarantee=exactly_once_v2` (KIP-447), the way most Kafka
users get exactly-once: the word count, windowed count and stream-table join topologies of
tests/clients/java's `sluice.check.StreamsEos` run against a real broker while the inputs
stream in, the application is killed with SIGKILL mid-stream (twice) and restarted, once with
a fresh state dir so its stores are restored from the changelog topics. The outputs, read with
read_committed, must be exact: caching is off, so every input record made exactly one output
record, and each word's counts are 1, 2, ..., n with nothing repeated or missing, each
(user, window)'s the same, and every order is joined exactly once with its customer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from clients import create_topic
from java_support import java_classpath

PARTITIONS = 3
LINES = 600
CLICKS = 600
ORDERS = 300
CUSTOMERS = 20
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
USERS = [f"user-{i}" for i in range(7)]
WINDOW_MS = 60_000
# The clicks' event times: three windows, from a fixed epoch so the windows are known.
CLICKS_START_MS = 1_800_000_000_000
DEADLINE_S = 240
KILLS = 2


def line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 4))


def click_time(i: int) -> int:
    return CLICKS_START_MS + (i * 97_531) % (3 * WINDOW_MS)


class App:
    """The Streams application as a child process; kill -9 and restart at will."""

    def __init__(self, classpath: str, bootstrap: str, app_id: str, tmp_path):
        self.classpath, self.bootstrap, self.app_id, self.tmp_path = classpath, bootstrap, app_id, tmp_path
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, fresh_state: bool = False) -> None:
        self.starts += 1
        state = self.tmp_path / ("state" if not fresh_state else f"state-{self.starts}")
        log = open(self.tmp_path / f"streams-{self.starts}.log", "wb")
        self.proc = subprocess.Popen(
            ["java", "-cp", self.classpath, "sluice.check.StreamsEos", "--bootstrap", self.bootstrap,
             "--app-id", self.app_id, "--state-dir", str(state)],
            stdout=subprocess.PIPE, stderr=log,
        )  # fmt: skip
        ready = self.proc.stdout.readline().decode().strip()
        assert ready == "RUNNING", f"Streams did not start ({ready!r}): {self.log_tail()}"

    def kill(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, f"Streams died: {self.log_tail()}"
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self) -> str:
        return (self.tmp_path / f"streams-{self.starts}.log").read_text(errors="replace")[-4000:]


def produce_inputs(bootstrap: str, stop_after: threading.Event | None = None) -> None:
    """Customers first (older timestamps, so the table holds them before any order), then
    lines, clicks and orders interleaved, slowly enough that kills land mid-stream."""
    # murmur2, as Java's default partitioner: the join needs eos-customers partitioned as
    # Streams partitions the orders it re-keys by customer (co-partitioning).
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "partitioner": "murmur2_random"})  # fmt: skip
    now = int(time.time() * 1000)
    for c in range(CUSTOMERS):
        p.produce("eos-customers", key=f"c{c}", value=f"customer-{c}", timestamp=now - 60_000)
    p.flush(30)
    for i in range(max(LINES, CLICKS, ORDERS)):
        if i < LINES:
            p.produce("eos-text", key=f"l{i}", value=line(i))
        if i < CLICKS:
            p.produce("eos-clicks", key=USERS[i % len(USERS)], value=f"page-{i}", timestamp=click_time(i))
        if i < ORDERS:
            p.produce("eos-orders", key=f"o{i}", value=f"c{i % CUSTOMERS}")
        if i % 50 == 49:
            p.flush(30)
            time.sleep(0.2)
    assert p.flush(30) == 0


def read_committed(bootstrap: str, topic: str, value_is_long: bool) -> list[tuple[str, object]]:
    """Every record of `topic`, read_committed, in partition then offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out, at_end = [], set()
        deadline = time.monotonic() + 60
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: not read to the end"
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    at_end.add(m.partition())
                    continue
                value = int.from_bytes(m.value(), "big", signed=True) if value_is_long else m.value().decode()
                out.append((m.key().decode(), value))
        return out
    finally:
        c.close()


def expected_word_counts() -> Counter:
    words = Counter()
    for i in range(LINES):
        words.update(line(i).split())
    return words


def expected_window_counts() -> Counter:
    windows = Counter()
    for i in range(CLICKS):
        t = click_time(i)
        windows[f"{USERS[i % len(USERS)]}@{t - t % WINDOW_MS}"] += 1
    return windows


def assert_counts_exact(records: list[tuple[str, int]], expected: Counter, what: str) -> None:
    """Each key's counts, in offset order, are exactly 1..n (per key all land in one partition)."""
    seen: dict[str, list[int]] = defaultdict(list)
    for key, count in records:
        seen[key].append(count)
    assert set(seen) == set(expected), f"{what}: keys differ"
    for key, n in expected.items():
        assert seen[key] == list(range(1, n + 1)), f"{what} {key}: {seen[key][:20]}... expected 1..{n}"


def wait_for(what: str, check, app: App) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert app.alive(), f"Streams died while waiting for {what}: {app.log_tail()}"
        assert time.monotonic() < deadline, f"{what} did not happen within {DEADLINE_S} s: {app.log_tail()}"
        time.sleep(0.5)


def output_count(bootstrap: str, topic: str) -> int:
    """Committed offsets of `topic`: records and commit markers (a floor to wait for)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-watcher", "isolation.level": "read_committed"})
    try:
        total = 0
        for p in range(PARTITIONS):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        c.close()


@pytest.fixture
def streams_broker(broker):
    for topic in ["eos-text", "eos-counts", "eos-clicks", "eos-window-counts", "eos-orders", "eos-customers",
                  "eos-enriched"]:  # fmt: skip
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    return broker


def test_streams_exactly_once_v2_is_exact_across_kill_9(streams_broker, tmp_path):
    broker = streams_broker
    app = App(java_classpath(), broker.bootstrap, "sluice-eos-app", tmp_path)
    producer = threading.Thread(target=produce_inputs, args=(broker.bootstrap,))
    app.start()
    producer.start()
    try:
        # Kill mid-stream, once some output is committed; restart (the second time with a
        # fresh state dir: the stores restore from their changelogs).
        for kill in range(KILLS):
            floor = (kill + 1) * 200
            wait_for(f"{floor} committed word counts", lambda: output_count(broker.bootstrap, "eos-counts") >= floor, app)
            app.kill()
            app.start(fresh_state=kill == KILLS - 1)
        producer.join(timeout=DEADLINE_S)
        assert not producer.is_alive(), "the input producer did not finish"
        words, windows = expected_word_counts(), expected_window_counts()
        total = sum(words.values()) + sum(windows.values()) + ORDERS
        # Records, not offsets (the commit markers take offsets too).
        wait_for("every output", lambda: sum(len(read_committed(broker.bootstrap, t, t != "eos-enriched")) for t in
                 ("eos-counts", "eos-window-counts", "eos-enriched")) >= total, app)  # fmt: skip
    finally:
        if app.alive():
            app.kill()
    assert_counts_exact(read_committed(broker.bootstrap, "eos-counts", True), words, "word count")
    assert_counts_exact(read_committed(broker.bootstrap, "eos-window-counts", True), windows, "windowed count")
    enriched = read_committed(broker.bootstrap, "eos-enriched", False)
    assert sorted(enriched) == sorted((f"o{i}", f"c{i % CUSTOMERS}:customer-{i % CUSTOMERS}") for i in range(ORDERS))
