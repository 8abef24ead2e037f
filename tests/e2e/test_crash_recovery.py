"""Crash recovery of a real broker process whose segment files were damaged while it was down.

Covers: after SIGKILL (no clean-shutdown marker), the active segment's tail is torn (cut
inside the last batch), corrupted (a flipped byte inside the last batch, so its CRC fails), or
followed by zeros (as after a preallocated or half-written tail); the restarted broker keeps
every whole batch before the damage, drops the damaged one, reports the right high watermark,
and appends after the recovered end. The data-dir layout used to find the segment is the one
documented in docs/config.md (`<data.dir>/topics/<topic>/<partition>/<base offset>.log`).

Batches are written with the raw wire helper so their boundaries are known exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kafka_wire as kw
from clients import create_topic
from kafka_wire import KafkaConnection

BATCHES = 20
RECORDS_PER_BATCH = 5


def value(batch: int, record: int) -> bytes:
    return f"batch-{batch:03d}-record-{record}".encode() * 3


def write_batches(bootstrap: str, topic: str) -> list[int]:
    """Appends BATCHES batches with acks=all; returns each batch's size in bytes."""
    sizes = []
    with KafkaConnection(bootstrap) as conn:
        for b in range(BATCHES):
            batch = kw.record_batch([value(b, r) for r in range(RECORDS_PER_BATCH)])
            result = conn.produce(topic, 0, batch)
            assert (result.error_code, result.base_offset) == (kw.NONE, b * RECORDS_PER_BATCH)
            sizes.append(len(batch))
    return sizes


def active_segment(data_dir: Path, topic: str) -> Path:
    logs = sorted((data_dir / "topics" / topic / "0").glob("*.log"))
    assert logs, f"no segment under {data_dir}/topics/{topic}/0 (layout of docs/config.md changed?)"
    return logs[-1]


def read_all(bootstrap: str, topic: str) -> tuple[list[tuple[int, bytes | None]], int]:
    """Every (offset, value) from offset 0 and the high watermark, via raw fetches."""
    out: list[tuple[int, bytes | None]] = []
    with KafkaConnection(bootstrap) as conn:
        while True:
            result = conn.fetch(topic, 0, len(out))
            assert result.error_code == kw.NONE, result.error_code
            got = [(o, v) for o, v in kw.batch_record_values(result.records or b"") if o >= len(out)]
            if not got:
                return out, result.high_watermark
            out.extend(got)


def tear(segment: Path, last_batch_bytes: int):
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - last_batch_bytes // 2)


def corrupt(segment: Path, last_batch_bytes: int):
    with open(segment, "r+b") as f:
        pos = segment.stat().st_size - last_batch_bytes // 3  # inside the last batch's records
        f.seek(pos)
        byte = f.read(1)
        f.seek(pos)
        f.write(bytes([byte[0] ^ 0xFF]))


def zero_tail(segment: Path, _last_batch_bytes: int):
    with open(segment, "ab") as f:
        f.write(b"\0" * 4096)


@pytest.mark.parametrize(
    "damage, batches_kept",
    [(tear, BATCHES - 1), (corrupt, BATCHES - 1), (zero_tail, BATCHES)],
    ids=["torn-tail", "bad-crc-tail", "zeroed-tail"],
)
def test_recovery_drops_only_the_damaged_tail(broker, topic_name, damage, batches_kept):
    create_topic(broker.bootstrap, topic_name)
    sizes = write_batches(broker.bootstrap, topic_name)
    broker.kill()
    damage(active_segment(broker.data_dir, topic_name), sizes[-1])

    broker.start()
    expected = [(b * RECORDS_PER_BATCH + r, value(b, r)) for b in range(batches_kept) for r in range(RECORDS_PER_BATCH)]
    records, high = read_all(broker.bootstrap, topic_name)
    assert high == len(expected)
    assert records == expected
    with KafkaConnection(broker.bootstrap) as conn:
        result = conn.produce(topic_name, 0, kw.record_batch([b"after recovery"]))
        assert (result.error_code, result.base_offset) == (kw.NONE, len(expected))
    # And the recovered log survives a clean restart unchanged.
    broker.restart()
    records, high = read_all(broker.bootstrap, topic_name)
    assert records == [*expected, (len(expected), b"after recovery")]
