"""Materialized transforms (docs/transforms.md): a source topic run through a wasm plugin
inside the broker into output topics, exactly once, checked with real clients.

Covers: confluent-kafka produces JSON orders keyed by customer; `sluice transform deploy`
splits them with plugins/split-transform into orders-eu and orders-us plus a dead-letter
topic for unparseable ones, and read_committed consumers find every order exactly once in
the right output, keys kept, per-customer order kept, no routing header; the broker
SIGKILLed several times in the middle of a stream while an idempotent producer writes, and
still every source record exactly once in the outputs (read_committed); a poison record
(plugins/hostile/poison-transform traps on it) under `stop`, `skip` and `dead-letter`, the
failing records isolated by bisecting; pause and resume (kept across a restart), lag
reported and reaching zero, replay with `restart --from-offset`; refusals (an output that is
the source, an unknown plugin, refused parameters, 9 outputs, deleting a topic in use,
clients writing the transform's reserved group); the same plugin as a view shows exactly the
first output.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaAdminClient
from plugin_support import crc32_partition, murmur2_partition, plugin_dir, replace_file, wasm
from transform_support import caught_up, cli, command, deploy, describe, read_all

from clients import consumer, create_topic
from conftest import wait_until
from test_metrics import http, scrape

PLUGINS = {
    "split-transform": "split-transform",
    "poison": "hostile-poison-transform",
    "json-validator": "json-validator",
    "crc32": "crc32",
}
SPLIT = {"field": "$.region", "value": "eu", "unparseable": "dead-letter"}


def start(broker_factory, tmp_path, **settings):
    return broker_factory(settings={"plugin.dir": str(plugin_dir(tmp_path, PLUGINS))} | settings)


def order_value(i: int) -> bytes:
    """Order `i`: eu, us, or (every 20th) not JSON at all."""
    if i % 20 == 7:
        return f"garbage-{i}".encode()
    region = "eu" if i % 5 < 3 else "us"
    return json.dumps({"id": i, "region": region, "total": i % 97}).encode()


def expected_output(value: bytes) -> str:
    if value.startswith(b"garbage"):
        return "orders-dlq"
    return "orders-eu" if json.loads(value)["region"] == "eu" else "orders-us"


def produce_orders(bootstrap: str, first: int, count: int, **config) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **config})
    for i in range(first, first + count):
        p.produce("orders", key=f"customer-{i % 101}".encode(), value=order_value(i))
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def create_order_topics(bootstrap: str, source_partitions: int = 6) -> None:
    create_topic(bootstrap, "orders", source_partitions)
    create_topic(bootstrap, "orders-eu", 3)
    create_topic(bootstrap, "orders-us", 3)
    create_topic(bootstrap, "orders-dlq", 1)


def outputs(bootstrap: str) -> dict[str, list]:
    return {t: read_all(bootstrap, t, n) for t, n in (("orders-eu", 3), ("orders-us", 3), ("orders-dlq", 1))}


def check_exactly_once(bootstrap: str, source_values: list[bytes]) -> None:
    """Every source record (a multiset of values: a retried produce may store one twice)
    appears as many times in its output, under read_committed; keys and order per customer
    kept; no routing header."""
    got = outputs(bootstrap)
    want = Counter((expected_output(v), v) for v in source_values)
    have = Counter((t, m.value()) for t, ms in got.items() for m in ms)
    missing, extra = want - have, have - want
    assert not missing and not extra, f"missing {list(missing)[:5]} extra {list(extra)[:5]}"
    for topic, messages in got.items():
        per_customer = defaultdict(list)
        for m in messages:
            headers = dict(m.headers() or [])
            assert "sluice.output" not in headers, "the routing header never reaches a consumer"
            i = int(m.value().split(b"-")[1]) if topic == "orders-dlq" else json.loads(m.value())["id"]
            assert m.key() == f"customer-{i % 101}".encode(), "the key is kept"
            per_customer[(m.partition(), m.key())].append(i)
            if topic == "orders-dlq":
                assert headers["split.reason"].startswith(b"not JSON"), headers
        for ids in per_customer.values():
            assert ids == sorted(ids), "a customer's orders stay in order in each output partition"


def source_values(bootstrap: str) -> list[bytes]:
    return [m.value() for m in read_all(bootstrap, "orders", 6)]


def test_split_orders_exactly_once_with_a_dead_letter_topic(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    create_order_topics(broker.bootstrap)
    produce_orders(broker.bootstrap, 0, 3000)
    deployed = cli(
        broker,
        "deploy", "orders-split", "--from", "orders", "--plugin", "split-transform",
        "--to", "orders-eu", "--to", "orders-us", "--to", "orders-dlq",
        "--param", "field=$.region", "--param", "value=eu", "--param", "unparseable=dead-letter",
    )  # fmt: skip
    assert deployed.returncode == 0, deployed.stderr
    assert "deployed transform orders-split" in deployed.stdout
    produce_orders(broker.bootstrap, 3000, 2000)
    t = caught_up(broker, "orders-split")
    check_exactly_once(broker.bootstrap, source_values(broker.bootstrap))
    assert sum(p["records_in"] for p in t["partitions"]) == 5000
    out = Counter()
    for p in t["partitions"]:
        out.update(p["records_out"])
    assert out == Counter(expected_output(order_value(i)) for i in range(5000))
    samples = scrape(broker)
    for output, n in out.items():
        assert samples[f'sluice_transform_records_out_total{{transform="orders-split",output="{output}"}}'] == n
    lags = {k: v for k, v in samples.items() if k.startswith("sluice_transform_lag_records{")}
    assert len(lags) == 6 and set(lags.values()) == {0}, lags
    assert samples['sluice_transform_partitions{transform="orders-split",state="running"}'] == 6
    described = json.loads(cli(broker, "describe", "orders-split", "--output", "json").stdout)
    assert described["lag"] == 0 and described["group"] == "__sluice_transform/orders-split"
    text = cli(broker, "describe", "orders-split").stdout
    assert "orders-split: orders -> split-transform -> orders-eu, orders-us, orders-dlq (running, lag 0)" in text
    # The positions are the group's committed offsets: what a read_committed reader of the
    # source would resume from (the log end here).
    c = consumer(broker.bootstrap, **{"group.id": "__sluice_transform/orders-split"})
    committed = c.committed([TopicPartition("orders", p) for p in range(6)], timeout=30)
    c.close()
    assert [tp.offset for tp in committed] == [p["position"] for p in t["partitions"]]
    assert [p["position"] for p in t["partitions"]] == [p["last_stable_offset"] for p in t["partitions"]]


class SteadyProducer(threading.Thread):
    """An idempotent producer writing orders until stopped; broker restarts are its problem."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop_flag = threading.Event()
        self.errors: list[str] = []
        self.sent = 0

    def run(self):
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "reconnect.backoff.max.ms": 300,
                "message.timeout.ms": 120_000,
            }
        )

        def report(err, _msg):
            if err is not None:
                self.errors.append(str(err))

        i = 100_000
        while not self.stop_flag.is_set():
            for _ in range(50):
                p.produce("orders", key=f"customer-{i % 101}".encode(), value=order_value(i), on_delivery=report)
                i += 1
            p.poll(0.02)
        p.flush(120)
        self.sent = i - 100_000


