"""A tiny raw Kafka wire helper for tests that real clients cannot express (bad frames, bad
CRCs, old versions, exact long-poll timing). Not a client: only the few request/response
versions the tests use, encoded with `struct` from the protocol guide
(https://kafka.apache.org/protocol): non-flexible versions (request header v1, response
header v0), plus ApiVersions v3's flexible header.

Layout: primitive encoders; `Fields` (a body built field by field, so the fuzzer knows the
field boundaries and which fields are lengths or counts); CRC-32C; record batches (any
header values, gzip, raw payloads); the response reader; `KafkaConnection`. Request bodies
of the other APIs are in kafka_messages.py.
"""

from __future__ import annotations

import gzip
import json
import random
import socket
import struct
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

API_PRODUCE = 0
API_FETCH = 1
API_GET_TELEMETRY_SUBSCRIPTIONS = 71
API_PUSH_TELEMETRY = 72
API_LIST_OFFSETS = 2
API_METADATA = 3
API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_JOIN_GROUP = 11
API_HEARTBEAT = 12
API_LEAVE_GROUP = 13
API_SYNC_GROUP = 14
API_DESCRIBE_GROUPS = 15
API_LIST_GROUPS = 16
API_API_VERSIONS = 18
API_CREATE_TOPICS = 19
API_DELETE_TOPICS = 20
API_INIT_PRODUCER_ID = 22
API_DESCRIBE_CONFIGS = 32
API_DELETE_GROUPS = 42
API_INCREMENTAL_ALTER_CONFIGS = 44
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
API_DESCRIBE_ACLS = 29
API_CREATE_ACLS = 30
API_DELETE_ACLS = 31
API_DESCRIBE_CLIENT_QUOTAS = 48
API_ALTER_CLIENT_QUOTAS = 49
API_DESCRIBE_USER_SCRAM_CREDENTIALS = 50
API_ALTER_USER_SCRAM_CREDENTIALS = 51
API_DESCRIBE_PRODUCERS = 61
API_ADD_PARTITIONS_TO_TXN = 24
API_ADD_OFFSETS_TO_TXN = 25
API_END_TXN = 26
API_WRITE_TXN_MARKERS = 27
API_TXN_OFFSET_COMMIT = 28
API_DESCRIBE_TRANSACTIONS = 65
API_CREATE_PARTITIONS = 37
API_DESCRIBE_LOG_DIRS = 35
API_OFFSET_FOR_LEADER_EPOCH = 23
API_ELECT_LEADERS = 43
API_DESCRIBE_CLUSTER = 60
API_DELETE_RECORDS = 21
API_ALTER_CONFIGS = 33
API_OFFSET_DELETE = 47
API_LIST_TRANSACTIONS = 66
API_CONSUMER_GROUP_HEARTBEAT = 68
API_CONSUMER_GROUP_DESCRIBE = 69
API_LIST_CONFIG_RESOURCES = 74
API_DESCRIBE_TOPIC_PARTITIONS = 75

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
INVALID_REQUIRED_ACKS = 21
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
UNSUPPORTED_COMPRESSION_TYPE = 76
MEMBER_ID_REQUIRED = 79
INVALID_RECORD = 87

# Record batch attributes.
COMPRESSION_GZIP = 1
ATTR_CONTROL = 0x20


# --- primitive encoders -------------------------------------------------------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def nbytes(b: bytes | None) -> bytes:
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def array(items: list[bytes]) -> bytes:
    return i32(len(items)) + b"".join(items)


