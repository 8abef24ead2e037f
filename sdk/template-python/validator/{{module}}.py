"""A Sluice validator: refuses records that have no key."""

from typing import Optional

from sluice_sdk import Record


def validate(record: Record) -> Optional[str]:
    """None accepts the record; a string, the reason, refuses it (and its whole batch)."""
    if record.key is None:
        return "a record needs a key"
    return None
