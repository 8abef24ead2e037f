"""What the idempotence and transaction suites share: a TCP fault proxy between the clients and
the broker, record batches with producer id / epoch / sequence (and the transactional bit), and
raw requests no client library exposes (InitProducerId, ListOffsets and Fetch with an
isolation level, DescribeProducers, DescribeTransactions, ListTransactions).

`FaultProxy` listens on 127.0.0.1 (an ephemeral port, bound before the broker starts so the
broker can advertise it: `advertised.listeners=PLAINTEXT://127.0.0.1:<proxy port>`) and pipes
every client connection to the broker's current port (`upstream`, changed after a restart).
It can `cut()` every connection, or `blackhole_then_cut(...)`: keep forwarding requests but
drop the broker's Produce answers until it has dropped some, then cut. The second forces a producer to retry
batches the broker already appended, which only sequence-number deduplication makes harmless.

The flexible APIs (DescribeProducers 61, DescribeTransactions 65, ListTransactions 66: all
flexible from v0) use request header v2 and response header v1 (a tagged-field section after
the correlation id), with compact strings and arrays; layouts from
https://kafka.apache.org/protocol (and the `kafka-protocol` crate's generated messages).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import kafka_wire as kw
from kafka_wire import Fields, KafkaConnection

API_ADD_PARTITIONS_TO_TXN = 24
API_ADD_OFFSETS_TO_TXN = 25
API_END_TXN = 26
API_TXN_OFFSET_COMMIT = 28
API_DESCRIBE_PRODUCERS = 61
API_DESCRIBE_TRANSACTIONS = 65
API_LIST_TRANSACTIONS = 66

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
PRODUCER_FENCED = 90

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

ATTR_TRANSACTIONAL = 0x10

# How long a proxy pump waits in recv before looking at its stop flag again.
PROXY_POLL_S = 0.2
PROXY_BUFFER_BYTES = 256 * 1024
CONNECT_TIMEOUT_S = 5.0


# --- the fault proxy -----------------------------------------------------------------------------


class _Pair:
    """One client connection and its broker connection, pumped by two threads. Both directions
    are split into frames (4-byte length, then the message): the request direction notes each
    request's correlation id and API key, the answer direction forwards or drops whole
    frames and counts the dropped ones by API key."""

    def __init__(self, proxy: "FaultProxy", client: socket.socket, upstream: socket.socket):
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.closed = threading.Event()
        self.api_of_correlation: dict[int, int] = {}

    def start(self):
        threading.Thread(target=self._pump, args=(self.client, self.upstream, False), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.upstream, self.client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool):
        buf = bytearray()
        try:
            src.settimeout(PROXY_POLL_S)
            while not self.closed.is_set():
                try:
                    data = src.recv(PROXY_BUFFER_BYTES)
                except TimeoutError:
                    continue
                if not data:
                    break
                buf += data
                out = bytearray()
                while len(buf) >= 4:
                    (length,) = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + length:
                        break
                    frame = bytes(buf[: 4 + length])
                    del buf[: 4 + length]
                    if answers:
                        if not self._on_answer(frame):
                            continue
                    else:
                        self._on_request(frame)
                    out += frame
                if out:
                    dst.sendall(out)
        except OSError:
            pass
        finally:
            self.close()

    def _on_request(self, frame: bytes):
        api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 4)
        self.api_of_correlation[correlation_id] = api_key
        self.proxy.requests[api_key] = self.proxy.requests.get(api_key, 0) + 1

    def _on_answer(self, frame: bytes) -> bool:
        """Whether to forward this answer frame."""
        (correlation_id,) = struct.unpack_from(">i", frame, 4)
        api_key = self.api_of_correlation.pop(correlation_id, -1)
        if api_key not in self.proxy.drop_answers_of:
            return True
        with self.proxy.dropped_changed:
            self.proxy.dropped[api_key] = self.proxy.dropped.get(api_key, 0) + 1
            self.proxy.dropped_changed.notify_all()
        return False

    def close(self):
        if self.closed.is_set():
            return
        self.closed.set()
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class FaultProxy:
    """A TCP proxy 127.0.0.1:port -> 127.0.0.1:upstream that can cut its connections."""

    def __init__(self):
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(PROXY_POLL_S)
        self.port: int = self._listener.getsockname()[1]
        # The broker's port; None refuses connections (closed right after accept).
        self.upstream: int | None = None
        # Answers to these API keys are dropped (whole frames), the others forwarded.
        self.drop_answers_of: frozenset[int] = frozenset()
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.cuts = 0
        # Requests seen and answers dropped, by API key (-1: an answer to no request seen).
        self.requests: dict[int, int] = {}
        self.dropped: dict[int, int] = {}
        self.dropped_changed = threading.Condition()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def advertised_listeners(self) -> str:
        """The broker setting that sends clients back through this proxy."""
        return f"PLAINTEXT://127.0.0.1:{self.port}"

    def _accept_loop(self):
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            port = self.upstream
            try:
                if port is None:
                    raise OSError("no upstream")
                up = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
                up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                client.close()
                continue
            pair = _Pair(self, client, up)
            with self._lock:
                self._pairs = [p for p in self._pairs if not p.closed.is_set()] + [pair]
            pair.start()

    def open_connections(self) -> int:
        with self._lock:
            return sum(1 for p in self._pairs if not p.closed.is_set())

    def cut(self) -> int:
        """Closes every open connection (both sides); returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        n = 0
        for p in pairs:
            if not p.closed.is_set():
                n += 1
            p.close()
        self.cuts += 1
        return n

    def blackhole_then_cut(
        self, hand_over, api_key: int = kw.API_PRODUCE, answers: int = 1, timeout_s: float = 10.0, before_cut=None
    ):
        """Drops the broker's answers to `api_key`, runs `hand_over()` (which makes the client send), waits
        until at least `answers` answers of `api_key` were dropped (requests the broker
        served and the client never heard of), runs `before_cut()` if given (kill the broker,
        say), then cuts every connection: the client must send them again. Fails when that many were not dropped within `timeout_s`."""
        with self.dropped_changed:
            target = self.dropped.get(api_key, 0) + answers
        self.drop_answers_of = frozenset([api_key])
        try:
            hand_over()
            deadline = time.monotonic() + timeout_s
            with self.dropped_changed:
                while self.dropped.get(api_key, 0) < target:
                    remaining = deadline - time.monotonic()
                    assert remaining > 0, f"{answers} answers to API {api_key} not dropped within {timeout_s}s"
                    self.dropped_changed.wait(remaining)
            if before_cut is not None:
                before_cut()
            return self.cut()
        finally:
            self.drop_answers_of = frozenset()

    def close(self):
        self._stopped.set()
        self._listener.close()
        self._thread.join(timeout=5)
        self.cut()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- record batches with producer fields -----------------------------------------------------------


