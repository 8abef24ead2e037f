"""The machinery of one kill -9 trial (`test_kill9.py` runs many): its seeded plan, the
producer and consumer-group threads that record what the broker acknowledged, the SIGKILL and
restart on the same data dir and port, and the checker that holds the recovered broker to
every acknowledgement.

A trial, in order:
1. a broker (`sluice.acks.all.fsync` as the test says) and one topic of 2-6 partitions with
   small segments (so rolls and index entries happen during the trial);
2. two confluent-kafka producers, acks=all, each with its own codec (none, lz4, zstd, gzip,
   snappy) and idempotence off or on, send short bursts of small keyed records; every value
   is unique (`<seed>/<producer>/<seq>/` + padding) and every successful delivery report is
   kept as value -> (partition, offset);
3. a consumer group member (enable.auto.commit=false) consumes and commits each batch with a
   synchronous commit(); every partition offset the broker acknowledged is kept;
4. once both are under way, a pause drawn from the seeded RNG, then SIGKILL; the broker is
   restarted on the same data dir and port, so the clients reconnect and retry what was in
   flight (a retried batch whose ack was lost may be stored twice: counted, not failed); in a
   third of the trials it is SIGKILLed once more within 0.5 s of listening again, and in a
   quarter the first SIGKILL comes 0-0.2 s after a SIGTERM, in the middle of the shutdown;
5. the committed offsets are read before anything commits again, the producers send one more
   burst and flush, the log is read back whole, and the group member drains it to the end.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from clients import create_topic
from conftest import Broker

CODECS = ("none", "lz4", "zstd", "gzip", "snappy")
PRODUCERS_PER_TRIAL = 2
KILL_AFTER_S = (0.2, 2.0)
# A third of the trials kill the restarted broker once more, this soon after it listens,
# while the clients are still reconnecting and retrying.
SECOND_KILL_CHANCE = 1 / 3
SECOND_KILL_AFTER_S = (0.0, 0.5)
# A quarter of the trials send SIGTERM first and SIGKILL this soon after, mid-shutdown (a
# broker that finished shutting down by then must have exited 0).
TERM_FIRST_CHANCE = 1 / 4
TERM_GRACE_S = (0.0, 0.2)
# Segment sizes drawn per trial: small enough to roll several times in a trial, larger than
# the producers' batch.size (a batch bigger than a segment is refused).
SEGMENT_BYTES_CHOICES = (32 * 1024, 128 * 1024, 1024 * 1024)
PRODUCER_BATCH_BYTES = 16 * 1024
BURST_RECORDS = (10, 150)
BURST_GAP_S = (0.01, 0.05)
VALUE_PADDING_BYTES = (0, 120)
BURSTS_AFTER_RESTART = 1
# librdkafka's reconnect backoff grows to 10 s by default; keep the restart gap short.
RECONNECT_BACKOFF_MAX_MS = 300
MESSAGE_TIMEOUT_MS = 30_000
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 300
STARTED_DEADLINE_S = 30.0
JOIN_DEADLINE_S = 60.0
DRAIN_DEADLINE_S = 60.0
FLUSH_DEADLINE_S = 45.0
# librdkafka's level-3 connection errors while the broker is down are the experiment, not news.
CLIENT_LOG_LEVEL = 2
# Where PinnedBroker looks for its port: the span just below the ephemeral range (and 32000).
PINNED_PORT_MAX = 32_000
PINNED_PORT_SPAN = 12_000
PINNED_PORT_TRIES = 50
BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


class PinnedBroker(Broker):
    """A broker that always listens on one port, so its clients reconnect after a restart.

    The port is below the kernel's ephemeral range: no port-0 listener or outgoing connection
    (of a parallel worker, say) can take it between a kill and the restart."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pinned_port = free_port_below_ephemeral()

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listen") + 1] = f"127.0.0.1:{self.pinned_port}"
        return cmd


