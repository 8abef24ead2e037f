"""Three (and five) real brokers as one cluster, as a user runs them: every node formatted
for one cluster id and listed in `controller.quorum.voters`, clients bootstrapping from one
node only. Topics spread their partitions over the brokers, clients follow each partition
to its leader, groups to their coordinator; a broker that dies makes its partitions
unavailable (replication factor 1) until it returns with its data; the active controller
can die in the middle of a storm of topic creations and every acknowledged one is on
every broker afterwards, created once.
"""

from __future__ import annotations

import collections
import json
import urllib.error
import urllib.request
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from cluster_support import cluster_factory  # noqa: F401 (fixture)
from conftest import wait_until
from kafka_wire import Fields, KafkaConnection, record_batch

NOT_LEADER_OR_FOLLOWER = 6


def produce_all(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors = []
    for i in range(count):
        producer.produce(
            topic, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=lambda e, m: e and errors.append(e)
        )
    assert producer.flush(60) == 0
    assert not errors, errors


def consume_all(bootstrap: str, topic: str, count: int, group: str) -> list[tuple[bytes, bytes]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    seen: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen.append((msg.key(), msg.value()))
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(6)], timeout=30)
        assert sum(tp.offset for tp in committed if tp.offset > 0) == count, committed
    finally:
        consumer.close()
    return seen


def test_three_brokers_spread_a_topic_and_clients_follow_its_leaders(cluster_factory, topic_name):
    cluster = cluster_factory(3)
    meta = cluster.metadata(via=2)
    assert {(b["id"], b["name"]) for b in meta["brokers"]} == {
        (k, f"127.0.0.{k}:{cluster.kafka_port}") for k in (1, 2, 3)
    }
    assert meta["controllerid"] in (1, 2, 3)
    cluster.sluice("topic", "create", topic_name, "-p", "6", via=3)
    # Every broker answers the same placement at once (read-your-writes on the creating
    # broker, the image on the others): each broker leads two of the six partitions.
    leaders = cluster.leaders(3, topic_name)
    assert sorted(leaders.values()) == [1, 1, 2, 2, 3, 3], leaders
    wait_until(lambda: all(cluster.leaders(k, topic_name) == leaders for k in (1, 2)), 10, "every node's image")
    produce_all(cluster.node(1).bootstrap, topic_name, 600)
    seen = consume_all(cluster.node(2).bootstrap, topic_name, 600, f"{topic_name}-group")
    assert sorted(seen) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(600))
    # A partition's records are on its leader's disk only.
    for partition, leader in leaders.items():
        for k in (1, 2, 3):
            index = cluster.node(k).data_dir / "topics" / topic_name / str(partition)
            segments = [f for f in index.iterdir() if f.suffix == ".log"]
            size = sum(f.stat().st_size for f in segments)
            assert (size > 0) == (k == leader), (partition, leader, k, size)
    # A broker that does not lead a partition says so (clients refresh and follow).
    partition, leader = next(iter(leaders.items()))
    other = next(k for k in (1, 2, 3) if k != leader)
    with KafkaConnection(cluster.node(other).bootstrap) as conn:
        assert conn.produce(topic_name, partition, record_batch([b"x"])).error_code == NOT_LEADER_OR_FOLLOWER


def test_a_dead_broker_leaves_its_partitions_leaderless_until_it_returns(cluster_factory, topic_name):
    cluster = cluster_factory(3)
    cluster.sluice("topic", "create", topic_name, "-p", "6", via=1)
    produce_all(cluster.node(1).bootstrap, topic_name, 300)
    cluster.node(3).kill()
    cluster.wait_for_brokers({1, 2}, via=1)
    leaders = cluster.leaders(1, topic_name)
    assert sorted(leaders.values()) == [-1, -1, 1, 1, 2, 2], leaders
    # The others keep taking writes for the partitions they lead.
    producer = Producer({"bootstrap.servers": cluster.node(2).bootstrap})
    delivered = []
    for p, leader in leaders.items():
        if leader > 0:
            producer.produce(topic_name, partition=p, value=b"while-3-was-down", on_delivery=lambda e, m: delivered.append(e))
    producer.flush(30)
    assert delivered == [None] * 4, delivered
    cluster.node(3).start()
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(lambda: -1 not in cluster.leaders(1, topic_name).values(), 30, "node 3 to lead again")
    assert sorted(cluster.leaders(2, topic_name).values()) == [1, 1, 2, 2, 3, 3]
    seen = consume_all(cluster.node(3).bootstrap, topic_name, 304, f"{topic_name}-after")
    expected = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300)] + [(None, b"while-3-was-down")] * 4
    assert sorted(seen, key=repr) == sorted(expected, key=repr)


def test_a_graceful_stop_is_a_controlled_shutdown(cluster_factory, topic_name):
    cluster = cluster_factory(3)
    cluster.sluice("topic", "create", topic_name, "-p", "3", via=1)
    assert cluster.node(2).stop() == 0
    # Controlled shutdown: the controller moved its leadership at once, not after the
    # session timeout, and it is no longer listed.
    leaders = cluster.leaders(1, topic_name)
    assert 2 not in leaders.values(), leaders
    assert cluster.live_brokers(1) == {1, 3}


