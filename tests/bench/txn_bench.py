#!/usr/bin/env python3
"""Produce throughput of idempotent and transactional producers against plain ones, with
confluent-kafka (librdkafka) in this process, in one broker run.

    tests/bench/txn_bench.py                              RUNS=5, 500,000 x 100 B per run
    RUNS=1 RECORDS=20000 tests/bench/txn_bench.py         a quick smoke run
    TXN_SIZES=100,1000,10000 tests/bench/txn_bench.py     records per transaction

Needs a release broker (target/release/sluice, or $SLUICE_BIN); started by bench_support
(ephemeral ports, a temp dir, acks=all not fsynced: the CPU paths, not the disk). Every run
goes into a fresh topic of PARTITIONS partitions (default 3), acks=all, linger.ms=5,
100-byte values, keyless records spread round-robin by explicit partition:
  - plain, plain with 5 requests in flight, and idempotent (enable.idempotence=true): RUNS
    rounds, the order alternating (plain first, then idempotent first, ...). Each producer
    first delivers one record to every partition (not timed, reported as "ready ms": the
    connection, metadata and, when idempotent, the producer id); then records/s from the
    first timed produce() to the end of flush(), the broker's CPU per record (user +
    system, /proc/PID/stat) and the client's (this process: the Python produce() loop and
    librdkafka's threads, which share the machine's cores with the broker);
  - transactional, for each size in TXN_SIZES: init_transactions once (not timed), then
    begin / produce SIZE records / commit until RECORDS are committed; records/s and
    transactions/s over the whole loop.
TXN_SIZES= (empty) skips the transactional loads; WARM_UP=0 times each producer from its
first record (the start-up then counts against a run's records/s).
Prints a markdown table: medians, and the ratio of the medians against plain. A transactional
load whose init_transactions fails is reported with its error instead of numbers.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from bench_support import Broker, loadavg, median, start_broker  # noqa: E402
from confluent_kafka import KafkaException, Producer  # noqa: E402

from clients import create_topic  # noqa: E402

RUNS = int(os.environ.get("RUNS", "5"))
RECORDS = int(os.environ.get("RECORDS", "500000"))
PARTITIONS = int(os.environ.get("PARTITIONS", "3"))
TXN_SIZES = [int(n) for n in os.environ.get("TXN_SIZES", "100,10000").split(",") if n]
WARM_UP = os.environ.get("WARM_UP", "1") != "0"
VALUE = b"x" * 100
# One run's flush or commit; longer is a hang, not a result.
FLUSH_TIMEOUT_S = 600
INIT_TIMEOUT_S = 30


def config(bootstrap: str, **extra) -> dict:
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000,
        "log_level": 2,
    }
    conf.update(extra)
    return conf


class Counter:
    """Delivery reports: how many succeeded, the first errors."""

    def __init__(self):
        self.ok = 0
        self.errors: list[str] = []

    def __call__(self, err, _msg):
        if err is None:
            self.ok += 1
        elif len(self.errors) < 5:
            self.errors.append(str(err))


def produce_n(p: Producer, topic: str, n: int, first: int, counter: Counter):
    for i in range(first, first + n):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % PARTITIONS, on_delivery=counter)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)


def cpu_us_per_record(broker: Broker, before: tuple[float, float], records: int) -> float:
    user, system = broker.cpu_s()
    return ((user - before[0]) + (system - before[1])) * 1e6 / records


def client_cpu_us_per_record(before_s: float, records: int) -> float:
    """This process's CPU (every thread: Python and librdkafka) since `before_s`, per record."""
    return (time.process_time() - before_s) * 1e6 / records


# librdkafka caps max.in.flight.requests.per.connection at 5 under idempotence; a plain
# producer with the same cap separates the client's pipelining from the broker's checks.
IN_FLIGHT_IDEMPOTENT = 5


def warm_up(p: Producer, topic: str) -> float:
    """Delivers one record to each partition; milliseconds until they are all acknowledged."""
    counter = Counter()
    t0 = time.perf_counter()
    for partition in range(PARTITIONS):
        p.produce(topic, VALUE, partition=partition, on_delivery=counter)
    assert p.flush(FLUSH_TIMEOUT_S) == 0 and counter.ok == PARTITIONS, f"{topic}: warm-up {counter.errors}"
    return (time.perf_counter() - t0) * 1e3


