"""What empty partitions cost on disk: kilobytes, whatever `segment.index.bytes` says.

Issue 34: every empty partition took 20 MB of real disk (its offset and time indexes were
allocated whole at `segment.index.bytes`, 10 MiB each), so about 3,650 empty partitions
filled an 80 GB disk. The indexes are sparse now (blocks reserved a step ahead of the
entries, docs/format.md). The test creates `EMPTY_PARTITIONS` partitions, half of them with
`segment.index.bytes` far above the default, writes nothing, and sums the real disk use of
the data dir (`st_blocks` x 512 of every file and directory, not their lengths) before and
after: the growth per partition must stay under `EMPTY_PARTITION_DISK_BYTES_MAX`, while the
index files keep their full lengths. Again after a restart (clean close: indexes trimmed,
producer snapshots and clean-shutdown markers written; reopen: new leader epochs).
"""

from __future__ import annotations

import os
from pathlib import Path

from clients import create_topic

EMPTY_PARTITIONS = 200
# Per empty partition: its directory and a few small files (checkpoint, leader epochs,
# producer snapshot, clean-shutdown marker), a block each; the old 20 MiB was 320 times this.
EMPTY_PARTITION_DISK_BYTES_MAX = 64 * 1024
LARGE_INDEX_BYTES = 64 * 1024 * 1024


def disk_bytes(root: Path) -> int:
    """Real disk use under `root`: allocated blocks, not lengths (sparse files count little)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def index_lengths(data: Path) -> list[int]:
    return [p.stat().st_size for p in (data / "topics").rglob("*.index")]


def test_empty_partitions_cost_kilobytes_of_disk(broker, topic_name):
    before = disk_bytes(broker.data_dir)
    half = EMPTY_PARTITIONS // 2
    create_topic(broker.bootstrap, f"{topic_name}-default", partitions=half)
    large = {"segment.index.bytes": str(LARGE_INDEX_BYTES)}
    create_topic(broker.bootstrap, f"{topic_name}-large", partitions=half, config=large)
    lengths = index_lengths(broker.data_dir)
    assert len(lengths) == EMPTY_PARTITIONS
    assert sum(lengths) >= half * (10 * 1024 * 1024 + LARGE_INDEX_BYTES) * 0.99, "sized, not allocated"

    grown = disk_bytes(broker.data_dir) - before
    per_partition = grown / EMPTY_PARTITIONS
    print(f"{EMPTY_PARTITIONS} empty partitions: {grown} bytes of disk, {per_partition:.0f} each")
    assert per_partition <= EMPTY_PARTITION_DISK_BYTES_MAX, (
        f"{EMPTY_PARTITIONS} empty partitions took {grown} bytes of disk, {per_partition:.0f} each"
    )

    broker.restart()
    grown = disk_bytes(broker.data_dir) - before
    print(f"after a restart: {grown} bytes, {grown / EMPTY_PARTITIONS:.0f} each")
    assert grown / EMPTY_PARTITIONS <= EMPTY_PARTITION_DISK_BYTES_MAX, (
        f"after a restart: {grown} bytes of disk for {EMPTY_PARTITIONS} empty partitions"
    )
