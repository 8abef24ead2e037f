"""Hostile: allocates without bound in `partition` when the key is `bomb`. The
Python twin of plugins/hostile/memory-bomb: when the host refuses to grow the
memory, CPython raises MemoryError, which the SDK does not catch, so the call traps."""

from sluice_sdk import partitioner_api


def partition(record, partition_count: int) -> int:
    if record.key == b"bomb":
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))  # zeroed: every page is written
    return 0


PartitionerApi = partitioner_api(partition)
