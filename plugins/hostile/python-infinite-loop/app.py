"""Hostile: never returns from `partition`, unless the key is `ok` (so the same
plugin also proves the host recovers after stopping it). The Python twin of
plugins/hostile/infinite-loop. Says so on stderr first: the host puts a guest's stdio in
the plugin's log, even for a call it stops."""

import sys

from sluice_sdk import partitioner_api


def partition(record, partition_count: int) -> int:
    if record.key != b"ok":
        print(f"spinning on key {record.key!r}", file=sys.stderr, flush=True)
    n = 0
    while record.key != b"ok":
        n += 1
    return n % partition_count


PartitionerApi = partitioner_api(partition)