def uvarint(v: int) -> bytes:
    """Unsigned varint (flexible versions' lengths and tag counts)."""
    out = bytearray()
    while True:
        if v & ~0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        else:
            out.append(v)
            return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag varint (records use signed varints)."""
    return uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


NO_TAGGED_FIELDS = uvarint(0)


class Fields:
    """A request body built field by field. Besides the bytes it remembers where every field
    starts (`boundaries`) and which fields are lengths or counts (`lengths`: offset, width),
    so a fuzzer can truncate at a field boundary or set a count to a huge value."""

    def __init__(self):
        self.parts: list[tuple[str, bytes]] = []  # (kind: "value" | "length", bytes)

    def _add(self, kind: str, b: bytes) -> "Fields":
        self.parts.append((kind, b))
        return self

    def i8(self, v: int) -> "Fields":
        return self._add("value", i8(v))

    def bool(self, v: bool) -> "Fields":
        return self._add("value", i8(1 if v else 0))

    def i16(self, v: int) -> "Fields":
        return self._add("value", i16(v))

    def i32(self, v: int) -> "Fields":
        return self._add("value", i32(v))

    def i64(self, v: int) -> "Fields":
        return self._add("value", i64(v))

    def string(self, s: str | None) -> "Fields":
        self._add("length", string(s)[:2])
        return self if s is None else self._add("value", s.encode())

    def nbytes(self, b: bytes | None) -> "Fields":
        self._add("length", nbytes(b)[:4])
        return self if b is None else self._add("value", b)

    def array(self, items: list["Fields"] | None) -> "Fields":
        """An array of sub-bodies (None: the null array, count -1)."""
        self._add("length", i32(-1 if items is None else len(items)))
        for item in items or []:
            self.parts += item.parts
        return self

    def i32_array(self, values: list[int]) -> "Fields":
        return self.array([Fields().i32(v) for v in values])

    def string_array(self, values: list[str] | None) -> "Fields":
        return self.array(None if values is None else [Fields().string(v) for v in values])

    def compact_string(self, s: str | None) -> "Fields":
        self._add("length", uvarint(0 if s is None else len(s.encode()) + 1))
        return self if s is None else self._add("value", s.encode())

    def uuid(self, v: bytes = bytes(16)) -> "Fields":
        """A 16-byte UUID (the zero UUID by default: "none")."""
        assert len(v) == 16
        return self._add("value", v)

    def f64(self, v: float) -> "Fields":
        return self._add("value", struct.pack(">d", v))

    def compact_bytes(self, b: bytes | None) -> "Fields":
        self._add("length", uvarint(0 if b is None else len(b) + 1))
        return self if b is None else self._add("value", b)

    def compact_array(self, items: list["Fields"] | None) -> "Fields":
        """A compact array of sub-bodies (None: the null array)."""
        self._add("length", uvarint(0 if items is None else len(items) + 1))
        for item in items or []:
            self.parts += item.parts
        return self

    def tagged_fields(self) -> "Fields":
        return self._add("length", NO_TAGGED_FIELDS)

    def extend(self, other: "Fields") -> "Fields":
        """Appends another body's fields (with their boundaries)."""
        self.parts += other.parts
        return self

    def __bytes__(self) -> bytes:
        return b"".join(b for _, b in self.parts)

    def boundaries(self) -> list[int]:
        out, pos = [0], 0
        for _, b in self.parts:
            pos += len(b)
            out.append(pos)
        return out

    def lengths(self) -> list[tuple[int, int]]:
        out, pos = [], 0
        for kind, b in self.parts:
            if kind == "length":
                out.append((pos, len(b)))
            pos += len(b)
        return out


MESSAGE_SPECS = Path(__file__).resolve().parents[2] / "broker" / "protocol" / "messages"


@cache
def request_specs() -> dict[int, dict]:
    """Kafka 4.4.0's request specs (vendored in broker/protocol/messages), by API key."""
    out = {}
    for path in MESSAGE_SPECS.glob("*Request.json"):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
        spec = json.loads(text)
        out[spec["apiKey"]] = spec
    return out


def request_spec(api_key: int) -> dict:
    return request_specs()[api_key]


def versions_contain(versions: str, version: int) -> bool:
    """Whether a spec's version range ("3+", "0-4", "2", "none") holds `version`."""
    if versions == "none":
        return False
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    lo, _, hi = versions.partition("-")
    return int(lo) <= version <= int(hi or lo)


def is_flexible(api_key: int, version: int) -> bool:
    """Whether a request uses header v2 and compact fields, as its spec says (an API the
    specs do not know: never)."""
    spec = request_specs().get(api_key)
    return spec is not None and versions_contain(spec.get("flexibleVersions", "none"), version)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes, client_id: str = "sluice-e2e") -> bytes:
    """A whole request frame: length prefix, header (v1, or v2 when flexible), body."""
    header = i16(api_key) + i16(version) + i32(correlation_id) + string(client_id)
    if is_flexible(api_key, version):
        header += NO_TAGGED_FIELDS
    msg = header + body
    return i32(len(msg)) + msg


