"""Plugins cannot starve the broker or each other, end to end with the real wasm plugins:

- 300 topics bound to one partitioner (`sluice.partitioner=murmur2`, the real murmur2.wasm
  deployed through the admin API) take no pool slots of their own: after producing to some
  of them, a topic bound to another partitioner (crc32) still accepts records produced with
  confluent-kafka, each in the partition crc32 picks, and the broker stays up;
- a component over a per-component limit (five core instances) is refused at deploy, by the
  admin API (400 PLUGIN_OVER_LIMIT) and by `sluice plugin deploy`, with the limit and its
  value named, and nothing is installed.
"""

from __future__ import annotations

import subprocess

from confluent_kafka.admin import NewTopic
from plugin_support import crc32_partition, landed, murmur2_partition, wasm
from test_plugin_admin import call

from clients import Record, admin_op, create_topic, produce_all, producer
from conftest import sluice_bin

TOPICS = 300
PARTITIONS = 3
KEYS = [f"key-{i}".encode() for i in range(30)]


# PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX (broker/plugin-host/src/limits.rs): a Python
# guest needs 14.
CORE_INSTANCES_MAX = 16


def too_many_core_instances() -> bytes:
    """A component (binary, by hand) instantiating an empty core module one time more than
    PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX allows."""
    n = CORE_INSTANCES_MAX + 1
    module = b"\0asm\x01\0\0\0"
    modules = bytes([1, len(module)]) + module  # core module section: one module
    instances = bytes([n]) + bytes([0, 0, 0]) * n  # instantiate module 0, no args, n times
    return b"\0asm\x0d\0\x01\0" + modules + bytes([2, len(instances)]) + instances


def test_300_topics_on_one_partitioner_do_not_starve_another(broker_factory, topic_name):
    broker = broker_factory()
    api = broker.admin_url + "/v1/plugins"
    for name in ["murmur2", "crc32"]:
        status, info = call("PUT", f"{api}/{name}", wasm(name))
        assert status == 200, info

    names = [f"{topic_name}-m{i}" for i in range(TOPICS)]
    new = [
        NewTopic(n, num_partitions=PARTITIONS, replication_factor=1, config={"sluice.partitioner": "murmur2"})
        for n in names
    ]
    created = admin_op(broker.bootstrap, "create_topics", new, operation_timeout=120, request_timeout=120)
    assert created == {n: None for n in names}, {n: e for n, e in created.items() if e is not None}
    assert call("GET", f"{api}/murmur2")[1]["users"] == TOPICS

    p = producer(broker.bootstrap)
    for n in names[::30]:
        produce_all(p, n, [Record(k, b"m") for k in KEYS], partition=None)
    for n in names[::90]:
        for part, messages in landed(broker.bootstrap, n, PARTITIONS).items():
            assert all(murmur2_partition(m.key(), PARTITIONS) == part for m in messages), n

    other = f"{topic_name}-crc32"
    create_topic(broker.bootstrap, other, PARTITIONS, {"sluice.partitioner": "crc32"})
    delivered = produce_all(producer(broker.bootstrap), other, [Record(k, b"c") for k in KEYS], partition=None)
    assert len(delivered) == len(KEYS)
    placed = landed(broker.bootstrap, other, PARTITIONS)
    assert sum(len(m) for m in placed.values()) == len(KEYS)
    for part, messages in placed.items():
        for m in messages:
            assert part == crc32_partition(m.key(), PARTITIONS), m.key()
    assert broker.is_running()
    status, stats = call("GET", f"{api}/murmur2")
    assert status == 200 and stats["stats"]["errors"].get("busy", 0) == 0, stats


def test_a_component_over_a_limit_is_refused_at_deploy(broker, tmp_path):
    api = broker.admin_url + "/v1/plugins"
    hostile = too_many_core_instances()
    status, err = call("PUT", f"{api}/greedy", hostile)
    assert status == 400 and err["code"] == "PLUGIN_OVER_LIMIT", err
    assert f"PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX = {CORE_INSTANCES_MAX}" in err["error"], err

    path = tmp_path / "greedy.wasm"
    path.write_bytes(hostile)
    cli = subprocess.run(
        [sluice_bin(), "plugin", "deploy", str(path), "--admin", broker.admin_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode != 0, cli.stdout
    assert f"PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX = {CORE_INSTANCES_MAX}" in cli.stderr, cli.stderr
    assert call("GET", f"{api}/greedy")[0] == 404
