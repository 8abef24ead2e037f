"""A full disk is an error, not corruption: a real broker on a real, small filesystem.

The fixture makes a 64 MiB ext4 image, loop-mounts it (a size-limited tmpfs if loop devices
are unavailable; the test skips, saying why, where neither can be mounted) and runs the
broker with its data dir there (`sluice.acks.all.fsync=true`). The test fills most of the
filesystem with a filler file, then produces acks=all with confluent-kafka (retries off, so
every answer is seen) until the broker answers KAFKA_STORAGE_ERROR. While full: every
error is KAFKA_STORAGE_ERROR, never a success for unstored data; the broker stays up and
serves Metadata, ListOffsets, Fetch and `/metrics` (a fenced partition is counted); every
acknowledged record reads back intact at its offset. Then the filler is deleted and, without
a restart, the fence lifts by itself (the prober's write and fsync succeed, the log is
reopened from disk), producing works again at the next offset, and everything acknowledged
before and after reads back. Segment rolls (small segments) happen on the full disk, so
index block reservations and checkpoints meet ENOSPC too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request

import pytest
from confluent_kafka import KafkaError, Producer

from clients import consume_partition, create_topic, topic_names, watermarks
from conftest import Broker, wait_until

IMAGE_BYTES = 64 * 1024 * 1024
# Left free before producing: a few segments' worth, so rolls happen on the full disk.
HEADROOM_BYTES = 6 * 1024 * 1024
VALUE_BYTES = 16 * 1024
ROUND_RECORDS = 32
ROUNDS_MAX = 400
LIFT_DEADLINE_S = 60.0
TOPIC_CONFIG = {"segment.bytes": str(1024 * 1024), "segment.index.bytes": str(64 * 1024)}


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def small_fs(tmp_path):
    """A mounted small filesystem: (mount point, kind); unmounted and removed afterwards."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    image = tmp_path / "disk.img"
    kind = None
    reasons = []
    if shutil.which("mkfs.ext4"):
        with open(image, "wb") as f:
            f.truncate(IMAGE_BYTES)
        # -m 0: no blocks reserved for root (the broker runs as root here).
        step = run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
        if step.returncode == 0:
            step = run("mount", "-o", "loop", str(image), str(mount))
        if step.returncode == 0:
            kind = "ext4"
        else:
            reasons.append(f"ext4 loop mount: {step.stderr.strip()}")
            image.unlink(missing_ok=True)
    if kind is None:
        mounted = run("mount", "-t", "tmpfs", "-o", f"size={IMAGE_BYTES}", "tmpfs", str(mount))
        if mounted.returncode == 0:
            kind = "tmpfs"
        else:
            reasons.append(f"tmpfs mount: {mounted.stderr.strip()}")
    if kind is None:
        pytest.skip(f"cannot mount a small filesystem here (needs root or CAP_SYS_ADMIN): {reasons}")
    try:
        yield mount, kind
    finally:
        if run("umount", str(mount)).returncode != 0:
            run("umount", "-l", str(mount))
        image.unlink(missing_ok=True)


@pytest.fixture
def full_disk_broker(small_fs, tmp_path, request):
    mount, _ = small_fs
    data = mount / "data"
    data.mkdir()
    broker = Broker(data, tmp_path / "broker.log", {"sluice.acks.all.fsync": "true"}, {})
    broker.start()
    try:
        yield broker
    finally:
        failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
        if failed:
            print(broker.log_tail())
        if broker.is_running():
            broker.stop()


def scrape(broker: Broker) -> dict[str, float]:
    with urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def value_of(i: int) -> bytes:
    head = f"record-{i:08d}-".encode()
    return head + bytes((i * 7 + j) % 251 for j in range(VALUE_BYTES - len(head)))


class Outcomes:
    """Delivery reports of one producer: acknowledged offset -> value, and the errors."""

    def __init__(self):
        self.acked: dict[int, bytes] = {}
        self.errors: list[KafkaError] = []

    def callback(self, value: bytes):
        def cb(err, msg):
            if err is not None:
                self.errors.append(err)
            else:
                assert msg.offset() not in self.acked, f"offset {msg.offset()} acknowledged twice"
                self.acked[msg.offset()] = value

        return cb


