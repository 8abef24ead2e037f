"""Partition by one field of a JSON value: records with the same
`customer_id` land together even when their keys differ.

The Python twin of plugins/json-field (same parameter, same partitions on
plugins/testdata/json-field-partitioner.json). Parameter: `field`
(required), a path such as `$.customer_id`. The field's bytes (a string's
contents as written, or a number's literal) are hashed like a Java client
key: `toPositive(murmur2(bytes)) % partitions`. Records whose value is
missing, not JSON, or lacks the field (or holds `null`) fall back to the
key's murmur2, then to partition 0.
"""

from sluice_sdk import InvalidParams, Params, Path, Record, murmur2_partition


def init(params: Params) -> Path:
    params.only(["field"])
    field = params.require("field")
    try:
        return Path(field)
    except ValueError as e:
        raise InvalidParams(f"parameter `field`: {e}") from None


def partition(path: Path, record: Record, partition_count: int) -> int:
    found = path.find(record.value) if record.value is not None else None
    if found is None:
        found = record.key
    return 0 if found is None else murmur2_partition(found, partition_count)
