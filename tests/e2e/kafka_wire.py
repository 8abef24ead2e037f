"""A tiny raw Kafka wire helper for tests that real clients cannot express (bad frames, bad
CRCs, old versions, exact long-poll timing). Not a client: only the few request/response
versions the tests use, encoded with `struct` from the protocol guide
(https://kafka.apache.org/protocol): non-flexible versions only, request header v1,
response header v0.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_API_VERSIONS = 18

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_COMPRESSION_TYPE = 76


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


def varint(v: int) -> bytes:
    """Zig-zag varint (records use signed varints)."""
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        if z & ~0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        else:
            out.append(z)
            return bytes(out)


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
    values: list[bytes], key: bytes | None = None, timestamp_ms: int | None = None, corrupt_crc: bool = False
) -> bytes:
    """An uncompressed magic-2 batch holding `values`, base offset 0."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    records = b"".join(record(i, key, v) for i, v in enumerate(values))
    after_crc = (
        i16(0)  # attributes: no compression, CreateTime
        + i32(len(values) - 1)  # last offset delta
        + i64(ts)
        + i64(ts)
        + i64(-1)  # producer id
        + i16(-1)  # producer epoch
        + i32(-1)  # base sequence
        + i32(len(values))
        + records
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
        shift = 0
        z = 0
        while True:
            b = self.take(1)[0]
            z |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        return (z >> 1) ^ -(z & 1)


@dataclass
class PartitionResult:
    partition: int
    error_code: int
    base_offset: int = -1
    high_watermark: int = -1
    records: bytes | None = None


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
        self.correlation_id = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send_request(self, api_key: int, api_version: int, body: bytes) -> int:
        self.correlation_id += 1
        header = i16(api_key) + i16(api_version) + i32(self.correlation_id) + string("sluice-e2e")
        msg = header + body
        self.sock.sendall(i32(len(msg)) + msg)
        return self.correlation_id

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
        body = b""
        if version >= 3:
            body += string(None)  # transactional id
        body += i16(acks) + i32(timeout_ms)
        body += array([string(topic) + array([i32(partition) + nbytes(batch)])])
        return self.send_request(API_PRODUCE, version, body)

    def produce(
        self, topic: str, partition: int, batch: bytes, version: int = 3, acks: int = -1, timeout_ms: int = 10_000
    ) -> PartitionResult:
        cid = self.send_produce(topic, partition, batch, version, acks, timeout_ms)
        r = self.recv_response(cid)

        def part(x):
            p = PartitionResult(x.i32(), x.i16(), base_offset=x.i64())
            if version >= 2:
                x.i64()  # log append time
            if version >= 5:
                x.i64()  # log start offset
            return p

        topics = r.array(lambda x: (x.string(), x.array(part)))
        assert len(topics) == 1 and len(topics[0][1]) == 1, f"unexpected produce response shape {topics}"
        return topics[0][1][0]

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
        """Sends Fetch v4 or v11 (v10+ may carry zstd) and returns the correlation id; read
        the answer with `recv_fetch` and the same version."""
        assert version in (4, 11)
        body = i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0)
        if version == 4:
            part = i32(partition) + i64(offset) + i32(max_bytes)
        else:
            body += i32(0) + i32(-1)  # no fetch session
            part = i32(partition) + i32(-1) + i64(offset) + i64(-1) + i32(max_bytes)
        body += array([string(topic) + array([part])])
        if version == 11:
            body += array([]) + string("")  # forgotten topics, rack id
        return self.send_request(API_FETCH, version, body)

    def recv_fetch(self, correlation_id: int, version: int = 4) -> PartitionResult:
        r = self.recv_response(correlation_id)
        r.i32()  # throttle time
        if version >= 7:
            top_error, _session = r.i16(), r.i32()
            assert top_error == NONE, f"fetch top-level error {top_error}"

        def part(x):
            p = PartitionResult(x.i32(), x.i16())
            p.high_watermark = x.i64()
            x.i64()  # last stable offset
            if version >= 5:
                x.i64()  # log start offset
            x.array(lambda y: (y.i64(), y.i64()))  # aborted transactions
            if version >= 11:
                x.i32()  # preferred read replica
            p.records = x.nbytes()
            return p

        topics = r.array(lambda x: (x.string(), x.array(part)))
        assert len(topics) == 1 and len(topics[0][1]) == 1, f"unexpected fetch response shape {topics}"
        return topics[0][1][0]

    def fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int = 0, version: int = 4) -> PartitionResult:
        return self.recv_fetch(
            self.send_fetch(topic, partition, offset, max_wait_ms=max_wait_ms, version=version), version
        )

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