def producer_batch(
    values: list[bytes],
    producer_id: int,
    epoch: int,
    base_sequence: int,
    transactional: bool = False,
    timestamp_ms: int | None = None,
) -> bytes:
    """An uncompressed magic-2 batch (base offset 0) from an idempotent (or transactional)
    producer: its id, epoch and the sequence of its first record."""
    records = b"".join(kw.record(i, None, v) for i, v in enumerate(values))
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    attributes = ATTR_TRANSACTIONAL if transactional else 0
    after_crc = (
        kw.i16(attributes)
        + kw.i32(len(values) - 1)
        + kw.i64(ts)
        + kw.i64(ts)
        + kw.i64(producer_id)
        + kw.i16(epoch)
        + kw.i32(base_sequence)
        + kw.i32(len(values))
        + records
    )
    after_length = kw.i32(0) + kw.i8(2) + struct.pack(">I", kw.crc32c(after_crc)) + after_crc
    return kw.i64(0) + kw.i32(len(after_length)) + after_length


@dataclass
class BatchInfo:
    base_offset: int
    last_offset: int
    producer_id: int
    epoch: int
    base_sequence: int
    attributes: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & kw.ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)


def batch_headers(records_bytes: bytes) -> list[BatchInfo]:
    """The header of each complete batch in a fetch answer's records."""
    out = []
    pos = 0
    while pos + 61 <= len(records_bytes):
        base_offset, batch_len = struct.unpack_from(">qi", records_bytes, pos)
        if pos + 12 + batch_len > len(records_bytes):
            break
        attributes, last_delta = struct.unpack_from(">hi", records_bytes, pos + 21)
        pid, epoch, seq = struct.unpack_from(">qhi", records_bytes, pos + 43)
        out.append(BatchInfo(base_offset, base_offset + last_delta, pid, epoch, seq, attributes))
        pos += 12 + batch_len
    return out