def free_port_below_ephemeral() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    high = min(PINNED_PORT_MAX, ephemeral_low)
    rng = random.Random()  # not the trial's RNG: the port is no part of the plan
    for _ in range(PINNED_PORT_TRIES):
        port = rng.randrange(max(1024, high - PINNED_PORT_SPAN), high)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port below {high} in {PINNED_PORT_TRIES} tries")


@dataclass(frozen=True)
class ProducerPlan:
    name: str
    compression: str
    idempotence: bool
    seed: str


@dataclass(frozen=True)
class TrialPlan:
    seed: str
    fsync: bool
    topic: str
    partitions: int
    segment_bytes: int
    kill_after_s: float
    second_kill_after_s: float | None
    term_grace_s: float | None
    producers: tuple[ProducerPlan, ...]

    @classmethod
    def draw(cls, base_seed: int, index: int, fsync: bool) -> TrialPlan:
        """Trial `index` of a run; codec and idempotence cycle so every pair comes up."""
        seed = f"{base_seed}:{index}:{'fsync' if fsync else 'cache'}"
        rng = random.Random(seed)
        producers = []
        for j in range(PRODUCERS_PER_TRIAL):
            k = index * PRODUCERS_PER_TRIAL + j
            codec = CODECS[k % len(CODECS)]
            idempotence = (k // len(CODECS)) % 2 == 1
            producers.append(ProducerPlan(f"p{j}", codec, idempotence, f"{seed}/p{j}"))
        return cls(
            seed=seed,
            fsync=fsync,
            topic=f"kill9-{index}-{'fsync' if fsync else 'cache'}",
            partitions=rng.randint(2, 6),
            segment_bytes=rng.choice(SEGMENT_BYTES_CHOICES),
            kill_after_s=round(rng.uniform(*KILL_AFTER_S), 3),
            second_kill_after_s=round(rng.uniform(*SECOND_KILL_AFTER_S), 3)
            if rng.random() < SECOND_KILL_CHANCE
            else None,
            term_grace_s=round(rng.uniform(*TERM_GRACE_S), 3) if rng.random() < TERM_FIRST_CHANCE else None,
            producers=tuple(producers),
        )

    def describe(self) -> str:
        clients = ", ".join(f"{p.name}={p.compression}{'+idempotent' if p.idempotence else ''}" for p in self.producers)
        return (
            f"seed={self.seed} partitions={self.partitions} segment.bytes={self.segment_bytes} "
            f"kill_after={self.kill_after_s}s term_grace={self.term_grace_s} "
            f"second_kill_after={self.second_kill_after_s} producers: {clients}"
        )


class ProducerThread(threading.Thread):
    """Bursts of records until the kill, one more burst once the broker is back, then flush."""

    def __init__(self, plan: ProducerPlan, bootstrap: str, topic: str, broker_back: threading.Event):
        super().__init__(name=f"kill9-{plan.name}", daemon=True)
        self.plan = plan
        self.topic = topic
        self.broker_back = broker_back
        self.stop_producing = threading.Event()
        self.rng = random.Random(plan.seed)
        self.seq = 0
        # Every value handed to produce(); every successful delivery report.
        self.sent: set[bytes] = set()
        self.acked: dict[bytes, tuple[int, int]] = {}
        # A value reported delivered twice (at any place): the broker acked one record twice.
        self.double_acks: list[tuple[bytes, tuple[int, int], tuple[int, int]]] = []
        self.failed = 0
        self.fatal: list[str] = []
        self.unflushed = 0
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "log_level": CLIENT_LOG_LEVEL,
                "enable.idempotence": plan.idempotence,
                "compression.type": plan.compression,
                "linger.ms": 5,
                "batch.size": PRODUCER_BATCH_BYTES,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
                "error_cb": self._on_error,
            }
        )

    def _on_error(self, err: KafkaError):
        if err.fatal():
            self.fatal.append(str(err))

    def _on_delivery(self, err, msg):
        if err is not None:
            self.failed += 1
            return
        place = (msg.partition(), msg.offset())
        value = msg.value()
        if value in self.acked:
            self.double_acks.append((value, self.acked[value], place))
        self.acked[value] = place

    def _burst(self):
        for _ in range(self.rng.randint(*BURST_RECORDS)):
            value = f"{self.plan.seed}/{self.seq:07d}/".encode() + b"x" * self.rng.randint(*VALUE_PADDING_BYTES)
            key = None if self.seq % 3 == 0 else f"k{self.seq % 13}".encode()
            try:
                self.producer.produce(self.topic, key=key, value=value, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.05)
                continue
            except KafkaException as err:  # fatal idempotence state: recorded by error_cb too
                self.fatal.append(str(err))
                return
            self.sent.add(value)
            self.seq += 1
        self.producer.poll(0)

    def run(self):
        while not self.stop_producing.is_set() and not self.fatal:
            self._burst()
            # Delivery reports: the next burst once this one is acked, or after the gap.
            self.producer.flush(self.rng.uniform(*BURST_GAP_S))
        if not self.broker_back.wait(JOIN_DEADLINE_S):
            return
        for _ in range(BURSTS_AFTER_RESTART):
            self._burst()
        self.unflushed = self.producer.flush(FLUSH_DEADLINE_S)
        if self.unflushed:
            self.producer.purge()
            self.producer.flush(5)

    @property
    def in_flight(self) -> int:
        return len(self.producer)


