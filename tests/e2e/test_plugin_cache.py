"""The compiled-plugin cache through the real broker: a deployed plugin's compiled code lands in
`<data.dir>/plugin-cache/<sha256>.cwasm` beside its digest (nothing compiled inside
`plugin.dir`); with the broker stopped, the `.cwasm` is replaced by another plugin's valid
compiled code; the restarted broker logs the file and the reason, does not load it (the topic
still partitions with murmur2, not crc32) and writes a matching `.cwasm` back.
"""

from __future__ import annotations

import hashlib
import json
import urllib.request

from plugin_support import landed, murmur2_partition, wasm

from clients import Record, create_topic, produce_all, producer

PARTITIONS = 4
KEYS = [f"order-{i}".encode() for i in range(40)]


def deploy(admin_url: str, name: str, plugin: str) -> str:
    req = urllib.request.Request(f"{admin_url}/v1/plugins/{name}", data=wasm(plugin), method="PUT")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())["sha256"]


def cwasm_digest(digest_file) -> str:
    lines = dict(line.split(" ", 1) for line in digest_file.read_text().splitlines()[1:])
    return lines["cwasm"]


def test_a_substituted_compiled_plugin_is_detected_and_recompiled(broker_factory, topic_name):
    broker = broker_factory()
    router = deploy(broker.admin_url, "router", "murmur2")
    other = deploy(broker.admin_url, "other", "crc32")
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "router"})
    broker.stop()

    cache = broker.data_dir / "plugin-cache"
    cwasm = cache / f"{router}.cwasm"
    assert cwasm.is_file() and (cache / f"{other}.cwasm").is_file()
    assert not (broker.data_dir / "plugins" / ".cache").exists()
    substitute = (cache / f"{other}.cwasm").read_bytes()
    cwasm.write_bytes(substitute)

    broker.start()
    log = broker.log_path.read_text(errors="replace")
    warned = [line for line in log.splitlines() if "ignoring the compiled plugin cache file" in line]
    assert any(str(cwasm) in line and "does not match the digest" in line for line in warned), log[-4000:]
    produce_all(producer(broker.bootstrap), topic_name, [Record(k, b"v") for k in KEYS], partition=None)
    for p, messages in landed(broker.bootstrap, topic_name, PARTITIONS).items():
        for m in messages:
            assert p == murmur2_partition(m.key(), PARTITIONS), m.key()
    rewritten = cwasm.read_bytes()
    assert rewritten != substitute
    assert hashlib.sha256(rewritten).hexdigest() == cwasm_digest(cache / f"{router}.digest")
