"""A Sluice transform: passes every record through unchanged. Call
`out.push(key, value, headers, timestamp)` to emit something else, or nothing
to drop the record."""

from sluice_sdk import Output, Record


def transform(record: Record, out: Output) -> None:
    out.keep(record)
