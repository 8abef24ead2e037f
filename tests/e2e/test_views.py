"""Views: read-only topics whose fetches run a source topic through filter and transform
plugins (the real wasm built from plugins/), read by real clients.

Covers: a confluent-kafka consumer group reads a view and sees exactly the matching records
at their source offsets, commits, restarts and resumes; kcat and kafka-python read a view;
a source range filtered out entirely does not stall any of the three clients; a consumer at
the end of a view long-polls and wakes when a matching record arrives; transforms (redact)
and chains; compressed sources keep working for every codec; a view is listed in Metadata
with its source's partitions, answers ListOffsets like its source, refuses produces,
survives a restart and is deleted with its source (the CLI test deletes one); hostile filters (loop,
memory bomb, panic) under `fail` (the consumer sees an error and no unvetted record) and
`skip` (the batch is dropped and counted) while the broker keeps serving; a view read
read_committed never shows a source's aborted or open transactions; a view grows with its
source's partitions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from plugin_support import plugin_dir

from clients import Record, consume_partition, consumer, create_topic, produce_all, producer, topic_names, watermarks
from conftest import wait_until
from test_metrics import http, scrape

EU = {"field": "$.region", "op": "==", "value": "eu"}
DEADLINE_S = 60.0


def start(broker_factory, tmp_path, **settings):
    plugins = {
        "json-filter": "json-filter",
        "redact": "redact",
        "bad-filter": "hostile-bad-filter",
        "sample": "sample",
    }
    d = plugin_dir(tmp_path, plugins)
    return broker_factory(settings={"plugin.dir": str(d), **settings})


def create_view(broker, name: str, source: str, stages: list[tuple[str, dict]], on_error: str = "fail") -> dict:
    body = {
        "name": name,
        "source": source,
        "stages": [{"plugin": p, "params": params} for p, params in stages],
        "on_error": on_error,
    }
    status, text = http(broker, "POST", "/v1/views", body)
    assert status == 201, text
    return json.loads(text)


def order(i: int, region: str) -> bytes:
    return json.dumps({"id": i, "region": region, "card_number": f"4111-{i:04d}"}).encode()


def load_orders(broker, topic: str, partitions: int = 1, **config) -> dict[int, list[tuple[int, bytes]]]:
    """500 `us` orders (a range the eu view filters out entirely), then 300 mixed ones (every
    third `eu`), spread over the partitions; returns the eu records `(offset, value)` by
    partition, in offset order."""
    p = producer(broker.bootstrap, linger_ms=20, **config)
    expected: dict[int, list[tuple[int, bytes]]] = {i: [] for i in range(partitions)}
    records = [Record(None, order(i, "us")) for i in range(500)]
    records += [Record(None, order(500 + i, "eu" if i % 3 == 0 else "us")) for i in range(300)]
    for part in range(partitions):
        for d in produce_all(p, topic, records, partition=part):
            if b'"eu"' in d.record.value:
                expected[part].append((d.offset, d.record.value))
    for part in expected:
        expected[part].sort()
    return expected


def read_group(bootstrap: str, topic: str, group: str, count: int, **config) -> list:
    c = consumer(
        bootstrap,
        **{"group.id": group, "auto.offset.reset": "earliest", "enable.partition.eof": False, "enable.auto.offset.store": True, **config},
    )
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < count:
            assert time.monotonic() < deadline, f"read {len(got)} of {count} from {topic}"
            for m in c.consume(num_messages=500, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
        c.commit(asynchronous=False)
        # Nothing more arrives that the view should have dropped.
        extra = [m for m in c.consume(num_messages=100, timeout=1.0) if m.error() is None]
        assert not extra, [(m.partition(), m.offset()) for m in extra]
    finally:
        c.close()
    return got


def test_a_consumer_group_reads_a_view_commits_and_resumes(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 3)
    expected = load_orders(broker, topic_name, 3)
    view = f"{topic_name}-eu"
    created = create_view(broker, view, topic_name, [("json-filter", EU)])
    assert created["partition_count"] == 3 and created["stages"][0]["kind"] == "filter"

    got = read_group(broker.bootstrap, view, "view-readers", 300)
    by_partition = {p: sorted((m.offset(), m.value()) for m in got if m.partition() == p) for p in range(3)}
    assert by_partition == expected, "exactly the eu records, at their source offsets"

    # More records; the group resumes after its committed offsets.
    p = producer(broker.bootstrap)
    fresh = produce_all(p, topic_name, [Record(None, order(900 + i, "eu")) for i in range(5)], partition=1)
    again = read_group(broker.bootstrap, view, "view-readers", 5)
    assert sorted((m.partition(), m.offset()) for m in again) == sorted((1, d.offset) for d in fresh)
    c = consumer(broker.bootstrap, **{"group.id": "view-readers"})
    try:
        committed = c.committed([TopicPartition(view, i) for i in range(3)], timeout=30)
    finally:
        c.close()
    # Committed on the view's name: after the last record read (a filtered tail stays lag).
    last = {p: expected[p][-1][0] for p in range(3)} | {1: fresh[-1].offset}
    assert [tp.offset for tp in committed] == [last[0] + 1, last[1] + 1, last[2] + 1]


def test_kcat_and_kafka_python_read_a_view_past_filtered_ranges(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    expected = load_orders(broker, topic_name)[0]
    view = f"{topic_name}-eu"
    create_view(broker, view, topic_name, [("json-filter", EU)])

    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (tests/run installs it)"
    out = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-C", "-q", "-t", view, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n"],
        capture_output=True,
        timeout=DEADLINE_S,
        check=True,
    ).stdout.decode()
    assert [tuple(line.split(" ", 1)) for line in out.splitlines()] == [(str(o), v.decode()) for o, v in expected]

    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        tp = KpTopicPartition(view, 0)
        kp.assign([tp])
        kp.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(expected) and time.monotonic() < deadline:
            for records in kp.poll(timeout_ms=500).values():
                got.extend((r.offset, r.value) for r in records)
        assert got == expected
        assert kp.position(tp) == 800, "position past the filtered tail"
    finally:
        kp.close()


def test_a_view_of_only_filtered_records_lets_consumers_reach_the_end(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    p = producer(broker.bootstrap, linger_ms=20)
    produce_all(p, topic_name, [Record(None, order(i, "us")) for i in range(2000)])
    view = f"{topic_name}-eu"
    create_view(broker, view, topic_name, [("json-filter", EU)])
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(view, 0, 0)])
        wait_until(
            lambda: any(m.error() and m.error().code() == KafkaError._PARTITION_EOF for m in c.consume(10, 0.2)),
            DEADLINE_S,
            "partition EOF on a view whose records are all filtered out",
        )
        # Past the filtered range, and not past the next record.
        produce_all(p, topic_name, [Record(None, order(2000, "eu"))])
        got = []
        wait_until(lambda: got.extend(m for m in c.consume(10, 0.2) if not m.error()) or got, 30, "the eu record")
        assert [(m.offset(), m.value()) for m in got] == [(2000, order(2000, "eu"))]
    finally:
        c.close()


def test_a_consumer_at_the_end_of_a_view_wakes_for_a_matching_record(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    view = f"{topic_name}-eu"
    create_view(broker, view, topic_name, [("json-filter", EU)])
    c = consumer(broker.bootstrap, **{"fetch.wait.max.ms": 5000, "enable.partition.eof": False})
    p = producer(broker.bootstrap)
    try:
        c.assign([TopicPartition(view, 0, 0)])
        assert c.consume(10, 1.0) == [], "nothing to read yet"
        wait_until(lambda: broker_waiting_fetches(broker) >= 1, DEADLINE_S, "a parked fetch on the view")
        produce_all(p, topic_name, [Record(None, order(1, "us"))])
        produce_all(p, topic_name, [Record(None, order(2, "eu"))])
        got = []
        wait_until(lambda: got.extend(m for m in c.consume(10, 0.2) if not m.error()) or got, 10, "the eu record")
        assert [(m.offset(), m.value()) for m in got] == [(1, order(2, "eu"))]
    finally:
        c.close()


def broker_waiting_fetches(broker) -> float:
    return scrape(broker).get("sluice_fetches_waiting", 0)


def test_a_transform_view_masks_fields_and_chains_after_a_filter(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    expected = load_orders(broker, topic_name)[0]
    view = f"{topic_name}-eu-masked"
    created = create_view(
        broker, view, topic_name, [("json-filter", EU), ("redact", {"fields": "card_number"})]
    )
    assert [s["kind"] for s in created["stages"]] == ["filter", "transform"]
    got = read_group(broker.bootstrap, view, "masked", len(expected))
    assert [m.offset() for m in got] == [o for o, _ in expected]
    for m, (_, original) in zip(got, expected):
        want = json.loads(original)
        want["card_number"] = "****"
        assert json.loads(m.value()) == want


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_views_of_compressed_batches(broker_factory, tmp_path, topic_name, codec):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    expected = load_orders(broker, topic_name, compression_type=codec)[0]
    view = f"{topic_name}-eu"
    create_view(broker, view, topic_name, [("json-filter", EU), ("redact", {"fields": "card_number"})])
    got = read_group(broker.bootstrap, view, "compressed", len(expected))
    assert [(m.offset(), json.loads(m.value())["id"]) for m in got] == [
        (o, json.loads(v)["id"]) for o, v in expected
    ]


def test_a_view_is_a_read_only_topic_that_persists(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 2)
    load_orders(broker, topic_name, 2)
    view = f"{topic_name}-eu"
    create_view(broker, view, topic_name, [("json-filter", EU)], on_error="skip")
    meta = consumer(broker.bootstrap).list_topics(timeout=30).topics
    assert len(meta[view].partitions) == 2
    assert watermarks(broker.bootstrap, view, 1) == watermarks(broker.bootstrap, topic_name, 1) == (0, 800)

    # Produce to a view: refused, nothing appended anywhere.
    errors = []
    p = producer(broker.bootstrap)
    p.produce(view, b"nope", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_EXCEPTION, errors
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 800)

    # A topic cannot take the view's name.
    status, text = http(broker, "POST", "/v1/topics", {"name": view, "partitions": 1})
    assert status == 409, text

    broker.restart()
    status, text = http(broker, "GET", f"/v1/views/{view}")
    assert status == 200, text
    assert json.loads(text)["on_error"] == "skip"
    assert view in topic_names(broker.bootstrap)
    assert len(read_group(broker.bootstrap, view, "after-restart", 200)) == 200

    # Deleting the source deletes its view with it (docs/views.md).
    status, text = http(broker, "DELETE", f"/v1/topics/{topic_name}")
    assert status == 200 and json.loads(text)["views_deleted"] == [view], text
    assert http(broker, "GET", f"/v1/views/{view}")[0] == 404
    assert view not in topic_names(broker.bootstrap)


def test_creating_a_bad_view_names_the_problem(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    cases = [
        ({"name": "v1", "source": "nope", "stages": [{"plugin": "json-filter", "params": EU}]}, 404, "unknown source topic"),
        ({"name": "v2", "source": topic_name, "stages": [{"plugin": "missing"}]}, 404, "no plugin named `missing`"),
        ({"name": "v3", "source": topic_name, "stages": [{"plugin": "json-filter", "params": {"x": "1"}}]}, 400, "parameter"),
        ({"name": "v4", "source": topic_name, "stages": []}, 400, "no stages"),
        ({"name": "v5", "source": topic_name, "stages": [{"plugin": "sample", "params": {"n": "2"}}], "on_error": "drop"}, 400, "`fail` or `skip`"),
        ({"name": "bad name!", "source": topic_name, "stages": [{"plugin": "sample", "params": {"n": "2"}}]}, 400, "characters"),
    ]
    for body, status, needle in cases:
        got, text = http(broker, "POST", "/v1/views", body)
        assert (got, needle in text) == (status, True), (body, got, text)
    status, text = http(broker, "GET", "/v1/views")
    assert json.loads(text) == {"views": []}


def poll_errors_and_values(c, seconds: float) -> tuple[list, list]:
    errors, values = [], []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in c.consume(50, 0.2):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(m.error())
            else:
                values.append(m.value())
    return errors, values


@pytest.mark.parametrize("cue", [b"loop", b"bomb", b"panic"])
def test_hostile_filters_under_fail_and_skip(broker_factory, tmp_path, topic_name, cue):
    broker = start(broker_factory, tmp_path, **{"plugin.call.timeout.ms": "300", "plugin.memory.bytes.max": "33554432"})
    create_topic(broker.bootstrap, topic_name, 1)
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, [Record(None, b"before")])
    produce_all(p, topic_name, [Record(None, cue)])
    produce_all(p, topic_name, [Record(None, b"after")])
    create_view(broker, f"{topic_name}-fail", topic_name, [("bad-filter", {})], on_error="fail")
    create_view(broker, f"{topic_name}-skip", topic_name, [("bad-filter", {})], on_error="skip")

    # fail: the consumer sees the error, and never a record past the batch it failed on.
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(f"{topic_name}-fail", 0, 0)])
        errors, values = poll_errors_and_values(c, 3.0)
    finally:
        c.close()
    assert values == [b"before"]
    assert errors, "the consumer saw the view's failure"

    # skip: the failed batch is dropped and counted, the rest flows.
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(f"{topic_name}-skip", 0, 0)])
        errors, values = poll_errors_and_values(c, 3.0)
    finally:
        c.close()
    assert (errors, values) == ([], [b"before", b"after"])
    status, text = http(broker, "GET", f"/v1/views/{topic_name}-skip")
    assert json.loads(text)["stats"]["records_skipped"] == 1, text
    labels = f'view="{topic_name}-skip",source="{topic_name}"'
    samples = scrape(broker)
    assert samples[f"sluice_view_records_skipped_total{{{labels}}}"] == 1
    assert samples[f"sluice_view_batches_failed_total{{{labels}}}"] >= 1

    # The broker kept serving everything else.
    produce_all(p, topic_name, [Record(None, b"still")])
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 4)
    assert broker.is_running()


def sluice_view(broker, *args: str) -> subprocess.CompletedProcess:
    from conftest import sluice_bin

    return subprocess.run(
        [sluice_bin(), "view", *args, "--admin-url", broker.admin_url],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )


def test_the_view_cli_creates_a_chain_lists_describes_and_deletes(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    expected = load_orders(broker, topic_name)[0]
    view = f"{topic_name}-eu-masked"
    made = sluice_view(
        broker, "create", view, "--from", topic_name,
        "--filter", "json-filter", "--param", "field=$.region", "--param", "op===", "--param", "value=eu",
        "--transform", "redact", "--param", "fields=card_number",
        "--on-error", "skip", "--output", "json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    stages = json.loads(made.stdout)["stages"]
    assert [(s["plugin"], s["kind"], s["params"]) for s in stages] == [
        ("json-filter", "filter", EU),
        ("redact", "transform", {"fields": "card_number"}),
    ]
    listed = sluice_view(broker, "list", "--output", "json")
    assert [v["name"] for v in json.loads(listed.stdout)["views"]] == [view], listed.stderr
    text = sluice_view(broker, "list").stdout
    assert f"{view} <- {topic_name}: json-filter(" in text and "redact(fields=card_number)" in text, text

    got = read_group(broker.bootstrap, view, "cli-view", len(expected))
    assert [json.loads(m.value())["card_number"] for m in got] == ["****"] * len(expected)
    described = json.loads(sluice_view(broker, "describe", view, "--output", "json").stdout)
    assert described["stats"]["records_out"] == len(expected)
    assert described["stats"]["records_in"] >= 800
    samples = scrape(broker)
    assert samples[f'sluice_view_records_out_total{{view="{view}",source="{topic_name}"}}'] == len(expected)

    wrong = sluice_view(broker, "create", "v2", "--from", topic_name, "--filter", "redact", "--param", "fields=x")
    assert wrong.returncode == 1 and "is a transform, not a filter" in wrong.stderr, wrong.stderr
    orphan = sluice_view(broker, "create", "v3", "--from", topic_name, "--param", "x=1")
    assert orphan.returncode == 1 and "at least one stage" in orphan.stderr, orphan.stderr

    deleted = sluice_view(broker, "delete", view)
    assert deleted.returncode == 0 and f"deleted view {view}" in deleted.stdout
    missing = sluice_view(broker, "describe", view)
    assert missing.returncode == 1 and "unknown view" in missing.stderr


def test_consume_filter_runs_a_plugin_for_one_consumer(broker_factory, tmp_path, topic_name):
    from conftest import sluice_bin

    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    expected = load_orders(broker, topic_name)[0]
    out = subprocess.run(
        [
            sluice_bin(), "consume", topic_name, "-e", "-f", "%o %s\\n",
            "--filter", "json-filter", "--param", "field=$.region", "--param", "op===", "--param", "value=eu",
            "--transform", "redact", "--param", "fields=card_number",
            "--brokers", broker.bootstrap, "--admin-url", broker.admin_url,
        ],
        capture_output=True, text=True, timeout=DEADLINE_S,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [int(line.split(" ", 1)[0]) for line in lines] == [o for o, _ in expected]
    assert all(json.loads(line.split(" ", 1)[1])["card_number"] == "****" for line in lines)
    # The ephemeral view is gone, and it never showed in the topic list.
    assert json.loads(http(broker, "GET", "/v1/views")[1]) == {"views": []}
    assert topic_names(broker.bootstrap) == {topic_name}


def test_a_scaffolded_filter_is_built_deployed_and_read_through_a_view(broker, topic_name, tmp_path):
    """The plugin author's path: `sluice plugin new` -> edit -> `plugin build` -> `plugin
    deploy` -> `view create` -> read. The guest build shares plugins/target with tests/run's
    build of plugins/, so the wasm32 std is not built again."""
    from conftest import REPO_ROOT, sluice_bin

    def sluice(*args: str) -> subprocess.CompletedProcess:
        run = subprocess.run([sluice_bin(), *args], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
        assert run.returncode == 0, run.stderr
        return run

    crate = tmp_path / "keep-keyed"
    sluice("plugin", "new", str(crate), "--kind", "filter", "--sdk", str(REPO_ROOT / "sdk"))
    lib = crate / "src" / "lib.rs"
    lib.write_text(lib.read_text().replace("record.key().is_some()", 'record.key() == Some(b"keep")'))
    built = json.loads(
        sluice("plugin", "build", str(crate), "--target-dir", str(REPO_ROOT / "plugins" / "target"), "--output", "json").stdout
    )["built"]
    assert [p.rsplit("/", 1)[1] for p in built] == ["keep-keyed.wasm"], built
    admin = ["--admin-url", broker.admin_url]
    sluice("plugin", "deploy", built[0], *admin)
    create_topic(broker.bootstrap, topic_name, 1)
    produce_all(producer(broker.bootstrap), topic_name, [Record(k, b"v") for k in (b"keep", b"drop", None, b"keep")])
    sluice("view", "create", f"{topic_name}-kept", "--from", topic_name, "--filter", "keep-keyed", *admin)
    got = read_group(broker.bootstrap, f"{topic_name}-kept", "scaffold", 2)
    assert [(m.offset(), m.key()) for m in got] == [(0, b"keep"), (3, b"keep")]


def drain_view(bootstrap: str, view: str, isolation: str) -> list[bytes]:
    """Every record of the view's partition 0 until the consumer reports its end."""
    c = consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(view, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return out
            out.append(msg.value())
        raise AssertionError(f"no end of {view} within {DEADLINE_S}s ({isolation})")
    finally:
        c.close()


def test_a_view_read_committed_never_shows_aborted_or_open_transactions(broker_factory, tmp_path, topic_name):
    """A transactional producer commits, aborts and leaves a transaction open in the source;
    a read_committed consumer of the view sees only committed eu records (the filter never
    sees the aborted ones), a read_uncommitted one sees every eu record."""
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name)
    view = f"{topic_name}-eu"
    create_view(broker, view, topic_name, [("json-filter", EU)])
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-tx", "linger.ms": 5})
    p.init_transactions(30)

    def txn(first: int, end: str):
        p.begin_transaction()
        for i in range(first, first + 6):
            p.produce(topic_name, value=order(i, "eu" if i % 2 == 0 else "us"), partition=0)
        assert p.flush(30) == 0
        if end == "commit":
            p.commit_transaction(30)
        elif end == "abort":
            p.abort_transaction(30)

    txn(0, "commit")
    txn(100, "abort")
    txn(200, "commit")
    txn(300, "open")
    committed = [order(i, "eu") for i in (0, 2, 4, 200, 202, 204)]
    everything = committed[:3] + [order(i, "eu") for i in (100, 102, 104)] + committed[3:]
    everything += [order(i, "eu") for i in (300, 302, 304)]
    assert drain_view(broker.bootstrap, view, "read_committed") == committed
    assert drain_view(broker.bootstrap, view, "read_uncommitted") == everything
    p.commit_transaction(30)
    wait_until(
        lambda: drain_view(broker.bootstrap, view, "read_committed") == committed + everything[-3:],
        DEADLINE_S,
        "the committed open transaction in the view",
    )


def test_a_view_follows_its_source_when_partitions_are_added(broker_factory, tmp_path, topic_name):
    from confluent_kafka.admin import NewPartitions

    from clients import admin, admin_op

    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, 1)
    view = f"{topic_name}-eu"
    create_view(broker, view, topic_name, [("json-filter", EU)])
    grown = admin_op(broker.bootstrap, "create_partitions", [NewPartitions(topic_name, 2)], operation_timeout=30, request_timeout=30)
    assert grown == {topic_name: None}, grown
    assert len(admin(broker.bootstrap).list_topics(view, timeout=30).topics[view].partitions) == 2
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, [Record(None, order(1, "us")), Record(None, order(2, "eu"))], partition=1)
    [m] = consume_partition(broker.bootstrap, view, 1, 1)
    assert (m.offset(), m.value()) == (1, order(2, "eu"))
