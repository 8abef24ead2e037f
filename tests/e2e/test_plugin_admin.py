"""The plugin admin API (`/v1/plugins`) end to end: deploy a real plugin with PUT, list and
describe it (with its call statistics), bind a topic to it, refuse to delete it while in use (409) unless forced, reject
bad uploads (garbage, a filter where a partitioner is bound is still a valid upload, an
oversized module) without replacing the working version, and hot-swap a topic's partitioner
by uploading a new version under the same name.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request

from plugin_support import crc32_partition, landed, murmur2_partition, wasm

from clients import Record, create_topic, produce_all, producer
from conftest import wait_until

PARTITIONS = 4
KEYS = [f"order-{i}".encode() for i in range(60)]


def call(method: str, url: str, body: bytes | None = None) -> tuple[int, dict | list | None]:
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def placed(bootstrap: str, topic: str) -> dict[bytes, set[int]]:
    out: dict[bytes, set[int]] = {}
    for p, messages in landed(bootstrap, topic, PARTITIONS).items():
        for m in messages:
            out.setdefault(m.key(), set()).add(p)
    return out


def test_deploy_list_describe_delete_and_hot_swap_through_the_admin_api(broker_factory, topic_name):
    broker = broker_factory(settings={"plugin.module.bytes.max": "1 MiB"})
    api = broker.admin_url + "/v1/plugins"
    status, info = call("PUT", f"{api}/router", wasm("murmur2"))
    assert status == 200, info
    assert info["name"] == "router" and info["kind"] == "partitioner" and info["users"] == 0
    assert info["wit_version"] == "0.2.0"
    assert len(info["sha256"]) == 64 and info["size_bytes"] > 0
    assert call("GET", api)[1] == [info]
    status, described = call("GET", f"{api}/router")
    stats = described.pop("stats")
    assert (status, described) == (200, info)
    assert stats["calls"] == 0 and set(stats["errors"]) >= {"timeout", "memory", "trap", "guest", "contract"}
    assert call("GET", f"{api}/nope")[0] == 404

    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "router"})
    assert call("GET", f"{api}/router")[1]["users"] == 1
    produce_all(producer(broker.bootstrap), topic_name, [Record(k, b"v1") for k in KEYS], partition=None)
    where = placed(broker.bootstrap, topic_name)
    assert all(where[k] == {murmur2_partition(k, PARTITIONS)} for k in KEYS)

    # Bad uploads are refused and the working version stays.
    status, err = call("PUT", f"{api}/router", b"\x00asm garbage")
    assert status == 400 and err["code"] == "INVALID_PLUGIN", err
    status, err = call("PUT", f"{api}/router", b"\x00" * (2 << 20))
    assert status == 413 and "plugin.module.bytes.max" in err["error"], err
    # A plugin of another kind cannot take over a name a topic is bound to.
    status, err = call("PUT", f"{api}/router", wasm("hostile-filter-kind"))
    assert status == 409 and err["code"] == "PLUGIN_KIND_CHANGE", err
    assert "partitioner in use by 1 handle" in err["error"] and "filter" in err["error"], err
    assert call("GET", f"{api}/router")[1]["sha256"] == info["sha256"]

    # In use: 409 without force.
    status, err = call("DELETE", f"{api}/router")
    assert status == 409 and err["code"] == "PLUGIN_IN_USE", err

    # A new version under the same name reaches the topic without reconfiguring it.
    status, swapped = call("PUT", f"{api}/router", wasm("crc32"))
    assert status == 200 and swapped["sha256"] != info["sha256"]
    produce_all(producer(broker.bootstrap), topic_name, [Record(k, b"v2") for k in KEYS], partition=None)
    for p, messages in landed(broker.bootstrap, topic_name, PARTITIONS).items():
        for m in messages:
            if m.value() == b"v2":
                assert p == crc32_partition(m.key(), PARTITIONS), m.key()
    assert hashlib.sha256(b"").hexdigest() != swapped["sha256"]

    assert call("DELETE", f"{api}/router?force=true")[0] == 204
    wait_until(lambda: call("GET", api)[1] == [], 5, "the plugin to be gone")