# --- non-flexible raw requests ---------------------------------------------------------------------


@dataclass
class ProducerIdAndEpoch:
    error_code: int
    producer_id: int
    epoch: int


def init_producer_id(
    conn: KafkaConnection, transactional_id: str | None = None, timeout_ms: int = 60_000, version: int = 1
) -> ProducerIdAndEpoch:
    """InitProducerId v0-v1 (non-flexible)."""
    r = conn.request(kw.API_INIT_PRODUCER_ID, version, Fields().string(transactional_id).i32(timeout_ms))
    r.i32()  # throttle time
    return ProducerIdAndEpoch(r.i16(), r.i64(), r.i16())


def list_offset(conn: KafkaConnection, topic: str, partition: int, isolation: int, timestamp: int = -1) -> int:
    """ListOffsets v2 of one partition with an isolation level: latest (-1) under
    READ_COMMITTED is the last stable offset, under READ_UNCOMMITTED the high watermark."""
    body = Fields().i32(-1).i8(isolation)
    body.array([Fields().string(topic).array([Fields().i32(partition).i64(timestamp)])])
    r = conn.request(kw.API_LIST_OFFSETS, 2, body)
    r.i32()  # throttle time
    topics = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16(), y.i64(), y.i64()))))
    assert len(topics) == 1 and len(topics[0][1]) == 1, f"unexpected ListOffsets answer {topics}"
    _p, error, _ts, offset = topics[0][1][0]
    assert error == kw.NONE, f"ListOffsets {topic}/{partition} isolation {isolation}: error {error}"
    return offset


@dataclass
class IsolatedFetch:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset)
    records: bytes


def fetch_isolated(
    conn: KafkaConnection, topic: str, partition: int, offset: int, isolation: int, version: int = 4
) -> IsolatedFetch:
    """Fetch v4-v6 of one partition with an isolation level (no wait)."""
    assert 4 <= version <= 6
    part = Fields().i32(partition).i64(offset)
    if version >= 5:
        part.i64(-1)
    part.i32(1 << 20)
    body = Fields().i32(-1).i32(0).i32(1).i32(1 << 20).i8(isolation)
    body.array([Fields().string(topic).array([part])])
    r = conn.request(kw.API_FETCH, version, body)
    r.i32()  # throttle time

    def part_answer(x):
        _p, error, hw, lso = x.i32(), x.i16(), x.i64(), x.i64()
        if version >= 5:
            x.i64()  # log start offset
        aborted = x.array(lambda y: (y.i64(), y.i64()))
        return IsolatedFetch(error, hw, lso, aborted, x.nbytes() or b"")

    topics = r.array(lambda x: (x.string(), x.array(part_answer)))
    assert len(topics) == 1 and len(topics[0][1]) == 1, f"unexpected Fetch answer {topics}"
    return topics[0][1][0]


# --- flexible raw requests ------------------------------------------------------------------------


class FlexReader:
    """Reads a flexible answer body: compact strings and arrays, tagged-field sections."""

    def __init__(self, reader):
        self.r = reader

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.r.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def i16(self) -> int:
        return self.r.i16()

    def i32(self) -> int:
        return self.r.i32()

    def i64(self) -> int:
        return self.r.i64()

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.r.take(n - 1).decode()

    def array(self, item) -> list:
        n = self.uvarint()
        return [] if n == 0 else [item(self) for _ in range(n - 1)]

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.r.take(self.uvarint())


def flexible_request(conn: KafkaConnection, api_key: int, version: int, body: Fields) -> FlexReader:
    """Sends a request with header v2 and returns the answer positioned after header v1."""
    conn.correlation_id += 1
    cid = conn.correlation_id
    header = kw.i16(api_key) + kw.i16(version) + kw.i32(cid) + kw.string("sluice-e2e") + kw.NO_TAGGED_FIELDS
    msg = header + bytes(body)
    conn.send_raw(kw.i32(len(msg)) + msg)
    reader = FlexReader(conn.recv_response(cid))
    reader.tags()
    return reader


@dataclass
class ProducerState:
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass
class PartitionProducers:
    error_code: int
    error_message: str | None
    producers: list[ProducerState] = field(default_factory=list)


