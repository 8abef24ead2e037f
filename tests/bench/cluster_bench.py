#!/usr/bin/env python3
"""Three brokers against one, on the same machine in the same run: produce and consume
throughput of a 6-partition topic (librdkafka's rdkafka_performance bootstrapping from one
broker, 100-byte records, linger.ms=5, acks=1, unkeyed records spread over the partitions;
the consumer a group reading all six), and the cost of a metadata change (CreateTopics of
one topic per request, one after another, through confluent-kafka's AdminClient: requests
per second and p50/p99 latency; on three brokers each goes through the active controller
and is answered once the receiving broker applied it).

    tests/bench/cluster_bench.py                 RUNS=3, RECORDS=2000000, TOPICS=100
    RUNS=1 RECORDS=200000 TOPICS=20 tests/bench/cluster_bench.py    a quick smoke run

Needs target/release/sluice (or $SLUICE_BIN) and rdkafka_performance (built by
tests/bench/client_bench.sh into target/client-bench/). Each run starts a fresh single
broker and a fresh three-broker cluster (nodes on 127.0.0.1-3, as tests/e2e/cluster_support.py
makes them), alternating which goes first. Broker CPU is the sum over the cluster's processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from bench_support import CLK_TCK, PERF, SLUICE, loadavg, median, start_broker  # noqa: E402

os.environ.setdefault("SLUICE_BIN", SLUICE)
from cluster_support import Cluster  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
RECORDS = int(os.environ.get("RECORDS", "2000000"))
TOPICS = int(os.environ.get("TOPICS", "100"))
PARTITIONS = 6


def cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def perf(bootstrap: str, pids: list[int], args: list[str]) -> tuple[float, float]:
    """(msgs/s, broker CPU us per record) of one rdkafka_performance run."""
    cmd = [PERF, "-b", bootstrap, "-q", "-c", str(RECORDS), "-X", "linger.ms=5", *args]
    before = cpu_s(pids)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    after = cpu_s(pids)
    out = done.stdout
    if "-P" in args:
        line = next((x for x in out.splitlines() if "messages produced" in x), None)
        assert line and f" {RECORDS} delivered" in line and " 0 failed" in line, f"{cmd}: {line or out + done.stderr}"
    else:
        lines = [x for x in out.splitlines() if "messages (" in x and "consumed" in x]
        assert lines and lines[-1].startswith(f"% {RECORDS} messages"), f"{cmd}: {out[-2000:]}{done.stderr[-2000:]}"
        line = lines[-1]
    rate = float(line.split(" msgs/s")[0].rsplit(" ", 1)[1])
    return rate, (after - before) * 1e6 / RECORDS


def create_topics(bootstrap: str, prefix: str) -> tuple[float, float, float]:
    """(creates/s, p50 ms, p99 ms) of TOPICS sequential single-topic CreateTopics."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    latencies = []
    started = time.monotonic()
    for i in range(TOPICS):
        t0 = time.monotonic()
        for f in admin.create_topics([NewTopic(f"{prefix}-{i}", 1, 1)]).values():
            f.result(timeout=60)
        latencies.append((time.monotonic() - t0) * 1000)
    total = time.monotonic() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return TOPICS / total, median(latencies), p99


def create_topic(bootstrap: str, name: str):
    subprocess.run([SLUICE, "topic", "create", name, "-p", str(PARTITIONS), "--brokers", bootstrap], check=True, capture_output=True)


def measure(bootstrap: str, pids: list[int], tag: str) -> dict[str, float]:
    topic = f"bench-{tag}"
    create_topic(bootstrap, topic)
    produce, produce_cpu = perf(bootstrap, pids, ["-P", "-t", topic, "-s", "100", "-a", "1"])
    consume, consume_cpu = perf(
        bootstrap, pids, ["-C", "-G", f"{topic}-group", "-t", topic, "-X", "auto.offset.reset=earliest"]
    )
    creates, p50, p99 = create_topics(bootstrap, f"{tag}-created")
    return {
        "produce": produce,
        "produce_cpu": produce_cpu,
        "consume": consume,
        "consume_cpu": consume_cpu,
        "creates": creates,
        "create_p50": p50,
        "create_p99": p99,
    }


def one_broker(tmp: Path) -> dict[str, float]:
    broker = start_broker(tmp, [], settings={"num.partitions": str(PARTITIONS)})
    try:
        return measure(broker.bootstrap, [broker.proc.pid], "one")
    finally:
        broker.stop()


def three_brokers(tmp: Path) -> dict[str, float]:
    cluster = Cluster(tmp, 3, {"sluice.acks.all.fsync": "false"}).start()
    try:
        pids = [n.pid for n in cluster.nodes.values()]
        return measure(cluster.node(1).bootstrap, pids, "three")
    finally:
        cluster.kill_all()


def main():
    print(f"RUNS={RUNS} RECORDS={RECORDS} TOPICS={TOPICS} broker={SLUICE}; load {loadavg()}", file=sys.stderr)
    results: dict[str, list[dict[str, float]]] = {"one": [], "three": []}
    for run in range(RUNS):
        order = ["one", "three"] if run % 2 == 0 else ["three", "one"]
        for which in order:
            with tempfile.TemporaryDirectory(prefix=f"cluster-bench-{which}-") as tmp:
                got = one_broker(Path(tmp)) if which == "one" else three_brokers(Path(tmp))
            results[which].append(got)
            print(f"run {run + 1} {which}: {got} (load {loadavg()})", file=sys.stderr)
    med = {w: {k: median([r[k] for r in rs]) for k in rs[0]} for w, rs in results.items()}
    o, t = med["one"], med["three"]
    print(f"| load | 1 broker | 3 brokers | 3 / 1 |")
    print("|---|---:|---:|---:|")
    print(f"| produce msgs/s | {o['produce']:,.0f} | {t['produce']:,.0f} | {t['produce'] / o['produce']:.2f}x |")
    print(f"| produce broker CPU us/record (all brokers) | {o['produce_cpu']:.3f} | {t['produce_cpu']:.3f} | {t['produce_cpu'] / o['produce_cpu']:.2f}x |")
    print(f"| consume msgs/s | {o['consume']:,.0f} | {t['consume']:,.0f} | {t['consume'] / o['consume']:.2f}x |")
    print(f"| consume broker CPU us/record (all brokers) | {o['consume_cpu']:.3f} | {t['consume_cpu']:.3f} | {t['consume_cpu'] / o['consume_cpu']:.2f}x |")
    print(f"| CreateTopics/s (one topic each, sequential) | {o['creates']:.1f} | {t['creates']:.1f} | {t['creates'] / o['creates']:.2f}x |")
    print(f"| CreateTopics p50 ms | {o['create_p50']:.1f} | {t['create_p50']:.1f} | |")
    print(f"| CreateTopics p99 ms | {o['create_p99']:.1f} | {t['create_p99']:.1f} | |")


if __name__ == "__main__":
    main()