# --- CRC-32C (Castagnoli), as record batches use --------------------------------------------


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --- record batch v2 (magic 2) -------------------------------------------------------------


def record(offset_delta: int, key: bytes | None, value: bytes | None, timestamp_delta: int = 0) -> bytes:
    body = (
        i8(0)
        + varint(timestamp_delta)
        + varint(offset_delta)
        + (varint(-1) if key is None else varint(len(key)) + key)
        + (varint(-1) if value is None else varint(len(value)) + value)
        + varint(0)  # headers
    )
    return varint(len(body)) + body


def record_batch(
    values: list[bytes],
    key: bytes | None = None,
    timestamp_ms: int | None = None,
    corrupt_crc: bool = False,
    compression: int = 0,
) -> bytes:
    """A magic-2 batch holding `values`, base offset 0, uncompressed or gzip
    (`compression=COMPRESSION_GZIP`)."""
    records = b"".join(record(i, key, v) for i, v in enumerate(values))
    payload = gzip.compress(records) if compression == COMPRESSION_GZIP else records
    assert compression in (0, COMPRESSION_GZIP), "test helper writes none or gzip only"
    return batch_with_header(
        payload,
        records_count=len(values),
        attributes=compression,
        timestamp_ms=timestamp_ms,
        corrupt_crc=corrupt_crc,
    )


def batch_with_header(
    payload: bytes,
    records_count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    timestamp_ms: int | None = None,
    corrupt_crc: bool = False,
) -> bytes:
    """A magic-2 batch around `payload` (the records section as sent: compressed when the
    attributes say so) with whatever header counts the caller says, and a valid CRC unless
    `corrupt_crc`. Lets a test lie about recordsCount or lastOffsetDelta."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    after_crc = (
        i16(attributes)  # compression codec in bits 0-2, CreateTime, control bit 0x20
        + i32(records_count - 1 if last_offset_delta is None else last_offset_delta)
        + i64(ts)
        + i64(ts)
        + i64(-1)  # producer id
        + i16(-1)  # producer epoch
        + i32(-1)  # base sequence
        + i32(records_count)
        + payload
    )
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    after_length = i32(0) + i8(2) + struct.pack(">I", crc) + after_crc  # leader epoch, magic
    return i64(0) + i32(len(after_length)) + after_length


def batch_record_values(records_bytes: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in uncompressed magic-2 batches (as returned by Fetch)."""
    out = []
    pos = 0
    while pos + 61 <= len(records_bytes):
        base_offset, batch_len = struct.unpack_from(">qi", records_bytes, pos)
        end = pos + 12 + batch_len
        if end > len(records_bytes):
            break  # partial trailing batch, allowed in fetch responses
        attributes = struct.unpack_from(">h", records_bytes, pos + 21)[0]
        assert attributes & 0x7 == 0, "test helper decodes uncompressed batches only"
        count = struct.unpack_from(">i", records_bytes, pos + 57)[0]
        reader = _Reader(records_bytes[pos + 61 : end])
        for _ in range(count):
            reader.varint()  # length
            reader.i8()
            reader.varint()  # timestamp delta
            offset_delta = reader.varint()
            key_len = reader.varint()
            if key_len >= 0:
                reader.take(key_len)
            value_len = reader.varint()
            value = reader.take(value_len) if value_len >= 0 else None
            for _h in range(reader.varint()):
                reader.take(reader.varint())
                hl = reader.varint()
                if hl >= 0:
                    reader.take(hl)
            out.append((base_offset + offset_delta, value))
        pos = end
    return out


def batch_compression_codecs(records_bytes: bytes) -> list[int]:
    """The compression codec (attributes & 7: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) of each
    complete batch in a fetch response's records."""
    codecs = []
    pos = 0
    while pos + 61 <= len(records_bytes):
        batch_len = struct.unpack_from(">i", records_bytes, pos + 8)[0]
        if pos + 12 + batch_len > len(records_bytes):
            break
        codecs.append(struct.unpack_from(">h", records_bytes, pos + 21)[0] & 0x7)
        pos += 12 + batch_len
    return codecs


# --- Produce and Fetch bodies (the other APIs: kafka_messages.py) -------------------------------


