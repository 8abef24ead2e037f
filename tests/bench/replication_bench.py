#!/usr/bin/env python3
"""Replication's cost (issue 37): a three-node cluster with replication.factor=3 and
min.insync.replicas=2 against one broker, for Sluice and for Apache Kafka 4.4.0, on the same
machine in the same run, with the same client and the same loads.

    tests/bench/replication_bench.py                         RUNS=3 RECORDS=1000000, every target
    RUNS=1 RECORDS=200000 LAT_SECONDS=1 tests/bench/replication_bench.py       a smoke run
    TARGETS=sluice-1,sluice-3 tests/bench/replication_bench.py                  Sluice only
    tests/bench/replication_bench.py --report OUT/runs.jsonl...                 the tables again

Targets (each started fresh, in its own temp dir, for every run, and stopped after it):
  sluice-1          one `sluice serve`, its defaults (acks=all answered after an fsync)
  sluice-3          three nodes on 127.0.0.1-3 (tests/e2e/cluster_support.py), the same defaults:
                    acks=all answered at the high watermark, fsynced on every in-sync replica
  sluice-1-nofsync, sluice-3-nofsync   the same with sluice.acks.all.fsync=false (Kafka's durability)
  kafka-1           Apache Kafka 4.4.0, one KRaft node (broker+controller), its defaults (no fsync)
  kafka-3           three KRaft nodes (broker+controller) on 127.0.0.1-3, static
                    controller.quorum.voters, one cluster id, each its own log dir
Every node of every target listens on ephemeral ports (never 9092/9093). Topics of the
three-node targets have replication.factor=3 and min.insync.replicas=2, of the one-node
targets 1 and 1.

Loads, per target, one partition, 100-byte records, librdkafka's rdkafka_performance
(the one ../shared/bench/setup-kafka-peer.sh builds, as its sbs-kafka.sh runs it), after an
untimed warm-up (WARMUP_RECORDS produced acks=1 and acks=all and consumed, for the JIT):
  produce acks=1    RECORDS records, linger.ms=5
  produce acks=all  RECORDS records, linger.ms=5
  consume           the acks=1 topic from the beginning (assign, no group)
  latency           for each rate of LAT_RATES, LAT_SECONDS of records acks=all at that
                    rate, linger.ms=0 (one record per request), every delivery's latency
                    (-l): p50/p99; a load not done in 3 x LAT_SECONDS + 30 s "did not keep up"
Broker CPU per record: utime+stime from /proc/PID/stat of every broker process of the
target (all threads; for Kafka the whole JVM), before and after each load.

Before each run the script waits until the 1-minute load average is below LOAD_MAX (60 s
sleeps, at most LOAD_WAIT_S in all), and records the load seen before every target.
Targets rotate from run to run. Logs each run's row (stderr; all rows in OUT/runs.jsonl),
then prints medians and ratios (three nodes / one node of the same broker and mode; Sluice
/ Kafka at the same node count). A fixed-rate load whose median rate is below KEPT_UP of
the offered rate shows "did not keep up" instead of latencies.

Env: RUNS(3) RECORDS(1000000) LAT_RATES(1000,5000 msg/s) LAT_SECONDS(5) WARMUP_RECORDS(100000)
     TARGETS(sluice-1,sluice-3,kafka-1,kafka-3,sluice-1-nofsync,sluice-3-nofsync)
     LOAD_MAX(1.5) LOAD_WAIT_S(900) KAFKA_HEAP(-Xmx1g -Xms1g) SLUICE_BIN(target/release/sluice)
     SLUICE_SETS(KEY=VALUE,... for every Sluice node)
     PEERS_DIR(~/.cache/sluice-peers: Kafka's jars and rdkafka_performance) RDKPERF OUT
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("SLUICE_BIN", str(ROOT / "target" / "release" / "sluice"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from cluster_support import Cluster, ports_free_on  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conftest import Broker  # noqa: E402

PEERS = Path(os.environ.get("PEERS_DIR") or Path.home() / ".cache" / "sluice-peers")
RDKPERF = os.environ.get("RDKPERF") or str(PEERS / "rdkperf" / "rdkafka_performance")
KAFKA = PEERS / "kafka"
JAVA = os.environ.get("KAFKA_JAVA") or "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
KAFKA_HEAP = os.environ.get("KAFKA_HEAP", "-Xmx1g -Xms1g").split()

RUNS = int(os.environ.get("RUNS", "3"))
RECORDS = int(os.environ.get("RECORDS", "1000000"))
LAT_RATES = [int(r) for r in os.environ.get("LAT_RATES", "1000,5000").split(",")]
LAT_SECONDS = int(os.environ.get("LAT_SECONDS", "5"))
WARMUP_RECORDS = int(os.environ.get("WARMUP_RECORDS", "100000"))
TARGETS = os.environ.get("TARGETS", "sluice-1,sluice-3,kafka-1,kafka-3,sluice-1-nofsync,sluice-3-nofsync").split(",")
# A fixed-rate load whose median rate (rdkafka_performance's, start-up included) is below
# this share of the offered rate did not keep up: its latencies are a growing queue's.
KEPT_UP = 0.6
# KEY=VALUE,... for every Sluice node (an experiment: e.g. replica.fetch.wait.max.ms=10).
SLUICE_SETS = [kv for kv in os.environ.get("SLUICE_SETS", "").split(",") if kv]
LOAD_MAX = float(os.environ.get("LOAD_MAX", "1.5"))
LOAD_WAIT_S = int(os.environ.get("LOAD_WAIT_S", "900"))
OUT = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="replication-bench-"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
# One client run longer than this is a hang, not a result.
CLIENT_TIMEOUT_S = 600
# A Kafka node that has not started in this long will not.
KAFKA_START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 20
# A fixed-rate load takes LAT_SECONDS when the broker keeps up.
LAT_TIMEOUT_S = 3 * LAT_SECONDS + 30

LOADS = ["produce acks=1", "produce acks=all", "consume"] + [f"latency {rate}/s" for rate in LAT_RATES]

# Every process this script starts, stopped at exit whatever happens.
STARTED: list[subprocess.Popen] = []


def stop_all():
    for proc in STARTED:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for proc in STARTED:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    STARTED.clear()


atexit.register(stop_all)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def log(msg: str):
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, file=sys.stderr, flush=True)
    with open(OUT / "bench.log", "a") as f:
        f.write(line + "\n")


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def wait_for_quiet():
    """Until the 1-minute load average is below LOAD_MAX, or LOAD_WAIT_S has passed."""
    waited = 0
    while load1() >= LOAD_MAX and waited < LOAD_WAIT_S:
        log(f"load {loadavg()} >= {LOAD_MAX}: waiting 60 s")
        time.sleep(60)
        waited += 60
    if load1() >= LOAD_MAX:
        log(f"load still {loadavg()} after {waited} s: measuring anyway")


def cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


# ---- targets ----------------------------------------------------------------------------


class Target:
    """A running broker or cluster: its bootstrap list, process ids and replication."""

    bootstrap: str
    pids: list[int]
    replicas: int

    def stop(self):
        raise NotImplementedError


class SluiceOne(Target):
    def __init__(self, root: Path, settings: dict[str, str]):
        self.broker = Broker(root / "data", root / "broker.log", settings, {}).start()
        STARTED.append(self.broker.proc)
        self.bootstrap, self.pids, self.replicas = self.broker.bootstrap, [self.broker.pid], 1

    def stop(self):
        self.broker.proc.terminate()
        self.broker.proc.wait(STOP_TIMEOUT_S)


class SluiceThree(Target):
    def __init__(self, root: Path, settings: dict[str, str]):
        self.cluster = Cluster(root, 3, settings)
        for node in self.cluster.nodes.values():
            node.start()
            STARTED.append(node.proc)
        self.cluster.wait_for_brokers(self.cluster.brokers)
        nodes = self.cluster.nodes.values()
        self.bootstrap = ",".join(n.bootstrap for n in nodes)
        self.pids, self.replicas = [n.pid for n in nodes], 3

    def stop(self):
        self.cluster.kill_all()


class KafkaNodes(Target):
    """`size` Kafka 4.4.0 nodes, each broker+controller, node k on 127.0.0.k, every one a
    static voter, formatted with one cluster id; Kafka's shipped defaults otherwise (the
    peer's server.properties), internal topics replicated `size` times."""

    def __init__(self, root: Path, size: int):
        hosts = [f"127.0.0.{k}" for k in range(1, size + 1)]
        port, controller_port = ports_free_on(hosts)
        voters = ",".join(f"{k}@{h}:{controller_port}" for k, h in enumerate(hosts, 1))
        base = [
            line
            for line in (KAFKA / "config" / "server.properties").read_text().splitlines()
            if not re.match(r"(node\.id|listeners|advertised\.listeners|controller\.quorum\.bootstrap\.servers)=", line)
        ]
        java = [JAVA, f"-Dlog4j2.configurationFile={KAFKA / 'config' / 'log4j2.properties'}", "-cp", f"{KAFKA / 'lib'}/*"]
        cluster_id = self.tool(java + ["kafka.tools.StorageTool", "random-uuid"]).split()[-1]
        rf, isr = str(size), str(min(size, 2))
        self.procs, self.logs = [], []
        for k, host in enumerate(hosts, 1):
            props = root / f"node-{k}.properties"
            overrides = {
                "node.id": k,
                "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
                "advertised.listeners": f"PLAINTEXT://{host}:{port}",
                "controller.quorum.voters": voters,
                "log.dirs": root / f"node-{k}",
                "offsets.topic.replication.factor": rf,
                "transaction.state.log.replication.factor": rf,
                "transaction.state.log.min.isr": isr,
                "share.coordinator.state.topic.replication.factor": rf,
                "share.coordinator.state.topic.min.isr": isr,
                "default.replication.factor": rf,
            }
            props.write_text("\n".join(base + [f"{key}={value}" for key, value in overrides.items()]) + "\n")
            self.tool(java + ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)])
            log_path = root / f"node-{k}.log"
            self.logs.append(log_path)
            cmd = [
                JAVA,
                *KAFKA_HEAP,
                "-server",
                "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20",
                "-XX:InitiatingHeapOccupancyPercent=35",
                "-XX:+ExplicitGCInvokesConcurrent",
                "-XX:MaxInlineLevel=15",
                "-Djava.awt.headless=true",
                *java[1:],
                "kafka.Kafka",
                str(props),
            ]
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
            STARTED.append(proc)
            self.procs.append(proc)
        self.bootstrap = ",".join(f"{h}:{port}" for h in hosts)
        self.pids, self.replicas = [p.pid for p in self.procs], size
        self.wait_for_brokers(size)

    @staticmethod
    def tool(cmd: list[str]) -> str:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{cmd}: {done.stdout}{done.stderr}"
        return done.stdout

    def wait_for_brokers(self, size: int):
        admin = None  # created once every node says it started: no refused connections logged
        deadline = time.monotonic() + KAFKA_START_TIMEOUT_S
        while time.monotonic() < deadline:
            for proc, path in zip(self.procs, self.logs, strict=True):
                assert proc.poll() is None, f"kafka exited: {path.read_text()[-3000:]}"
            if admin is None and all("Kafka Server started" in p.read_text(errors="replace") for p in self.logs):
                admin = AdminClient({"bootstrap.servers": self.bootstrap})
            try:
                if admin is not None and len(admin.list_topics(timeout=5).brokers) == size:
                    return
            except Exception:  # not answering yet
                pass
            time.sleep(0.5)
        raise AssertionError(f"kafka: {size} brokers not up in {KAFKA_START_TIMEOUT_S} s")

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:  # a controlled shutdown waiting for a quorum
                proc.kill()
                proc.wait()


