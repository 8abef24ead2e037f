#!/usr/bin/env python3
"""Produce throughput into a topic with the wasm murmur2 partitioner against the same topic
without a plugin, in the same broker run, with librdkafka's rdkafka_performance.

    tests/bench/plugin_bench.py                    RUNS=3 alternating runs per load, 500,000 x 100 B
    RUNS=1 RECORDS=100000 tests/bench/plugin_bench.py   a quick smoke run

Needs a release broker (target/release/sluice, or $SLUICE_BIN), the built murmur2 plugin
(plugins/target/wasm, or $SLUICE_PLUGINS_DIR) and rdkafka_performance (built by
tests/bench/client_bench.sh into target/client-bench/, or $PERF). Topics have 6 partitions;
acks=1, linger.ms=5. Three loads, each on a plain topic and on a `sluice.partitioner=murmur2`
topic:
  - "stays": one key, sent to the partition murmur2 picks for it (the plugin runs on every
    batch; batches are appended unchanged);
  - "moved": one key, sent to another partition (every batch re-encoded for its target);
  - "keyless": no key, librdkafka's sticky partitioner; the plugin spreads keyless records
    round-robin, so every batch is split into 6 (the worst case).
Prints a markdown table of medians (msgs/s and the plugin/plain ratio).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from plugin_support import murmur2_partition  # noqa: E402

from clients import create_topic  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
RECORDS = int(os.environ.get("RECORDS", "500000"))
PARTITIONS = 6
SLUICE = os.environ.get("SLUICE_BIN") or str(ROOT / "target" / "release" / "sluice")
PERF = os.environ.get("PERF") or str(ROOT / "target" / "client-bench" / "rdkafka_performance")
WASM = Path(os.environ.get("SLUICE_PLUGINS_DIR") or ROOT / "plugins" / "target" / "wasm") / "murmur2.wasm"
KEY = b"customer-42"


def start_broker(tmp: Path) -> tuple[subprocess.Popen, str]:
    (tmp / "plugins").mkdir()
    shutil.copyfile(WASM, tmp / "plugins" / "murmur2.wasm")
    cmd = [SLUICE, "serve", "--data-dir", str(tmp / "data"), "--listen", "127.0.0.1:0", "--admin-listen", "",
           "--set", f"plugin.dir={tmp / 'plugins'}", "--set", "sluice.acks.all.fsync=false"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(tmp / "broker.log", "wb"))
    line = proc.stdout.readline().decode()
    match = re.search(r"kafka=(\S+)", line)
    assert match, f"no listening line: {line!r}"
    return proc, match.group(1)


def produce(bootstrap: str, topic: str, partition: int | None, key: bytes | None) -> float:
    cmd = [PERF, "-P", "-b", bootstrap, "-t", topic, "-s", "100", "-c", str(RECORDS), "-a", "1", "-q",
           "-X", "linger.ms=5"]
    if partition is not None:
        cmd += ["-p", str(partition)]
    if key is not None:
        cmd += ["-k", key.decode()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    line = next(l for l in out.splitlines() if "messages produced" in l)
    assert f" {RECORDS} delivered" in line and " 0 failed" in line, line
    return float(re.search(r" ([0-9]+) msgs/s", line).group(1))


def main():
    home = murmur2_partition(KEY, PARTITIONS)
    loads = {
        "stays (key, sent to murmur2's partition)": (home, KEY),
        "moved (key, sent to another partition)": ((home + 1) % PARTITIONS, KEY),
        "keyless (every batch split in 6)": (None, None),
    }
    with tempfile.TemporaryDirectory() as d:
        proc, bootstrap = start_broker(Path(d))
        try:
            results = {}
            for i, (name, (partition, key)) in enumerate(loads.items()):
                create_topic(bootstrap, f"plain-{i}", PARTITIONS)
                create_topic(bootstrap, f"routed-{i}", PARTITIONS, {"sluice.partitioner": "murmur2"})
                plain, routed = [], []
                for _ in range(RUNS):
                    plain.append(produce(bootstrap, f"plain-{i}", partition, key))
                    routed.append(produce(bootstrap, f"routed-{i}", partition, key))
                results[name] = (statistics.median(plain), statistics.median(routed))
                print(f"{name}: plain {plain} routed {routed}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(60)
    print(f"{RUNS} runs per load, {RECORDS} records of 100 B, acks=1, linger.ms=5, {PARTITIONS} partitions\n")
    print("| load | no plugin msgs/s | murmur2 plugin msgs/s | plugin / none |\n|---|---:|---:|---:|")
    for name, (plain, routed) in results.items():
        print(f"| {name} | {plain:,.0f} | {routed:,.0f} | {routed / plain:.2f}x |")


if __name__ == "__main__":
    main()