def test_the_active_controller_dies_during_a_storm_of_topic_creations(cluster_factory, topic_name):
    cluster = cluster_factory(3)
    controller = cluster.controller(1)
    survivors = [k for k in (1, 2, 3) if k != controller]
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def storm(via: int, worker: int):
        i = 0
        while not stop.is_set():
            name = f"{topic_name}-w{worker}-{i}"
            i += 1
            run = cluster.sluice("topic", "create", name, "-p", "1", via=via, check=False)
            if run.returncode == 0:
                with lock:
                    acknowledged.append(name)

    workers = [threading.Thread(target=storm, args=(survivors[w % 2], w)) for w in range(4)]
    for w in workers:
        w.start()
    wait_until(lambda: len(acknowledged) >= 8, 60, "creations before the kill")
    cluster.node(controller).kill()
    before_kill = len(acknowledged)
    wait_until(lambda: len(acknowledged) >= before_kill + 8, 60, "creations after the kill")
    stop.set()
    for w in workers:
        w.join(timeout=120)
    cluster.node(controller).start()
    cluster.wait_for_brokers({1, 2, 3})
    for k in (1, 2, 3):

        def listed(k=k):
            topics = {t["topic"] for t in cluster.metadata(k)["topics"]}
            return set(acknowledged) <= topics

        wait_until(listed, 30, f"node {k} to list every acknowledged topic")
    # Created once: one id per name, the same on every broker (topic.json is each
    # broker's copy of the image).
    ids = {}
    for k in (1, 2, 3):
        for name in acknowledged:
            topic_file = cluster.node(k).data_dir / "topics" / name / "topic.json"
            ids.setdefault(name, set()).add(json.loads(topic_file.read_text())["topic_id"])
    assert all(len(v) == 1 for v in ids.values()), ids


def test_five_voters_lose_two_and_keep_serving_changes(cluster_factory, topic_name):
    cluster = cluster_factory(5)
    controller = cluster.controller(1)
    down = [controller, next(k for k in (1, 2, 3, 4, 5) if k != controller)]
    for k in down:
        cluster.node(k).kill()
    up = [k for k in (1, 2, 3, 4, 5) if k not in down]
    cluster.sluice("topic", "create", topic_name, "-p", "5", via=up[0])
    for k in up:
        wait_until(lambda k=k: topic_name in {t["topic"] for t in cluster.metadata(k)["topics"]}, 30, f"node {k}")
    for k in down:
        cluster.node(k).start()
    for k in down:
        wait_until(lambda k=k: topic_name in {t["topic"] for t in cluster.metadata(k)["topics"]}, 30, f"node {k} to catch up")
        assert (cluster.node(k).data_dir / "topics" / topic_name / "topic.json").exists()


def test_configs_acls_and_users_change_through_any_broker(cluster_factory, topic_name):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    cluster = cluster_factory(3)
    admins = {k: AdminClient({"bootstrap.servers": cluster.node(k).bootstrap}) for k in (1, 2, 3)}
    for f in admins[1].create_topics([NewTopic(topic_name, 3, 1, config={"retention.ms": "3600000"})]).values():
        assert f.result(timeout=30) is None
    change = ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)
    altered = admins[2].incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[change])])
    for f in altered.values():
        f.result(timeout=30)
    for k in (1, 2, 3):

        def overrides(k=k):
            [f] = admins[k].describe_configs([ConfigResource(ResourceType.TOPIC, topic_name)]).values()
            return {n: e.value for n, e in f.result(timeout=30).items() if not e.is_default}

        wait_until(lambda: overrides() == {"retention.ms": "3600000", "segment.bytes": "1048576"}, 10, f"node {k}'s configs")
    # A user made on node 1 logs in anywhere (its credential is in every broker's image).
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-pw")
    for f in admins[1].alter_user_scram_credentials([upsert]).values():
        assert f.result(timeout=30) is None
    # Node 1 answered once it applied the change (read-your-writes); the others apply it
    # from the metadata log a moment later.
    def credentials(k):
        try:
            desc = admins[k].describe_user_scram_credentials(["alice"])["alice"].result(timeout=30)
        except Exception:  # noqa: BLE001 (not applied there yet: RESOURCE_NOT_FOUND)
            return None
        return [(c.mechanism, c.iterations) for c in desc.scram_credential_infos]

    for k in (1, 2, 3):
        wait_until(lambda k=k: credentials(k) == [(ScramMechanism.SCRAM_SHA_256, 4096)], 15, f"node {k}'s user")
    # An ACL made on node 3 is described, and enforced, on node 1.
    binding = AclBinding(
        ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW
    )
    for f in admins[3].create_acls([binding]).values():
        assert f.result(timeout=30) is None
    any_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    for k in (1, 2, 3):
        wait_until(
            lambda k=k: [str(b) for b in admins[k].describe_acls(any_acl).result(timeout=30)] == [str(binding)],
            15,
            f"node {k}'s ACLs",
        )
    # The topic now has an ACL: the anonymous principal may no longer describe it.
    meta = cluster.metadata(1, topic_name)
    [t] = [t for t in meta["topics"] if t["topic"] == topic_name]
    assert "authoriz" in t.get("error", "").lower(), t


