#!/usr/bin/env python3
"""Materialized transforms (issue 18) against the same pipeline run as an external
consume-transform-produce loop, at equal guarantees, one fresh broker per load and round.

    tests/bench/transform_bench.py                          RUNS=3 rounds, 2,000,000 orders
    RUNS=1 RECORDS=20000 tests/bench/transform_bench.py     a quick smoke run
    PROCESSES=6 LOADS=sluice,filter,c tests/bench/transform_bench.py
                                                            6 loop processes; only these loads

Needs a release broker (target/release/sluice, or $SLUICE_BIN), the built `split-transform`
and `json-filter` plugins (sdk/build-plugins.sh -> plugins/target/wasm, or $SLUICE_PLUGINS_DIR), confluent-kafka
and a C compiler with the system librdkafka (`librdkafka-dev`): the script builds
tests/bench/transform_c/split.c into target/transform-bench/split and refuses compiler
warnings.

The pipeline: `orders` (6 partitions) holds RECORDS JSON orders of 200 bytes
(`{"id":N,"region":"eu"|"us","customer":"c-NNNNNN","total":N.NN,"items":N,"note":"xx.."}`,
keyed by customer, 60% "eu", seeded), preloaded untimed by confluent-kafka (linger.ms=20, no
compression, the murmur2 partitioner); an order whose region is "eu" goes to `orders-eu`,
any other to `orders-us` (3 partitions each), with its key. Equal guarantees: the source
read read_committed, the output written by transactional producers with the source
positions committed in the same transaction, a commit every 100 ms. Each load, in a round
whose order alternates (sluice, filter, python, c; then c, python, filter, sluice; ...),
gets a fresh broker with the same preload:
  - sluice: `POST /v1/transforms` of `split-transform` (field $.region, value eu,
    commit_interval_ms 100), timed from the POST until `GET /v1/transforms/split` answers
    lag 0 with every source record counted in (polled every 10 ms);
  - filter: the same, with `json-filter` ($.region == eu) as the plugin: a filter given two
    outputs sends the records it keeps to the first and the others to the second, answering
    with a bit per record (no record bytes back out of the guest);
  - python: PROCESSES (default 3) confluent-kafka processes (this file, `worker`), each
    assigned its share of the source partitions from offset 0: a read_committed Consumer
    (enable.auto.commit=false, consume(num_messages=500)), json.loads and the region compare,
    produce to the output with the same key, a transactional Producer with
    send_offsets_to_transaction(consumer positions, consumer_group_metadata()) and
    commit_transaction every 100 ms, until its partitions are consumed to the preloaded end;
  - c: the same loop in C on librdkafka (transform_c/split.c; a byte scan for the field).
The loop processes connect, run init_transactions and read the source's metadata, then wait
for a go line (they assign the source only then, so nothing is fetched early): records/s
are timed from the go to the last process's last commit; "from start" adds the start-up
(process start, connections, InitProducerId: the "start-up ms" column; for sluice, the
POST's answer, which is inside its timed window). CPU per record: the broker's
(utime+stime, /proc/PID/stat) over the timed window; the loop processes' own (getrusage in
each, every thread) from the go to their last commit. Checked every run: a read_committed
consumer of the outputs finds every order id exactly once, in the output its region names.
Prints a markdown table of medians and the ratios of sluice against each loop.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from bench_support import ROOT, Broker, loadavg, median, start_broker  # noqa: E402
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

from clients import create_topic, produce_with_backpressure, producer, watermarks  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
RECORDS = int(os.environ.get("RECORDS", "2000000"))
PROCESSES = int(os.environ.get("PROCESSES", "3"))
SOURCE, OUT_EU, OUT_US = "orders", "orders-eu", "orders-us"
SOURCE_PARTITIONS, OUTPUT_PARTITIONS = 6, 3
EU_FRACTION = 0.6
VALUE_BYTES = 200
CUSTOMERS = 100_000
SEED = 18
COMMIT_INTERVAL_MS = 100
BATCH_RECORDS = 500
POLL_INTERVAL_S = 0.01
# One load; longer is a hang, not a result.
LOAD_TIMEOUT_S = 900
TXN_TIMEOUT_S = 60
C_SOURCE = Path(__file__).resolve().parent / "transform_c" / "split.c"
C_BINARY = ROOT / "target" / "transform-bench" / "split"
LOADS = os.environ.get("LOADS", "sluice,filter,python,c").split(",")
assert LOADS[0] == "sluice" and set(LOADS) <= {"sluice", "filter", "python", "c"}, f"LOADS={LOADS}: sluice first, then filter, python, c"
# The materialized loads: the plugin and its parameters. `filter` is the same split by a
# filter plugin given two outputs (kept records to the first, dropped to the second): the
# plugin answers with a bit per record, so no record bytes come back out of the guest.
TRANSFORMS = {
    "sluice": ("split-transform", {"field": "$.region", "value": "eu"}),
    "filter": ("json-filter", {"field": "$.region", "op": "==", "value": "eu"}),
}


@dataclass
class Result:
    records_per_s: float
    records_per_s_from_start: float
    startup_ms: float
    broker_us: float
    client_us: float
    txns_per_s: float

    @property
    def total_us(self) -> float:
        return self.broker_us + self.client_us


def orders():
    """The preload, the same every run: (key, value, is it "eu") per order, in id order."""
    rng = random.Random(SEED)
    for i in range(RECORDS):
        eu = rng.random() < EU_FRACTION
        customer = rng.randrange(CUSTOMERS)
        head = (
            f'{{"id":{i},"region":"{"eu" if eu else "us"}","customer":"c-{customer:06d}",'
            f'"total":{rng.randrange(100_000) / 100:.2f},"items":{rng.randrange(1, 20)},"note":"'
        )
        value = head + "x" * (VALUE_BYTES - len(head) - 2) + '"}'
        yield f"customer-{customer:06d}".encode(), value.encode(), eu


def fresh_broker(tmp: Path) -> tuple[Broker, list[int]]:
    """A broker with the topics created and the source preloaded; the source's end offsets."""
    broker = start_broker(tmp, [plugin for plugin, _ in TRANSFORMS.values()], admin=True)
    try:
        create_topic(broker.bootstrap, SOURCE, SOURCE_PARTITIONS)
        create_topic(broker.bootstrap, OUT_EU, OUTPUT_PARTITIONS)
        create_topic(broker.bootstrap, OUT_US, OUTPUT_PARTITIONS)
        p = producer(
            broker.bootstrap,
            linger_ms=20,
            compression_type="none",
            partitioner="murmur2_random",
            queue_buffering_max_messages=1_000_000,
        )
        for key, value, _ in orders():
            produce_with_backpressure(p, SOURCE, key=key, value=value)
        assert p.flush(120) == 0, "source records left undelivered"
        ends = [watermarks(broker.bootstrap, SOURCE, part)[1] for part in range(SOURCE_PARTITIONS)]
        assert sum(ends) == RECORDS, f"source holds {sum(ends)} of {RECORDS} records"
    except BaseException:
        broker.stop()
        raise
    return broker, ends


