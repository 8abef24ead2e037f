"""A Jepsen-style trial of replication: three brokers, a replicated topic
(`replication.factor` 3, `min.insync.replicas` 2), an idempotent acks=all producer writing
unique values without pause, a consumer polling the whole time, and a nemesis that, round
after round, does one of: SIGKILL a partition leader, a follower, the active controller, two
brokers at once, or all three at once (each restarted after a while); or SIGSTOP a leader
past its session timeout (then SIGCONT: it was replaced, and truncates what only it had). At
the end the faults stop and a consumer reads every partition from the beginning. The checker
(an oracle over the history):

- lost writes: every value acknowledged is read, at the partition and offset its
  acknowledgement gave (nothing acknowledged is lost, nothing moves);
- duplicates: no value is read twice (the idempotent producer's retries across failovers are
  deduplicated);
- nothing invented: every value read was sent; at most the unacknowledged ones are extra (a
  write whose answer was lost may still have landed, as in any Kafka);
- the polls: within each partition the concurrent consumer's offsets only grow, it skips no
  offset the final log holds, and every record it read is the final log's record at that
  offset (no consumer ever read a record that later disappeared: reads stay below the high
  watermark);
- the three brokers' logs of each partition end up byte-for-byte equal.

`SLUICE_REPLICATION_ROUNDS` (default 3) nemesis rounds per trial; the seed of each trial is
printed and `SLUICE_REPLICATION_SEED` replays one.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

from cluster_support import cluster_factory  # noqa: F401 (fixture)
from confluent_kafka import Consumer, Producer, TopicPartition
from test_replication import create_replicated, partitions_of, wait_identical

from conftest import wait_until

ROUNDS = int(os.environ.get("SLUICE_REPLICATION_ROUNDS", "3"))
PARTITIONS = 3


class History:
    """What the producer sent and what was acknowledged (value -> (partition, offset))."""

    def __init__(self):
        self.sent: set[bytes] = set()
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, str] = {}
        self.lock = threading.Lock()


def produce_until(bootstrap: str, topic: str, history: History, stop: threading.Event):
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 120000,
            "request.timeout.ms": 10000,
            "log_level": 0,
        }
    )

    def cb(err, msg):
        with history.lock:
            if err is None:
                history.acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                history.failed[msg.value()] = str(err)

    n = 0
    while not stop.is_set():
        value = f"v-{n}".encode()
        n += 1
        with history.lock:
            history.sent.add(value)
        while True:
            try:
                p.produce(topic, value=value, partition=n % PARTITIONS, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if n % 50 == 0:
            time.sleep(0.01)
    p.flush(180)


def poll_until(bootstrap: str, topic: str, polled: list[tuple[int, int, bytes]], stop: threading.Event):
    """A consumer polling from the beginning until `stop`, recording what it read in order."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"poller-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 0,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    try:
        while not stop.is_set():
            m = c.poll(0.2)
            if m is not None and not m.error():
                polled.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()


def check_polls(polled: list[tuple[int, int, bytes]], final: dict[tuple[int, int], bytes], seed: int):
    """Offsets only grow per partition, no offset of the final log is skipped, and every
    record read is the final log's record at that offset."""
    last: dict[int, int] = {}
    for partition, offset, value in polled:
        previous = last.get(partition)
        assert previous is None or offset > previous, (
            f"partition {partition}: poll went from {previous} to {offset} (seed {seed})"
        )
        if previous is not None:
            skipped = [o for o in range(previous + 1, offset) if (partition, o) in final]
            assert not skipped, f"partition {partition}: the consumer skipped offsets {skipped[:5]} (seed {seed})"
        assert final.get((partition, offset)) == value, (
            f"partition {partition} offset {offset}: read {value!r}, the log has {final.get((partition, offset))!r} (seed {seed})"
        )
        last[partition] = offset