def start(target: str, root: Path) -> Target:
    settings = dict(kv.split("=", 1) for kv in SLUICE_SETS)
    if target.endswith("-nofsync"):
        settings["sluice.acks.all.fsync"] = "false"
    if target.startswith("sluice-1"):
        return SluiceOne(root, settings)
    if target.startswith("sluice-3"):
        return SluiceThree(root, settings)
    if target == "kafka-1":
        return KafkaNodes(root, 1)
    if target == "kafka-3":
        return KafkaNodes(root, 3)
    raise SystemExit(f"unknown target {target}")


# ---- loads ------------------------------------------------------------------------------


def create_topic(target: Target, topic: str):
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    config = {"min.insync.replicas": "2"} if target.replicas == 3 else {}
    deadline = time.monotonic() + 60
    while True:
        try:
            for f in admin.create_topics([NewTopic(topic, 1, target.replicas, config=config)]).values():
                f.result(timeout=30)
            break
        except Exception as e:  # brokers still registering (INVALID_REPLICATION_FACTOR)
            if time.monotonic() > deadline:
                raise
            log(f"create {topic}: {e}; retrying")
            time.sleep(1)
    # until its leader is known and every replica is in sync
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if (
            md
            and md.error is None
            and md.partitions
            and all(p.leader >= 0 and len(p.isrs) == target.replicas for p in md.partitions.values())
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic}: no leader with a full ISR in 60 s")


