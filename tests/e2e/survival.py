"""What "the broker survived" means for the hostile-input suites: the process is alive, kcat
can produce and consume a fresh record, and records produced before the attack read back
identical (partition, offset, key, value).

`seed_records` writes the reference data (several partitions; confluent-kafka uncompressed
and gzip, kcat uncompressed and snappy) and reads it back once as the reference;
`assert_survived` checks all three conditions.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaError, TopicPartition

import kafka_messages as km
import kafka_wire as kw
from clients import Record, consumer, create_topic, produce_all, producer
from conftest import Broker
from kafka_wire import KafkaConnection

KCAT_TIMEOUT_S = 60
READ_BACK_TIMEOUT_S = 30.0
KEEP_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1"}

# topic -> (partitions, how its records are written)
SEED_TOPICS = {
    "seed-plain": (3, "confluent"),
    "seed-gzip": (2, "confluent-gzip"),
    "seed-kcat": (2, "kcat"),
}
RECORDS_PER_PARTITION = 40
CANARY_TOPIC = "seed-canary"

Row = tuple[str, int, int, bytes | None, bytes | None]  # topic, partition, offset, key, value


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    kcat_bin = shutil.which("kcat")
    assert kcat_bin, "kcat is not installed (tests/run installs it)"
    proc = subprocess.run(
        [kcat_bin, "-b", bootstrap, *args], input=stdin, capture_output=True, text=True, timeout=KCAT_TIMEOUT_S
    )
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def kcat_round_trip(bootstrap: str) -> float:
    """kcat produces one fresh record to the canary topic and consumes it back; returns the
    seconds it took."""
    started = time.monotonic()
    marker = f"canary-{uuid.uuid4().hex}"
    kcat(bootstrap, "-P", "-t", CANARY_TOPIC, "-p", "0", "-K:", stdin=f"k:{marker}\n")
    lines = kcat(bootstrap, "-C", "-q", "-t", CANARY_TOPIC, "-p", "0", "-e", "-f", "%k|%s\\n").splitlines()
    assert f"k|{marker}" in lines, f"kcat did not read back {marker}: last lines {lines[-3:]}"
    return time.monotonic() - started


@dataclass
class Seeded:
    rows: list[Row]

    @property
    def digest(self) -> str:
        return hashlib.sha256(repr(sorted(self.rows)).encode()).hexdigest()


def _values(topic: str, partition: int) -> list[tuple[bytes, bytes]]:
    return [
        (f"k-{topic}-{partition}-{i}".encode(), f"v-{topic}-{partition}-{i}-{'x' * (i * 7 % 90)}".encode())
        for i in range(RECORDS_PER_PARTITION)
    ]


def seed_records(bootstrap: str) -> Seeded:
    """Writes the reference records and returns them as read back."""
    for topic, (partitions, how) in SEED_TOPICS.items():
        create_topic(bootstrap, topic, partitions, config=KEEP_FOREVER)
        for partition in range(partitions):
            kv = _values(topic, partition)
            if how == "kcat":
                half = len(kv) // 2  # the second half snappy-compressed
                for chunk, extra in ((kv[:half], ()), (kv[half:], ("-z", "snappy"))):
                    lines = "".join(f"{k.decode()}:{v.decode()}\n" for k, v in chunk)
                    kcat(bootstrap, "-P", "-t", topic, "-p", str(partition), "-K:", *extra, stdin=lines)
            else:
                conf = {"compression_type": "gzip"} if how == "confluent-gzip" else {}
                produce_all(producer(bootstrap, **conf), topic, [Record(k, v) for k, v in kv], partition)
    create_topic(bootstrap, CANARY_TOPIC, 1)
    rows = read_rows(bootstrap, {t: (p, RECORDS_PER_PARTITION) for t, (p, _) in SEED_TOPICS.items()})
    expected = sorted((t, p, k, v) for t, (n, _) in SEED_TOPICS.items() for p in range(n) for k, v in _values(t, p))
    assert sorted((t, p, k, v) for t, p, _, k, v in rows) == expected, "seeded records did not read back"
    return Seeded(rows)


def read_rows(bootstrap: str, topics: dict[str, tuple[int, int]]) -> list[Row]:
    """Every record of topic -> (partitions, records per partition), read with one
    confluent-kafka consumer assigned to all of them; fails past the deadline."""
    wanted = {(t, p): n for t, (parts, n) in topics.items() for p in range(parts)}
    got: dict[tuple[str, int], list[Row]] = {tp: [] for tp in wanted}
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(t, p, 0) for t, p in wanted])
        deadline = time.monotonic() + READ_BACK_TIMEOUT_S
        while any(len(got[tp]) < n for tp, n in wanted.items()):
            short = {tp: len(got[tp]) for tp, n in wanted.items() if len(got[tp]) < n}
            assert time.monotonic() < deadline, f"records missing at the deadline (partition: count read): {short}"
            for msg in c.consume(num_messages=1000, timeout=0.5):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, f"consume error: {msg.error()}"
                    continue
                got[(msg.topic(), msg.partition())].append(
                    (msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value())
                )
        return [row for tp in wanted for row in got[tp]]
    finally:
        c.close()


def crash_report(broker: Broker) -> str:
    """The panic or allocation-failure line of the broker's latest crash, if any, with the
    sluice source lines of its backtrace."""
    try:
        lines = broker.log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    picked = [i for i, line in enumerate(lines) if "panicked at" in line or "memory allocation of" in line]
    if not picked:
        return ""
    start = picked[-1]
    end = next((j for j in range(start, len(lines)) if lines[j].startswith("=== start")), len(lines))
    frames = [line.strip() for line in lines[start:end] if "/work/" in line and "/.cargo/" not in line]
    return "\n".join(lines[start : start + 2] + frames[:6])


def crashing(broker: Broker) -> bool:
    """True when the broker's log shows a crash since its latest start (a dying broker may
    go on serving for a second while it prints the backtrace)."""
    try:
        text = broker.log_path.read_text(errors="replace")
    except FileNotFoundError:
        return False
    since_start = text[text.rfind("=== start") :]
    return "panicked at" in since_start or "memory allocation of" in since_start


def crash_signature(broker: Broker) -> str:
    """Where the latest crash happened: its first sluice source line, else its message with
    the numbers blanked."""
    lines = crash_report(broker).splitlines()
    frames = [line for line in lines if "/work/" in line]
    if frames:
        return frames[0].split("/broker/")[-1]
    return re.sub(r"\d+", "N", lines[0]) if lines else "(no crash in the log)"


def assert_survived(broker: Broker, seeded: Seeded, phase: str):
    assert broker.is_running(), f"broker died during {phase} (exit {broker.proc.poll()})\n{crash_report(broker)}"
    kcat_round_trip(broker.bootstrap)
    counts = {t: (p, RECORDS_PER_PARTITION) for t, (p, _) in SEED_TOPICS.items()}
    rows = Seeded(read_rows(broker.bootstrap, counts))
    changed = sorted(set(rows.rows) ^ set(seeded.rows))[:5]
    assert rows.digest == seeded.digest, f"records changed during {phase}: {changed}"
    # Nothing was appended to the seeded partitions either.
    partitions = [(t, p) for t, (n, _) in SEED_TOPICS.items() for p in range(n)]
    with KafkaConnection(broker.bootstrap) as conn:
        for timestamp, expected in ((-2, 0), (-1, RECORDS_PER_PARTITION)):
            answers = km.list_offsets(conn, partitions, timestamp)
            wrong = [a for a in answers if a[2:] != (kw.NONE, expected)]
            assert len(answers) == len(partitions) and not wrong, f"ListOffsets({timestamp}) after {phase}: {wrong}"
