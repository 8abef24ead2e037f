"""Per-plugin metrics on `/metrics`, `GET /v1/plugins/{name}` and `sluice plugin describe`.

A topic routed by the murmur2 partitioner gets a known number of produce batches over the raw
wire (one partitioner call per batch); the scrape must count exactly those calls, no errors,
and a latency histogram with as many observations. Hostile partitioners (an infinite loop, a
panic, an out-of-range answer) each fail one produce: the timeout, trap and guest-error counters
of that plugin move, and only those. Records in and out count successful calls' records. The scrape is parsed as Prometheus text.
"""

from __future__ import annotations

import json
import subprocess

from plugin_support import murmur2_partition, plugin_dir, produce_v8
from test_metrics import http, scrape
from test_plugins import keyed_batch

from clients import create_topic
from conftest import sluice_bin

PARTITIONS = 4
BATCHES = 7
KEYS_PER_BATCH = 10


def labels(plugin: str, kind: str = "partitioner") -> str:
    return f'plugin="{plugin}",kind="{kind}"'


def test_partitioner_calls_match_the_batches_produced(broker_factory, tmp_path, topic_name):
    d = plugin_dir(tmp_path, {"murmur2": "murmur2"})
    broker = broker_factory(settings={"plugin.dir": str(d)})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "murmur2"})
    before = scrape(broker)
    assert before[f"sluice_plugin_calls_total{{{labels('murmur2')}}}"] == 0

    for b in range(BATCHES):
        keys = [f"k-{b}-{i}".encode() for i in range(KEYS_PER_BATCH)]
        code, _, _ = produce_v8(broker.bootstrap, topic_name, murmur2_partition(keys[0], PARTITIONS), keyed_batch(keys))
        assert code == 0

    after = scrape(broker)
    lab = labels("murmur2")
    assert after[f"sluice_plugin_calls_total{{{lab}}}"] == BATCHES
    assert after[f"sluice_plugin_timeouts_total{{{lab}}}"] == 0
    for kind in ["timeout", "memory", "trap", "guest", "contract", "instantiate", "params"]:
        assert after[f'sluice_plugin_errors_total{{{lab},error="{kind}"}}'] == 0
    assert after[f"sluice_plugin_call_duration_seconds_count{{{lab}}}"] == BATCHES
    assert after[f'sluice_plugin_call_duration_seconds_bucket{{{lab},le="+Inf"}}'] == BATCHES
    assert after[f"sluice_plugin_call_duration_seconds_sum{{{lab}}}"] > 0
    assert sum(v for k, v in after.items() if k.startswith("sluice_partition_records_in_total")) == (
        BATCHES * KEYS_PER_BATCH
    )
    # A partitioner places every record it is handed.
    assert after[f"sluice_plugin_records_in_total{{{lab}}}"] == BATCHES * KEYS_PER_BATCH
    assert after[f"sluice_plugin_records_out_total{{{lab}}}"] == BATCHES * KEYS_PER_BATCH

    status, body = http(broker, "GET", "/v1/plugins/murmur2")
    assert status == 200, body
    stats = json.loads(body)["stats"]
    assert stats["calls"] == BATCHES and sum(stats["errors"].values()) == 0, stats
    assert (stats["records_in"], stats["records_out"]) == (BATCHES * KEYS_PER_BATCH,) * 2, stats
    described = subprocess.run(
        [sluice_bin(), "plugin", "describe", "murmur2", "--admin-url", broker.admin_url, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["stats"]["calls"] == BATCHES


def test_hostile_partitioners_bump_their_error_counters(broker_factory, tmp_path, topic_name):
    hostile = ["hostile-infinite-loop", "hostile-panic"]
    d = plugin_dir(tmp_path, {p: p for p in hostile})
    broker = broker_factory(settings={"plugin.dir": str(d)})
    for plugin in hostile:
        create_topic(broker.bootstrap, f"{topic_name}-{plugin}", PARTITIONS, {"sluice.partitioner": plugin})

    def produce(plugin: str, key: bytes) -> int:
        code, _, _ = produce_v8(broker.bootstrap, f"{topic_name}-{plugin}", 0, keyed_batch([key]))
        return code

    assert produce("hostile-infinite-loop", b"spin") != 0
    assert produce("hostile-panic", b"panic") != 0
    assert produce("hostile-panic", b"range") != 0
    assert produce("hostile-panic", b"fine") == 0

    m = scrape(broker)
    loop, panic = labels("hostile-infinite-loop"), labels("hostile-panic")
    assert m[f"sluice_plugin_calls_total{{{loop}}}"] == 1
    assert m[f"sluice_plugin_timeouts_total{{{loop}}}"] == 1
    assert m[f'sluice_plugin_errors_total{{{loop},error="timeout"}}'] == 1
    assert m[f'sluice_plugin_errors_total{{{loop},error="trap"}}'] == 0
    assert m[f"sluice_plugin_calls_total{{{panic}}}"] == 3
    assert m[f'sluice_plugin_errors_total{{{panic},error="trap"}}'] == 1
    # The SDK checks the range itself and returns a guest error (the host would call an
    # unchecked out-of-range answer a contract error).
    assert m[f'sluice_plugin_errors_total{{{panic},error="guest"}}'] == 1
    assert m[f'sluice_plugin_errors_total{{{panic},error="contract"}}'] == 0
    assert m[f"sluice_plugin_timeouts_total{{{panic}}}"] == 0
    # Failed calls count no records.
    assert m[f"sluice_plugin_records_in_total{{{loop}}}"] == 0
    assert m[f"sluice_plugin_records_in_total{{{panic}}}"] == 1
    # The timed-out call waited for the deadline: at least plugin.call.timeout.ms in the sum.
    assert m[f"sluice_plugin_call_duration_seconds_sum{{{loop}}}"] > 0
