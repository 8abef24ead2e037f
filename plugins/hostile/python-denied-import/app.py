"""Hostile: a partitioner that imports what the broker denies (wasi:config/store,
through its own WIT in wit/) and reads a secret with it. The broker must refuse
the deploy, naming the import; it never runs. componentize-py always imports
wasi:sockets and wasi:filesystem (its libc links them), so a denied import in
Python has to come from the world, as here."""

from sluice_sdk import partitioner_api


def partition(record, partition_count: int) -> int:
    from wit_world.imports import store  # the denied import

    secret = store.get("sluice.admin.password")
    return len(str(secret)) % partition_count


PartitionerApi = partitioner_api(partition)