def test_kafka_python_produces_and_consumes_in_a_group(cluster_factory, topic_name):
    from kafka import KafkaConsumer, KafkaProducer

    cluster = cluster_factory(3)
    cluster.sluice("topic", "create", topic_name, "-p", "6", via=2)
    producer = KafkaProducer(bootstrap_servers=cluster.node(3).bootstrap, linger_ms=5)
    futures = [producer.send(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode()) for i in range(300)]
    producer.flush(60)
    landed = {f.get(timeout=30).partition for f in futures}
    assert landed == set(range(6))  # every broker took writes
    producer.close()
    consumer = KafkaConsumer(
        topic_name,
        bootstrap_servers=cluster.node(1).bootstrap,
        group_id=f"{topic_name}-kp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
    )
    seen = []
    for msg in consumer:
        seen.append((msg.key, msg.value))
        if len(seen) == 300:
            break
    consumer.commit()
    consumer.close()
    assert sorted(seen) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(300))


def txn_coordinator(bootstrap: str, transactional_id: str, key_type: int = 1) -> int:
    """FindCoordinator v1: the coordinator's node id of a transactional id (key type 1) or a
    group (0)."""
    with KafkaConnection(bootstrap) as conn:
        r = conn.request(10, 1, Fields().string(transactional_id).i8(key_type))
        r.i32()  # throttle
        assert r.i16() == 0
        r.string()
        return r.i32()


