#!/usr/bin/env python3
"""Produce throughput into a topic with a pass-all validator plugin against the same kind of
topic without one, in the same broker run, with librdkafka's rdkafka_performance.

    tests/bench/validator_bench.py                         RUNS=5 pairs per load, 1,000,000 x 100 B
    RUNS=1 RECORDS=100000 tests/bench/validator_bench.py   a quick smoke run
    LOADS=one-partition tests/bench/validator_bench.py     only this load

Needs a release broker (target/release/sluice, or $SLUICE_BIN), the built
record-policy-validator plugin (sdk/build-plugins.sh -> plugins/target/wasm) and
rdkafka_performance (tests/bench/client_bench.sh builds it into target/client-bench/, or
$PERF). The validator is `record-policy-validator` with no parameters: it accepts every
record, so the run measures what validation costs (decode each batch, one plugin call per
batch over its columns, the batch appended as sent). acks=1, linger.ms=5, 100-byte values;
pairs (plain, validated) whose order alternates, each run into a fresh topic. Loads:
  - one-partition: uncompressed batches into one partition;
  - six-partitions: random keys over 6 partitions (smaller batches, more calls);
  - lz4: one partition, lz4-compressed batches (decompressed for the plugin).
Prints a markdown table: median msgs/s, the ratio of the medians and the median of the
per-pair ratios (goal: >= 0.8x), and the broker's CPU per record.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from bench_support import Broker, Run, loadavg, median, perf, start_broker  # noqa: E402

from clients import create_topic  # noqa: E402

RUNS = int(os.environ.get("RUNS", "5"))
RECORDS = int(os.environ.get("RECORDS", "1000000"))
VALIDATOR = "record-policy-validator"
# name -> (partitions, rdkafka_performance arguments, what it shows)
LOADS = {
    "one-partition": (1, ["-p", "0"], "one partition, uncompressed"),
    "six-partitions": (6, ["-K", "1000000"], "random keys over 6 partitions, uncompressed"),
    "lz4": (1, ["-p", "0", "-z", "lz4"], "one partition, lz4 (decompressed for the plugin)"),
}
SELECTED = [n for n in os.environ.get("LOADS", ",".join(LOADS)).split(",") if n]


def run_pairs(broker: Broker, name: str) -> tuple[list[Run], list[Run]]:
    partitions, args, _ = LOADS[name]
    plain, validated = [], []
    for i in range(RUNS):
        order = [("plain", plain, {}), ("validated", validated, {"sluice.validator": VALIDATOR})]
        for kind, runs, config in order if i % 2 == 0 else order[::-1]:
            topic = f"{name}-{kind}-{i}"
            create_topic(broker.bootstrap, topic, partitions, config)
            cmd = ["-P", "-t", topic, "-s", "100", "-a", "1", "-X", "linger.ms=5", *args]
            runs.append(perf(broker, cmd, RECORDS))
        print(f"{name} pair {i} (load {loadavg()}): plain {plain[-1]}, validated {validated[-1]}", file=sys.stderr)
    return plain, validated


def main():
    for name in SELECTED:
        assert name in LOADS, f"unknown load {name}; one of {', '.join(LOADS)}"
    results = {}
    loads = []
    with tempfile.TemporaryDirectory() as d:
        broker = start_broker(Path(d), [VALIDATOR])
        try:
            for name in SELECTED:
                loads.append(loadavg())
                results[name] = run_pairs(broker, name)
            loads.append(loadavg())
        finally:
            broker.stop()
    print(
        f"\n{RUNS} pairs per load, {RECORDS:,} records of 100 B, acks=1, linger.ms=5;"
        f" load average before each load and at the end: {' | '.join(loads)}\n"
    )
    print(
        "| load | no validator msgs/s | pass-all validator msgs/s | ratio of medians | median of pair ratios"
        " | broker CPU us/record, no validator | with validator |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for name, (plain, validated) in results.items():
        p, v = median([x.msgs_per_s for x in plain]), median([x.msgs_per_s for x in validated])
        pairs = median([b.msgs_per_s / a.msgs_per_s for a, b in zip(plain, validated, strict=True)])
        cp, cv = median([x.broker_us_per_record for x in plain]), median([x.broker_us_per_record for x in validated])
        print(f"| {LOADS[name][2]} | {p:,.0f} | {v:,.0f} | {v / p:.2f}x | {pairs:.2f}x | {cp:.3f} | {cv:.3f} |")


if __name__ == "__main__":
    main()