def read_everything(bootstrap: str, topic: str, expect_at_least: int) -> list[tuple[int, int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"checker-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == m.error()._PARTITION_EOF:
                    at_end.add(m.partition())
                    if len(at_end) == PARTITIONS and len(seen) >= expect_at_least:
                        break
                continue
            at_end.discard(m.partition())
            seen.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return seen


def test_nothing_acknowledged_is_lost_through_kills_and_pauses(cluster_factory, topic_name):
    seed = int(os.environ.get("SLUICE_REPLICATION_SEED", random.randrange(1 << 30)))
    print(f"replication trial seed {seed}")
    rng = random.Random(seed)
    settings = {"replica.lag.time.max.ms": "4000"}
    cluster = cluster_factory(3, settings)
    create_replicated(cluster.node(1).bootstrap, topic_name, PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_until(
        lambda: all(p["isr"] == [1, 2, 3] for p in partitions_of(cluster, 1, topic_name).values()),
        30,
        "full ISRs",
    )
    bootstrap = ",".join(cluster.node(k).bootstrap for k in (1, 2, 3))
    history = History()
    stop = threading.Event()
    producer = threading.Thread(target=produce_until, args=(bootstrap, topic_name, history, stop), daemon=True)
    producer.start()
    polled: list[tuple[int, int, bytes]] = []
    poller = threading.Thread(target=poll_until, args=(bootstrap, topic_name, polled, stop), daemon=True)
    poller.start()
    try:
        for round_no in range(ROUNDS):
            time.sleep(rng.uniform(1.0, 3.0))
            leaders = partitions_of(cluster, 1 if cluster.node(1).is_running() else 2, topic_name)
            leader = rng.choice([p["leader"] for p in leaders.values() if p["leader"] > 0] or [1])
            fault = rng.choice(["leader", "follower", "controller", "two", "all", "pause"])
            if fault == "leader":
                victims = [leader]
            elif fault == "follower":
                victims = [rng.choice([k for k in (1, 2, 3) if k != leader])]
            elif fault == "controller":
                victims = [cluster.controller(via=leader)]
            elif fault == "two":
                victims = [leader, rng.choice([k for k in (1, 2, 3) if k != leader])]
            elif fault == "all":
                victims = [1, 2, 3]
            else:
                victims = [leader]
            print(f"round {round_no}: {fault} {victims}")
            if fault == "pause":
                pid = cluster.node(leader).proc.pid
                os.kill(pid, signal.SIGSTOP)
                time.sleep(rng.uniform(3.5, 6.0))
                os.kill(pid, signal.SIGCONT)
            else:
                for k in victims:
                    cluster.node(k).kill()
                time.sleep(rng.uniform(3.5, 6.0))
                for k in victims:
                    cluster.node(k).start()
            victim = victims[0]
            survivor = next((k for k in (1, 2, 3) if k != victim), 1)
            cluster.wait_for_brokers({1, 2, 3}, via=survivor, timeout_s=60)
            wait_until(
                lambda s=survivor: all(p["isr"] == [1, 2, 3] for p in partitions_of(cluster, s, topic_name).values()),
                90,
                f"every ISR full again after round {round_no}",
            )
    finally:
        stop.set()
        producer.join(240)
        poller.join(60)
    assert not producer.is_alive(), "the producer did not finish"
    acked, sent = dict(history.acked), set(history.sent)
    assert len(acked) > 1000, f"too few acknowledged writes to judge: {len(acked)}"
    seen = read_everything(cluster.node(1).bootstrap, topic_name, len(acked))
    values = [v for _, _, v in seen]
    duplicates = {v for v in values if values.count(v) > 1} if len(values) != len(set(values)) else set()
    assert not duplicates, f"read twice: {sorted(duplicates)[:10]}"
    at = {v: (p, o) for p, o, v in seen}
    lost = [v for v in acked if v not in at]
    assert not lost, f"{len(lost)} acknowledged values lost (seed {seed}): {lost[:10]}"
    moved = [(v, acked[v], at[v]) for v in acked if at[v] != acked[v]]
    assert not moved, f"acknowledged values read elsewhere (seed {seed}): {moved[:10]}"
    invented = [v for v in at if v not in sent]
    assert not invented, f"values never sent: {invented[:10]}"
    check_polls(polled, {(p, o): v for p, o, v in seen}, seed)
    print(
        f"{len(acked)} acknowledged, {len(at) - len(acked)} unacknowledged landed, "
        f"{len(history.failed)} failed, {len(polled)} polled while faults ran"
    )
    wait_identical(cluster, [1, 2, 3], topic_name, PARTITIONS, timeout_s=60)
