"""Black-box adversarial suite: a live broker over TCP under hostile clients, phase by phase.

One broker is shared by the phases, in order. Before them, reference records go in
(survival.py: several partitions, confluent-kafka and kcat, compressed and not). After every
phase the broker process must be alive, kcat must produce and consume a fresh record, and
the reference records must read back identical (offsets, keys, values; no records added).

Phases:
- every API: for each (api key, version) the broker advertises, a valid request (which must
  be answered) and then seeded mutations of it (wire_fuzz.py); plus out-of-range versions
  and unknown API keys. Each send is answered or closes its connection; none hangs.
  CreateAcls and AlterClientQuotas are sent valid only (`NOT_MUTATED`: a mutation could store
  a `*` ACL or a throttling quota that changes what the later phases may do).
  Served Produce versions also carry record batches mutated with a valid CRC (plain and
  gzip); afterwards the partition they went to must read to its end with confluent-kafka.
  SLUICE_ADVERSARIAL_ITERATIONS (random mutations per API version, default 200) and
  SLUICE_ADVERSARIAL_SEED make it longer (then raise pytest's --timeout, 300 s) or different;
  a failure's label reproduces it;
  SLUICE_ADVERSARIAL_WORKERS=1 sends one request at a time (exact blame for a crash);
  SLUICE_ADVERSARIAL_APIS=1,3 fuzzes only those API keys. A crash restarts the broker and
  the run goes on (up to RESTARTS_MAX); the request that kills a fresh broker again is named.
- truncated frames: a length prefix larger than the bytes sent then EOF or RST, EOF in the
  middle of the length prefix, declared lengths 0, 7, negative and socket.request.max.bytes+1.
- slow senders: connections trickling a request a byte every 50-100 ms are answered while
  kcat and confluent-kafka are served meanwhile; a sender that stalls mid-frame is closed
  after connections.max.idle.ms (small here, via --set).
- half-open connections: 2,000 connections that sent nothing or part of a frame stay open
  while kcat round-trips; the connections gauge (admin /metrics) counts them and goes back
  down once they close. Run after a restart with a long idle timeout, so it also checks that
  a graceful restart after the attacks keeps the data. Also with max.connections.per.ip.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

import kafka_messages as km
import kafka_wire as kw
from confluent_kafka import KafkaError, TopicPartition

from clients import Record, consume_partition, consumer, create_topic, produce_all, producer
from conftest import Broker, wait_until
from kafka_wire import ConnectionClosed, KafkaConnection
from survival import CANARY_TOPIC, assert_survived, crash_signature, crashing, kcat_round_trip, seed_records
from test_metrics import scrape
from test_protocol_errors import raise_nofile_limit
from wire_fuzz import Outcome, Prober, batch_mutations, mutations

ITERATIONS = int(os.environ.get("SLUICE_ADVERSARIAL_ITERATIONS", "200"))
SEED = int(os.environ.get("SLUICE_ADVERSARIAL_SEED", "20261203"))
# Broker restarts after crashes in one fuzz run before it gives up.
RESTARTS_MAX = 10
CRASH_GRACE_S = 3.0  # how long a broker that closed a connection may take to abort
CRASH_EXAMPLES = 2  # failures listed per crash signature (all are counted)
AGAIN = " (sent again)"
# Only these API keys (comma-separated), to fuzz around a crash not yet fixed; default all.
ONLY_APIS = {int(k) for k in os.environ.get("SLUICE_ADVERSARIAL_APIS", "").split(",") if k}
# Concurrent fuzz connections; 1 makes "which request killed the broker" exact.
FUZZ_WORKERS = int(os.environ.get("SLUICE_ADVERSARIAL_WORKERS", "4"))
IDLE_MS = 8_000
SOCKET_REQUEST_MAX_BYTES = 1024 * 1024
HALF_OPEN_CONNECTIONS = 2_000
CLOSE_DEADLINE_S = 10.0
READ_TO_END_S = 30.0
PROMPT_S = 15.0  # a kcat round trip during an attack must finish within this
SETTINGS = {
    "connections.max.idle.ms": str(IDLE_MS),
    "group.initial.rebalance.delay.ms": "0",
    "socket.request.max.bytes": str(SOCKET_REQUEST_MAX_BYTES),
    "message.max.bytes": str(SOCKET_REQUEST_MAX_BYTES // 2),
}
FUZZ_NAMES = km.FuzzNames(topic="fz-scratch", doomed_topic="fz-doomed", group="fz-group")
# The APIs whose valid requests the catalog encodes; each must be advertised.
CATALOG_APIS = {
    kw.API_PRODUCE, kw.API_FETCH, kw.API_LIST_OFFSETS, kw.API_METADATA, kw.API_OFFSET_COMMIT,
    kw.API_OFFSET_FETCH, kw.API_FIND_COORDINATOR, kw.API_JOIN_GROUP, kw.API_HEARTBEAT,
    kw.API_LEAVE_GROUP, kw.API_SYNC_GROUP, kw.API_DESCRIBE_GROUPS, kw.API_LIST_GROUPS,
    kw.API_API_VERSIONS, kw.API_CREATE_TOPICS, kw.API_DELETE_TOPICS, kw.API_INIT_PRODUCER_ID,
    kw.API_DESCRIBE_CONFIGS, kw.API_DELETE_GROUPS, kw.API_INCREMENTAL_ALTER_CONFIGS,
    kw.API_SASL_HANDSHAKE, kw.API_SASL_AUTHENTICATE, kw.API_DESCRIBE_ACLS, kw.API_CREATE_ACLS,
    kw.API_DELETE_ACLS, kw.API_DESCRIBE_CLIENT_QUOTAS, kw.API_ALTER_CLIENT_QUOTAS,
    kw.API_DESCRIBE_USER_SCRAM_CREDENTIALS, kw.API_ALTER_USER_SCRAM_CREDENTIALS,
    kw.API_CONSUMER_GROUP_HEARTBEAT, kw.API_CONSUMER_GROUP_DESCRIBE,
}  # fmt: skip

# Sent valid but not mutated: a mutation may store a real ACL (a `*` one would close every
# topic to the anonymous callers of the later phases) or a quota that throttles them. Their
# decoders are fuzzed without a broker's state by the cargo-fuzz `request` target.
NOT_MUTATED = {kw.API_CREATE_ACLS, kw.API_ALTER_CLIENT_QUOTAS}
UNKNOWN_API_KEYS = [4, 5, 6, 7, 17, 21, 23, 24, 29, 36, 37, 50, 60, 67, 1000, 0x7FFF, -1]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The phases' broker and its reference records."""
    raise_nofile_limit(HALF_OPEN_CONNECTIONS * 2 + 1024)  # the broker inherits it
    root = tmp_path_factory.mktemp("adversarial")
    (root / "data").mkdir()
    broker = Broker(root / "data", root / "broker.log", SETTINGS, {}).start()
    try:
        seeded = seed_records(broker.bootstrap)
        create_topic(broker.bootstrap, FUZZ_NAMES.topic, 2)
        create_topic(broker.bootstrap, FUZZ_NAMES.doomed_topic, 1)
        produce_all(producer(broker.bootstrap), FUZZ_NAMES.topic, [Record(b"k", b"scratch")] * 3)
        yield broker, seeded
    except BaseException:
        print(broker.log_tail())
        raise
    finally:
        if broker.is_running():
            broker.stop()