def plain_run(
    broker: Broker, topic: str, idempotent: bool, in_flight: int | None = None
) -> tuple[float, float, float, float]:
    """(records/s, broker CPU us/record, client CPU us/record, ready ms)."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    extra = {"enable.idempotence": idempotent}
    if in_flight is not None:
        extra["max.in.flight.requests.per.connection"] = in_flight
    p = Producer(config(broker.bootstrap, **extra))
    ready_ms = warm_up(p, topic) if WARM_UP else float("nan")
    counter = Counter()
    cpu0 = broker.cpu_s()
    client0 = time.process_time()
    t0 = time.perf_counter()
    produce_n(p, topic, RECORDS, 0, counter)
    assert p.flush(FLUSH_TIMEOUT_S) == 0, f"{topic}: records undelivered after {FLUSH_TIMEOUT_S}s"
    elapsed = time.perf_counter() - t0
    assert counter.ok == RECORDS and not counter.errors, f"{topic}: {counter.ok} delivered, {counter.errors}"
    return (
        RECORDS / elapsed,
        cpu_us_per_record(broker, cpu0, RECORDS),
        client_cpu_us_per_record(client0, RECORDS),
        ready_ms,
    )


def txn_run(broker: Broker, topic: str, size: int) -> tuple[float, float, float, float]:
    """(records/s, transactions/s, broker and client CPU us/record) for transactions of
    `size` records."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    p = Producer(config(broker.bootstrap, **{"transactional.id": f"{topic}-tx"}))
    p.init_transactions(INIT_TIMEOUT_S)
    counter = Counter()
    cpu0 = broker.cpu_s()
    client0 = time.process_time()
    t0 = time.perf_counter()
    done = txns = 0
    while done < RECORDS:
        n = min(size, RECORDS - done)
        p.begin_transaction()
        produce_n(p, topic, n, done, counter)
        p.commit_transaction(FLUSH_TIMEOUT_S)  # flushes, then EndTxn(COMMIT)
        done += n
        txns += 1
    elapsed = time.perf_counter() - t0
    assert counter.ok == RECORDS and not counter.errors, f"{topic}: {counter.ok} delivered, {counter.errors}"
    return (
        RECORDS / elapsed,
        txns / elapsed,
        cpu_us_per_record(broker, cpu0, RECORDS),
        client_cpu_us_per_record(client0, RECORDS),
    )


def main():
    plain: list[tuple[float, float, float, float]] = []
    plain5: list[tuple[float, float, float, float]] = []
    idem: list[tuple[float, float, float, float]] = []
    txn: dict[int, list[tuple[float, float, float, float]] | str] = {}
    loads = []
    with tempfile.TemporaryDirectory() as d:
        broker = start_broker(Path(d), [])
        try:
            loads.append(loadavg())
            for i in range(RUNS):
                order = [("plain", False, None, plain), ("plain5", False, IN_FLIGHT_IDEMPOTENT, plain5), ("idem", True, None, idem)]
                for name, idempotent, in_flight, runs in order if i % 2 == 0 else order[::-1]:
                    runs.append(plain_run(broker, f"bench-{name}-{i}", idempotent, in_flight))
                print(
                    f"round {i} (load {loadavg()}): plain {show(plain[-1])}; plain 5 in flight"
                    f" {show(plain5[-1])}; idempotent {show(idem[-1])}",
                    file=sys.stderr,
                )
            for size in TXN_SIZES:
                loads.append(loadavg())
                runs: list[tuple[float, float, float, float]] = []
                try:
                    for i in range(RUNS):
                        runs.append(txn_run(broker, f"bench-txn{size}-{i}", size))
                        print(f"txn {size} run {i} (load {loadavg()}): {runs[-1]}", file=sys.stderr)
                    txn[size] = runs
                except KafkaException as err:
                    txn[size] = f"failed: {err.args[0]}"
            loads.append(loadavg())
        finally:
            broker.stop()

    base = median([r[0] for r in plain])
    print(
        f"\n{RUNS} runs per load, {RECORDS:,} records of {len(VALUE)} B, acks=all (not fsynced), linger.ms=5,"
        f" {PARTITIONS} partitions, {'after' if WARM_UP else 'without'} a warm-up; load average at the start,"
        " before each transactional load and at the end:"
        f" {' | '.join(loads)}\n"
    )
    print(
        "| load | records/s | vs plain | transactions/s | broker CPU us/record | client CPU us/record | ready ms |"
        "\n|---|---:|---:|---:|---:|---:|---:|"
    )
    print(f"| plain | {base:,.0f} | 1.00x | | {cpu(plain)} | {ready(plain)} |")
    base5 = median([r[0] for r in plain5])
    print(
        f"| plain, {IN_FLIGHT_IDEMPOTENT} requests in flight | {base5:,.0f} | {base5 / base:.2f}x | | {cpu(plain5)} |"
        f" {ready(plain5)} |"
    )
    rate = median([r[0] for r in idem])
    pairs = median([b[0] / a[0] for a, b in zip(plain, idem, strict=True)])
    pairs5 = median([b[0] / a[0] for a, b in zip(plain5, idem, strict=True)])
    print(
        f"| idempotent | {rate:,.0f} | {rate / base:.2f}x (rounds {pairs:.2f}x; vs plain with"
        f" {IN_FLIGHT_IDEMPOTENT} in flight {pairs5:.2f}x) | | {cpu(idem)} | {ready(idem)} |"
    )
    for size, runs in txn.items():
        if isinstance(runs, str):
            print(f"| transactional, {size:,} records/txn | {runs} | | | | | |")
            continue
        rate = median([r[0] for r in runs])
        print(
            f"| transactional, {size:,} records/txn | {rate:,.0f} | {rate / base:.2f}x |"
            f" {median([r[1] for r in runs]):,.1f} | {cpu([r[1:] for r in runs])} | |"
        )


def cpu(runs: list[tuple[float, ...]]) -> str:
    """The broker and client CPU columns: medians of fields 1 and 2 of each run."""
    return f"{median([r[1] for r in runs]):.3f} | {median([r[2] for r in runs]):.3f}"


def show(run: tuple[float, float, float, float]) -> str:
    """One run for the progress lines."""
    return f"{run[0]:,.0f}/s, CPU us/record broker {run[1]:.3f} client {run[2]:.3f}, ready {run[3]:.1f} ms"


def ready(runs: list[tuple[float, float, float, float]]) -> str:
    """The ready column: the median warm-up time in ms (blank without a warm-up)."""
    return f"{median([r[3] for r in runs]):.1f}" if WARM_UP else ""


if __name__ == "__main__":
    main()