def admin_call(broker: Broker, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"http://{broker.admin}{path}", data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def run_sluice(broker: Broker, load: str = "sluice") -> Result:
    plugin, params = TRANSFORMS[load]
    spec = {
        "name": "split",
        "source": SOURCE,
        "plugin": plugin,
        "outputs": [OUT_EU, OUT_US],
        "params": params,
        "commit_interval_ms": COMMIT_INTERVAL_MS,
    }
    user0, sys0 = broker.cpu_s()
    t0 = time.perf_counter()
    admin_call(broker, "POST", "/v1/transforms", spec)
    deployed_ms = (time.perf_counter() - t0) * 1e3
    deadline = t0 + LOAD_TIMEOUT_S
    while True:
        t = admin_call(broker, "GET", "/v1/transforms/split")
        assert t["state"] != "failed", f"transform failed: {[p['last_error'] for p in t['partitions']]}"
        if t["lag"] == 0 and sum(p["records_in"] for p in t["partitions"]) == RECORDS:
            break
        assert time.perf_counter() < deadline, f"transform lag {t['lag']} after {LOAD_TIMEOUT_S} s"
        time.sleep(POLL_INTERVAL_S)
    elapsed = time.perf_counter() - t0
    user1, sys1 = broker.cpu_s()
    out = sum(n for p in t["partitions"] for n in p["records_out"].values())
    assert out == RECORDS, f"transform counts {out} records out of {RECORDS}"
    txns = sum(p["transactions"] for p in t["partitions"])
    broker_us = ((user1 - user0) + (sys1 - sys0)) * 1e6 / RECORDS
    return Result(RECORDS / elapsed, RECORDS / elapsed, deployed_ms, broker_us, 0.0, txns / elapsed)


def build_c():
    C_BINARY.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["cc", "-O2", "-Wall", "-Wextra", "-o", str(C_BINARY), str(C_SOURCE), "-lrdkafka"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr.strip(), f"{' '.join(cmd)}:\n{done.stderr}"


def run_loop(broker: Broker, ends: list[int], kind: str) -> Result:
    """PROCESSES loop processes (python or c), each with its share of the source partitions."""
    started = time.perf_counter()
    procs = []
    for i in range(PROCESSES):
        parts = [f"{p}:{ends[p]}" for p in range(SOURCE_PARTITIONS) if p % PROCESSES == i]
        args = [broker.bootstrap, SOURCE, OUT_EU, OUT_US, f"bench-{kind}-{i}", f"bench-{kind}", *parts]
        cmd = [sys.executable, __file__, "worker", *args] if kind == "python" else [str(C_BINARY), *args]
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    try:
        for proc in procs:
            line = proc.stdout.readline()
            assert line.strip() == "ready", f"{kind} worker {proc.pid}: {line!r} (exit {proc.poll()})"
        user0, sys0 = broker.cpu_s()
        t0 = time.perf_counter()
        ready_ms = (t0 - started) * 1e3
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for proc in procs:
            line = proc.stdout.readline()
            assert line.startswith("{"), f"{kind} worker {proc.pid} ended without a report (exit {proc.wait(60)})"
            reports.append(json.loads(line))
        elapsed = time.perf_counter() - t0
        user1, sys1 = broker.cpu_s()
        for proc in procs:
            assert proc.wait(60) == 0, f"{kind} worker {proc.pid} exited with {proc.returncode}"
    finally:
        for proc in procs:  # a failed run leaves no loop process behind
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    consumed = sum(r["consumed"] for r in reports)
    produced = sum(sum(r["produced"]) for r in reports)
    assert consumed == produced == RECORDS, f"{kind}: {consumed} consumed, {produced} produced of {RECORDS}"
    return Result(
        RECORDS / elapsed,
        RECORDS / (elapsed + ready_ms / 1e3),
        ready_ms,
        ((user1 - user0) + (sys1 - sys0)) * 1e6 / RECORDS,
        sum(r["cpu_s"] for r in reports) * 1e6 / RECORDS,
        sum(r["transactions"] for r in reports) / elapsed,
    )


def worker(argv: list[str]):
    """One Python loop process: BOOTSTRAP SOURCE OUT_MATCHED OUT_OTHERS TRANSACTIONAL_ID
    GROUP_ID PARTITION:END...; the protocol of transform_c/split.c (ready, go, a JSON report)."""
    bootstrap, source, out_eu, out_us, txn_id, group = argv[:6]
    ends = {int(p): int(e) for p, e in (a.split(":") for a in argv[6:])}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "partitioner": "murmur2_random"})
    prod.init_transactions(TXN_TIMEOUT_S)
    group_metadata = consumer.consumer_group_metadata()
    # The source's metadata now: an assign() of a topic the consumer has not seen waits for
    # its next metadata refresh (up to a second) before the first fetch.
    consumer.list_topics(source, timeout=TXN_TIMEOUT_S)
    print("ready", flush=True)
    if not sys.stdin.readline():
        sys.exit("worker: stdin closed before the go line")
    t0, cpu0 = time.perf_counter(), time.process_time()
    consumer.assign([TopicPartition(source, p, 0) for p in ends])
    nexts = dict.fromkeys(ends, 0)
    open_parts = sum(1 for e in ends.values() if e > 0)
    consumed = eu = txns = in_txn = 0
    prod.begin_transaction()
    txn_start = time.monotonic()
    while open_parts:
        for m in consumer.consume(num_messages=BATCH_RECORDS, timeout=POLL_INTERVAL_S):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(m.error())
                continue
            value = m.value()
            matched = json.loads(value)["region"] == "eu"
            while True:
                try:
                    prod.produce(out_eu if matched else out_us, value, m.key())
                    break
                except BufferError:
                    prod.poll(0.01)
            eu += matched
            consumed += 1
            in_txn += 1
            part, nxt = m.partition(), m.offset() + 1
            if nexts[part] < ends[part] <= nxt:
                open_parts -= 1
            nexts[part] = nxt
        prod.poll(0)
        if in_txn and (not open_parts or (time.monotonic() - txn_start) * 1e3 >= COMMIT_INTERVAL_MS):
            prod.send_offsets_to_transaction(consumer.position(consumer.assignment()), group_metadata, TXN_TIMEOUT_S)
            prod.commit_transaction(TXN_TIMEOUT_S)
            txns += 1
            in_txn = 0
            if open_parts:
                prod.begin_transaction()
                txn_start = time.monotonic()
    report = {
        "consumed": consumed,
        "produced": [eu, consumed - eu],
        "transactions": txns,
        "elapsed_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - cpu0,
    }
    print(json.dumps(report), flush=True)
    consumer.close()