def produce_body(
    version: int,
    batches: dict[str, list[tuple[int, bytes]]],
    acks: int = -1,
    timeout_ms: int = 10_000,
    transactional_id: str | None = None,
) -> Fields:
    """Produce v0-v13: topic -> [(partition, record batch bytes)], with a transactional id
    from v3 (null unless given); v9+ flexible; v13+ name a topic by its 16-byte id."""
    if version >= 9:
        topics = [
            (Fields().uuid(topic) if version >= 13 else Fields().compact_string(topic))
            .compact_array([Fields().i32(p).compact_bytes(b).tagged_fields() for p, b in parts])
            .tagged_fields()
            for topic, parts in batches.items()
        ]
        f = Fields().compact_string(transactional_id).i16(acks).i32(timeout_ms)
        return f.compact_array(topics).tagged_fields()
    f = Fields()
    if version >= 3:
        f.string(transactional_id)
    f.i16(acks).i32(timeout_ms)
    topics = []
    for topic, parts in batches.items():
        topics.append(Fields().string(topic).array([Fields().i32(p).nbytes(b) for p, b in parts]))
    return f.array(topics)


def fetch_body(
    version: int,
    partitions: list[tuple[str | bytes, int, int]],
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> Fields:
    """Fetch v4-v18 of (topic, partition, offset) entries (v13+ name a topic by its 16-byte
    id); consecutive entries of one topic share a topic entry, so a repeated partition stays
    repeated."""
    if version >= 12:
        return fetch_body_flexible(version, partitions, max_wait_ms, min_bytes, max_bytes)
    assert 4 <= version <= 11
    f = Fields().i32(-1).i32(max_wait_ms).i32(min_bytes).i32(max_bytes).i8(0)
    if version >= 7:
        f.i32(0).i32(-1)  # no fetch session
    grouped: list[tuple[str, list[Fields]]] = []
    for topic, partition, offset in partitions:
        part = Fields().i32(partition)
        if version >= 9:
            part.i32(-1)  # current leader epoch
        part.i64(offset)
        if version >= 5:
            part.i64(-1)  # log start offset
        part.i32(max_bytes)
        if grouped and grouped[-1][0] == topic:
            grouped[-1][1].append(part)
        else:
            grouped.append((topic, [part]))
    f.array([Fields().string(t).array(parts) for t, parts in grouped])
    if version >= 7:
        f.array([])  # forgotten topics
    if version >= 11:
        f.string("")  # rack id
    return f


def fetch_body_flexible(
    version: int,
    partitions: list[tuple[str | bytes, int, int]],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
) -> Fields:
    """Fetch v12-v18: compact lengths and tagged fields; topics by id from v13; no replica id
    from v15 (a consumer's replica state is the tagged field it leaves out)."""
    f = Fields()
    if version <= 14:
        f.i32(-1)
    f.i32(max_wait_ms).i32(min_bytes).i32(max_bytes).i8(0).i32(0).i32(-1)
    grouped: list[tuple[str | bytes, list[Fields]]] = []
    for topic, partition, offset in partitions:
        part = Fields().i32(partition).i32(-1).i64(offset).i32(-1).i64(-1).i32(max_bytes).tagged_fields()
        if grouped and grouped[-1][0] == topic:
            grouped[-1][1].append(part)
        else:
            grouped.append((topic, [part]))

    def topic_field(t: str | bytes) -> Fields:
        if version >= 13:
            assert isinstance(t, bytes), "Fetch v13+ names topics by id"
            return Fields().uuid(t)
        return Fields().compact_string(t)

    f.compact_array([topic_field(t).compact_array(parts).tagged_fields() for t, parts in grouped])
    f.compact_array([])  # forgotten topics
    f.compact_string("")  # rack id
    return f.tagged_fields()


# --- response decoding -----------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        assert self.pos + n <= len(self.data), f"short response: need {n} at {self.pos}/{len(self.data)}"
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def i8(self) -> int:
        return self.unpack(">b")

    def i16(self) -> int:
        return self.unpack(">h")

    def i32(self) -> int:
        return self.unpack(">i")

    def i64(self) -> int:
        return self.unpack(">q")

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def array(self, item) -> list:
        n = self.i32()
        return [] if n < 0 else [item(self) for _ in range(n)]

    def varint(self) -> int:
        z = self.uvarint()
        return (z >> 1) ^ -(z & 1)

    def uvarint(self) -> int:
        shift = 0
        z = 0
        while True:
            b = self.take(1)[0]
            z |= (b & 0x7F) << shift
            if not b & 0x80:
                return z
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def compact_array(self, item) -> list | None:
        n = self.uvarint()
        return None if n == 0 else [item(self) for _ in range(n - 1)]

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


@dataclass
class PartitionResult:
    partition: int
    error_code: int
    base_offset: int = -1
    high_watermark: int = -1
    records: bytes | None = None
    topic: str | bytes | None = None
    # Produce v8+: (batch_index, message) of each record the broker refused, and the message.
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    error_message: str | None = None


@dataclass
class ApiVersionsResult:
    error_code: int
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)


