"""Python (componentize-py) and JavaScript (componentize-js) plugins through the broker,
end to end, next to their Rust twins (same parameters and behaviour, proved offline by
plugins/testdata's shared vectors and here by the broker's answers):

- deployed through the CLI (`sluice plugin deploy`) and the admin API (PUT): kind, WIT
  version and `wasi: true` reported;
- as view filters read by kcat and confluent-kafka: the same records at the same offsets as
  the Rust json-filter's view;
- as partitioners, with confluent-kafka and kafka-python producing the same records: every
  record lands where the Rust json-field partitioner puts it, whichever client sent it;
- as validators, refusing bad records through confluent-kafka's per-record error reporting;
- hostile guests (an infinite loop, a memory bomb, a denied WASI import) are stopped or
  refused with a clear error naming the limit or the import, what a guest wrote to stderr
  before it was stopped reaches the plugin's log (`sluice plugin logs`), and the broker
  keeps serving.

The polyglot plugins' compiled forms are shared by the run's brokers (polyglot_support.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from plugin_support import built_plugins_dir, landed, wasm
from polyglot_support import seed_cache

import kafka_wire as kw
from clients import Record, consume_partition, create_topic, produce_all, producer, watermarks
from conftest import sluice_bin
from kafka_wire import KafkaConnection

DEADLINE_S = 60.0
# The first test of a run compiles every polyglot plugin for the warm cache (5-15 s each in
# the debug broker, the other xdist worker waiting on its lock): past pytest.ini's 300 s.
pytestmark = pytest.mark.timeout(900)
PARTITIONS = 6
LANGS = ["python", "js"]
EU = {"field": "$.region", "op": "==", "value": "eu"}


def start(broker_factory, tmp_path, **settings):
    return broker_factory(settings={"plugin.dir": str(tmp_path / "plugins"), **settings}, prepare=seed_cache)


def sluice(broker, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    where = ["--admin-url", broker.admin_url] if args[0] in ("plugin", "view") else ["--brokers", broker.bootstrap]
    proc = subprocess.run([sluice_bin(), *args, *where], capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, f"{args}: rc={proc.returncode} {proc.stderr}"
    return proc


def deploy_cli(broker, built: str, name: str) -> dict:
    out = sluice(
        broker, "plugin", "deploy", str(built_plugins_dir() / f"{built}.wasm"), "--name", name, "--output", "json"
    )
    return json.loads(out.stdout)


def deploy_api(broker, built: str, name: str) -> dict:
    request = urllib.request.Request(f"{broker.admin_url}/v1/plugins/{name}", data=wasm(built), method="PUT")
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.loads(answer.read())


def params_args(params: dict[str, str]) -> list[str]:
    return [a for k, v in params.items() for a in ("--param", f"{k}={v}")]


def orders(n: int) -> list[bytes]:
    regions = ["eu", "us", "apac"]
    out = []
    for i in range(n):
        if i % 17 == 5:
            out.append(b"not json")
        elif i % 13 == 7:
            out.append(json.dumps({"id": i}).encode())
        else:
            out.append(json.dumps({"id": i, "region": regions[i % 3], "customer": f"c-{i % 11}"}).encode())
    return out


def kcat_view(bootstrap: str, view: str) -> list[tuple[int, bytes]]:
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (tests/run installs it)"
    out = subprocess.run(
        [kcat, "-b", bootstrap, "-C", "-q", "-t", view, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n"],
        capture_output=True,
        timeout=DEADLINE_S,
        check=True,
    ).stdout.decode()
    return [(int(o), v.encode()) for o, v in (line.split(" ", 1) for line in out.splitlines())]


@pytest.mark.parametrize("lang", LANGS)
def test_filters_deploy_and_serve_views_like_the_rust_one(broker_factory, tmp_path, topic_name, lang):
    broker = start(broker_factory, tmp_path)
    info = deploy_cli(broker, f"{lang}-json-filter", f"{lang}-filter")
    assert (info["kind"], info["wit_version"], info["wasi"]) == ("filter", "0.2.0", True), info
    assert deploy_api(broker, "json-filter", "rust-filter")["wasi"] is False

    create_topic(broker.bootstrap, topic_name)
    values = orders(300)
    produce_all(producer(broker.bootstrap, linger_ms=20), topic_name, [Record(None, v) for v in values])
    expected = [(i, v) for i, v in enumerate(values) if b'"region": "eu"' in v]
    assert len(expected) > 50

    for plugin in (f"{lang}-filter", "rust-filter"):
        sluice(
            broker,
            "view",
            "create",
            f"{topic_name}-{plugin}",
            "--from",
            topic_name,
            "--filter",
            plugin,
            *params_args(EU),
        )
        assert kcat_view(broker.bootstrap, f"{topic_name}-{plugin}") == expected, plugin
    low, high = watermarks(broker.bootstrap, f"{topic_name}-{lang}-filter", 0)
    got = consume_partition(broker.bootstrap, f"{topic_name}-{lang}-filter", 0, len(expected), start_offset=low)
    assert [(m.offset(), m.value()) for m in got] == expected
    assert high == len(values)

    described = json.loads(sluice(broker, "plugin", "describe", f"{lang}-filter", "--output", "json").stdout)
    assert described["stats"]["records_in"] >= len(values) and described["stats"]["cpu_us"] > 0, described


@pytest.mark.parametrize("lang", LANGS)
def test_partitioners_agree_with_the_rust_one_across_client_families(broker_factory, tmp_path, topic_name, lang):
    broker = start(broker_factory, tmp_path)
    deploy_api(broker, f"{lang}-json-field-partitioner", f"{lang}-router")
    deploy_api(broker, "json-field", "rust-router")
    by_customer = {"sluice.partitioner.params": "field=$.customer"}
    ours, theirs = f"{topic_name}-{lang}", f"{topic_name}-rust"
    create_topic(broker.bootstrap, ours, PARTITIONS, {"sluice.partitioner": f"{lang}-router", **by_customer})
    create_topic(broker.bootstrap, theirs, PARTITIONS, {"sluice.partitioner": "rust-router", **by_customer})

    values = orders(240)
    half = len(values) // 2
    for topic in (ours, theirs):
        # confluent-kafka sends the first half, kafka-python the second, each to a partition
        # of its own choosing (its own key hash): the plugin decides where each lands.
        produce_all(
            producer(broker.bootstrap), topic, [Record(f"k{i}".encode(), v) for i, v in enumerate(values[:half])]
        )
        kp = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        for i, v in enumerate(values[half:]):
            kp.send(topic, key=f"k{half + i}".encode(), value=v)
        kp.flush(timeout=DEADLINE_S)
        kp.close()

    def placement(topic: str) -> dict[bytes, int]:
        return {m.value(): p for p, messages in landed(broker.bootstrap, topic, PARTITIONS).items() for m in messages}

    placed, reference = placement(ours), placement(theirs)
    assert len(placed) == len(set(values)) and placed == reference
    assert len(set(placed.values())) > 1, "records spread over partitions"


@pytest.mark.parametrize("lang", LANGS)
def test_validators_refuse_bad_records_through_confluent_kafka(broker_factory, tmp_path, topic_name, lang):
    built = built_plugins_dir() / f"{lang}-json-validator.wasm"
    if not built.exists():
        pytest.fail(f"{built} missing: sdk/build-polyglot-plugins.sh builds it (tests/run does)")
    broker = start(broker_factory, tmp_path)
    assert deploy_cli(broker, f"{lang}-json-validator", f"{lang}-schema")["kind"] == "validator"
    create_topic(
        broker.bootstrap,
        topic_name,
        config={"sluice.validator": f"{lang}-schema", "sluice.validator.params": "required=$.id,types=$.id:number"},
    )
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "acks": "all", "retries": 0})
    reports: dict[int, KafkaError | None] = {}
    mixed = [b'{"id": 1}', b'{"id": "two"}', b"[3]", b'{"id": 4}']
    for i, v in enumerate(mixed):
        p.produce(topic_name, value=v, partition=0, on_delivery=lambda err, msg, i=i: reports.__setitem__(i, err))
    assert p.flush(DEADLINE_S) == 0
    codes = [reports[i].code() if reports[i] else None for i in range(len(mixed))]
    assert codes == [
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD,
    ], reports
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0), "nothing of the refused batch is appended"
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, b'{"id": 5}')])
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 1)

    # The reasons, as the Rust validator gives them, over the raw wire.
    records = b"".join(kw.record(i, None, v) for i, v in enumerate(mixed))
    with KafkaConnection(broker.bootstrap) as conn:
        result = conn.produce_many({topic_name: [(0, kw.batch_with_header(records, records_count=len(mixed)))]}, 8)[0]
    assert result.record_errors == [
        (1, "field $.id is of type string, expected number"),
        (2, "the value is a JSON array, not an object"),
    ], result


def produce_raw(bootstrap: str, topic: str, key: bytes) -> kw.PartitionResult:
    with KafkaConnection(bootstrap) as conn:
        batch = kw.batch_with_header(kw.record(0, key, b"v"), records_count=1)
        return conn.produce_many({topic: [(0, batch)]}, 8)[0]


@pytest.mark.parametrize("lang", LANGS)
def test_hostile_guests_are_stopped_and_the_broker_keeps_serving(broker_factory, tmp_path, topic_name, lang):
    # A second per call, so the memory bomb reaches plugin.memory.bytes.max (64 MiB) before
    # the deadline (SpiderMonkey in a debug broker fills memory slowly).
    broker = start(broker_factory, tmp_path, **{"plugin.call.timeout.ms": "1000"})
    deploy_api(broker, f"hostile-{lang}-infinite-loop", "spin")
    deploy_api(broker, f"hostile-{lang}-memory-bomb", "bomb")
    create_topic(broker.bootstrap, f"{topic_name}-spin", PARTITIONS, {"sluice.partitioner": "spin"})
    create_topic(broker.bootstrap, f"{topic_name}-bomb", PARTITIONS, {"sluice.partitioner": "bomb"})

    spun = produce_raw(broker.bootstrap, f"{topic_name}-spin", b"spin")
    assert spun.error_code == kw.POLICY_VIOLATION and "plugin.call.timeout.ms" in spun.error_message, spun
    assert produce_raw(broker.bootstrap, f"{topic_name}-spin", b"ok").error_code == 0, "a fresh instance serves"

    bombed = produce_raw(broker.bootstrap, f"{topic_name}-bomb", b"bomb")
    assert bombed.error_code == kw.POLICY_VIOLATION and "plugin.memory.bytes.max" in bombed.error_message, bombed
    assert produce_raw(broker.bootstrap, f"{topic_name}-bomb", b"fine").error_code == 0

    denied = sluice(
        broker, "plugin", "deploy", str(built_plugins_dir() / f"hostile-{lang}-denied-import.wasm"), check=False
    )
    named = {"python": "wasi:config/store", "js": "wasi:http/"}[lang]
    assert denied.returncode == 1 and named in denied.stderr, denied.stderr
    listed = json.loads(sluice(broker, "plugin", "list", "--output", "json").stdout)
    assert sorted(p["name"] for p in listed) == ["bomb", "spin"]

    # What the looping guest wrote to stderr before it was stopped is in the plugin log.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        logs = json.loads(sluice(broker, "plugin", "logs", "spin", "--output", "json").stdout)
        if any("spinning on" in line["message"] and line["level"] == "warn" for line in logs["lines"]):
            break
        assert time.monotonic() < deadline, logs
        time.sleep(0.2)

    other = f"{topic_name}-plain"
    create_topic(broker.bootstrap, other)
    produce_all(producer(broker.bootstrap), other, [Record(None, b"still serving")])
    assert [m.value() for m in consume_partition(broker.bootstrap, other, 0, 1)] == [b"still serving"]


@pytest.mark.parametrize(
    ("lang", "native_test"),
    [("python", ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]), ("js", ["node", "--test"])],
)
def test_a_scaffolded_guest_tests_builds_and_runs(tmp_path, lang, native_test):
    """The plugin author's path in Python and JavaScript: `sluice plugin new --lang` ->
    the native unit test the template carries -> `sluice plugin build` (componentize-py or
    componentize-js) -> `sluice plugin test` runs the built component in the broker's host."""
    from conftest import REPO_ROOT

    def cli(*args: str) -> subprocess.CompletedProcess:
        run = subprocess.run([sluice_bin(), *args], capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert run.returncode == 0, f"{args}: {run.stderr}"
        return run

    made = json.loads(
        cli(
            "plugin",
            "new",
            "keyed",
            "--lang",
            lang,
            "--kind",
            "filter",
            "--sdk",
            str(REPO_ROOT / "sdk"),
            "--output",
            "json",
        ).stdout
    )
    assert made == {"created": "keyed", "kind": "filter", "lang": lang}
    tested = subprocess.run(native_test, capture_output=True, text=True, timeout=120, cwd=tmp_path / "keyed")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    built = json.loads(cli("plugin", "build", "keyed", "--sdk", str(REPO_ROOT / "sdk"), "--output", "json").stdout)[
        "built"
    ]
    assert [p.rsplit("/", 1)[1] for p in built] == ["keyed.wasm"], built
    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"key": "k1", "value": "a"}\n{"value": "no key"}\n{"key": "k2", "value": "b"}\n')
    doc = json.loads(
        cli("plugin", "test", str(tmp_path / built[0]), "--records", str(samples), "--output", "json").stdout
    )
    assert doc["kind"] == "filter" and [r["kept"] for r in doc["records"]] == [True, False, True], doc
