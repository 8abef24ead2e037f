#!/usr/bin/env python3
"""Consume throughput through views (fetch-time filters, issue #6) against raw consume of the
same source topic, in the same broker run, with librdkafka's rdkafka_performance -C.

    tests/bench/view_bench.py                            RUNS=5 rounds, 2,000,000 JSON records
    RUNS=1 RECORDS=200000 tests/bench/view_bench.py      a quick smoke run
    PARTITIONS=2 tests/bench/view_bench.py               a source topic of 2 partitions

Needs a release broker (target/release/sluice, or $SLUICE_BIN), the built `sample` and
`json-filter` plugins (sdk/build-plugins.sh -> plugins/target/wasm, or $SLUICE_PLUGINS_DIR)
and rdkafka_performance (tests/bench/client_bench.sh builds it into target/client-bench/, or
$PERF). The source topic (1 partition by default) is loaded once with RECORDS keyed JSON
records of 100-200 bytes (`{"id":N,"customer":"c-NNNNNN","region":"..","total":N.NN,
"items":N,"note":"..."}`), `region` = "eu" for 10% of them (seeded, and for the first and
the last record, so a consumer of the 10% view receives its first record at the start of
the source and its last at the end). Views, created with `POST /v1/views`:
  - pass-sample: `sample` with n=1 (keeps every record; the cheapest predicate, so it shows
    the cost of the view path itself: decode, plugin call, re-encode);
  - pass-json: `json-filter` `$.region != "none"` (keeps every record, scans the JSON);
  - eu-10pct: `json-filter` `$.region == "eu"` (keeps 10%).
Each round consumes the whole source once raw and once through each view, from offset 0, in
an order that rotates from round to round. Reported per read: median records/s delivered,
MB/s delivered, source records covered per second (for a view: its records/s times
source/kept), the ratio against raw consume (ratio of medians, and median of per-round
ratios), and the broker's CPU per source record (user + system, /proc/PID/stat).
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from bench_support import Broker, Run, loadavg, median, perf, start_broker  # noqa: E402

from clients import create_topic, produce_with_backpressure, producer, topic_names, watermarks  # noqa: E402

RUNS = int(os.environ.get("RUNS", "5"))
RECORDS = int(os.environ.get("RECORDS", "2000000"))
PARTITIONS = int(os.environ.get("PARTITIONS", "1"))
SOURCE = "orders"
KEPT_FRACTION = 0.10
SEED = 6
VIEW_DEADLINE_S = 30.0
REGIONS_OTHER = ["us", "apac", "latam"]
# view name -> its stages
VIEWS = {
    "pass-sample": [{"plugin": "sample", "params": {"n": "1"}}],
    "pass-json": [{"plugin": "json-filter", "params": {"field": "$.region", "op": "!=", "value": '"none"'}}],
    "eu-10pct": [{"plugin": "json-filter", "params": {"field": "$.region", "op": "==", "value": '"eu"'}}],
}


def record(i: int, rng: random.Random) -> tuple[bytes, bytes, bool]:
    """Key, JSON value (100-200 bytes) and whether it is an "eu" record."""
    eu = i in (0, RECORDS - 1) or rng.random() < KEPT_FRACTION
    region = "eu" if eu else rng.choice(REGIONS_OTHER)
    customer = rng.randrange(1_000_000)
    head = (
        f'{{"id":{i},"customer":"c-{customer:06d}","region":"{region}",'
        f'"total":{rng.randrange(100_000) / 100:.2f},"items":{rng.randrange(1, 20)},"note":"'
    )
    pad = rng.randrange(100, 201) - len(head) - 2
    return f"customer-{customer:06d}".encode(), (head + "x" * max(pad, 0) + '"}').encode(), eu


def load_source(broker: Broker) -> int:
    """Fills the source topic (partition i % PARTITIONS); returns how many records are "eu"."""
    create_topic(broker.bootstrap, SOURCE, PARTITIONS)
    p = producer(
        broker.bootstrap, acks="1", linger_ms=20, batch_num_messages=10_000, queue_buffering_max_messages=1_000_000
    )
    rng = random.Random(SEED)
    kept = 0
    started = time.monotonic()
    for i in range(RECORDS):
        key, value, eu = record(i, rng)
        kept += eu
        produce_with_backpressure(p, SOURCE, key=key, value=value, partition=i % PARTITIONS)
    assert p.flush(120) == 0, "source records left undelivered"
    total = sum(watermarks(broker.bootstrap, SOURCE, part)[1] for part in range(PARTITIONS))
    assert total == RECORDS, f"source holds {total} of {RECORDS} records"
    print(f"loaded {RECORDS:,} records ({kept:,} eu) in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return kept


def create_view(broker: Broker, name: str, stages: list[dict]):
    body = json.dumps({"name": name, "source": SOURCE, "stages": stages, "on_error": "fail"}).encode()
    req = urllib.request.Request(
        f"http://{broker.admin}/v1/views", data=body, method="POST", headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status in (200, 201), f"POST /v1/views {name}: {resp.status} {resp.read()!r}"
    deadline = time.monotonic() + VIEW_DEADLINE_S
    while name not in topic_names(broker.bootstrap):
        assert time.monotonic() < deadline, f"view {name} not in Metadata after {VIEW_DEADLINE_S} s"
        time.sleep(0.1)


def view_stats(broker: Broker, name: str) -> dict:
    """The view's counters since the broker started (batches, records in and out, ...)."""
    with urllib.request.urlopen(f"http://{broker.admin}/v1/views/{name}", timeout=30) as resp:
        return json.load(resp)["stats"]