def test_exactly_once_across_kill_9_in_the_middle_of_the_stream(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    port = broker.port
    create_order_topics(broker.bootstrap)
    deploy(
        broker,
        {
            "name": "orders-split",
            "source": "orders",
            "plugin": "split-transform",
            "outputs": ["orders-eu", "orders-us", "orders-dlq"],
            "params": SPLIT,
        },
    )
    producer = SteadyProducer(broker.bootstrap)
    producer.start()
    rng = random.Random(18)
    for _ in range(3):
        time.sleep(rng.uniform(1.0, 3.0))
        broker.kill()
        broker.listen = f"127.0.0.1:{port}"
        broker.start()
    time.sleep(1.0)
    producer.stop_flag.set()
    producer.join(180)
    assert not producer.is_alive()
    assert producer.sent > 500, producer.sent
    t = caught_up(broker, "orders-split", timeout_s=180)
    values = source_values(broker.bootstrap)
    assert len(values) >= producer.sent - len(producer.errors)
    check_exactly_once(broker.bootstrap, values)
    # Aborted attempts of the killed incarnations stay in the logs, as in Kafka: a
    # read_uncommitted reader may see them (reported, not failed).
    uncommitted = sum(len(read_all(broker.bootstrap, t_, n, "read_uncommitted")) for t_, n in (("orders-eu", 3), ("orders-us", 3), ("orders-dlq", 1)))
    print(f"kill -9 x3: {len(values)} source records, {uncommitted} output records read_uncommitted, aborts {sum(p['aborts'] for p in t['partitions'])}")


POISON_AT = (37, 150, 151)


def run_poison(broker, name: str, on_error: str, dead_letter: str | None = None) -> dict:
    create_topic(broker.bootstrap, f"{name}-in", 1)
    create_topic(broker.bootstrap, f"{name}-out", 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for i in range(200):
        p.produce(f"{name}-in", key=str(i).encode(), value=(b"poison-%d" % i) if i in POISON_AT else b"ok-%d" % i)
    assert p.flush(30) == 0
    body = {"name": name, "source": f"{name}-in", "plugin": "poison", "outputs": [f"{name}-out"], "on_error": on_error}
    if dead_letter:
        body["dead_letter_topic"] = dead_letter
    deploy(broker, body)
    return body


def test_a_poison_record_under_each_failure_policy(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    # stop: the output holds everything before the first poison record; the partition
    # reports the failure at its offset and stays there.
    run_poison(broker, "stopper", "stop")

    def failed():
        p = describe(broker, "stopper")["partitions"][0]
        return p if p["state"] == "failed" else None

    p = wait_until(failed, 60, "the stop policy to fail the partition")
    assert p["position"] == POISON_AT[0] and p["last_error"]["kind"] == "trap", p
    assert [m.value() for m in read_all(broker.bootstrap, "stopper-out", 1)] == [b"ok-%d" % i for i in range(POISON_AT[0])]
    # resume retries a failed partition (it fails again on the same record).
    first_at = p["last_error"]["at_ms"]
    command(broker, "stopper", "resume")
    wait_until(lambda: failed() and failed()["last_error"]["at_ms"] > first_at, 60, "resume to retry the failed partition")
    # skip: exactly the poison records are missing, and counted.
    run_poison(broker, "skipper", "skip")
    t = caught_up(broker, "skipper")
    assert t["partitions"][0]["records_skipped"] == len(POISON_AT)
    want = [b"ok-%d" % i for i in range(200) if i not in POISON_AT]
    assert [m.value() for m in read_all(broker.bootstrap, "skipper-out", 1)] == want
    # dead-letter: exactly the poison records, with why, in the same transactions.
    create_topic(broker.bootstrap, "poison-dlq", 1)
    run_poison(broker, "dlq", "dead-letter", "poison-dlq")
    t = caught_up(broker, "dlq")
    assert t["partitions"][0]["records_dead_lettered"] == len(POISON_AT)
    assert [m.value() for m in read_all(broker.bootstrap, "dlq-out", 1)] == want
    dead = read_all(broker.bootstrap, "poison-dlq", 1)
    assert [m.value() for m in dead] == [b"poison-%d" % i for i in POISON_AT]
    for m, offset in zip(dead, POISON_AT):
        h = {k: v.decode() for k, v in m.headers()}
        assert (h["sluice.dlq.error"], h["sluice.dlq.transform"], h["sluice.dlq.topic"]) == ("trap", "dlq", "dlq-in")
        assert (h["sluice.dlq.partition"], h["sluice.dlq.offset"]) == ("0", str(offset))
        assert "poison" in h["sluice.dlq.reason"] and h["sluice.dlq.plugin"].startswith("poison@")
        assert m.key() == str(offset).encode()


def test_a_plugin_that_never_returns_stalls_neither_producers_nor_other_transforms(broker_factory, tmp_path):
    """Records on which the plugin spins until the call deadline (plugin.call.timeout.ms)
    are bisected out and skipped, while a healthy transform on another topic, sharing the
    broker's plugin-call slot (a fair queue; one slot, transform.calls.concurrent.max = 1),
    keeps up and producers keep producing."""
    broker = start(broker_factory, tmp_path, **{"transform.calls.concurrent.max": "1"})
    spinning = (5, 90, 91, 160)
    create_topic(broker.bootstrap, "spin-in", 2)
    create_topic(broker.bootstrap, "spin-out", 1)
    create_order_topics(broker.bootstrap, source_partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(200):
        p.produce("spin-in", partition=i % 2, value=(b"spin-%d" % i) if i in spinning else b"ok-%d" % i)
    assert p.flush(30) == 0
    deploy(broker, {"name": "slow", "source": "spin-in", "plugin": "poison", "outputs": ["spin-out"], "on_error": "skip"})
    deploy(broker, {"name": "split", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-us", "orders-dlq"], "params": SPLIT})
    produce_orders(broker.bootstrap, 0, 2000)
    caught_up(broker, "split")
    check_exactly_once(broker.bootstrap, source_values_of(broker, 2))
    t = caught_up(broker, "slow")
    assert sum(p["records_skipped"] for p in t["partitions"]) == len(spinning)
    assert {p["last_error"]["kind"] for p in t["partitions"] if p["last_error"]} <= {"timeout"}
    assert sorted(m.value() for m in read_all(broker.bootstrap, "spin-out", 1)) == sorted(b"ok-%d" % i for i in range(200) if i not in spinning)


def total_out(t: dict) -> int:
    return sum(sum(p["records_out"].values()) for p in t["partitions"])


def test_pause_resume_lag_and_replay(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    create_order_topics(broker.bootstrap, source_partitions=2)
    produce_orders(broker.bootstrap, 0, 500)
    deploy(broker, {"name": "split", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-us", "orders-dlq"], "params": SPLIT})
    caught_up(broker, "split")
    eu = sum(expected_output(order_value(i)) == "orders-eu" for i in range(500))
    assert len(read_all(broker.bootstrap, "orders-eu", 3)) == eu
    paused = cli(broker, "pause", "split")
    assert paused.returncode == 0, paused.stderr
    produce_orders(broker.bootstrap, 500, 300)
    t = wait_until(lambda: (d := describe(broker, "split"))["lag"] == 300 and d, 30, "the lag to show the paused records")
    assert t["state"] == "paused" and all(p["state"] == "paused" for p in t["partitions"])
    time.sleep(1.0)
    assert sum(len(read_all(broker.bootstrap, o, n)) for o, n in (("orders-eu", 3), ("orders-us", 3), ("orders-dlq", 1))) == 500
    # Paused survives a restart.
    broker.restart()
    def all_paused():
        d = describe(broker, "split")
        return d if all(p["state"] == "paused" for p in d["partitions"]) else None

    t = wait_until(all_paused, 30, "paused after a restart")
    assert t["lag"] == 300
    assert cli(broker, "resume", "split").returncode == 0
    caught_up(broker, "split")
    check_exactly_once(broker.bootstrap, source_values_of(broker, 2))
    # Replay from the start writes every record again (a new run).
    replayed = cli(broker, "restart", "split", "--from-offset", "earliest")
    assert replayed.returncode == 0, replayed.stderr
    t = caught_up(broker, "split")
    assert t["generation"] == 1 and total_out(t) == 800
    assert sum(len(read_all(broker.bootstrap, o, n)) for o, n in (("orders-eu", 3), ("orders-us", 3), ("orders-dlq", 1))) == 1600
    # Each committed position names the generation that committed it (read with kafka-python:
    # confluent-kafka reads a metadata string without a NUL terminator past its end).
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    committed = admin.list_consumer_group_offsets("__sluice_transform/split")
    admin.close()
    assert sorted((tp.partition, c.offset, c.metadata) for tp, c in committed.items()) == [(i, p["log_end_offset"], "generation=1") for i, p in enumerate(t["partitions"])]
    # A crash right after a restart's spec write, before the group's offsets were dropped:
    # the spec says generation 2 from the start, the group still holds generation 1's
    # positions at the end. They are not taken for generation 2's: the replay happens.
    broker.stop()
    spec_path = broker.data_dir / "transforms" / "split.json"
    spec = json.loads(spec_path.read_text())
    spec.update(generation=2, start_offsets=[0, 0], from_offset="earliest")
    spec_path.write_text(json.dumps(spec))
    broker.start()
    t = caught_up(broker, "split")
    assert t["generation"] == 2 and total_out(t) == 800
    # From the end: nothing more.
    command(broker, "split", "restart", {"from_offset": "latest"})
    t = caught_up(broker, "split")
    assert total_out(t) == 0 and t["start_offsets"] == [p["log_end_offset"] for p in t["partitions"]]


def source_values_of(broker, partitions: int) -> list[bytes]:
    return [m.value() for m in read_all(broker.bootstrap, "orders", partitions)]


def test_refusals(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    create_order_topics(broker.bootstrap, source_partitions=1)
    base = {"name": "t", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-us"], "params": SPLIT | {"unparseable": "second"}}

    def refused(body: dict, status: int, *words: str):
        got, text = http(broker, "POST", "/v1/transforms", body)
        assert got == status, (body, got, text)
        for w in words:
            assert w in text, (w, text)

    refused(base | {"outputs": ["orders"]}, 400, "source")
    refused(base | {"plugin": "nope"}, 404, "nope")
    refused(base | {"params": {"value": "eu"}}, 400, "field")
    refused(base | {"outputs": [f"o{i}" for i in range(9)]}, 400, "TRANSFORM_OUTPUTS_MAX")
    refused(base | {"outputs": ["missing"]}, 404, "missing")
    create_topic(broker.bootstrap, "validated", 1, {"sluice.validator": "json-validator", "sluice.validator.params": "required=$.id"})
    refused(base | {"on_error": "dead-letter", "dead_letter_topic": "validated"}, 400, "sluice.validator", "dead letters")
    deploy(broker, base)
    refused(base, 409, "exists")
    # A transform writing back into its own chain would loop records forever.
    refused(
        base | {"name": "back", "source": "orders-us", "outputs": ["orders"], "params": SPLIT},
        400,
        "cycle",
        "back -> t -> back",
    )
    # Clients may read the transform's group but never write it.
    c = consumer(broker.bootstrap, **{"group.id": "__sluice_transform/t"})
    c.assign([TopicPartition("orders", 0, 0)])
    with pytest.raises(KafkaException) as e:
        c.commit(offsets=[TopicPartition("orders", 0, 5)], asynchronous=False)
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    c.close()
    # Deleting a topic the transform writes fails it, naming the topic (docs/transforms.md).
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert admin.delete_topics(["orders-eu"], operation_timeout=30)["orders-eu"].result() is None
    failed = wait_until(lambda: (t := describe(broker, "t"))["state"] == "failed" and t, 30, "t to fail")
    assert '"orders-eu"' in failed["reason"] and "was deleted" in failed["reason"], failed
    status, _ = http(broker, "DELETE", "/v1/transforms/t")
    assert status == 200


def test_outputs_are_validated_and_refused_records_follow_the_failure_policy(broker_factory, tmp_path):
    """An output topic's validator (sluice.validator) runs on what the transform writes there,
    as on a produce: an order whose output it refuses is isolated and dead-lettered with the
    validator's reason, the same order routed to an output without a validator is written,
    and a validator set on an output while the transform runs applies from then on."""
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, "orders", 2)
    create_topic(broker.bootstrap, "orders-eu", 1, {"sluice.validator": "json-validator", "sluice.validator.params": "types=$.total:number"})
    create_topic(broker.bootstrap, "orders-us", 1)
    create_topic(broker.bootstrap, "refused", 1)

    def order(i: int) -> bytes:
        total = "n/a" if i % 10 == 3 else i  # a string total: the eu validator refuses it
        return json.dumps({"id": i, "region": "eu" if i % 2 else "us", "total": total}).encode()

    def produce(first: int, count: int):
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for i in range(first, first + count):
            p.produce("orders", key=b"c-%d" % i, value=order(i))
        assert p.flush(30) == 0

    produce(0, 200)
    body = {"name": "checked", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-us"], "params": {"field": "$.region", "value": "eu"}, "on_error": "dead-letter", "dead_letter_topic": "refused"}
    deploy(broker, body)
    t = caught_up(broker, "checked")
    bad_eu = [i for i in range(200) if i % 2 and i % 10 == 3]
    assert sum(p["records_dead_lettered"] for p in t["partitions"]) == len(bad_eu)
    assert sorted(json.loads(m.value())["id"] for m in read_all(broker.bootstrap, "orders-eu", 1)) == [i for i in range(200) if i % 2 and i not in bad_eu]
    assert sorted(json.loads(m.value())["id"] for m in read_all(broker.bootstrap, "orders-us", 1)) == [i for i in range(200) if not i % 2]
    dead = read_all(broker.bootstrap, "refused", 1)
    assert sorted(json.loads(m.value())["id"] for m in dead) == bad_eu
    for m in dead:
        h = {k: v.decode() for k, v in m.headers()}
        assert h["sluice.dlq.error"] == "validator", h
        assert "orders-eu" in h["sluice.dlq.reason"] and "json-validator" in h["sluice.dlq.reason"] and "$.total" in h["sluice.dlq.reason"], h

    # A validator set on orders-us now applies to the next records.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (("sluice.validator", "json-validator"), ("sluice.validator.params", "required=$.vip"))]
    resource = ConfigResource(ResourceType.TOPIC, "orders-us", incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    produce(200, 10)
    t = wait_until(lambda: (d := caught_up(broker, "checked")) and sum(p["records_in"] for p in d["partitions"]) == 210 and d, 60, "the new records")
    assert sum(p["records_dead_lettered"] for p in t["partitions"]) == len(bad_eu) + 5 + 1  # 5 us (no vip), 1 eu (203)
    assert len(read_all(broker.bootstrap, "orders-us", 1)) == 100


def test_a_new_plugin_version_takes_over_at_a_committed_position(broker_factory, tmp_path):
    """The plugin file is replaced in the plugin dir (hot reload) while a producer writes:
    version 1 keeps each record once, version 2 (hostile-duplicate-transform) twice. Every
    source record is in the output once or twice, and in each source partition the records
    kept once all come before those kept twice: one switch, at a position, with nothing
    lost, repeated or mixed."""
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, "orders", 2)
    create_topic(broker.bootstrap, "copies", 1)
    deploy(broker, {"name": "copy", "source": "orders", "plugin": "poison", "outputs": ["copies"], "partitioning": "source"})
    producer = SteadyProducer(broker.bootstrap)
    producer.start()
    time.sleep(1.5)
    old_sha = describe(broker, "copy")["partitions"][0]["plugin_sha256"]
    replace_file(tmp_path / "plugins" / "poison.wasm", wasm("hostile-duplicate-transform"))
    time.sleep(1.5)
    producer.stop_flag.set()
    producer.join(120)
    t = caught_up(broker, "copy")
    new_sha = {p["plugin_sha256"] for p in t["partitions"]}
    assert old_sha and old_sha not in new_sha, (old_sha, new_sha)
    assert sum(p["aborts"] for p in t["partitions"]) == 0, "a reload commits, it does not abort"
    copies = Counter(m.value() for m in read_all(broker.bootstrap, "copies", 1))
    for partition in range(2):
        source = [m.value() for m in read_all(broker.bootstrap, "orders", 2) if m.partition() == partition]
        counts = [copies[v] for v in source]
        assert set(counts) <= {1, 2} and 2 in counts, Counter(counts)
        switch = counts.index(2) if 2 in counts else len(counts)
        assert counts == [1] * switch + [2] * (len(counts) - switch), f"partition {partition} mixed versions"


def test_output_placement_follows_a_partitioner_plugin(broker_factory, tmp_path):
    """Keyed output goes where the Java client puts it (murmur2) by default; with
    `--partitioner crc32` where that plugin says; and an output topic's own
    `sluice.partitioner` is honoured, so every producer to it places records the same way."""
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, "orders", 2)
    create_topic(broker.bootstrap, "by-key", 3)
    create_topic(broker.bootstrap, "by-plugin", 3)
    create_topic(broker.bootstrap, "by-topic", 3, {"sluice.partitioner": "crc32"})
    produce_orders(broker.bootstrap, 0, 300)
    base = {"source": "orders", "plugin": "poison"}
    deploy(broker, base | {"name": "a", "outputs": ["by-key"]})
    done = cli(broker, "deploy", "b", "--from", "orders", "--plugin", "poison", "--to", "by-plugin", "--partitioner", "crc32")
    assert done.returncode == 0, done.stderr
    deploy(broker, base | {"name": "c", "outputs": ["by-topic"]})
    for name in "abc":
        caught_up(broker, name)
    for topic, place in (("by-key", murmur2_partition), ("by-plugin", crc32_partition), ("by-topic", crc32_partition)):
        got = read_all(broker.bootstrap, topic, 3)
        assert len(got) == 300, topic
        wrong = [(m.key(), m.partition()) for m in got if m.partition() != place(m.key(), 3)]
        assert not wrong, (topic, wrong[:5])
    assert describe(broker, "b")["partitioner"] == "crc32"


def test_partitions_added_to_the_source_get_runners(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    create_order_topics(broker.bootstrap, source_partitions=1)
    deploy(broker, {"name": "split", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-us", "orders-dlq"], "params": SPLIT})
    produce_orders(broker.bootstrap, 0, 100)
    caught_up(broker, "split")
    from confluent_kafka.admin import NewPartitions

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions("orders", 3)])["orders"].result(30)
    wait_until(lambda: len(describe(broker, "split")["partitions"]) == 3, 30, "runners for the new partitions")
    produce_orders(broker.bootstrap, 100, 300)
    t = caught_up(broker, "split")
    assert [p["log_end_offset"] > 0 for p in t["partitions"]] == [True, True, True]
    check_exactly_once(broker.bootstrap, source_values_of(broker, 3))


def test_the_same_plugin_as_a_view_shows_the_first_output(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    create_order_topics(broker.bootstrap, source_partitions=1)
    create_topic(broker.bootstrap, "orders-rest", 1)
    produce_orders(broker.bootstrap, 0, 400)
    deploy(broker, {"name": "split", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-rest"], "params": SPLIT | {"unparseable": "second"}, "partitioning": "source"})
    caught_up(broker, "split")
    status, text = http(broker, "POST", "/v1/views", {"name": "orders-eu-view", "source": "orders", "stages": [{"plugin": "split-transform", "params": SPLIT | {"unparseable": "second"}}]})
    assert status == 201, text
    view = read_all(broker.bootstrap, "orders-eu-view", 1)
    materialized = read_all(broker.bootstrap, "orders-eu", 3)
    assert [m.value() for m in view] == [m.value() for m in materialized if m.partition() == 0]
    assert all("sluice.output" not in dict(m.headers() or []) for m in view)
