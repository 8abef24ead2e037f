"""Write Sluice plugins in Python: plain functions, the plumbing hidden.

The Python twin of the Rust crate `sluice-sdk` (sdk/src): a plugin is one plain
function per kind, testable with pytest, and an `app.py` that hands it to the
export helper of its kind, which componentize-py builds into a component:

    # my_filter.py                          # app.py (the component's entry point)
    def keep(record) -> bool:               from sluice_sdk import filter_api
        return record.key is not None       import my_filter
                                            FilterApi = filter_api(my_filter.keep)

| kind        | function                                  | export helper      |
|-------------|-------------------------------------------|--------------------|
| partitioner | partition([state,] record, count) -> int  | partitioner_api    |
| filter      | keep([state,] record) -> bool             | filter_api         |
| transform   | transform([state,] record, out) -> None   | transform_api      |
| validator   | validate([state,] record) -> str | None   | validator_api      |

A validator returns None (or falls off its end) to accept a record and a
string, the reason, to refuse it; one refusal refuses the whole batch.

A stateful plugin also passes `init(params) -> state`; its function then gets the
state first. `init` validates with `Params.require` / `Params.only` and raises
`InvalidParams`; a stateless plugin rejects any parameter. Raise `Failed` for a
batch the plugin cannot process; any other exception traps, like a Rust panic,
and the broker discards the instance. Import every module at the top of a file:
the component is pre-initialized at build time and has no filesystem at run
time, so an import first made inside a function fails there.

Helpers with the same results as the Rust SDK, byte for byte: `Path` (find one
JSON field by scanning, escapes not decoded), `check_json` (strict JSON, with the
messages and byte positions of `sluice_sdk::json::check`; from sluice_json.py),
`murmur2` / `murmur2_partition` (Kafka's Java client), `log`. `print()` goes to
the broker's log for this plugin too (stdout at info, stderr at warn). Nothing
here imports the generated bindings (`wit_world`) outside a component, so the
module loads in plain CPython.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from sluice_json import (JSON_DEPTH_MAX, JSON_FAST_CHECK_BYTES_MAX, NotJson, check_json,
                         kind_of_raw, walk_json)

__all__ = [
    "JSON_DEPTH_MAX", "JSON_FAST_CHECK_BYTES_MAX", "Failed", "InvalidParams", "NotJson",
    "Output", "Params", "Path", "PluginError", "Record", "check_json", "filter_api",
    "kind_of_raw", "log", "murmur2", "murmur2_partition", "partitioner_api", "records",
    "refusal", "to_positive", "transform_api", "validator_api", "walk_json",
]


class PluginError(Exception):
    """A plugin failure the host is told about (the WIT `plugin-error`)."""


class InvalidParams(PluginError):
    """`init` rejected its parameters; the message names the parameter."""


class Failed(PluginError):
    """The plugin could not process the batch."""


class Params:
    """The operator's parameters: string key/value pairs, in order."""

    def __init__(self, pairs=()):
        items = pairs.items() if isinstance(pairs, dict) else pairs
        self.pairs = [(str(k), str(v)) for k, v in items]

    def get(self, key: str, default: Optional[str] = None) -> Optional[str]:
        return next((v for k, v in self.pairs if k == key), default)

    def require(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise InvalidParams(f"missing required parameter `{key}`")
        return value

    def only(self, known) -> None:
        """Reject any key not in `known`, so a typo is an error, not ignored."""
        for k, _ in self.pairs:
            if k not in known:
                if not known:
                    raise InvalidParams(f"unknown parameter `{k}`: this plugin takes no parameters")
                raise InvalidParams(f"unknown parameter `{k}`; known parameters: {', '.join(known)}")

    def __len__(self) -> int:
        return len(self.pairs)


@dataclass
class Record:
    """One record: `key` and `value` are bytes, or None (no key / a tombstone)."""

    key: Optional[bytes] = None
    value: Optional[bytes] = None
    headers: list = field(default_factory=list)  # [(name: bytes, value: bytes)]
    offset: int = 0
    timestamp: int = 0  # ms since the epoch

    def header(self, name) -> Optional[bytes]:
        name = name.encode() if isinstance(name, str) else name
        return next((v for n, v in self.headers if n == name), None)


def _bit(bitmap: bytes, i: int) -> bool:
    return bitmap[i >> 3] >> (i & 7) & 1 == 1


def records(batch) -> Iterator[Record]:
    """The records of a columnar `record-batch` (see wit/sluice-plugin.wit).

    The host checks the column shapes before the call; a short column here
    raises IndexError, which traps.
    """
    key_start = value_start = header = 0
    for i, offset in enumerate(batch.offsets):
        key_end, value_end = batch.key_ends[i], batch.value_ends[i]
        key = None if _bit(batch.key_nulls, i) else batch.key_bytes[key_start:key_end]
        value = None if _bit(batch.value_nulls, i) else batch.value_bytes[value_start:value_end]
        key_start, value_start = key_end, value_end
        headers = []
        for _ in range(batch.header_counts[i]):
            e = batch.header_ends
            name_start = e[2 * header - 1] if header else 0
            name_end, value_end_h = e[2 * header], e[2 * header + 1]
            headers.append((batch.header_bytes[name_start:name_end],
                            batch.header_bytes[name_end:value_end_h]))
            header += 1
        yield Record(key, value, headers, offset, batch.timestamps[i])


class Output:
    """What a transform writes its output records to, as columns."""

    def __init__(self):
        self.offsets, self.timestamps = [], []
        self.key_bytes, self.key_ends, self.key_nulls = bytearray(), [], bytearray()
        self.value_bytes, self.value_ends, self.value_nulls = bytearray(), [], bytearray()
        self.header_counts, self.header_bytes, self.header_ends = [], bytearray(), []
        self.source = 0  # index of the input record being transformed

    def keep(self, record: Record) -> None:
        """Emit the input record unchanged."""
        self.push(record.key, record.value, record.headers, record.timestamp)

    def push(self, key, value, headers=(), timestamp: int = 0) -> None:
        """Emit a record made from the current input record."""
        n = len(self.offsets)
        if n % 8 == 0:
            self.key_nulls.append(0)
            self.value_nulls.append(0)
        for data, column, ends, nulls in (
                (key, self.key_bytes, self.key_ends, self.key_nulls),
                (value, self.value_bytes, self.value_ends, self.value_nulls)):
            if data is None:
                nulls[n >> 3] |= 1 << (n & 7)
            else:
                column += data
            ends.append(len(column))
        for name, v in headers:
            self.header_bytes += name
            self.header_ends.append(len(self.header_bytes))
            self.header_bytes += v
            self.header_ends.append(len(self.header_bytes))
        self.header_counts.append(len(headers))
        self.offsets.append(self.source)
        self.timestamps.append(timestamp)

    def records(self) -> list:
        """The records emitted so far (for tests)."""
        return list(records(self))


class Path:
    """A JSON path, `$.a.b` or `a.b` (object members only), found by scanning.

    `find` returns the field's bytes as written: a string's contents without
    its quotes (escapes not decoded), other values as their literal text
    (`42`, `true`, `{...}`); None when the document is not an object along the
    path, the field is missing, or it is `null` (a string whose contents read
    `null` too, as in the Rust SDK). The rest of the document is not parsed.
    """

    # Runs of bytes skipped whole (C speed, where a loop per byte costs the most):
    # Rust's `u8::is_ascii_whitespace` (space, \t, \n, form feed, \r); a string's
    # bytes up to a quote or backslash; a container's bytes up to a bracket, whole
    # strings included (a backslash in one skips the byte after it; an unterminated
    # one stops the run at its quote); a literal's bytes up to `,}]` or space, \t,
    # \r, \n (no form feed). The container's pattern is possessive (`*+`, `++`):
    # a plain `(?:...)*` keeps backtracking state per repetition, over 100 MB for a
    # 1 MB container, which the plugin's 64 MiB memory would not hold.
    _WS = re.compile(rb"[ \t\n\x0c\r]*")
    _STRING_PLAIN = re.compile(rb'[^"\\]*')
    _NESTED_PLAIN = re.compile(rb'(?:[^"{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+', re.DOTALL)
    _LITERAL = re.compile(rb"[^,}\] \t\r\n]*")

    def __init__(self, path: str):
        rest = path[2:] if path.startswith("$.") else path[1:] if path.startswith("$") else path
        if not rest:
            raise ValueError(f"path `{path}` names no field; expected e.g. `$.customer_id`")
        self.segments = [s.encode() for s in rest.split(".")]
        if any(not s for s in self.segments):
            raise ValueError(f"path `{path}` has an empty segment")

    def find(self, doc: bytes) -> Optional[bytes]:
        at = 0
        for segment in self.segments:
            at = self._enter_member(doc, at, segment)
            if at is None:
                return None
        found = self._value(doc, at)
        if found is None or found[0] == b"null":
            return None
        return found[0]

    def find_raw(self, doc: bytes) -> Optional[bytes]:
        """The field's value as written (a string with its quotes, so `kind_of_raw`
        can tell it), or None when missing or `null`, as `find`."""
        at = 0
        for segment in self.segments:
            at = self._enter_member(doc, at, segment)
            if at is None:
                return None
        start = self._skip_ws(doc, at)
        found = self._value(doc, start)
        if found is None or doc[start:found[1]] == b"null":
            return None
        return doc[start:found[1]]

    @classmethod
    def _skip_ws(cls, doc: bytes, at: int) -> int:
        return cls._WS.match(doc, at).end()

    @classmethod
    def _enter_member(cls, doc: bytes, at: int, name: bytes) -> Optional[int]:
        """The position of member `name`'s value in the object at `at`."""
        at = cls._skip_ws(doc, at)
        if doc[at:at + 1] != b"{":
            return None
        at += 1
        while True:
            at = cls._skip_ws(doc, at)
            if doc[at:at + 1] == b"}":
                return None
            found = cls._string(doc, at)
            if found is None:
                return None
            key, at = found
            at = cls._skip_ws(doc, at)
            if doc[at:at + 1] != b":":
                return None
            at += 1
            if key == name:
                return at
            found = cls._value(doc, at)
            if found is None:
                return None
            at = cls._skip_ws(doc, found[1])
            if doc[at:at + 1] != b",":
                return None
            at += 1

    @classmethod
    def _string(cls, doc: bytes, at: int):
        """(contents, position after the closing quote) of the string at `at`."""
        at = cls._skip_ws(doc, at)
        if doc[at:at + 1] != b'"':
            return None
        start = at = at + 1
        while True:
            at = cls._STRING_PLAIN.match(doc, at).end()
            if at >= len(doc):
                return None
            if doc[at] == 0x22:
                return doc[start:at], at + 1
            at += 2  # a backslash: skip the escaped byte, whatever it is

    @classmethod
    def _value(cls, doc: bytes, at: int):
        """(bytes, position after) of any value: a string's contents, else its text."""
        at = cls._skip_ws(doc, at)
        if at >= len(doc):
            return None
        start, first = at, doc[at]
        if first == 0x22:
            return cls._string(doc, at)
        if first in b"{[":
            depth = 0
            while (at := cls._NESTED_PLAIN.match(doc, at).end()) < len(doc):
                byte = doc[at]
                if byte == 0x22:
                    found = cls._string(doc, at)
                    if found is None:
                        return None
                    at = found[1]
                    continue
                if byte in b"{[":
                    depth += 1
                elif byte in b"}]":
                    depth -= 1
                    if depth == 0:
                        return doc[start:at + 1], at + 1
                at += 1
            return None
        at = cls._LITERAL.match(doc, at).end()
        return (doc[start:at], at) if at > start else None


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (the Java client's key hash), as a signed 32-bit int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(data)) & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = data[whole:]
    if tail:
        for i in reversed(range(len(tail))):
            h ^= tail[i] << (8 * i)
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's `Utils.toPositive`: clears the sign bit (not `abs`)."""
    return n & 0x7FFFFFFF


def murmur2_partition(key: bytes, partition_count: int) -> int:
    """`toPositive(murmur2(key)) % partition_count`, the Java client's choice."""
    return to_positive(murmur2(key)) % partition_count


_LEVELS = ("debug", "info", "warn", "error")


def _in_component() -> bool:
    return sys.platform == "wasi"


# In a component, the host's bindings are imported now, while componentize-py
# pre-initializes the app: at run time a component has no filesystem, so a module
# first imported then is not found (the same holds for a plugin's own imports).
_host = None
if _in_component():
    try:
        from wit_world.imports import host as _host, types as _types
    except ImportError:  # a world without sluice:plugin/host (a hostile plugin's own WIT)
        pass


def log(level: str, message: str) -> None:
    """Write to the broker's log for this plugin (natively: to stderr)."""
    if _host is not None:
        _host.log(_types.LogLevel(_LEVELS.index(level)), message)
    else:
        print(f"[plugin {level}] {message}", file=sys.stderr)


# --- Exports: the classes componentize-py instantiates (one per kind). ---


def _export(init: Optional[Callable]):
    """The base of an export class: `init(params)` keeps the plugin's state."""

    class Export:
        # On the class, not the object: the state is the component instance's,
        # whichever object componentize-py makes to dispatch a call.
        state: Any = None

        def init(self, params) -> None:
            with _reported():
                given = Params((p.key, p.value) for p in params)
                if init is None:
                    given.only(())
                else:
                    type(self).state = init(given)

    return Export


class _reported:
    """Turns our PluginError into the WIT `plugin-error`; anything else traps."""

    def __enter__(self):
        return self

    def __exit__(self, kind, error, _tb):
        if isinstance(error, PluginError):
            from componentize_py_types import Err
            from wit_world.imports import types
            variant = (types.PluginError_InvalidParams if isinstance(error, InvalidParams)
                       else types.PluginError_Failed)
            raise Err(variant(str(error))) from None
        return False


def _stateful(fn: Callable, init: Optional[Callable]) -> Callable:
    return fn if init is not None else (lambda _state, *args: fn(*args))


def partitioner_api(partition: Callable, init: Optional[Callable] = None):
    """The `PartitionerApi` export: one partition per record."""
    fn = _stateful(partition, init)

    class PartitionerApi(_export(init)):
        def partition(self, batch, partition_count: int) -> list:
            with _reported():
                return [fn(self.state, r, partition_count) for r in records(batch)]

    return PartitionerApi


def filter_api(keep: Callable, init: Optional[Callable] = None):
    """The `FilterApi` export: a keep bitmap, bit i set keeps record i."""
    fn = _stateful(keep, init)

    class FilterApi(_export(init)):
        def filter(self, batch) -> bytes:
            with _reported():
                bitmap = bytearray((len(batch.offsets) + 7) // 8)
                for i, record in enumerate(records(batch)):
                    if fn(self.state, record):
                        bitmap[i >> 3] |= 1 << (i & 7)
                return bytes(bitmap)

    return FilterApi


def transform_api(transform: Callable, init: Optional[Callable] = None):
    """The `TransformApi` export: the records `transform` emitted, as a batch."""
    fn = _stateful(transform, init)

    class TransformApi(_export(init)):
        def transform(self, batch):
            from wit_world.imports import types
            with _reported():
                out = Output()
                for i, record in enumerate(records(batch)):
                    out.source = i
                    fn(self.state, record, out)
                return types.RecordBatch(
                    out.offsets, out.timestamps, bytes(out.key_bytes), out.key_ends,
                    bytes(out.key_nulls), bytes(out.value_bytes), out.value_ends,
                    bytes(out.value_nulls), out.header_counts, bytes(out.header_bytes),
                    out.header_ends)

    return TransformApi


def refusal(reason) -> Optional[str]:
    """A validator's answer for one record: None accepts, a string (the reason) refuses.

    Anything else is a bug in the plugin (a filter's True/False, say) and raises
    TypeError, which traps."""
    if reason is None or isinstance(reason, str):
        return reason
    raise TypeError("a validator returns None to accept a record or a reason string to "
                    f"refuse it, not {type(reason).__name__} {reason!r}")


def validator_api(validate: Callable, init: Optional[Callable] = None):
    """The `ValidatorApi` export: the refused records, in order, each with its reason."""
    fn = _stateful(validate, init)

    class ValidatorApi(_export(init)):
        def validate(self, batch) -> list:
            from wit_world.exports.validator_api import Rejection
            with _reported():
                return [Rejection(i, reason) for i, reason in
                        ((i, refusal(fn(self.state, r))) for i, r in enumerate(records(batch)))
                        if reason is not None]

    return ValidatorApi