class GroupMember:
    """One group consumer: consume a batch, commit its end with a synchronous commit()."""

    def __init__(self, bootstrap: str, topic: str, group: str, seed: str):
        self.topic = topic
        self.rng = random.Random(f"{seed}/consumer")
        self.assigned = threading.Event()
        self.assignments = 0
        self.stop = threading.Event()
        self.reads: list[tuple[int, int, bytes]] = []
        # Highest offset the broker acknowledged per partition, and the count of those acks.
        self.acked_commits: dict[int, int] = {}
        self.commits_acked = 0
        self.commits_failed = 0
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": CLIENT_LOG_LEVEL,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.thread = threading.Thread(target=self._until_stopped, name="kill9-consumer", daemon=True)

    def _on_assign(self, _consumer, _partitions):
        self.assignments += 1
        self.assigned.set()

    def _until_stopped(self):
        while not self.stop.is_set():
            self.step()

    def step(self) -> dict[int, int]:
        """Consumes one batch and commits it; returns the offsets the broker acknowledged."""
        positions: dict[int, int] = {}
        for msg in self.consumer.consume(num_messages=self.rng.randint(1, 500), timeout=0.05):
            if msg.error():
                continue  # transport errors while the broker is down; not records
            self.reads.append((msg.partition(), msg.offset(), msg.value()))
            positions[msg.partition()] = msg.offset() + 1
        if not positions:
            return {}
        offsets = [TopicPartition(self.topic, p, o) for p, o in positions.items()]
        try:
            result = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            self.commits_failed += 1
            return {}
        acked = {tp.partition: tp.offset for tp in result if tp.error is None}
        self.commits_failed += len(result) - len(acked)
        for p, o in acked.items():
            self.acked_commits[p] = max(self.acked_commits.get(p, -1), o)
        self.commits_acked += len(acked)
        return acked

    def drain(self, highs: dict[int, int], committed: dict[int, int], assignments_before: int):
        """After the restart: rejoin (the broker forgot the member), then consume and commit
        from the committed offsets until every partition is committed at its end."""
        done = dict(committed)
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        want = {p: h for p, h in highs.items() if h > 0}
        while self.assignments == assignments_before or any(done.get(p, -1) < h for p, h in want.items()):
            assert time.monotonic() < deadline, (
                f"group member (assignments {assignments_before} -> {self.assignments}) "
                f"committed {done} of {want} before the deadline"
            )
            for p, o in self.step().items():
                done[p] = max(done.get(p, -1), o)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (OffsetFetch from a consumer outside it)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    for tp in tps:
        assert tp.error is None, f"committed() for {topic}-{tp.partition}: {tp.error}"
    return {tp.partition: tp.offset for tp in tps}


