"""`sluice debug dump-log`: a partition's record batches read straight from its segment files,
as Kafka's `kafka-dump-log` prints them (docs/format.md), beside a running broker."""

from __future__ import annotations

import json
import shutil
import subprocess

from confluent_kafka import Producer

from clients import create_topic
from conftest import sluice_bin


def dump(path) -> list[dict]:
    run = subprocess.run([sluice_bin(), "debug", "dump-log", str(path), "--output", "json"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines() if not line.startswith("#")]


def test_dump_log_lists_every_batch_with_its_offsets_epochs_and_crc(broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(3):
        plain.produce(topic_name, partition=0, value=f"plain-{i}".encode())
        plain.flush(30)
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-tx"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic_name, partition=0, value=b"in-a-transaction")
    txn.commit_transaction(30)

    partition = broker.data_dir / "topics" / topic_name / "0"
    batches = dump(partition)
    # Three plain batches, the transaction's batch and its COMMIT marker, back to back.
    assert [b["base_offset"] for b in batches] == [0, 1, 2, 3, 4], batches
    assert all(b["crc_valid"] for b in batches)
    assert [b["is_transactional"] for b in batches] == [False, False, False, True, True]
    assert [b["is_control"] for b in batches] == [False, False, False, False, True]
    assert batches[3]["producer_id"] == batches[4]["producer_id"] >= 0
    positions = [b["position"] for b in batches]
    assert positions == [0] + [sum(b["size"] for b in batches[:i]) for i in range(1, 5)]

    # A flipped byte in a copy: that batch's CRC is reported invalid, the others still read.
    [segment] = sorted(partition.glob("*.log"))
    copy = tmp_path / segment.name
    shutil.copyfile(segment, copy)
    data = bytearray(copy.read_bytes())
    data[batches[1]["position"] + batches[1]["size"] - 1] ^= 0xFF
    copy.write_bytes(bytes(data))
    damaged = dump(copy)
    assert [b["crc_valid"] for b in damaged[:5]] == [True, False, True, True, True]
    # A torn tail ends the dump with a line saying where.
    copy.write_bytes(bytes(data[: batches[4]["position"] + 20]))
    run = subprocess.run([sluice_bin(), "debug", "dump-log", str(copy)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and f"torn tail at position {batches[4]['position']}" in run.stdout, run.stdout
    assert run.stdout.count("baseOffset:") == 4
