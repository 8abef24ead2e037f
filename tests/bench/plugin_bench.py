#!/usr/bin/env python3
"""Produce throughput into a topic with the wasm murmur2 partitioner against the same kind of
topic without a plugin, in the same broker run, with librdkafka's rdkafka_performance.

    tests/bench/plugin_bench.py                         RUNS=5 pairs per load, 1,000,000 x 100 B
    RUNS=1 RECORDS=100000 tests/bench/plugin_bench.py   a quick smoke run
    LOADS=random-stays,random-moved tests/bench/plugin_bench.py   only these loads

Needs a release broker (target/release/sluice, or $SLUICE_BIN), the built murmur2 plugin
(sdk/build-plugins.sh -> plugins/target/wasm, or $SLUICE_PLUGINS_DIR) and rdkafka_performance
with the random-keys patch (tests/bench/client_bench.sh builds it into target/client-bench/,
or $PERF). Topics have 6 partitions; acks=1, linger.ms=5, 100-byte values. Each load runs on
a plain topic and on a `sluice.partitioner=murmur2` topic, in pairs whose order alternates
(plain first, then plugin first, ...), each run into a fresh topic:
  - random-stays: a random key per record out of 1,000,000, and the client partitions with
    murmur2 itself (librdkafka `partitioner=murmur2_random`): every record stays where the
    client sent it (the plugin runs on every batch; batches are appended unchanged);
  - random-moved: the same keys with librdkafka's default partitioner (CRC32): the plugin
    moves about 5 records in 6, so every batch is split and re-encoded into 6;
  - one-key-stays: one key, sent to the partition murmur2 picks for it;
  - one-key-moved: one key, sent to another partition (every batch re-encoded whole);
  - keyless: no key, librdkafka's sticky partitioner; the plugin spreads keyless records
    round-robin, so every batch is split into 6 (the worst case).
Prints a markdown table: median msgs/s, the ratio of the medians and the median of the
per-pair ratios, and the broker's CPU per record (user + system, from /proc/PID/stat).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from bench_support import Broker, Run, loadavg, median, perf, start_broker  # noqa: E402
from plugin_support import murmur2_partition  # noqa: E402

from clients import create_topic  # noqa: E402

RUNS = int(os.environ.get("RUNS", "5"))
RECORDS = int(os.environ.get("RECORDS", "1000000"))
PARTITIONS = 6
KEYS = 1_000_000
KEY = b"customer-42"
HOME = murmur2_partition(KEY, PARTITIONS)
# name -> (rdkafka_performance arguments, what it shows)
LOADS = {
    "random-stays": (
        ["-K", str(KEYS), "-X", "partitioner=murmur2_random"],
        f"random keys (1 of {KEYS:,}), client partitions with murmur2: every record stays",
    ),
    "random-moved": (["-K", str(KEYS)], "random keys, client's default partitioner (CRC32): ~5/6 of records moved"),
    "one-key-stays": (["-k", KEY.decode(), "-p", str(HOME)], "one key, sent to murmur2's partition"),
    "one-key-moved": (["-k", KEY.decode(), "-p", str((HOME + 1) % PARTITIONS)], "one key, sent to another partition"),
    "keyless": ([], "keyless, sticky partitioner (every batch split in 6)"),
}
SELECTED = [n for n in os.environ.get("LOADS", ",".join(LOADS)).split(",") if n]


def produce(broker: Broker, topic: str, args: list[str]) -> Run:
    return perf(broker, ["-P", "-t", topic, "-s", "100", "-a", "1", "-X", "linger.ms=5", *args], RECORDS)


def run_pairs(broker: Broker, name: str, args: list[str]) -> tuple[list[Run], list[Run]]:
    plain, routed = [], []
    for i in range(RUNS):
        order = [("plain", plain, {}), ("routed", routed, {"sluice.partitioner": "murmur2"})]
        for kind, runs, config in order if i % 2 == 0 else order[::-1]:
            topic = f"{name}-{kind}-{i}"
            create_topic(broker.bootstrap, topic, PARTITIONS, config)
            runs.append(produce(broker, topic, args))
        print(f"{name} pair {i} (load {loadavg()}): plain {plain[-1]}, routed {routed[-1]}", file=sys.stderr)
    return plain, routed


def main():
    for name in SELECTED:
        assert name in LOADS, f"unknown load {name}; one of {', '.join(LOADS)}"
    results = {}
    loads = []
    with tempfile.TemporaryDirectory() as d:
        broker = start_broker(Path(d), ["murmur2"])
        try:
            for name in SELECTED:
                loads.append(loadavg())
                results[name] = run_pairs(broker, name, LOADS[name][0])
            loads.append(loadavg())
        finally:
            broker.stop()
    print(
        f"\n{RUNS} pairs per load, {RECORDS:,} records of 100 B, acks=1, linger.ms=5, {PARTITIONS} partitions;"
        f" load average before each load and at the end: {' | '.join(loads)}\n"
    )
    print(
        "| load | no plugin msgs/s | murmur2 plugin msgs/s | ratio of medians | median of pair ratios"
        " | broker CPU us/record, no plugin | with plugin |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for name, (plain, routed) in results.items():
        p, r = median([x.msgs_per_s for x in plain]), median([x.msgs_per_s for x in routed])
        pairs = median([b.msgs_per_s / a.msgs_per_s for a, b in zip(plain, routed, strict=True)])
        cp, cr = median([x.broker_us_per_record for x in plain]), median([x.broker_us_per_record for x in routed])
        print(f"| {LOADS[name][1]} | {p:,.0f} | {r:,.0f} | {r / p:.2f}x | {pairs:.2f}x | {cp:.3f} | {cr:.3f} |")


if __name__ == "__main__":
    main()
