"""A Sluice partitioner: same key, same partition, as the Java client's
default for keyed records; keyless records go to partition 0."""

from sluice_sdk import Record, murmur2_partition


def partition(record: Record, partition_count: int) -> int:
    if record.key is None:
        return 0
    return murmur2_partition(record.key, partition_count)