def rdkperf(target: Target, args: list[str], records: int, lat_file: Path | None = None, rate: int = 0) -> dict:
    """One rdkafka_performance run: msgs/s, broker CPU us/record, and p50/p99 ms if lat_file."""
    cmd = [RDKPERF, "-b", target.bootstrap, "-p", "0", "-i", "1000", "-c", str(records), *args]
    if lat_file:
        cmd += ["-l", "-A", str(lat_file)]
    before, started = cpu_s(target.pids), time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=LAT_TIMEOUT_S if lat_file else CLIENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        if not lat_file:
            raise
        # The broker does not keep up with the fixed rate: no latency, only what it did.
        after, elapsed = cpu_s(target.pids), time.monotonic() - started
        log(f"latency load: not done in {LAT_TIMEOUT_S} s, the broker does not keep up with {rate}/s")
        return {
            "msgs_per_s": 0.0,
            "cpu_us": (after - before) * 1e6 / (rate * elapsed),
            "p50_ms": math.inf,
            "p99_ms": math.inf,
        }
    after = cpu_s(target.pids)
    out = done.stdout
    if "-P" in args:
        line = next((x for x in reversed(out.splitlines()) if "messages produced" in x), None)
        ok = line and f" {records} delivered" in line and " 0 failed" in line
    else:
        line = next((x for x in reversed(out.splitlines()) if "messages (" in x and "consumed" in x), None)
        # it stops at the end of the batch that reaches `records`
        ok = line and int(line.split()[1]) >= records
    assert ok, f"{' '.join(cmd)}: {line or out[-2000:]}{done.stderr[-2000:]}"
    result = {
        "msgs_per_s": float(re.search(r" ([0-9]+) msgs/s", line).group(1)),
        "cpu_us": (after - before) * 1e6 / records,
    }
    if lat_file:
        lat = sorted(int(x) for x in lat_file.read_text().split())
        result["p50_ms"] = lat[len(lat) // 2] / 1000
        result["p99_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1000
    return result


def produce(topic: str, acks: str, linger_ms: int, extra=()) -> list[str]:
    return ["-P", "-t", topic, "-s", "100", "-a", acks, "-X", f"linger.ms={linger_ms}", *extra]


def measure(target: Target, tag: str, root: Path) -> dict[str, dict]:
    topics = {name: f"{tag}-{name}" for name in ("warm", "acks1", "acksall", "lat")}
    for topic in [*topics.values(), *(f"{topics['lat']}-{rate}" for rate in LAT_RATES)]:
        if topic != topics["lat"]:
            create_topic(target, topic)
    if WARMUP_RECORDS:
        for acks in ("1", "-1"):
            rdkperf(target, produce(topics["warm"], acks, 5), WARMUP_RECORDS)
        rdkperf(target, ["-C", "-t", topics["warm"], "-o", "beginning"], WARMUP_RECORDS)
    return {
        "produce acks=1": rdkperf(target, produce(topics["acks1"], "1", 5), RECORDS),
        "produce acks=all": rdkperf(target, produce(topics["acksall"], "-1", 5), RECORDS),
        "consume": rdkperf(target, ["-C", "-t", topics["acks1"], "-o", "beginning"], RECORDS),
        **{
            f"latency {rate}/s": rdkperf(
                target,
                produce(f"{topics['lat']}-{rate}", "-1", 0, ["-r", str(rate)]),
                rate * LAT_SECONDS,
                root / "latency.us",
                rate,
            )
            for rate in LAT_RATES
        },
    }


def one_run(target: str, run: int) -> dict[str, dict]:
    with tempfile.TemporaryDirectory(prefix=f"replication-bench-{target}-") as tmp:
        root = Path(tmp)
        started = None
        try:
            started = start(target, root)
            return measure(started, f"r{run}", root)
        except BaseException:
            for path in sorted(root.glob("*.log")):
                shutil.copy(path, OUT / f"r{run}-{target}-{path.name}")
            raise
        finally:
            if started is not None:
                started.stop()
            stop_all()
            time.sleep(2)  # let the previous target's writeback and deletions settle


# ---- tables -----------------------------------------------------------------------------


def fmt(x: float | None, digits: int = 0) -> str:
    if x is not None and math.isinf(x):
        return "did not keep up"
    return "" if x is None else f"{x:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    return "" if a is None or not b or math.isinf(a) or math.isinf(b) else f"{a / b:.2f}x"


def report(results: dict[str, list[dict]]):
    med = {
        t: {load: {k: statistics.median(r[load][k] for r in rs) for k in rs[0][load]} for load in LOADS}
        for t, rs in results.items()
        if rs
    }

    def get(t, load, key):
        value = med.get(t, {}).get(load, {}).get(key)
        rate = re.fullmatch(r"latency (\d+)/s", load)
        if value is not None and rate and key != "cpu_us" and med[t][load]["msgs_per_s"] < KEPT_UP * int(rate.group(1)):
            return math.inf  # the latency of a queue that grows: not the broker's answer time
        return value

    modes = [("", "fsync on (Sluice's default)"), ("-nofsync", "sluice.acks.all.fsync=false")]
    rows = [
        ("produce acks=1 msgs/s", "produce acks=1", "msgs_per_s", 0),
        ("produce acks=all msgs/s", "produce acks=all", "msgs_per_s", 0),
        ("consume msgs/s", "consume", "msgs_per_s", 0),
        *[
            row
            for rate in LAT_RATES
            for row in (
                (f"acks=all p50 ms at {rate:,}/s", f"latency {rate}/s", "p50_ms", 2),
                (f"acks=all p99 ms at {rate:,}/s", f"latency {rate}/s", "p99_ms", 2),
            )
        ],
        ("CPU us/record produce acks=1", "produce acks=1", "cpu_us", 3),
        ("CPU us/record produce acks=all", "produce acks=all", "cpu_us", 3),
        ("CPU us/record consume", "consume", "cpu_us", 3),
        *[(f"CPU us/record acks=all at {rate:,}/s", f"latency {rate}/s", "cpu_us", 1) for rate in LAT_RATES],
    ]
    for suffix, title in modes:
        s1, s3 = f"sluice-1{suffix}", f"sluice-3{suffix}"
        if s1 not in med and s3 not in med:
            continue
        runs = max(len(results.get(t, [])) for t in (s1, s3, "kafka-1", "kafka-3"))
        print(f"\nSluice {title}; Kafka its defaults (no fsync). Medians of {runs} runs.\n")
        print(
            "| load | Sluice 1 broker | Sluice 3 (RF3) | 3 / 1 | Kafka 1 broker | Kafka 3 (RF3) | 3 / 1 | Sluice / Kafka, 1 | Sluice / Kafka, 3 |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, load, key, digits in rows:
            a1, a3, k1, k3 = (get(t, load, key) for t in (s1, s3, "kafka-1", "kafka-3"))
            cells = [
                fmt(a1, digits),
                fmt(a3, digits),
                ratio(a3, a1),
                fmt(k1, digits),
                fmt(k3, digits),
                ratio(k3, k1),
                ratio(a1, k1),
                ratio(a3, k3),
            ]
            print(f"| {label} | " + " | ".join(cells) + " |")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for tool in (os.environ["SLUICE_BIN"], RDKPERF, JAVA):
        assert os.access(tool, os.X_OK), f"missing {tool}"
    log(
        f"RUNS={RUNS} RECORDS={RECORDS} LAT_RATES={LAT_RATES} LAT_SECONDS={LAT_SECONDS} WARMUP_RECORDS={WARMUP_RECORDS} "
        f"TARGETS={','.join(TARGETS)} sluice={os.environ['SLUICE_BIN']} kafka heap={' '.join(KAFKA_HEAP)} out={OUT}"
    )
    results: dict[str, list[dict]] = {t: [] for t in TARGETS}
    raw = open(OUT / "runs.jsonl", "a")
    for run in range(1, RUNS + 1):
        wait_for_quiet()
        shift = (run - 1) % len(TARGETS)
        for target in TARGETS[shift:] + TARGETS[:shift]:
            load_before = loadavg()
            got = one_run(target, run)
            results[target].append(got)
            raw.write(
                json.dumps({"run": run, "target": target, "load_before": load_before, "load_after": loadavg(), **got}) + "\n"
            )
            raw.flush()
            summary = ", ".join(
                f"{load} {r['msgs_per_s']:,.0f}/s {r['cpu_us']:.3f} us"
                + (f" p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.2f} ms" if "p50_ms" in r else "")
                for load, r in got.items()
            )
            log(f"run {run} {target} (load {load_before}): {summary}")
    log(f"done, load {loadavg()}; rows in {OUT / 'runs.jsonl'}")
    report(results)


def report_from(paths: list[str]):
    """The tables again from runs.jsonl files (of runs finished separately)."""
    results: dict[str, list[dict]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            results.setdefault(row["target"], []).append({load: row[load] for load in LOADS})
    report(results)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        report_from(sys.argv[2:])
    else:
        main()
