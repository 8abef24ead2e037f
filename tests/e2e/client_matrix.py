"""Shared parts of the external-client suites (test_franz_go.py, test_kafka_go.py,
test_kafkajs.py): the programs in tests/clients/ built once per run by tests/clients/build.sh,
the records each codec round trip produces (written to a JSON spec the program reads, base64
bytes), and the checks every client's results go through: byte-exact records back, offsets as
the producer reported them, each codec really stored (raw Fetch), and a consumer group whose
members split the partitions, hand them over, and never read a record twice or miss one.
"""

from __future__ import annotations

import base64
import collections
import json
import subprocess
from pathlib import Path

import kafka_wire as kw
from conftest import REPO_ROOT
from kafka_wire import KafkaConnection

BUILD_SCRIPT = REPO_ROOT / "tests" / "clients" / "build.sh"
BUILD_TIMEOUT_S = 900
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS_PER_CODEC = 300


def build(client: str) -> Path:
    """Runs tests/clients/build.sh CLIENT (a no-op when tests/run already built it) and
    returns what it prints: the built program (Go) or the installed package dir (KafkaJS)."""
    done = subprocess.run(["bash", str(BUILD_SCRIPT), client], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"tests/clients/build.sh {client} failed:\n{done.stdout}\n{done.stderr}"
    return Path(done.stdout.strip().splitlines()[-1])


def record_spec(topic: str, codecs: list[str], per_codec: int = RECORDS_PER_CODEC) -> dict:
    """Codec i's records go to partition i. Keys: null every 5th, else text; values:
    compressible text, or binary bytes covering 0-255; headers on every other record, with a
    repeated key and binary values. No empty keys, values or headers: kafka-go reads those
    back as null."""
    partitions = []
    for p, codec in enumerate(codecs):
        records = []
        for i in range(per_codec):
            key = None if i % 5 == 0 else f"key-{codec}-{i}".encode()
            if i % 3 == 0:
                value = bytes((i * 7 + k) % 256 for k in range(1 + i % 300))
            else:
                value = (f"{codec} payload {i % 11} " * (1 + i % 30)).encode()
            headers = []
            if i % 2 == 0:
                headers = [("trace", f"t-{i}".encode()), ("dup", b"\x00\x01"), ("dup", bytes([255, i % 256]))]
            records.append({"key": key, "value": value, "headers": headers})
        partitions.append({"partition": p, "codec": codec, "records": records})
    return {"topic": topic, "partitions": partitions}


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def write_spec(path: Path, spec: dict) -> Path:
    encoded = {
        "topic": spec["topic"],
        "partitions": [
            {
                **p,
                "records": [
                    {
                        "key": _b64(r["key"]),
                        "value": _b64(r["value"]),
                        "headers": [{"key": k, "value": _b64(v)} for k, v in r["headers"]],
                    }
                    for r in p["records"]
                ],
            }
            for p in spec["partitions"]
        ],
    }
    path.write_text(json.dumps(encoded))
    return path


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def run_json(command: list[str], timeout_s: float, cwd: Path | None = None) -> dict:
    """Runs a client program that prints one JSON object {"result": ..., "error": ...};
    fails with its error and stderr tail unless it exited 0 without an error."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
    try:
        out = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise AssertionError(
            f"no JSON from {command[0]} (exit {done.returncode})\n{done.stdout}\n{done.stderr[-4000:]}"
        ) from None
    assert done.returncode == 0 and not out.get("error"), f"{out.get('error')}\n{done.stderr[-4000:]}"
    return out["result"]


def assert_round_trip(spec: dict, result: dict, bootstrap: str):
    """Every partition read back byte-exact (key, value, headers in order) at offsets 0..n-1,
    the producer's reported offsets (when the client reports them) equal to where the records
    were read, and the stored batches compressed with the codec asked for."""
    consumed = collections.defaultdict(list)
    for c in result["consumed"]:
        consumed[c["partition"]].append(c)
    for p in spec["partitions"]:
        got, want = consumed[p["partition"]], p["records"]
        codec = p["codec"]
        assert len(got) == len(want), f"{codec}: read {len(got)} of {len(want)} records"
        for i, (c, r) in enumerate(zip(got, want, strict=True)):
            where = f"{codec} record {i}"
            assert c["offset"] == i, where
            assert _unb64(c["key"]) == r["key"], where
            assert _unb64(c["value"]) == r["value"], where
            headers = [(h["key"], _unb64(h["value"])) for h in c["headers"] or []]
            assert headers == r["headers"], where
        produced = result.get("produced", {}).get(codec)
        if produced is not None:
            assert [(x["partition"], x["offset"]) for x in produced] == [
                (p["partition"], i) for i in range(len(want))
            ], codec
        assert_stored_codec(bootstrap, spec["topic"], p["partition"], codec)


def assert_stored_codec(bootstrap: str, topic: str, partition: int, codec: str):
    """The partition's stored batches use `codec` (a client may send a batch too small to be
    worth compressing uncompressed, so plain batches are allowed beside it)."""
    with KafkaConnection(leader_of(bootstrap, topic, partition)) as conn:
        fetched = conn.fetch(topic, partition, 0, version=11)
    codecs = kw.batch_compression_codecs(fetched.records)
    assert CODEC_IDS[codec] in codecs and set(codecs) <= {0, CODEC_IDS[codec]}, (codec, codecs)


def leader_of(bootstrap: str, topic: str, partition: int) -> str:
    """The address of the partition's leader, from Metadata (kcat): `bootstrap` itself on a
    single broker, the leading broker in a cluster."""
    done = subprocess.run(["kcat", "-b", bootstrap, "-L", "-J", "-t", topic], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    meta = json.loads(done.stdout)
    [t] = [t for t in meta["topics"] if t["topic"] == topic]
    [p] = [p for p in t["partitions"] if p["partition"] == partition]
    [b] = [b for b in meta["brokers"] if b["id"] == p["leader"]]
    return b["name"]


def assert_group_handover(result: dict, partitions: int):
    """The group scenario of every client: "alone" (member a holds every partition), "shared"
    (a and b split them, disjoint, both non-empty), "after-leave" (b left, a holds every
    partition again), "late-member" (a left too; c joins and must start at the committed
    offsets). Every produced value consumed exactly once, in its phase, by a member that held
    its partition then; the committed offsets at the log end."""
    assert not result.get("member_errors"), result["member_errors"]
    everything = list(range(partitions))
    a = result["assignments"]
    assert a["alone"] == {"a": everything}, a
    shared = a["shared"]
    assert set(shared) == {"a", "b"} and shared["a"] and shared["b"], shared
    assert sorted(shared["a"] + shared["b"]) == everything, shared
    assert a["after-leave"] == {"a": everything}, a

    consumed = result["consumed"]
    values = collections.Counter(c["value"] for c in consumed)
    twice = [v for v, n in values.items() if n > 1]
    assert not twice, f"read more than once: {twice[:10]}"
    assert len(consumed) == result["produced"], (len(consumed), result["produced"])
    for c in consumed:
        phase = c["value"].rsplit("-", 1)[0]
        assert c["phase"] == phase, c
        owners = a.get(phase) or {}
        if phase != "late-member":
            assert c["partition"] in owners.get(c["member"], []), (c, owners)
    late = [c for c in consumed if c["member"] == "c"]
    assert sorted(c["value"] for c in late) == sorted(f"late-member-{i}" for i in range(4)), late

    committed = {int(p): o for p, o in result["committed"].items()}
    ends = {int(p): o for p, o in result["log_end"].items()}
    assert committed == ends and sum(ends.values()) == result["produced"], (committed, ends)
