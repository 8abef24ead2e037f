"""10,000 partitions on one broker (issue 38): CreateTopics per second (100-topic batches of
5-partition topics through confluent-kafka's AdminClient, as a new user would), then a
restart: time to the listening line and to a Metadata answer naming every topic; RSS, open
descriptors (/proc/PID/fd) and disk used after creation and after the restart. Medians of
`--runs` runs (3), each on a fresh data dir.

    cargo build --release -p sluice-cli
    python3 tests/bench/partitions_bench.py [--partitions 10000] [--runs 3]

The release broker is target/release/sluice or $SLUICE_BIN. `max.connections` is set so the
descriptor budget fits the partitions under this process's RLIMIT_NOFILE (the broker
raises its soft limit to the hard one): see docs/config.md, "File descriptors".
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
SLUICE = os.environ.get("SLUICE_BIN") or str(ROOT / "target" / "release" / "sluice")
TOPICS_PER_BATCH = 100
PARTITIONS_PER_TOPIC = 5
START_TIMEOUT_S = 120
# BROKER_DESCRIPTORS_RESERVED + sluice.segment.files.open.max (broker/server/src/limits.rs)
FIXED_DESCRIPTORS = 256 + 512


def start(data: Path, log: Path, connections: int) -> tuple[subprocess.Popen, str, float]:
    """The broker, its bootstrap address, and seconds to its listening line."""
    cmd = [SLUICE, "serve", "--data-dir", str(data), "--listen", "127.0.0.1:0", "--admin-listen", ""]
    cmd += ["--set", f"max.connections={connections}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log, "ab"), env=env)
    line = proc.stdout.readline().decode()
    match = re.search(r"kafka=(\S+)", line)
    assert match, f"no listening line: {line!r}; log: {log.read_text()[-2000:]}"
    return proc, match.group(1), time.monotonic() - t0


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 60_000})


def create_all(client: AdminClient, partitions: int) -> float:
    """Creates the topics; returns the seconds taken."""
    topics = [f"t{i:05}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    t0 = time.monotonic()
    for i in range(0, len(topics), TOPICS_PER_BATCH):
        batch = [NewTopic(t, PARTITIONS_PER_TOPIC, 1) for t in topics[i : i + TOPICS_PER_BATCH]]
        for name, future in client.create_topics(batch, operation_timeout=60, request_timeout=120).items():
            future.result()  # raises on any refusal
    return time.monotonic() - t0


def wait_for_metadata(client: AdminClient, topics: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if len(client.list_topics(timeout=10).topics) >= topics:
                return
        except Exception:  # noqa: BLE001 - not serving yet
            pass
        assert time.monotonic() < deadline, "Metadata never named every topic"
        time.sleep(0.05)


def process_stats(pid: int) -> tuple[float, int]:
    """(RSS in MB, open descriptors)."""
    rss_kb = next(int(l.split()[1]) for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("VmRSS:"))
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def disk_mb(path: Path) -> float:
    out = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) / 1e6


def stop(proc: subprocess.Popen) -> float:
    """SIGTERM; seconds until the broker exited (0)."""
    t0 = time.monotonic()
    proc.terminate()
    assert proc.wait(600) == 0, "broker did not exit 0"
    return time.monotonic() - t0


def one_run(partitions: int, connections: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="sluice-partitions-") as tmp:
        data, log = Path(tmp) / "data", Path(tmp) / "broker.log"
        proc, bootstrap, _ = start(data, log, connections)
        try:
            created_s = create_all(admin(bootstrap), partitions)
            rss, fds = process_stats(proc.pid)
        finally:
            shutdown_s = stop(proc)
        t0 = time.monotonic()
        proc, bootstrap, listening_s = start(data, log, connections)
        try:
            wait_for_metadata(admin(bootstrap), partitions // PARTITIONS_PER_TOPIC)
            serving_s = time.monotonic() - t0
            rss2, fds2 = process_stats(proc.pid)
            disk = disk_mb(data)
        finally:
            stop(proc)
    return {
        "create_s": created_s,
        "partitions_per_s": partitions / created_s,
        "topics_per_s": partitions / PARTITIONS_PER_TOPIC / created_s,
        "rss_mb_created": rss,
        "fds_created": fds,
        "shutdown_s": shutdown_s,
        "restart_listening_s": listening_s,
        "restart_serving_s": serving_s,
        "rss_mb_restarted": rss2,
        "fds_restarted": fds2,
        "disk_mb": disk,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    connections = min(10_000, hard - FIXED_DESCRIPTORS - args.partitions)
    assert connections > 0, f"RLIMIT_NOFILE hard limit {hard} cannot hold {args.partitions} partitions"
    print(f"# {args.partitions} partitions, {args.runs} runs, nproc {os.cpu_count()}, RLIMIT_NOFILE hard {hard}, max.connections {connections}, {time.strftime('%Y-%m-%d')}")
    runs = []
    for i in range(args.runs):
        runs.append(one_run(args.partitions, connections))
        print(f"run {i + 1}: " + ", ".join(f"{k}={v:.2f}" for k, v in runs[-1].items()), flush=True)
    print("median: " + ", ".join(f"{k}={statistics.median(r[k] for r in runs):.2f}" for k in runs[0]))


if __name__ == "__main__":
    main()