def consume(broker: Broker, topic: str, count: int) -> Run:
    parts = [a for p in range(PARTITIONS) for a in ("-p", str(p))]
    return perf(broker, ["-C", "-t", topic, *parts, "-o", "beginning"], count)


def main():
    reads = {"raw": SOURCE, **{v: v for v in VIEWS}}
    results: dict[str, list[Run]] = {name: [] for name in reads}
    loads = []
    with tempfile.TemporaryDirectory() as d:
        broker = start_broker(Path(d), ["sample", "json-filter"], admin=True)
        try:
            kept = load_source(broker)
            delivered = {"raw": RECORDS, "pass-sample": RECORDS, "pass-json": RECORDS, "eu-10pct": kept}
            for name, stages in VIEWS.items():
                create_view(broker, name, stages)
            loads.append(loadavg())
            names = list(reads)
            for i in range(RUNS):
                for name in names[i % len(names) :] + names[: i % len(names)]:
                    results[name].append(consume(broker, reads[name], delivered[name]))
                print(
                    f"round {i} (load {loadavg()}): "
                    + ", ".join(f"{n} {results[n][-1].msgs_per_s:,.0f}/s" for n in names),
                    file=sys.stderr,
                )
            loads.append(loadavg())
            for name in VIEWS:
                print(f"{name}: {view_stats(broker, name)}", file=sys.stderr)
        finally:
            broker.stop()
    print(
        f"\n{RUNS} rounds, source {SOURCE}: {RECORDS:,} JSON records of 100-200 B, {kept:,} of them eu,"
        f" {PARTITIONS} partition(s); load average before and after: {' | '.join(loads)}\n"
    )
    print(
        "| read | records/s delivered | MB/s delivered | source records/s covered | vs raw (medians)"
        " | vs raw (median of rounds) | broker CPU us per source record |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    raw = results["raw"]
    raw_rate = median([r.msgs_per_s for r in raw])
    for name, runs in results.items():
        scale = RECORDS / delivered[name]
        rate = median([r.msgs_per_s for r in runs])
        mb = median([r.mb_per_s for r in runs])
        covered = rate * scale
        per_round = median([b.msgs_per_s * scale / a.msgs_per_s for a, b in zip(raw, runs, strict=True)])
        cpu = median([r.broker_us_per_record / scale for r in runs])
        print(
            f"| {name} | {rate:,.0f} | {mb:.1f} | {covered:,.0f} | {covered / raw_rate:.2f}x | {per_round:.2f}x"
            f" | {cpu:.3f} |"
        )


if __name__ == "__main__":
    main()
