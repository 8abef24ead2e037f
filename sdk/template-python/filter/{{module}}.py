"""A Sluice filter: keeps the records that have a key."""

from sluice_sdk import Record


def keep(record: Record) -> bool:
    return record.key is not None