class ConnectionClosed(Exception):
    """The broker closed the connection (EOF or reset)."""


class KafkaConnection:
    """One TCP connection speaking raw frames: 4-byte big-endian length, then the message."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0
        # When set, (min, max) seconds between the bytes of every request sent: a slow sender.
        self.trickle_s: tuple[float, float] | None = None

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data: bytes):
        if self.trickle_s is None:
            self.sock.sendall(data)
            return
        for i in range(len(data)):
            if i:
                time.sleep(random.uniform(*self.trickle_s))  # pacing the sender, not waiting for state
            self.sock.sendall(data[i : i + 1])

    def send_request(self, api_key: int, api_version: int, body: bytes | Fields) -> int:
        self.correlation_id += 1
        self.send_raw(request_frame(api_key, api_version, self.correlation_id, bytes(body)))
        return self.correlation_id

    def request(self, api_key: int, api_version: int, body: bytes | Fields) -> _Reader:
        """Sends one request and returns the reader positioned after the correlation id."""
        return self.recv_response(self.send_request(api_key, api_version, body))

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, BrokenPipeError) as err:
                raise ConnectionClosed(str(err)) from err
            if not chunk:
                raise ConnectionClosed(f"EOF after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_response(self, correlation_id: int) -> _Reader:
        (length,) = struct.unpack(">i", self._recv_exact(4))
        payload = self._recv_exact(length)
        reader = _Reader(payload)
        got = reader.i32()
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return reader

    def wait_closed(self, timeout_s: float) -> bool:
        """True when the broker closes the connection within `timeout_s` (any bytes it sends
        first are read and dropped)."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                if not self.sock.recv(65536):
                    return True
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False

    # --- requests ---------------------------------------------------------------------------

    def api_versions(self, version: int = 0) -> ApiVersionsResult:
        cid = self.send_request(API_API_VERSIONS, version, b"")
        r = self.recv_response(cid)
        # Whatever version was asked, an UNSUPPORTED_VERSION answer is in v0 layout.
        error = r.i16()
        entries = r.array(lambda x: (x.i16(), x.i16(), x.i16()))
        return ApiVersionsResult(error, {k: (lo, hi) for k, lo, hi in entries})

    def send_produce(
        self, topic: str, partition: int, batch: bytes, version: int = 3, acks: int = -1, timeout_ms: int = 10_000
    ) -> int:
        """Sends Produce and returns the correlation id (with acks=0 no answer comes)."""
        body = produce_body(version, {topic: [(partition, batch)]}, acks, timeout_ms)
        return self.send_request(API_PRODUCE, version, body)

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        version: int = 3,
        acks: int = -1,
        timeout_ms: int = 10_000,
        transactional_id: str | None = None,
    ) -> PartitionResult:
        results = self.produce_many({topic: [(partition, batch)]}, version, acks, timeout_ms, transactional_id)
        assert len(results) == 1, f"unexpected produce response shape {results}"
        return results[0]

    def produce_many(
        self,
        batches: dict[str, list[tuple[int, bytes]]],
        version: int = 3,
        acks: int = -1,
        timeout_ms: int = 10_000,
        transactional_id: str | None = None,
    ) -> list[PartitionResult]:
        """One Produce of several topics and partitions (as the transactional producer
        `transactional_id`, if given); one result per partition answered."""
        body = produce_body(version, batches, acks, timeout_ms, transactional_id)
        r = self.request(API_PRODUCE, version, body)
        if version >= 9:
            r.skip_tagged_fields()  # response header v1

        flexible = version >= 9

        def part(x):
            p = PartitionResult(x.i32(), x.i16(), base_offset=x.i64())
            if version >= 2:
                x.i64()  # log append time
            if version >= 5:
                x.i64()  # log start offset
            if flexible:
                p.record_errors = x.compact_array(lambda y: (y.i32(), y.compact_string(), y.skip_tagged_fields())[:2])
                p.error_message = x.compact_string()
                x.skip_tagged_fields()
            elif version >= 8:
                p.record_errors = x.array(lambda y: (y.i32(), y.string()))
                p.error_message = x.string()
            return p

        if flexible:
            topics = r.compact_array(lambda x: (x.compact_string(), x.compact_array(part), x.skip_tagged_fields())[:2])
        else:
            topics = r.array(lambda x: (x.string(), x.array(part)))
        out = []
        for name, parts in topics:
            for p in parts:
                p.topic = name
                out.append(p)
        return out

    def send_fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        version: int = 4,
    ) -> int:
        """Sends Fetch (v4-v18; v10+ may carry zstd; v13+ topics by id) and returns the correlation id; read the
        answer with `recv_fetch` and the same version."""
        body = fetch_body(version, [(topic, partition, offset)], max_wait_ms, min_bytes, max_bytes)
        return self.send_request(API_FETCH, version, body)

    def recv_fetch(self, correlation_id: int, version: int = 4) -> PartitionResult:
        results = self.recv_fetch_many(correlation_id, version)
        assert len(results) == 1, f"unexpected fetch response shape {results}"
        return results[0]

    def recv_fetch_many(self, correlation_id: int, version: int) -> list[PartitionResult]:
        """Every partition of a Fetch answer, in response order."""
        r = self.recv_response(correlation_id)
        if version >= 12:
            r.skip_tagged_fields()  # response header v1
        r.i32()  # throttle time
        if version >= 7:
            top_error, _session = r.i16(), r.i32()
            assert top_error == NONE, f"fetch top-level error {top_error}"

        flexible = version >= 12

        def part(x):
            p = PartitionResult(x.i32(), x.i16())
            p.high_watermark = x.i64()
            x.i64()  # last stable offset
            if version >= 5:
                x.i64()  # log start offset
            if flexible:
                x.compact_array(lambda y: (y.i64(), y.i64(), y.skip_tagged_fields()))  # aborted transactions
            else:
                x.array(lambda y: (y.i64(), y.i64()))  # aborted transactions
            if version >= 11:
                x.i32()  # preferred read replica
            if flexible:
                p.records = x.compact_bytes()
                x.skip_tagged_fields()
            else:
                p.records = x.nbytes()
            return p

        def topic(x):
            if version >= 13:
                return x.take(16), x.compact_array(part), x.skip_tagged_fields()
            if flexible:
                return x.compact_string(), x.compact_array(part), x.skip_tagged_fields()
            return x.string(), x.array(part), None

        out = []
        for name, parts, _ in r.compact_array(topic) if flexible else r.array(topic):
            for p in parts:
                p.topic = name
                out.append(p)
        if flexible:
            r.skip_tagged_fields()
            assert r.pos == len(r.data), "bytes left after the fetch response"
        return out

    def fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int = 0, version: int = 4) -> PartitionResult:
        return self.recv_fetch(
            self.send_fetch(topic, partition, offset, max_wait_ms=max_wait_ms, version=version), version
        )

    def fetch_many(self, partitions: list[tuple[str | bytes, int, int]], version: int = 11) -> list[PartitionResult]:
        """One Fetch of (topic, partition, offset) entries, repeated ones included."""
        cid = self.send_request(API_FETCH, version, fetch_body(version, partitions))
        return self.recv_fetch_many(cid, version)

    def metadata_topic_errors(self, topics: list[str]) -> dict[str, int]:
        """Metadata v1 for `topics`: topic name -> topic-level error code."""
        cid = self.send_request(API_METADATA, 1, array([string(t) for t in topics]))
        r = self.recv_response(cid)
        r.array(lambda x: (x.i32(), x.string(), x.i32(), x.string()))  # brokers
        r.i32()  # controller id

        def topic(x):
            error, name, _internal = x.i16(), x.string(), x.i8()
            x.array(lambda y: (y.i16(), y.i32(), y.i32(), y.array(_Reader.i32), y.array(_Reader.i32)))
            return name, error

        return dict(r.array(topic))
