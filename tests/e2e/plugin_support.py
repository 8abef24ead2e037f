"""Helpers for the plugin suites: where the built guest plugins are, a plugin directory to
start a broker with, Kafka's key hashes in Python (the expected partitions), and reading a
whole topic back to see where each record landed.

The plugins are built from plugins/ by `sdk/build-plugins.sh` (tests/run does it first) into
plugins/target/wasm/<name>.wasm; $SLUICE_PLUGINS_DIR overrides that directory.
"""

from __future__ import annotations

import os
import shutil
import zlib
from pathlib import Path

import pytest

from clients import consume_partition, watermarks

REPO_ROOT = Path(__file__).resolve().parents[2]


def built_plugins_dir() -> Path:
    return Path(os.environ.get("SLUICE_PLUGINS_DIR") or REPO_ROOT / "plugins" / "target" / "wasm")


def wasm(name: str) -> bytes:
    path = built_plugins_dir() / f"{name}.wasm"
    if not path.is_file():
        pytest.fail(f"{path} missing: build the plugins (sdk/build-plugins.sh; tests/run does)")
    return path.read_bytes()


def plugin_dir(tmp_path: Path, plugins: dict[str, str]) -> Path:
    """A fresh plugin dir with `deployed name -> built plugin` copied in."""
    d = tmp_path / "plugins"
    d.mkdir(exist_ok=True)
    for deployed, built in plugins.items():
        shutil.copyfile(built_plugins_dir() / f"{built}.wasm", d / f"{deployed}.wasm")
    return d


def replace_file(path: Path, data: bytes) -> None:
    """Writes aside and renames over `path`, as docs/plugins.md tells operators to."""
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, path)


def murmur2(data: bytes) -> int:
    """The Java client's murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Java's `Utils.toPositive(Utils.murmur2(key)) % numPartitions`."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def crc32_partition(key: bytes, partitions: int) -> int:
    """librdkafka's `consistent` partitioner: CRC-32 of the key modulo the partitions."""
    return zlib.crc32(key) % partitions


def landed(bootstrap: str, topic: str, partitions: int) -> dict[int, list]:
    """Every record of the topic by the partition it is stored in (confluent Messages)."""
    out = {}
    for p in range(partitions):
        low, high = watermarks(bootstrap, topic, p)
        out[p] = consume_partition(bootstrap, topic, p, high - low, start_offset=low) if high > low else []
    return out


def produce_v8(bootstrap: str, topic: str, partition: int, batch: bytes) -> tuple[int, int, str | None]:
    """Produce v8 (the version carrying `error_message`) of one batch over the raw wire:
    (error code, base offset, error message)."""
    from kafka_wire import KafkaConnection

    with KafkaConnection(bootstrap) as conn:
        cid = conn.send_produce(topic, partition, batch, version=8)
        r = conn.recv_response(cid)

        def part(x):
            index, error, base_offset = x.i32(), x.i16(), x.i64()
            x.i64()  # log append time
            x.i64()  # log start offset
            x.array(lambda y: (y.i32(), y.string()))  # record errors
            return index, error, base_offset, x.string()

        topics = r.array(lambda x: (x.string(), x.array(part)))
        _, error, base_offset, message = topics[0][1][0]
        return error, base_offset, message