def producer(bootstrap: str) -> Producer:
    # No retries and no idempotence: every broker answer reaches the delivery report.
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "linger.ms": 2,
            "message.timeout.ms": 30_000,
        }
    )


def produce_round(p: Producer, topic: str, first: int, out: Outcomes) -> None:
    for i in range(first, first + ROUND_RECORDS):
        value = value_of(i)
        p.produce(topic, value=value, partition=0, on_delivery=out.callback(value))
    assert p.flush(60) == 0, "delivery reports within 60 s"


def fill(mount, keep_free: int):
    """Writes a filler file until `keep_free` bytes are left; returns its path."""
    path = mount / "filler"
    stat = os.statvfs(mount)
    free = stat.f_bavail * stat.f_frsize
    chunk = b"\0" * (1024 * 1024)
    with open(path, "wb") as f:
        for _ in range((free - keep_free) // len(chunk)):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    return path


def read_back(broker: Broker, topic: str, acked: dict[int, bytes]) -> None:
    """Every acknowledged record is at its offset, byte for byte."""
    low, high = watermarks(broker.bootstrap, topic, 0)
    assert low == 0 and high > max(acked), f"watermarks {(low, high)} cover offsets up to {max(acked)}"
    messages = consume_partition(broker.bootstrap, topic, 0, high)
    by_offset = {m.offset(): m.value() for m in messages}
    missing = [o for o in acked if by_offset.get(o) != acked[o]]
    assert not missing, f"{len(missing)} acknowledged records missing or changed, first {missing[:5]}"


def test_full_disk_fails_produce_then_recovers_without_restart(full_disk_broker, small_fs, topic_name):
    broker = full_disk_broker
    mount, kind = small_fs
    create_topic(broker.bootstrap, topic_name, config=TOPIC_CONFIG)
    filler = fill(mount, HEADROOM_BYTES)
    out = Outcomes()
    p = producer(broker.bootstrap)
    next_record = 0
    for _ in range(ROUNDS_MAX):
        produce_round(p, topic_name, next_record, out)
        next_record += ROUND_RECORDS
        if out.errors:
            break
    assert out.errors, f"the {kind} filesystem never filled after {next_record} records"
    assert out.acked, "some records were acknowledged before the disk filled"
    codes = {e.code() for e in out.errors}
    assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, f"errors on a full disk: {out.errors[:3]}"

    # Still full: more produces fail, nothing new is acknowledged; everything else works.
    acked_while_full = len(out.acked)
    produce_round(p, topic_name, next_record, out)
    next_record += ROUND_RECORDS
    assert len(out.acked) == acked_while_full, "nothing is acknowledged while the disk is full"
    assert broker.is_running()
    assert topic_name in topic_names(broker.bootstrap), "Metadata is served while full"
    assert scrape(broker)["sluice_storage_fenced_partitions"] >= 1
    read_back(broker, topic_name, out.acked)
    pid = broker.pid

    # Free space: the fence lifts by itself and producing continues at the next offset.
    filler.unlink()
    os.sync()
    end_before = watermarks(broker.bootstrap, topic_name, 0)[1]
    acked_before = max(out.acked)

    def produce_one():
        nonlocal next_record
        probe = Outcomes()
        value = value_of(next_record)
        next_record += 1
        p.produce(topic_name, value=value, partition=0, on_delivery=probe.callback(value))
        assert p.flush(60) == 0
        assert {e.code() for e in probe.errors} <= {KafkaError.KAFKA_STORAGE_ERROR}, probe.errors[:3]
        out.acked.update(probe.acked)
        return min(probe.acked, default=None)

    first_after = wait_until(
        lambda: produce_one() is not None, LIFT_DEADLINE_S, "producing to work again after space was freed", 0.2
    )
    assert first_after
    first_offset = min(o for o in out.acked if o > acked_before)
    assert acked_before < first_offset <= end_before, (
        f"appends continue at the reopened log end: {first_offset} after {acked_before}, log end was {end_before}"
    )
    produce_round(p, topic_name, next_record, out)
    assert broker.pid == pid and broker.is_running(), "no restart"
    metrics = scrape(broker)
    assert metrics["sluice_storage_fence_lifted_total"] >= 1
    assert metrics["sluice_storage_fenced_partitions"] == 0
    read_back(broker, topic_name, out.acked)