def check_outputs(broker: Broker, eu: bytearray):
    """A read_committed consumer finds every order id once, in the output of its region."""
    seen = bytearray(RECORDS)
    for topic, want in ((OUT_EU, 1), (OUT_US, 0)):
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "bench-check",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        try:
            c.assign([TopicPartition(topic, p, 0) for p in range(OUTPUT_PARTITIONS)])
            at_end: set[int] = set()
            misplaced = 0
            deadline = time.monotonic() + LOAD_TIMEOUT_S
            while len(at_end) < OUTPUT_PARTITIONS:
                assert time.monotonic() < deadline, f"{topic}: not read to its end before the deadline"
                for m in c.consume(num_messages=10_000, timeout=0.5):
                    if m.error():
                        assert m.error().code() == KafkaError._PARTITION_EOF, f"{topic}: {m.error()}"
                        at_end.add(m.partition())
                        continue
                    at_end.discard(m.partition())
                    value = m.value()
                    i = int(value[6 : value.index(b",")])  # {"id":N,
                    seen[i] = min(seen[i] + 1, 255)
                    misplaced += eu[i] != want
        finally:
            c.close()
        assert misplaced == 0, f"{topic}: {misplaced} orders of the other region"
    once = seen.count(1)
    assert once == RECORDS, f"{RECORDS - once} order ids not exactly once ({seen.count(0)} missing)"