def describe_producers(conn: KafkaConnection, topic: str, partition: int) -> PartitionProducers:
    """DescribeProducers v0 of one partition."""
    body = Fields().compact_array(
        [Fields().compact_string(topic).compact_array([Fields().i32(partition)]).tagged_fields()]
    )
    body.tagged_fields()
    r = flexible_request(conn, API_DESCRIBE_PRODUCERS, 0, body)
    r.i32()  # throttle time

    def producer(x):
        s = ProducerState(x.i64(), x.i32(), x.i32(), x.i64(), x.i32(), x.i64())
        x.tags()
        return s

    def part(x):
        _p, error, message = x.i32(), x.i16(), x.string()
        out = PartitionProducers(error, message, x.array(producer))
        x.tags()
        return out

    def top(x):
        name, parts = x.string(), x.array(part)
        x.tags()
        return name, parts

    topics = r.array(top)
    assert len(topics) == 1 and len(topics[0][1]) == 1, f"unexpected DescribeProducers answer {topics}"
    return topics[0][1][0]


@dataclass
class TransactionDescription:
    error_code: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int
    producer_id: int
    epoch: int
    partitions: dict[str, list[int]]


def describe_transactions(conn: KafkaConnection, transactional_ids: list[str]) -> list[TransactionDescription]:
    """DescribeTransactions v0."""
    body = Fields().compact_array([Fields().compact_string(t) for t in transactional_ids]).tagged_fields()
    r = flexible_request(conn, API_DESCRIBE_TRANSACTIONS, 0, body)
    r.i32()  # throttle time

    def topic(x):
        name = x.string()
        parts = x.array(FlexReader.i32)
        x.tags()
        return name, parts

    def state(x):
        error, tid, st, timeout, start, pid, epoch = x.i16(), x.string(), x.string(), x.i32(), x.i64(), x.i64(), x.i16()
        topics = dict(x.array(topic))
        x.tags()
        return TransactionDescription(error, tid, st, timeout, start, pid, epoch, topics)

    return r.array(state)


@dataclass
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


def list_transactions(
    conn: KafkaConnection, states: list[str] | None = None, producer_ids: list[int] | None = None
) -> tuple[int, list[str], list[ListedTransaction]]:
    """ListTransactions v0: (error code, unknown state filters, transactions)."""
    body = Fields().compact_array([Fields().compact_string(s) for s in states or []])
    body.compact_array([Fields().i64(p) for p in producer_ids or []]).tagged_fields()
    r = flexible_request(conn, API_LIST_TRANSACTIONS, 0, body)
    r.i32()  # throttle time
    error = r.i16()
    unknown = r.array(FlexReader.string)

    def listed(x):
        out = ListedTransaction(x.string(), x.i64(), x.string())
        x.tags()
        return out

    return error, unknown, r.array(listed)


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def control_markers(records_bytes: bytes) -> list[tuple[int, int, int]]:
    """(offset, producer id, marker type: CONTROL_ABORT / CONTROL_COMMIT) of every control batch
    in a fetch answer's records; a control record's key is (version i16, type i16)."""
    out = []
    pos = 0
    while pos + 61 <= len(records_bytes):
        batch_len = struct.unpack_from(">i", records_bytes, pos + 8)[0]
        end = pos + 12 + batch_len
        if end > len(records_bytes):
            break
        [info] = batch_headers(records_bytes[pos:end])
        if info.is_control:
            reader = kw._Reader(records_bytes[pos + 61 : end])
            reader.varint()  # record length
            reader.i8()  # attributes
            reader.varint()  # timestamp delta
            offset_delta = reader.varint()
            key_len = reader.varint()
            assert key_len >= 4, f"control record key of {key_len} bytes"
            _version, marker = struct.unpack(">hh", reader.take(4))
            out.append((info.base_offset + offset_delta, info.producer_id, marker))
        pos = end
    return out


def bounded(fn, timeout_s: float, what: str):
    """Runs `fn()` in a thread and returns its result, re-raising what it raised; fails when
    it has not returned within `timeout_s` (for client calls that take no timeout)."""
    result: dict = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as err:  # handed to the caller
            result["error"] = err

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise AssertionError(f"{what} did not return within {timeout_s}s")
    if "error" in result:
        raise result["error"]
    return result.get("value")