def read_log(bootstrap: str, topic: str, partitions: int) -> tuple[dict[int, tuple[int, int]], dict[int, list]]:
    """Watermarks and every (offset, value) of each partition, read with assign() from 0."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kill9-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        marks = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False) for p in range(partitions)
        }
        logs: dict[int, list] = {p: [] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        while any(len(logs[p]) < high for p, (_, high) in marks.items()):
            assert time.monotonic() < deadline, "the log did not read back before the deadline"
            for msg in c.consume(num_messages=10_000, timeout=0.2):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, f"read error: {msg.error()}"
                    continue
                logs[msg.partition()].append((msg.offset(), msg.value()))
        return marks, logs
    finally:
        c.close()


@dataclass
class Outcome:
    """What one trial saw and what it found wrong."""

    acked: int = 0
    reads: int = 0
    commits: int = 0
    in_flight_at_kill: int = 0
    kills: int = 1
    # How the first stop went: "kill", "term+kill" (SIGKILL mid-shutdown), "term" (exited 0 first).
    stop: str = "kill"
    # Seconds from the trial's start to each phase's end, for the log of a slow trial.
    phases: dict[str, float] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def kill_maybe_mid_shutdown(broker: Broker, term_grace_s: float | None) -> str:
    """SIGKILL; with a grace, SIGTERM first and SIGKILL once the grace is over. Says which."""
    how = "kill"
    if term_grace_s is not None:
        broker.proc.send_signal(signal.SIGTERM)
        try:
            rc = broker.proc.wait(timeout=term_grace_s)
        except subprocess.TimeoutExpired:
            how = "term+kill"
        else:
            assert rc == 0, f"broker exited {rc} after SIGTERM\n{broker.log_tail()}"
            how = "term"
    broker.kill()
    return how


def run_trial(plan: TrialPlan, broker: Broker) -> Outcome:
    """Runs the trial of `plan` on a started broker; leaves it running (restarted) at the end."""
    config = {"segment.bytes": str(plan.segment_bytes), "index.interval.bytes": "512"}
    create_topic(broker.bootstrap, plan.topic, partitions=plan.partitions, config=config)
    group = f"kill9-{plan.seed}"
    back = threading.Event()
    producers = [ProducerThread(p, broker.bootstrap, plan.topic, back) for p in plan.producers]
    member = GroupMember(broker.bootstrap, plan.topic, group, plan.seed)
    for t in producers:
        t.start()
    member.thread.start()
    began = time.monotonic()
    phases = {}
    started = began + STARTED_DEADLINE_S
    while not (member.assigned.is_set() and all(t.acked for t in producers) and member.commits_acked):
        assert time.monotonic() < started, "producers and group member never got going"
        member.assigned.wait(0.01)
    phases["under_way"] = time.monotonic() - began
    time.sleep(plan.kill_after_s)  # the experiment: where in the stream the kill lands
    how = kill_maybe_mid_shutdown(broker, plan.term_grace_s)
    assignments_before = member.assignments
    outcome = Outcome(in_flight_at_kill=sum(t.in_flight for t in producers), phases=phases, stop=how)
    phases["killed"] = time.monotonic() - began
    for t in producers:
        t.stop_producing.set()
    member.stop.set()
    broker.start()
    if plan.second_kill_after_s is not None:
        time.sleep(plan.second_kill_after_s)  # the experiment again, just after the restart
        broker.kill()
        outcome.kills += 1
        broker.start()
    back.set()
    phases["restarted"] = time.monotonic() - began
    member.thread.join(JOIN_DEADLINE_S)
    assert not member.thread.is_alive(), "group member still busy after the restart"
    acked_commits = dict(member.acked_commits)
    committed = committed_offsets(broker.bootstrap, group, plan.topic, plan.partitions)
    for t in producers:
        t.join(FLUSH_DEADLINE_S + 10)
        assert not t.is_alive(), f"producer {t.plan.name} did not finish"
    phases["flushed"] = time.monotonic() - began
    marks, logs = read_log(broker.bootstrap, plan.topic, plan.partitions)
    highs = {p: high for p, (_, high) in marks.items()}
    phases["read_back"] = time.monotonic() - began
    member.drain(highs, committed, assignments_before)
    phases["drained"] = time.monotonic() - began
    final = committed_offsets(broker.bootstrap, group, plan.topic, plan.partitions)
    member.consumer.close()
    log = Recovered(marks, logs)
    check_records(producers, log, outcome)
    check_reads(member, log, outcome)
    check_commits(acked_commits, committed, final, highs, outcome)
    outcome.reads = len(member.reads)
    outcome.commits = member.commits_acked
    return outcome


def short(value: bytes) -> str:
    """The unique id of a value (its padding left off)."""
    return value.rstrip(b"x").rstrip(b"/").decode(errors="replace")


class Recovered:
    """The log as read back after the restart: where each value sits."""

    def __init__(self, marks: dict[int, tuple[int, int]], logs: dict[int, list]):
        self.marks = marks
        self.logs = logs
        self.places: dict[bytes, list[tuple[int, int]]] = {}
        for p, records in logs.items():
            for offset, value in records:
                self.places.setdefault(value, []).append((p, offset))

    def holds(self, value: bytes, place: tuple[int, int]) -> bool:
        return place in self.places.get(value, ())


def check_records(producers: list[ProducerThread], log: Recovered, out: Outcome):
    """Acked records at their acked place, contiguous offsets from 0, no record never sent."""
    sent: set[bytes] = set()
    acked: dict[bytes, tuple[int, int]] = {}
    for t in producers:
        sent |= t.sent
        acked.update(t.acked)
        out.violations += [
            f"{t.plan.name}: {short(v)} acknowledged twice, at {a} and at {b}" for v, a, b in t.double_acks
        ]
        out.violations += [f"{t.plan.name}: fatal producer error: {e}" for e in t.fatal[:1]]
        if t.unflushed:
            out.violations.append(f"{t.plan.name}: {t.unflushed} records undelivered {FLUSH_DEADLINE_S}s after restart")
    for p, (low, high) in log.marks.items():
        offsets = [o for o, _ in log.logs[p]]
        if low != 0 or offsets != list(range(high)):
            gaps = sorted(set(range(high)) ^ set(offsets))[:5]
            out.violations.append(f"partition {p}: watermarks ({low}, {high}), offsets not 0..{high}: first odd {gaps}")
    for value, place in sorted(acked.items(), key=lambda kv: kv[1]):
        if not log.holds(value, place):
            found = log.places.get(value, "nowhere")
            out.violations.append(f"acked {short(value)} at (partition, offset) {place} but found {found}")
    out.violations += [f"read back {short(v)} at {w}: never produced" for v, w in log.places.items() if v not in sent]
    for value, where in log.places.items():
        if len(where) > 1:
            first = "first copy acked" if acked.get(value) == min(where) else f"acked at {acked.get(value)}"
            out.duplicates.append(f"{short(value)} stored at {where} ({first})")
    out.acked = len(acked)


def check_reads(member: GroupMember, log: Recovered, out: Outcome):
    """What the group member read (before and after the kill) is where it read it."""
    wrong = [(p, o, v) for p, o, v in member.reads if not log.holds(v, (p, o))]
    out.violations += [
        f"group member read {short(v)} at {(p, o)}; the log has it at {log.places.get(v)}" for p, o, v in wrong[:5]
    ]


def check_commits(
    acked: dict[int, int], committed: dict[int, int], final: dict[int, int], highs: dict[int, int], out: Outcome
):
    """Every commit acked before the kill survives; after draining, the group is at the end."""
    for p, offset in sorted(acked.items()):
        got = committed.get(p, -1)
        if got < offset:
            out.violations.append(f"partition {p}: commit of {offset} was acknowledged, after restart {got}")
        if got > highs[p]:
            out.violations.append(f"partition {p}: committed {got} beyond the high watermark {highs[p]}")
    for p, high in sorted(highs.items()):
        if high > 0 and final.get(p) != high:
            out.violations.append(f"partition {p}: drained to {high} and committed, reads back {final.get(p)}")