def main():
    eu = bytearray(e for _, _, e in orders())
    build_c()
    results: dict[str, list[Result]] = {name: [] for name in LOADS}
    loads = [loadavg()]
    started = time.monotonic()
    for i in range(RUNS):
        for name in LOADS if i % 2 == 0 else LOADS[::-1]:
            with tempfile.TemporaryDirectory() as d:
                broker, ends = fresh_broker(Path(d))
                try:
                    result = run_sluice(broker, name) if name in TRANSFORMS else run_loop(broker, ends, name)
                    check_outputs(broker, eu)
                finally:
                    broker.stop()
            results[name].append(result)
            print(f"round {i} {name} (load {loadavg()}): {show(result)}", file=sys.stderr)
    loads.append(loadavg())
    minutes = (time.monotonic() - started) / 60
    print(
        f"\n{RUNS} rounds, {RECORDS:,} orders of {VALUE_BYTES} B ({sum(eu):,} eu) in {SOURCE_PARTITIONS} partitions"
        f" -> {OUT_EU}, {OUT_US} ({OUTPUT_PARTITIONS} each), commits every {COMMIT_INTERVAL_MS} ms,"
        f" {PROCESSES} loop processes; {minutes:.1f} min; load average before and after: {' | '.join(loads)}\n"
    )
    print(
        "| load | records/s | start-up ms | records/s from start | transactions/s | broker CPU us/record"
        " | client CPU us/record | total CPU us/record | sluice records/s vs it (medians; rounds)"
        " | its total CPU / sluice's |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    def versus(ours: list[Result], runs: list[Result]) -> tuple[str, str]:
        """Records/s of `ours` against `runs` (ratio of medians; median of per-round ratios),
        and the total CPU per record of `runs` against `ours`'s."""
        mine = median([r.records_per_s for r in ours])
        rounds = median([a.records_per_s / b.records_per_s for a, b in zip(ours, runs, strict=True)])
        rate = median([r.records_per_s for r in runs])
        cpu = median([r.total_us for r in runs]) / median([r.total_us for r in ours])
        return f"{mine / rate:.2f}x; {rounds:.2f}x", f"{cpu:.2f}x"

    for name, runs in results.items():
        rate = median([r.records_per_s for r in runs])
        total = median([r.total_us for r in runs])
        vs, cpu_vs = ("", "") if name in TRANSFORMS else versus(results["sluice"], runs)
        print(
            f"| {name} | {rate:,.0f} | {median([r.startup_ms for r in runs]):.0f}"
            f" | {median([r.records_per_s_from_start for r in runs]):,.0f}"
            f" | {median([r.txns_per_s for r in runs]):.1f} | {median([r.broker_us for r in runs]):.2f}"
            f" | {median([r.client_us for r in runs]):.2f} | {total:.2f} | {vs} | {cpu_vs} |"
        )
    loops = [name for name in results if name not in TRANSFORMS]
    if "filter" in results and loops:
        print("\n| materialized load | " + " | ".join(f"vs {n}: records/s (medians; rounds), CPU" for n in loops) + " |")
        print("|---|" + "---|" * len(loops))
        for name in TRANSFORMS:
            if name in results:
                cells = [", ".join(versus(results[name], results[n])) for n in loops]
                print(f"| {name} | " + " | ".join(cells) + " |")


def show(r: Result) -> str:
    return (
        f"{r.records_per_s:,.0f}/s ({r.records_per_s_from_start:,.0f}/s from start, start-up {r.startup_ms:.0f} ms),"
        f" {r.txns_per_s:.1f} txn/s,"
        f" CPU us/record broker {r.broker_us:.2f} client {r.client_us:.2f}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2:])
    else:
        main()