@pytest.fixture
def phase(shared):
    """The shared broker and reference records; a broker an earlier phase killed is started
    again on the same data, so each phase's result is its own."""
    broker, seeded = shared
    if not broker.is_running():
        print(f"restarting the broker an earlier phase killed (exit {broker.proc.poll()})")
        broker.start()
    return broker, seeded


def case_token(version: int, index: int) -> str:
    """Same width for every case, so a mutation found on one body applies to the next."""
    return f"u{version:02d}x{index:05d}"


class FuzzRun:
    """State shared by the fuzz workers. When the broker dies, the first worker to notice
    records a failure naming each worker's last request that ended in a close (one of them
    killed it), restarts the broker on the same data and the run goes on, up to
    RESTARTS_MAX times, so one run lists every crash rather than the first."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self.stop = threading.Event()
        self.last_closed: dict[str, str] = {}
        self.lock = threading.Lock()
        self.restarts = 0
        self.outcomes: Counter[str] = Counter()
        self.crashes: Counter[str] = Counter()  # crash signature -> how many
        # Probes in flight, and whether one runs alone (a request re-sent after a crash is
        # sent with nothing else in flight, so a second crash is its fault for certain).
        self.gate = threading.Condition()
        self.in_flight = 0
        self.alone = False

    def probe(self, prober: Prober, api_key: int, version: int, body: bytes, alone: bool = False):
        with self.gate:
            self.gate.wait_for(lambda: not self.alone)
            if alone:
                self.alone = True
                self.gate.wait_for(lambda: self.in_flight == 0)
            self.in_flight += 1
        try:
            if alone and crashing(self.broker):
                return Outcome("refused", "the broker was already dying of another request")
            outcome = prober.probe(api_key, version, body)
            if alone and outcome.kind != "answered":
                # Alone, so a death now is this request's doing: give an abort time to finish.
                deadline = time.monotonic() + CRASH_GRACE_S
                while self.broker.is_running() and time.monotonic() < deadline and outcome.kind != "refused":
                    time.sleep(0.05)
                outcome.killed_broker = not self.broker.is_running() or crashing(self.broker)
            return outcome
        finally:
            with self.gate:
                self.in_flight -= 1
                if alone:
                    self.alone = False
                self.gate.notify_all()

    def _accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.broker.port), timeout=5).close()
            return True
        except OSError:
            return False

    def bootstrap(self) -> str:
        with self.lock:
            return self.broker.bootstrap if self.broker.is_running() else "127.0.0.1:1"

    def record(self, worker: str, case: str, outcome, body: bytes, failures: list[str]) -> bool:
        """Notes one probe; False when the broker was gone (the case should be sent again)."""
        with self.lock:
            self.outcomes[outcome.kind] += 1
            if outcome.kind in ("closed", "answered+closed"):
                self.last_closed[worker] = f"{case} body={body[:96].hex()}"
        dead = outcome.kind == "refused" or (outcome.kind != "answered" and not self.broker.is_running())
        if outcome.killed_broker or dead:
            self._recover(case, body, failures, certain=outcome.killed_broker)
            return False
        if not outcome.ok:
            failures.append(f"{case}: {outcome.kind} {outcome.detail} body={body[:96].hex()}")
        return True

    def _recover(self, case: str, body: bytes, failures: list[str], certain: bool = False):
        with self.lock:
            if self.broker.is_running() and not crashing(self.broker) and self._accepts():
                return  # another worker restarted it already
            try:
                self.broker.proc.wait(timeout=30)  # a dying broker may print a long backtrace first
            except subprocess.TimeoutExpired:
                failures.append("the broker stopped accepting connections but did not exit within 30 s: killed")
                self.broker.kill()
            signature = crash_signature(self.broker)
            self.crashes[signature] += 1
            if certain:  # sent alone to a healthy broker, which died of it
                failures.append(f"CRASH at {signature}: {case[: -len(AGAIN)]} kills the broker, body={body[:96].hex()}")
            elif self.crashes[signature] <= CRASH_EXAMPLES:
                suspects = "\n  ".join(sorted(self.last_closed.values()))
                failures.append(f"crash at {signature} (noticed at {case}); the last requests closed:\n  {suspects}")
            self.last_closed.clear()
            self.restarts += 1
            if self.restarts > RESTARTS_MAX:
                self.stop.set()
                return
            self.broker.start()


def all_mutations(api_key: int, version: int, template, rng: random.Random):
    """Mutations of the request; for served Produce versions (but v13) also of the record batches it
    carries (plain and gzip) with their CRC kept valid, so the record parser is reached."""
    yield from mutations(template, rng, ITERATIONS)
    # v13 names the topic by id; its records reach the same parser as v12's.
    if api_key != kw.API_PRODUCE or not 3 <= version <= 12:
        return
    records = [b"fuzz-a", b"fuzz-b", b"fuzz-c"]
    for compression in (0, kw.COMPRESSION_GZIP):
        batch = kw.record_batch(records, key=b"k", timestamp_ms=0, compression=compression)
        for label, mutated in batch_mutations(batch, rng, ITERATIONS // 2):
            yield f"{label} ({'gzip' if compression else 'plain'})", bytes(
                kw.produce_body(version, {FUZZ_NAMES.topic: [(1, mutated)]})
            )


def fuzz_api_version(run: FuzzRun, api_key: int, version: int) -> tuple[int, list[str]]:
    """Sends the valid request and every mutation of it; returns (sends, failures)."""
    rng = random.Random(f"{SEED}:{api_key}:{version}")
    worker = threading.current_thread().name
    template_token = case_token(version, 0)
    template = km.sample_request(api_key, version, FUZZ_NAMES, template_token)
    if run.stop.is_set():
        return 0, []
    prober = Prober(run.bootstrap)
    failures: list[str] = []
    valid = run.probe(prober, api_key, version, bytes(template))
    if valid.kind in ("closed", "answered+closed", "refused"):
        run.record(worker, f"api {api_key} v{version} valid", valid, bytes(template), failures)
        valid = run.probe(prober, api_key, version, bytes(template))  # again, in case a crash closed it
    if valid.kind in ("closed", "answered+closed"):
        failures.append(f"api {api_key} v{version} valid request: the broker closed the connection")
    run.record(worker, f"api {api_key} v{version} valid", valid, bytes(template), failures)
    sends = 1
    mutations = [] if api_key in NOT_MUTATED else all_mutations(api_key, version, template, rng)
    try:
        for index, (label, body) in enumerate(mutations, 1):
            if run.stop.is_set():
                break
            body = body.replace(template_token.encode(), case_token(version, index).encode())
            sends += 1
            case = f"api {api_key} v{version} {label}"
            if not run.record(worker, case, run.probe(prober, api_key, version, body), body, failures):
                run.record(worker, case + AGAIN, run.probe(prober, api_key, version, body, alone=True), body, failures)
    finally:
        prober.close()
    return sends, failures


def fuzz_headers(run: FuzzRun, table: dict[int, tuple[int, int]]) -> tuple[int, list[str]]:
    """Versions outside the advertised range and API keys the broker does not implement."""
    rng = random.Random(f"{SEED}:headers")
    worker = threading.current_thread().name
    cases = []
    for api_key, (_lo, hi) in sorted(table.items()):
        body = bytes(km.sample_request(api_key, hi, FUZZ_NAMES, case_token(hi, 0)))
        cases += [(api_key, v, body) for v in (hi + 1, -1, 0x7FFF)]
    for api_key in UNKNOWN_API_KEYS:
        cases += [(api_key, 0, b""), (api_key, 3, rng.randbytes(rng.randint(1, 200)))]
    prober = Prober(run.bootstrap)
    failures: list[str] = []
    for api_key, version, body in cases:
        if run.stop.is_set():
            break
        outcome = run.probe(prober, api_key, version, body)
        run.record(worker, f"api {api_key} v{version} header case", outcome, body, failures)
    prober.close()
    return len(cases), failures


def test_every_api_version_survives_mutated_requests(phase):
    broker, seeded = phase
    with KafkaConnection(broker.bootstrap) as conn:
        table = conn.api_versions().versions
    missing = CATALOG_APIS - table.keys()
    assert not missing, f"APIs the catalog encodes are not advertised: {sorted(missing)}"
    jobs = [(k, v) for k, (lo, hi) in sorted(table.items()) for v in range(lo, hi + 1)]
    jobs = [(k, v) for k, v in jobs if not ONLY_APIS or k in ONLY_APIS]
    run = FuzzRun(broker)
    started = time.monotonic()
    with ThreadPoolExecutor(FUZZ_WORKERS) as pool:
        futures = [pool.submit(fuzz_api_version, run, k, v) for k, v in jobs]
        futures.append(pool.submit(fuzz_headers, run, table))
        results = [f.result() for f in futures]
    sends = sum(n for n, _ in results)
    failures = [f for _, fs in results for f in fs]
    elapsed = time.monotonic() - started
    print(f"{sends} requests over {len(jobs)} API versions in {elapsed:.1f}s (seed {SEED}): {dict(run.outcomes)}")
    assert sends > len(jobs) * ITERATIONS or failures
    if crashing(broker) or not broker.is_running():  # after RESTARTS_MAX crashes
        try:
            broker.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()
        broker.start()  # the data must still be intact
    try:
        assert_survived(broker, seeded, "every-API mutations (and any restarts after crashes)")
    except AssertionError as err:
        failures.append(str(err))
    # Whatever mutated batches the broker accepted, a real consumer reads them to the end.
    problems = read_to_end(broker.bootstrap, FUZZ_NAMES.topic, 1)
    if problems:
        failures.append(f"{FUZZ_NAMES.topic}[1], where the mutated batches went, does not read back: {problems}")
    assert not failures, (
        f"{len(failures)} failures in {sends} sends, {run.restarts} broker restarts, crashes {dict(run.crashes)}"
        f" (seed {SEED}):\n"
        + "\n".join(failures[:40])
    )


def read_to_end(bootstrap: str, topic: str, partition: int) -> list[str]:
    """Consumes a partition from 0 with confluent-kafka up to its high watermark; returns
    the errors seen (none when every stored batch decodes)."""
    try:
        with KafkaConnection(bootstrap) as conn:
            [(_, _, error, end)] = km.list_offsets(conn, [(topic, partition)])
    except (ConnectionClosed, OSError) as err:
        return [f"ListOffsets failed: {err!r}"]
    if error != kw.NONE:
        return [f"ListOffsets error {error}"]
    c = consumer(bootstrap)
    errors: list[str] = []
    position = 0
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + READ_TO_END_S
        while position < end and not errors:
            if time.monotonic() > deadline:
                return [f"stuck at offset {position} of {end} after {READ_TO_END_S}s"]
            for msg in c.consume(num_messages=1000, timeout=0.5):
                if msg.error() and msg.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(str(msg.error()))
                elif not msg.error():
                    position = msg.offset() + 1
    finally:
        c.close()
    return errors


# --- truncated frames -------------------------------------------------------------------------


def api_versions_frame() -> bytes:
    return kw.request_frame(kw.API_API_VERSIONS, 0, 1, b"")


# (id, bytes sent, how the client ends: "eof" (shutdown write), "rst", or "stay" (keep the
# socket open and expect the broker to close it at once))
TRUNCATED = [
    ("prefix-says-more-then-eof", kw.i32(200) + api_versions_frame()[4:], "eof"),
    ("prefix-says-more-then-rst", kw.i32(5000) + api_versions_frame()[4:] + b"x" * 100, "rst"),
    ("one-byte-of-prefix-then-eof", b"\x00", "eof"),
    ("three-bytes-of-prefix-then-eof", b"\x00\x00\x00", "eof"),
    ("three-bytes-of-prefix-then-rst", b"\x00\x00\x01", "rst"),
    ("header-cut-mid-client-id-then-eof", api_versions_frame()[:14], "eof"),
    ("length-0", kw.i32(0), "stay"),
    ("length-7", kw.i32(7) + b"\x00\x12\x00\x00\x00\x00\x00", "stay"),
    ("length-minus-1", kw.i32(-1) + b"\x00" * 16, "stay"),
    ("length-min-i32", kw.i32(-(2**31)) + b"\x00" * 16, "stay"),
    ("length-just-above-max", kw.i32(SOCKET_REQUEST_MAX_BYTES + 1) + api_versions_frame()[4:], "stay"),
    ("length-max-u32", b"\xff\xff\xff\xff", "stay"),
]


def batch_filling_frame(topic: str, frame_bytes: int) -> bytes:
    """A one-record batch whose Produce v3 frame (after the length prefix) is `frame_bytes`."""

    def frame_len(n: int) -> int:
        batch = kw.record_batch([b"x" * n], timestamp_ms=0)
        return len(kw.request_frame(kw.API_PRODUCE, 3, 1, bytes(kw.produce_body(3, {topic: [(1, batch)]})))) - 4

    probe = 20_000  # same varint widths as the final size (2n < 2^21)
    batch = kw.record_batch([b"x" * (probe + frame_bytes - frame_len(probe))], timestamp_ms=0)
    frame = kw.request_frame(kw.API_PRODUCE, 3, 1, bytes(kw.produce_body(3, {topic: [(1, batch)]})))
    assert len(frame) - 4 == frame_bytes
    return batch


def test_truncated_frames(phase):
    broker, seeded = phase
    failures = []
    with KafkaConnection(broker.bootstrap) as bystander:
        for name, data, ending in TRUNCATED:
            with KafkaConnection(broker.bootstrap) as victim:
                victim.send_raw(data)
                if ending == "rst":
                    victim.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue  # closing now sends RST
                if ending == "eof":
                    victim.sock.shutdown(socket.SHUT_WR)
                if not victim.wait_closed(CLOSE_DEADLINE_S):
                    failures.append(f"{name}: the broker did not close the connection within {CLOSE_DEADLINE_S}s")
            if bystander.api_versions().error_code != kw.NONE:
                failures.append(f"{name}: the bystander connection was not served afterwards")
    assert not failures, "\n".join(failures)
    # A frame of exactly socket.request.max.bytes is read (the limit is inclusive) and its
    # batch, above message.max.bytes, refused.
    with KafkaConnection(broker.bootstrap) as conn:
        result = conn.produce(FUZZ_NAMES.topic, 1, batch_filling_frame(FUZZ_NAMES.topic, SOCKET_REQUEST_MAX_BYTES))
        assert result.error_code == kw.MESSAGE_TOO_LARGE
    assert_survived(broker, seeded, "truncated frames")


# --- slow senders -----------------------------------------------------------------------------

TRICKLERS = 4
TRICKLE_S = (0.05, 0.1)


# A 53-byte Metadata frame: 2.6-5.3 s at this pace, inside connections.max.idle.ms.
TRICKLED_TOPICS = [CANARY_TOPIC, "seed-plain"]


TRICKLED_REQUESTS = 2  # one after the other on the connection: 5-11 s in all


def trickle_metadata(bootstrap: str, results: list, index: int):
    """Sends Metadata v1 a byte at a time, twice; results[index] = (topic errors of each,
    finished at)."""
    try:
        with KafkaConnection(bootstrap, timeout_s=60) as conn:
            conn.trickle_s = TRICKLE_S
            errors = [conn.metadata_topic_errors(TRICKLED_TOPICS) for _ in range(TRICKLED_REQUESTS)]
            results[index] = (errors, time.monotonic())
    except Exception as err:  # noqa: BLE001 - reported by the test thread
        results[index] = (err, None)


def test_slow_senders(phase):
    broker, seeded = phase
    stalled = KafkaConnection(broker.bootstrap)
    stalled.send_raw(kw.i32(100) + b"\x00\x03\x00\x01\x00\x00")  # half a Metadata frame, then nothing
    stalled_at = time.monotonic()
    results: list = [None] * TRICKLERS
    threads = [threading.Thread(target=trickle_metadata, args=(broker.bootstrap, results, i)) for i in range(TRICKLERS)]
    for t in threads:
        t.start()
    try:
        # Other clients are served promptly meanwhile: kcat is done before any trickler.
        assert kcat_round_trip(broker.bootstrap) < PROMPT_S
        kcat_done = time.monotonic()
        delivered = produce_all(producer(broker.bootstrap), CANARY_TOPIC, [Record(b"slow", b"meanwhile")])
        got = consume_partition(broker.bootstrap, CANARY_TOPIC, 0, 1, start_offset=delivered[0].offset)
        assert got[0].value() == b"meanwhile"
    finally:
        for t in threads:
            t.join(timeout=60)
    for errors, finished in results:
        assert errors == [{t: kw.NONE for t in TRICKLED_TOPICS}] * TRICKLED_REQUESTS, f"trickled Metadata: {errors!r}"
        assert finished > kcat_done, "a trickler finished before kcat: kcat did not run during the trickle"
    # The stalled sender is closed after connections.max.idle.ms, not before.
    assert stalled.wait_closed(IDLE_MS / 1000 + CLOSE_DEADLINE_S), "a stalled sender was never closed"
    elapsed = time.monotonic() - stalled_at
    stalled.close()
    assert elapsed >= IDLE_MS / 1000 * 0.8, f"stalled sender closed after {elapsed:.1f}s, before the idle timeout"
    assert_survived(broker, seeded, "slow senders")


# --- half-open connections --------------------------------------------------------------------


def open_half_open(bootstrap: str, count: int) -> list[socket.socket]:
    """`count` connections; odd ones have sent the first 6 bytes of a 100-byte frame."""
    host, port = bootstrap.rsplit(":", 1)
    socks = []
    for i in range(count):
        s = socket.create_connection((host, int(port)), timeout=CLOSE_DEADLINE_S)
        if i % 2:
            s.sendall(kw.i32(100) + b"\x00\x03")
        socks.append(s)
    return socks


def closed_by_peer(s: socket.socket) -> bool:
    """True when the broker has closed `s` (EOF or reset), without waiting."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        s.setblocking(True)


