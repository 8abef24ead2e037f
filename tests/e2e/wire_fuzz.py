"""The adversarial suite's mutation fuzzer: seeded mutations of valid request bodies, and a
prober that sends each one and classifies what the broker did.

Mutations of one body (`mutations`): truncation at every field boundary; every length or
count field set to -1, -2, the type's maximum and minimum (and 65,536 for 4-byte ones);
then `iterations` random ones: bit flips, bytes set to 0x00/0x7f/0x80/0xff, inserted and
deleted bytes, and garbage bodies of random length. Each comes with a label that, with the
seed, reproduces it.

`Prober.probe` sends the mutated request followed by an ApiVersions v0 on the same
connection and reads until that ApiVersions answer arrives or the broker closes the
connection. Acceptable: every frame is well formed and carries the correlation id of the
mutated request or of the ApiVersions, in order (a request may get no answer, as acks=0
produces do), or the connection is closed. Anything else (a hang past the deadline, a wrong
correlation id, a malformed frame) is a failure.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import kafka_wire as kw

# Longest a request may legitimately take: a mutated Fetch may long-poll up to the broker's
# FETCH_MAX_WAIT_MS_MAX (30 s); anything beyond that plus slack is a hang.
RESPONSE_DEADLINE_S = 45.0
# A response frame above this is malformed (the largest honest answer here is a Fetch of a
# few KiB).
RESPONSE_BYTES_MAX = 64 * 1024 * 1024

EXTREMES = {
    1: [kw.uvarint(0xFFFFFFFF), b"\x80"],  # compact lengths: huge, and an unterminated varint
    2: [kw.i16(v) for v in (-1, -2, 0x7FFF, -0x8000)],
    4: [kw.i32(v) for v in (-1, -2, 0x7FFFFFFF, -0x80000000, 0x10000)],
}
SPECIAL_BYTES = (0x00, 0x7F, 0x80, 0xFF)
GARBAGE_BYTES_MAX = 256


def mutations(fields: kw.Fields, rng: random.Random, iterations: int) -> Iterator[tuple[str, bytes]]:
    """(label, mutated body) pairs, the systematic ones first."""
    body = bytes(fields)
    for end in fields.boundaries()[:-1]:
        yield f"truncate@{end}", body[:end]
    for offset, width in fields.lengths():
        for value in EXTREMES[width]:
            yield f"length@{offset}={value.hex()}", body[:offset] + value + body[offset + width :]
    for i in range(iterations):
        yield random_mutation(body, rng, i)


def random_mutation(body: bytes, rng: random.Random, i: int) -> tuple[str, bytes]:
    kinds = ["insert", "garbage"] + (["bitflip", "byteset", "delete"] if body else [])
    kind = rng.choice(kinds)
    out = bytearray(body)
    if kind == "bitflip":
        positions = [rng.randrange(len(out) * 8) for _ in range(rng.randint(1, 3))]
        for bit in positions:
            out[bit // 8] ^= 1 << (bit % 8)
        return f"random#{i}:bitflip{positions}", bytes(out)
    if kind == "byteset":
        pos, value = rng.randrange(len(out)), rng.choice(SPECIAL_BYTES)
        out[pos] = value
        return f"random#{i}:byteset@{pos}={value:#x}", bytes(out)
    if kind == "insert":
        pos, extra = rng.randint(0, len(out)), rng.randbytes(rng.randint(1, 8))
        out[pos:pos] = extra
        return f"random#{i}:insert@{pos}={extra.hex()}", bytes(out)
    if kind == "delete":
        pos = rng.randrange(len(out))
        n = rng.randint(1, 8)
        del out[pos : pos + n]
        return f"random#{i}:delete@{pos}+{n}", bytes(out)
    garbage = rng.randbytes(rng.randint(0, GARBAGE_BYTES_MAX))
    return f"random#{i}:garbage({len(garbage)})", garbage


# Record batch v2 header fields after the CRC (offset into the CRC-covered part, width).
BATCH_FIELDS = {
    "attributes": (0, 2),
    "lastOffsetDelta": (2, 4),
    "baseTimestamp": (6, 8),
    "maxTimestamp": (14, 8),
    "producerId": (22, 8),
    "producerEpoch": (30, 2),
    "baseSequence": (32, 4),
    "recordsCount": (36, 4),
}
BATCH_CRC_COVERS_FROM = 21  # baseOffset 8, batchLength 4, partitionLeaderEpoch 4, magic 1, crc 4
BATCH_VALUES = {
    2: [-1, 0x7FFF, -0x8000, 0x20, 0x10, 0x07, 0x05],  # control bit, transactional, bad codecs
    4: [-1, 0x7FFFFFFF, -0x80000000, 0, 1000],
    8: [-1, 2**63 - 1, -(2**63)],
}


def reframe_batch(batch: bytes, covered: bytes) -> bytes:
    """`batch`'s first 17 bytes with a new CRC-covered part: batchLength and CRC made right,
    so the broker has to look inside."""
    head = bytearray(batch[:17])
    head[8:12] = struct.pack(">i", 4 + 1 + 4 + len(covered))
    return bytes(head) + struct.pack(">I", kw.crc32c(covered)) + covered


def batch_mutations(batch: bytes, rng: random.Random, iterations: int) -> Iterator[tuple[str, bytes]]:
    """Mutations of one record batch that keep its CRC valid: every header field set to
    extreme values, then random damage to the covered part (records or compressed bytes)."""
    covered = batch[BATCH_CRC_COVERS_FROM:]
    for name, (offset, width) in BATCH_FIELDS.items():
        for value in BATCH_VALUES[width]:
            packed = struct.pack({2: ">h", 4: ">i", 8: ">q"}[width], value)
            yield f"batch:{name}={value}", reframe_batch(batch, covered[:offset] + packed + covered[offset + width :])
    records_from = 40
    for i in range(iterations):
        label, damaged = random_mutation(covered[records_from:], rng, i)
        yield f"batch:{label}", reframe_batch(batch, covered[:records_from] + damaged)


@dataclass
class Outcome:
    """What one probe saw: "answered", "answered+closed", "closed" are fine; "hung",
    "wrong-correlation-id", "malformed", "refused" (nothing listens) are failures."""

    kind: str
    detail: str = ""
    # Set by a caller that sent this request alone: the broker died of it.
    killed_broker: bool = False

    @property
    def ok(self) -> bool:
        return self.kind in ("answered", "answered+closed", "closed")


class Prober:
    """One connection that is reopened whenever the broker closes it (to wherever `bootstrap()`
    says the broker listens now: it may have been restarted on another port)."""

    def __init__(self, bootstrap: Callable[[], str]):
        self.bootstrap = bootstrap
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def probe(self, api_key: int, version: int, body: bytes) -> Outcome:
        if self.sock is None:
            host, port = self.bootstrap().rsplit(":", 1)
            try:
                self.sock = socket.create_connection((host, int(port)), timeout=RESPONSE_DEADLINE_S)
            except ConnectionRefusedError:
                return Outcome("refused", "the broker is not listening (did it exit?)")
        cid, follow = self.correlation_id + 1, self.correlation_id + 2
        self.correlation_id += 2
        data = kw.request_frame(api_key, version, cid, body) + kw.request_frame(kw.API_API_VERSIONS, 0, follow, b"")
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close()
            return Outcome("closed", "while sending")
        outcome = self._read_answers(cid, follow)
        if outcome.kind != "answered":
            self.close()
        return outcome

    def _read_answers(self, cid: int, follow: int) -> Outcome:
        deadline = time.monotonic() + RESPONSE_DEADLINE_S
        answered = False
        while True:
            try:
                frame = self._read_frame(deadline)
            except TimeoutError:
                return Outcome("hung", f"no answer and no close within {RESPONSE_DEADLINE_S}s")
            except (ConnectionResetError, BrokenPipeError, EOFError):
                return Outcome("answered+closed" if answered else "closed")
            except ValueError as err:
                return Outcome("malformed", str(err))
            got = struct.unpack_from(">i", frame)[0]
            if got == cid and not answered:
                answered = True
            elif got == follow:
                return Outcome("answered")
            else:
                return Outcome("wrong-correlation-id", f"got {got}, expected {cid} or {follow}")

    def _read_frame(self, deadline: float) -> bytes:
        (length,) = struct.unpack(">i", self._read_exact(4, deadline))
        if not 4 <= length <= RESPONSE_BYTES_MAX:
            raise ValueError(f"response frame length {length}")
        return self._read_exact(length, deadline)

    def _read_exact(self, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)