def read_committed(bootstrap: str, topic: str, partitions: int, group: str, expect: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(values) < expect:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(msg.value())
    # A little longer: nothing more may show up (an aborted record would).
    end = time.monotonic() + 2
    while time.monotonic() < end:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            values.append(msg.value())
    consumer.close()
    return values


def test_transactions_span_brokers_markers_reach_every_leader(cluster_factory, topic_name):
    cluster = cluster_factory(3)
    cluster.sluice("topic", "create", topic_name, "-p", "3", via=1)
    leaders = cluster.leaders(1, topic_name)
    assert sorted(leaders.values()) == [1, 2, 3]
    txn_id = f"{topic_name}-tx"
    coordinator = txn_coordinator(cluster.node(1).bootstrap, txn_id)
    assert coordinator in (1, 2, 3)
    producer = Producer({"bootstrap.servers": cluster.node(2).bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    # Committed on every partition (so on every broker: two of them not the coordinator).
    producer.begin_transaction()
    for p in range(3):
        producer.produce(topic_name, partition=p, value=f"committed-{p}".encode())
    producer.commit_transaction(30)
    # Aborted on every partition: read_committed never shows it.
    producer.begin_transaction()
    for p in range(3):
        producer.produce(topic_name, partition=p, value=f"aborted-{p}".encode())
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for p in range(3):
        producer.produce(topic_name, partition=p, value=f"again-{p}".encode())
    producer.commit_transaction(30)
    values = read_committed(cluster.node(3).bootstrap, topic_name, 3, f"{topic_name}-rc", 6)
    assert sorted(values) == sorted([f"committed-{p}".encode() for p in range(3)] + [f"again-{p}".encode() for p in range(3)])


def test_the_cli_pointed_at_any_broker_follows_leaders_and_coordinators(cluster_factory, topic_name):
    import subprocess as sp

    from conftest import sluice_bin

    cluster = cluster_factory(3)
    cluster.sluice("topic", "create", topic_name, "-p", "6", via=2)
    lines = "".join(f"key-{i}:value-{i}\n" for i in range(600))

    def cli(*args, via, stdin=None):
        run = sp.run(
            [sluice_bin(), *args, "--brokers", cluster.node(via).bootstrap],
            input=stdin, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        return run.stdout

    cli("produce", topic_name, "--key-separator", ":", via=2, stdin=lines)
    assert len(cli("consume", topic_name, "-e", via=3).splitlines()) == 600
    group = f"{topic_name}-cli"
    assert len(cli("consume", topic_name, "-e", "-g", group, via=1).splitlines()) == 600
    described = json.loads(cli("group", "describe", group, "--output", "json", via=3))
    offsets = described["offsets"]
    assert len(offsets) == 6 and all(o["lag"] == 0 for o in offsets), offsets
    assert sum(o["committed_offset"] for o in offsets) == sum(o["log_end_offset"] for o in offsets) == 600, offsets
    assert sum(1 for o in offsets if o["log_end_offset"] > 0) >= 4, offsets  # the keys spread
    listed = json.loads(cli("group", "list", "--output", "json", via=1))
    assert group in [g["group"] for g in listed["groups"]]
    # The topic deleted through a broker that does not coordinate the group: the group's
    # committed offsets go on its coordinator too.
    coordinator = txn_coordinator(cluster.node(1).bootstrap, group, key_type=0)
    other = next(k for k in (1, 2, 3) if k != coordinator)
    cluster.sluice("topic", "delete", topic_name, via=other)

    def offsets_gone():
        return json.loads(cli("group", "describe", group, "--output", "json", via=other))["offsets"] == []

    wait_until(offsets_gone, 10, "the coordinator to drop the deleted topic's offsets")


def test_views_and_the_admin_apis_topics_are_the_clusters(cluster_factory, tmp_path, topic_name):
    from plugin_support import plugin_dir
    from test_metrics import http

    # The brokers start with the filter in their plugin.dir: published by their first start.
    plugins = plugin_dir(tmp_path, {"json-filter": "json-filter"})
    cluster = cluster_factory(3, {"plugin.dir": str(plugins)})
    # A topic made through node 2's admin API is the cluster's: spread, listed everywhere.
    status, text = http(cluster.node(2), "POST", "/v1/topics", {"name": topic_name, "partitions": 3})
    assert status in (200, 201), text
    assert sorted(cluster.leaders(3, topic_name).values()) == [1, 2, 3]
    producer = Producer({"bootstrap.servers": cluster.node(1).bootstrap})
    for i in range(60):
        region = "eu" if i % 3 == 0 else "us"
        producer.produce(topic_name, key=str(i).encode(), value=json.dumps({"id": i, "region": region}).encode())
    assert producer.flush(30) == 0
    # A view made through node 3's admin API reads on every partition's leader.
    view = f"{topic_name}-eu"
    body = {
        "name": view,
        "source": topic_name,
        "stages": [{"plugin": "json-filter", "params": {"field": "$.region", "op": "==", "value": "eu"}}],
    }
    status, text = http(cluster.node(3), "POST", "/v1/views", body)
    assert status == 201, text
    for k in (1, 2):
        wait_until(lambda k=k: http(cluster.node(k), "GET", f"/v1/views/{view}")[0] == 200, 10, f"node {k} has the view")
    consumer = Consumer({"bootstrap.servers": cluster.node(2).bootstrap, "group.id": f"{view}-readers", "auto.offset.reset": "earliest"})
    consumer.subscribe([view])
    ids = []
    deadline = time.monotonic() + 60
    while len(ids) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            ids.append(json.loads(msg.value())["id"])
    consumer.close()
    assert sorted(ids) == list(range(0, 60, 3))
    # Deleted through node 1: gone everywhere.
    status, text = http(cluster.node(1), "DELETE", f"/v1/views/{view}")
    assert status in (200, 204), text
    for k in (2, 3):
        wait_until(lambda k=k: http(cluster.node(k), "GET", f"/v1/views/{view}")[0] == 404, 10, f"node {k} dropped it")
    # An ephemeral view (`sluice consume --filter`) made through node 3 serves every
    # partition from its leader (it is made on every broker, and gone from every one after).
    import subprocess as sp

    from conftest import sluice_bin

    filtered = ["--filter", "json-filter", "--param", "field=$.region", "--param", "op===", "--param", "value=eu"]
    out = sp.run(
        [sluice_bin(), "consume", topic_name, "-e", "--output", "json", *filtered,
         "--brokers", cluster.node(3).bootstrap, "--admin-url", cluster.node(3).admin_url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert sorted(json.loads(json.loads(line)["value"])["id"] for line in out.stdout.splitlines()) == list(range(0, 60, 3))
    for k in (1, 2, 3):
        views = json.loads(http(cluster.node(k), "GET", "/v1/views")[1])["views"]
        assert not [v for v in views if v.get("ephemeral")], (k, views)


def test_a_plugin_uploaded_to_one_broker_is_installed_on_every_broker(cluster_factory, topic_name):
    """An upload is copied to every live broker and its version recorded in the metadata log;
    a broker that was down meanwhile fetches it from another when it returns, and a deletion
    made while it was down is applied when it returns. A file dropped in a broker's
    plugin.dir is refused, saying how to deploy."""
    import shutil
    from plugin_support import built_plugins_dir
    from test_metrics import http

    def put(k: int, name: str, wasm: bytes) -> dict:
        request = urllib.request.Request(cluster.node(k).admin_url + f"/v1/plugins/{name}", data=wasm, method="PUT")
        return json.loads(urllib.request.urlopen(request, timeout=120).read())

    def sha_on(k: int, name: str) -> str | None:
        status, text = http(cluster.node(k), "GET", f"/v1/plugins/{name}")
        return json.loads(text)["sha256"] if status == 200 else None

    cluster = cluster_factory(3)
    wasm = (built_plugins_dir() / "murmur2.wasm").read_bytes()
    info = put(1, "router", wasm)
    assert info["kind"] == "partitioner"
    for k in (2, 3):
        assert sha_on(k, "router") == info["sha256"], k
    # A topic bound to it can be made through any broker (each binds its own copy).
    cluster.sluice("topic", "create", topic_name, "-p", "3", "-c", "sluice.partitioner=router", via=3)
    assert sorted(cluster.leaders(2, topic_name).values()) == [1, 2, 3]
    # Deleted through another broker: gone everywhere (after its topic, once broker 2 has
    # applied the topic's deletion: each broker's metadata follows the log).
    cluster.sluice("topic", "delete", topic_name, via=1)
    deleted = []
    wait_until(lambda: deleted.append(http(cluster.node(2), "DELETE", "/v1/plugins/router")) or deleted[-1][0] != 409, 30, "not in use")
    status, text = deleted[-1]
    assert status in (200, 204), text
    for k in (1, 3):
        assert sha_on(k, "router") is None, k

    # Broker 3 down during an upload (2 of 3 store it: committed), back: it fetches it.
    cluster.node(3).stop()
    hashed = put(1, "hashed", (built_plugins_dir() / "fnv1a.wasm").read_bytes())
    assert sha_on(2, "hashed") == hashed["sha256"]
    # Broker 2 down during a deletion, back: it deletes its copy.
    cluster.node(2).stop()
    cluster.node(3).start()
    wait_until(lambda: sha_on(3, "hashed") == hashed["sha256"], 30, "broker 3 fetched the upload it missed")
    status, text = http(cluster.node(1), "DELETE", "/v1/plugins/hashed")
    assert status in (200, 204), text
    cluster.node(2).start()
    wait_until(lambda: sha_on(2, "hashed") is None, 30, "broker 2 applied the deletion it missed")
    assert sha_on(3, "hashed") is None

    # A new version uploaded to another broker replaces the old one everywhere, and stays
    # (the image named the old one until the new one's record committed).
    first = put(1, "swap", (built_plugins_dir() / "murmur2.wasm").read_bytes())
    second = put(3, "swap", (built_plugins_dir() / "crc32.wasm").read_bytes())
    assert first["sha256"] != second["sha256"]
    cluster.sluice("topic", "create", f"{topic_name}-later", "-p", "1", via=2)  # more images
    for k in (1, 2, 3):
        wait_until(lambda k=k: sha_on(k, "swap") == second["sha256"], 30, f"broker {k} on the new version")
    time.sleep(1)
    assert [sha_on(k, "swap") for k in (1, 2, 3)] == [second["sha256"]] * 3

    # A file dropped in plugin.dir is not loaded in a cluster, and the log says why.
    shutil.copyfile(built_plugins_dir() / "fnv1a.wasm", cluster.node(1).data_dir / "plugins" / "dropped.wasm")
    wait_until(lambda: "files changed in plugin.dir are not loaded" in cluster.node(1).log_tail(), 10, "the refusal logged")
    assert sha_on(1, "dropped") is None


def test_a_transactions_consumer_offsets_reach_a_group_coordinated_elsewhere(cluster_factory, topic_name):
    """consume-transform-produce (send_offsets_to_transaction) with the group's coordinator
    on another broker than the transaction's: the offsets wait in the transaction and reach
    the group when it commits; an aborted transaction's offsets never do."""
    cluster = cluster_factory(3)
    cluster.sluice("topic", "create", topic_name, "-p", "3", via=1)
    txn_id = f"{topic_name}-tx"
    coordinator = txn_coordinator(cluster.node(1).bootstrap, txn_id)
    group = next(
        g for g in (f"{topic_name}-g{i}" for i in range(200))
        if txn_coordinator(cluster.node(1).bootstrap, g, key_type=0) != coordinator
    )  # fmt: skip
    consumer = Consumer({"bootstrap.servers": cluster.node(3).bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.subscribe([topic_name])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    producer = Producer({"bootstrap.servers": cluster.node(2).bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)

    def offsets_in_txn(offset: int, commit: bool):
        producer.begin_transaction()
        producer.produce(topic_name, partition=0, value=f"out-{offset}".encode())
        tps = [TopicPartition(topic_name, p, offset) for p in range(3)]
        producer.send_offsets_to_transaction(tps, consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    offsets_in_txn(7, commit=True)
    offsets_in_txn(9, commit=False)
    committed = consumer.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=30)
    consumer.close()
    assert [tp.offset for tp in committed] == [7, 7, 7], committed


def test_the_active_controller_dies_during_a_storm_of_acls_and_users(cluster_factory, topic_name):
    """CreateAcls and SCRAM upserts from several clients while the active controller is
    killed with -9: every acknowledged ACL and user is on every broker afterwards, once."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    cluster = cluster_factory(3)
    controller = cluster.controller(1)
    survivors = [k for k in (1, 2, 3) if k != controller]
    acls: list[str] = []
    users: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def acl_storm(via: int, worker: int):
        admin = AdminClient({"bootstrap.servers": cluster.node(via).bootstrap})
        i = 0
        while not stop.is_set():
            name = f"{topic_name}-acl-{worker}-{i}"
            i += 1
            binding = AclBinding(
                ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:storm", "*", AclOperation.READ, AclPermissionType.ALLOW
            )
            try:
                for f in admin.create_acls([binding], request_timeout=20).values():
                    f.result(timeout=30)
            except Exception:  # noqa: BLE001 (an unacknowledged change is allowed to be lost)
                continue
            with lock:
                acls.append(name)

    def user_storm(via: int, worker: int):
        admin = AdminClient({"bootstrap.servers": cluster.node(via).bootstrap})
        i = 0
        while not stop.is_set():
            user = f"storm-{worker}-{i}"
            i += 1
            upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
            try:
                for f in admin.alter_user_scram_credentials([upsert], request_timeout=20).values():
                    f.result(timeout=30)
            except Exception:  # noqa: BLE001
                continue
            with lock:
                users.append(user)

    workers = [threading.Thread(target=acl_storm, args=(survivors[w % 2], w)) for w in range(2)]
    workers += [threading.Thread(target=user_storm, args=(survivors[w % 2], w)) for w in range(2)]
    for w in workers:
        w.start()
    wait_until(lambda: len(acls) >= 5 and len(users) >= 5, 60, "changes before the kill")
    cluster.node(controller).kill()
    before = (len(acls), len(users))
    wait_until(lambda: len(acls) >= before[0] + 5 and len(users) >= before[1] + 5, 60, "changes after the kill")
    stop.set()
    for w in workers:
        w.join(timeout=120)
    cluster.node(controller).start()
    cluster.wait_for_brokers({1, 2, 3})
    any_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    for k in (1, 2, 3):
        admin = AdminClient({"bootstrap.servers": cluster.node(k).bootstrap})

        def has_all(admin=admin):
            names = [b.name for b in admin.describe_acls(any_acl).result(timeout=30)]
            return set(acls) <= set(names) and len(names) == len(set(names))

        wait_until(has_all, 30, f"node {k} to list every acknowledged ACL once")
        described = admin.describe_user_scram_credentials(users)
        for user in users:
            infos = described[user].result(timeout=30).scram_credential_infos
            assert len(infos) == 1, (k, user, infos)


def test_a_plugin_uploaded_to_broker_1_partitions_identically_from_every_client_on_brokers_2_and_3(
    cluster_factory, topic_name
):
    """A partitioner plugin uploaded to broker 1 only, on topics whose partitions brokers 2
    and 3 lead: each client (librdkafka, kafka-python, Java's console producer) sends each
    record to the leader of the partition its own key hash picks; that broker runs the plugin
    and forwards the records it routes to a partition the other broker leads. Every record
    lands once, on the same partition whichever client sent it."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaProducer
    from java_support import java_classpath, run_java
    from plugin_support import built_plugins_dir, landed
    from test_polyglot_plugins import orders

    cluster = cluster_factory(3)
    wasm = (built_plugins_dir() / "json-field.wasm").read_bytes()
    request = urllib.request.Request(cluster.node(1).admin_url + "/v1/plugins/router", data=wasm, method="PUT")
    assert json.loads(urllib.request.urlopen(request, timeout=120).read())["kind"] == "partitioner"
    partitions = 6
    config = {"sluice.partitioner": "router", "sluice.partitioner.params": "field=$.customer"}
    clients = ("librdkafka", "kafka-python", "java")
    topics = {c: f"{topic_name}-{c}" for c in clients}
    admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
    on_2_and_3 = [[2 + p % 2] for p in range(partitions)]
    futures = admin.create_topics([NewTopic(t, num_partitions=partitions, replica_assignment=on_2_and_3, config=config) for t in topics.values()])
    for f in futures.values():
        f.result(timeout=30)
    for t in topics.values():
        assert cluster.leaders(1, t) == {p: 2 + p % 2 for p in range(partitions)}

    values = [v for v in orders(150) if b"customer" in v]
    bootstrap = cluster.node(1).bootstrap
    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for i, v in enumerate(values):
        p.produce(topics["librdkafka"], key=f"k{i}".encode(), value=v, on_delivery=lambda e, m: e and failed.append(e))
    assert p.flush(30) == 0 and not failed, failed
    kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    sent = [kp.send(topics["kafka-python"], key=f"k{i}".encode(), value=v) for i, v in enumerate(values)]
    kp.flush(timeout=30)
    for s in sent:
        s.get(timeout=30)
    kp.close()
    run_java(
        java_classpath(), "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap,
        "--topic", topics["java"], "--command-property", "acks=all",
        "--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
        stdin="".join(f"k{i}|{v.decode()}\n" for i, v in enumerate(values)),
    )

    def placement(topic: str) -> dict[bytes, int]:
        got = landed(bootstrap, topic, partitions)
        stored = [m.value() for messages in got.values() for m in messages]
        assert sorted(stored) == sorted(values), f"{topic}: every record once"
        return {m.value(): p for p, messages in got.items() for m in messages}

    placed = {c: placement(t) for c, t in topics.items()}
    assert placed["librdkafka"] == placed["kafka-python"] == placed["java"]
    used = set(placed["java"].values())
    assert {2 + p % 2 for p in used} == {2, 3}, f"records on both brokers: {used}"
    # The plugin's placement, not a client's: one customer, one partition.
    by_customer = collections.defaultdict(set)
    for v, p in placed["java"].items():
        by_customer[json.loads(v)["customer"]].add(p)
    assert all(len(ps) == 1 for ps in by_customer.values()), by_customer


def test_a_broker_down_past_a_snapshot_catches_up_from_it(cluster_factory, topic_name):
    """Snapshots every 20 metadata entries (the log purged below them): a broker that misses
    60 topic creations comes back through a snapshot and then has every topic."""
    cluster = cluster_factory(3, {"sluice.metadata.snapshot.entries": "20"})
    cluster.node(3).stop()
    names = [f"{topic_name}-{i}" for i in range(60)]
    for name in names:
        cluster.sluice("topic", "create", name, "-p", "1", via=1)
    cluster.node(3).start()
    cluster.wait_for_brokers({1, 2, 3})

    def caught_up():
        listed = {t["topic"] for t in cluster.metadata(3)["topics"]}
        return set(names) <= listed

    wait_until(caught_up, 60, "node 3 to list every topic")
    assert all((cluster.node(3).data_dir / "topics" / n / "topic.json").exists() for n in names)
    # It came back through the leader's snapshot (the entries it missed were purged).
    assert "installed a metadata snapshot" in cluster.node(3).log_path.read_text()


def test_a_paused_controller_is_replaced_and_rejoins_without_a_split(cluster_factory, topic_name):
    """SIGSTOP the active controller (a GC pause, a frozen VM): the others elect a new one
    and keep taking changes; resumed, the old one follows the new term and every broker
    ends with the same topics, each created once."""
    import os
    import signal as sig

    cluster = cluster_factory(3)
    old = cluster.controller(1)
    survivors = [k for k in (1, 2, 3) if k != old]
    os.kill(cluster.node(old).pid, sig.SIGSTOP)
    try:
        names = [f"{topic_name}-{i}" for i in range(5)]
        for name in names:
            cluster.sluice("topic", "create", name, "-p", "1", via=survivors[0])
        assert cluster.controller(survivors[1]) in survivors
    finally:
        os.kill(cluster.node(old).pid, sig.SIGCONT)
    cluster.sluice("topic", "create", f"{topic_name}-after", "-p", "1", via=old)
    for k in (1, 2, 3):
        wait_until(
            lambda k=k: {*names, f"{topic_name}-after"} <= {t["topic"] for t in cluster.metadata(k)["topics"]},
            30,
            f"node {k} to list every topic",
        )
    ids = {
        name: {json.loads((cluster.node(k).data_dir / "topics" / name / "topic.json").read_text())["topic_id"] for k in (1, 2, 3)}
        for name in names
    }
    assert all(len(v) == 1 for v in ids.values()), ids
    assert cluster.controller(old) in (1, 2, 3)


def test_a_broker_only_node_follows_the_log_as_a_learner_and_serves(cluster_factory, topic_name):
    """Three voters and a fourth node with `process.roles=broker`: it joins the quorum as a
    learner (never a voter), registers, takes partitions, forwards changes to the active
    controller, and after a kill -9 and a restart catches up and serves again."""
    cluster = cluster_factory(4, voters=3)
    assert cluster.live_brokers(4) == {1, 2, 3, 4}
    # A change through the learner, read back through it (read-your-writes).
    cluster.sluice("topic", "create", topic_name, "-p", "6", via=4)
    assert sorted(set(cluster.leaders(4, topic_name).values())) == [1, 2, 3, 4]
    produce_all(cluster.node(4).bootstrap, topic_name, 400)
    assert len(consume_all(cluster.node(4).bootstrap, topic_name, 400, f"{topic_name}-g")) == 400
    # Never a voter: the quorum's leader is one of 1-3, as every node says.
    leader = cluster.controller(4)
    assert leader in (1, 2, 3) and cluster.controller(1) == leader
    cluster.node(4).kill()
    cluster.sluice("topic", "create", f"{topic_name}-while-down", "-p", "2", via=1)
    cluster.node(4).start()
    cluster.wait_for_brokers({1, 2, 3, 4}, via=4)
    wait_until(lambda: f"{topic_name}-while-down" in {t["topic"] for t in cluster.metadata(4)["topics"]}, 30, "caught up")
    assert len(consume_all(cluster.node(4).bootstrap, topic_name, 400, f"{topic_name}-g2")) == 400


def test_dedicated_controllers_and_broker_only_nodes(cluster_factory, topic_name):
    """Kafka's isolated mode: three dedicated controllers (`process.roles=controller`, only a
    controller listener) and two broker-only nodes. Partitions live on the brokers only;
    killing the active controller elects another and changes go on."""
    cluster = cluster_factory(5, voters=3, controllers=3)
    assert cluster.live_brokers(4) == {4, 5}
    cluster.sluice("topic", "create", topic_name, "-p", "6", via=4)
    assert set(cluster.leaders(5, topic_name).values()) == {4, 5}
    produce_all(cluster.node(5).bootstrap, topic_name, 300)
    assert len(consume_all(cluster.node(4).bootstrap, topic_name, 300, f"{topic_name}-g")) == 300
    leader = cluster.controller(4)
    assert leader in (1, 2, 3)
    cluster.node(leader).kill()
    cluster.sluice("topic", "create", f"{topic_name}-after", "-p", "2", via=5)
    assert cluster.controller(4) in {1, 2, 3} - {leader}
    assert set(cluster.leaders(4, f"{topic_name}-after").values()) <= {4, 5}


def test_tls_between_brokers_on_the_controller_and_inter_broker_listeners(cluster_factory, tmp_path, topic_name):
    """The quorum over an SSL controller listener (a client certificate from the cluster's CA
    required) and an SSL inter-broker listener: transactions spanning the three brokers
    (WriteTxnMarkers and AddPartitionsToTxn between them) commit; a plaintext peer and one
    with another CA's certificate are refused at the controller listener."""
    import socket
    import ssl

    from tls_support import make_ca, make_leaf

    make_ca(tmp_path, "ca")
    make_ca(tmp_path, "otherca")
    make_leaf(tmp_path, "ca", "broker", "/CN=broker", "serverAuth,clientAuth", "IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3")
    make_leaf(tmp_path, "otherca", "stranger", "/CN=stranger", "clientAuth")
    settings = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(tmp_path / "broker.pem"),
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "allow.everyone.if.no.acl.found": "true",
    }
    cluster = cluster_factory(3, settings, extra_listener="INTERNAL")
    test_transactions_span_brokers_markers_reach_every_leader(lambda _size: cluster, topic_name)

    controller = ("127.0.0.1", cluster.controller_port)
    with socket.create_connection(controller, timeout=10) as plain:
        plain.sendall(b"\x00\x00\x00\x00\x10" + b"\x00" * 16)  # a hello frame's shape, in clear
        plain.settimeout(10)
        try:
            answer = plain.recv(64)
        except (ConnectionResetError, TimeoutError):
            answer = b""
        assert not answer or answer[:1] == b"\x15", f"a plaintext peer got an answer: {answer!r}"  # 0x15: a TLS alert
    stranger = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    stranger.load_cert_chain(str(tmp_path / "stranger.crt"), str(tmp_path / "stranger.key"))
    refused = False
    try:
        with socket.create_connection(controller, timeout=10) as raw:
            with stranger.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x00\x10")
                refused = tls.recv(16) == b""
    except (ssl.SSLError, ConnectionResetError, OSError):
        refused = True
    assert refused, "a peer with another CA's certificate was served"
    assert "TLS handshake refused" in cluster.node(1).log_tail()


def test_sasl_between_brokers_on_the_inter_broker_listener(cluster_factory, topic_name):
    """An inter-broker listener with SASL (SCRAM-SHA-256): each broker logs in to the others
    with `sasl.mechanism.inter.broker.protocol` and `sasl.jaas.config` (the user made through
    the cluster), and transactions spanning the brokers commit over it."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    settings = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";',
        "allow.everyone.if.no.acl.found": "true",
    }
    cluster = cluster_factory(3, settings, extra_listener="INTERNAL")
    admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
    upsert = UserScramCredentialUpsertion("broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"broker-secret")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        assert f.result(timeout=30) is None
    test_transactions_span_brokers_markers_reach_every_leader(lambda _size: cluster, topic_name)


def test_a_validator_uploaded_to_one_broker_refuses_bad_records_on_every_leader(cluster_factory, topic_name):
    """A validator plugin uploaded to broker 3 checks records on every partition's leader: a
    record it refuses fails its partition with INVALID_RECORD on each of the three brokers,
    and good records are stored."""
    from confluent_kafka import KafkaError

    from plugin_support import built_plugins_dir

    cluster = cluster_factory(3)
    wasm = (built_plugins_dir() / "json-validator.wasm").read_bytes()
    request = urllib.request.Request(cluster.node(3).admin_url + "/v1/plugins/schema", data=wasm, method="PUT")
    assert json.loads(urllib.request.urlopen(request, timeout=120).read())["kind"] == "validator"
    config = {"sluice.validator": "schema", "sluice.validator.params": "required=$.id,types=$.id:number"}
    cluster.sluice("topic", "create", topic_name, "-p", "3", *[a for k, v in config.items() for a in ("-c", f"{k}={v}")], via=1)
    assert sorted(cluster.leaders(1, topic_name).values()) == [1, 2, 3]
    outcomes = {}
    producer = Producer({"bootstrap.servers": cluster.node(1).bootstrap, "retries": 0, "linger.ms": 0})
    for p in range(3):
        for value in (b'{"id": 1}', b'{"id": "one"}'):
            producer.produce(
                topic_name, partition=p, value=value, on_delivery=lambda e, m: outcomes.update({(m.partition(), m.value()): e})
            )
            producer.flush(30)
    for p in range(3):
        assert outcomes[(p, b'{"id": 1}')] is None, outcomes
        refused = outcomes[(p, b'{"id": "one"}')]
        assert refused is not None and refused.code() == KafkaError.INVALID_RECORD, (p, refused)


def test_a_broker_of_another_cluster_is_refused_and_changes_nothing(cluster_factory, topic_name):
    """Node 3's data dir formatted for another cluster id, started with the same voters: the
    others refuse its hello (logged, naming both clusters), it never registers, and the
    cluster's two voters keep serving changes."""
    import shutil
    import subprocess as sp

    from conftest import sluice_bin

    cluster = cluster_factory(3)
    node = cluster.node(3)
    node.stop()
    shutil.rmtree(node.data_dir)
    other = sp.run([sluice_bin(), "cluster", "random-id"], capture_output=True, text=True, check=True).stdout.strip()
    sp.run(
        [sluice_bin(), "cluster", "format", "--data-dir", str(node.data_dir), f"--cluster-id={other}", "--node-id", "3"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    node.start()
    cluster.sluice("topic", "create", topic_name, "-p", "2", via=1)
    # Whichever side dials, the hello is refused naming node 3's cluster.
    refused = (f'node 3 belongs to cluster "{other}"', f'(node 3) to cluster "{other}": refused')
    wait_until(
        lambda: any(r in cluster.node(k).log_tail() for k in (1, 2) for r in refused), 30, "the refusal logged"
    )
    time.sleep(2)
    assert cluster.live_brokers(1) == {1, 2}
    assert topic_name in {t["topic"] for t in cluster.metadata(2)["topics"]}
