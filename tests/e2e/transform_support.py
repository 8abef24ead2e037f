"""Helpers of the materialized transform tests: deploying through the admin API or the CLI,
waiting for a transform to catch up, and reading its outputs whole, read_committed."""

from __future__ import annotations

import json
import subprocess
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

from conftest import sluice_bin, wait_until
from test_metrics import http

DEADLINE_S = 120.0


def deploy(broker, body: dict) -> dict:
    status, text = http(broker, "POST", "/v1/transforms", body)
    assert status == 201, text
    return json.loads(text)


def describe(broker, name: str) -> dict:
    status, text = http(broker, "GET", f"/v1/transforms/{name}")
    assert status == 200, text
    return json.loads(text)


def command(broker, name: str, verb: str, body: dict | None = None) -> dict:
    status, text = http(broker, "POST", f"/v1/transforms/{name}/{verb}", body)
    assert status == 200, text
    return json.loads(text)


def cli(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sluice_bin(), "transform", *args, "--admin-url", broker.admin_url],
        capture_output=True,
        text=True,
        timeout=120,
    )


def caught_up(broker, name: str, timeout_s: float = DEADLINE_S) -> dict:
    """Waits until every partition runs with lag 0 (what a user polls for)."""

    def done():
        t = describe(broker, name)
        return t if t["lag"] == 0 and all(p["state"] == "running" for p in t["partitions"]) else None

    return wait_until(done, timeout_s, f"transform {name} to catch up", interval_s=0.1)


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    """Every record of `topic` (all partitions), read until each partition's end under
    `isolation`; confluent Message objects, in partition then offset order."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "sluice-e2e-transform-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        at_end: set[int] = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: only {sorted(at_end)} of {partitions} partitions read to the end"
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                out.append(m)
        out.sort(key=lambda m: (m.partition(), m.offset()))
        return out
    finally:
        c.close()