def open_gauge(broker: Broker) -> float:
    return scrape(broker)["sluice_connections_open"]


def test_half_open_connections(phase):
    broker, seeded = phase
    # A long idle timeout, so the half-open connections stay until the test closes them.
    broker.settings["connections.max.idle.ms"] = "600000"
    broker.restart()
    assert_survived(broker, seeded, "a graceful restart after the attacks")
    base = open_gauge(broker)
    socks = open_half_open(broker.bootstrap, HALF_OPEN_CONNECTIONS)
    try:
        # (base may still count the closing connections of the check above, so no base + N)
        wait_until(lambda: open_gauge(broker) >= HALF_OPEN_CONNECTIONS, 60, "the gauge to count them")
        assert kcat_round_trip(broker.bootstrap) < PROMPT_S
        dropped = sum(closed_by_peer(s) for s in socks)
        assert dropped == 0, f"{dropped} half-open connections were closed by the broker"
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: open_gauge(broker) <= base, 60, "the connections gauge to go back down")
    assert_survived(broker, seeded, "half-open connections")


PER_IP_MAX = 500


def test_half_open_connections_with_per_ip_limit(broker_factory):
    raise_nofile_limit(HALF_OPEN_CONNECTIONS * 2 + 1024)
    broker = broker_factory({"max.connections.per.ip": str(PER_IP_MAX)})
    seeded = seed_records(broker.bootstrap)
    base = open_gauge(broker)
    socks = open_half_open(broker.bootstrap, HALF_OPEN_CONNECTIONS)
    try:
        # Beyond the limit connections are closed at once; the others stay.
        wait_until(
            lambda: sum(closed_by_peer(s) for s in socks) >= HALF_OPEN_CONNECTIONS - PER_IP_MAX,
            60,
            "connections over max.connections.per.ip to be closed",
        )
        assert open_gauge(broker) <= base + PER_IP_MAX
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: open_gauge(broker) <= base, 60, "the connections gauge to go back down")
    assert_survived(broker, seeded, "half-open connections over max.connections.per.ip")
