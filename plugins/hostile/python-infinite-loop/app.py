"""Hostile: never returns from `partition`, unless the key is `ok` (so the same
plugin also proves the host recovers after stopping it). The Python twin of
plugins/hostile/infinite-loop."""

from sluice_sdk import partitioner_api


def partition(record, partition_count: int) -> int:
    n = 0
    while record.key != b"ok":
        n += 1
    return n % partition_count


PartitionerApi = partitioner_api(partition)
