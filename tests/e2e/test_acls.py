"""ACLs with real clients: confluent-kafka's AdminClient creates, describes and deletes them
(CreateAcls/DescribeAcls/DeleteAcls), and users logged in over SASL_PLAINTEXT (SCRAM-SHA-256)
get what they are granted and nothing else.

The broker has a PLAINTEXT and a SASL_PLAINTEXT listener, `super.users = User:admin`, and
the default `allow.everyone.if.no.acl.found` (false: a SASL listener is configured). Covers:
an unauthorized user sees TOPIC_AUTHORIZATION_FAILED when it produces and no topic it may not
describe in Metadata; a DENY beats a PREFIXED ALLOW; a consumer group needs READ on the
group; a user may not change ACLs (CLUSTER_AUTHORIZATION_FAILED); the anonymous PLAINTEXT
principal is refused like any other; ACLs survive a restart, and deleting one takes the
right away. kafka-python and kcat check the same rights with their own clients. Raw
requests at Kafka 4.4's newest versions check what Kafka checks: CreateTopics v7's configs
need DESCRIBE_CONFIGS, DescribeTopicPartitions hides what may not be described,
FindCoordinator v6 refuses a group, ListConfigResources needs DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

from conftest import sluice_bin
from tls_support import TlsBroker, metric

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
TIMEOUT_S = 30


def create_users(data_dir):
    for name, password in PASSWORDS.items():
        proc = subprocess.run(
            [sluice_bin(), "user", "create", name, "--mechanism", "SCRAM-SHA-256", "--password-stdin",
             "--data-dir", str(data_dir)],
            input=password.encode(), capture_output=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()


@pytest.fixture
def acl_broker(tmp_path, request):
    data = tmp_path / "data"
    data.mkdir()
    create_users(data)
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "super.users": "User:admin",
        # The admin API asks the same ACLs: tls_support.metric scrapes /metrics with it.
        "admin.token": "acl-test-token",
    }
    broker = TlsBroker(data, tmp_path / "broker.log", settings, {}).start()
    yield broker
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(broker.log_tail())
    if broker.is_running():
        broker.stop()


def sasl(broker: TlsBroker, user: str) -> dict:
    return {
        "bootstrap.servers": broker.listener("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def wait(futures: dict) -> dict:
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT_S)
        except KafkaException as e:
            out[key] = e.args[0]
    return out


def produce(conf: dict, topic: str, value: bytes = b"v") -> KafkaError | None:
    """Produces one record; the delivery error, or None."""
    reports = []
    p = Producer({**conf, "message.timeout.ms": 10_000, "acks": "all"})
    p.produce(topic, value=value, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(TIMEOUT_S) == 0
    return reports[0]


def topics_seen(conf: dict) -> set[str]:
    return set(AdminClient(conf).list_topics(timeout=TIMEOUT_S).topics)


def allow(principal: str, rtype, name: str, op, pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW):
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def test_users_get_what_they_are_granted_and_nothing_else(acl_broker):
    admin = AdminClient(sasl(acl_broker, "admin"))
    new = [NewTopic(t, num_partitions=1, replication_factor=1) for t in ("orders", "secret", "logs-app", "logs-audit")]
    assert all(v is None for v in wait(admin.create_topics(new)).values())

    # Before any ACL: a user is refused everywhere, a super user is not.
    alice = sasl(acl_broker, "alice")
    assert produce(alice, "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topics_seen(alice) == set()
    assert produce(sasl(acl_broker, "admin"), "orders") is None

    bindings = [
        allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.WRITE),
        allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.READ),
        allow("User:alice", ResourceType.GROUP, "alice-group", AclOperation.READ),
        allow("User:alice", ResourceType.TOPIC, "logs-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
        allow("User:alice", ResourceType.TOPIC, "logs-audit", AclOperation.WRITE, permission=AclPermissionType.DENY),
    ]
    assert all(v is None for v in wait(admin.create_acls(bindings)).values())

    assert produce(alice, "orders") is None
    assert produce(alice, "logs-app") is None
    # DENY beats the PREFIXED ALLOW.
    assert produce(alice, "logs-audit").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(alice, "secret").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Metadata lists what alice may describe (WRITE and READ imply DESCRIBE, and the DENY is
    # of WRITE only), nothing else.
    assert topics_seen(alice) == {"orders", "logs-app", "logs-audit"}
    # bob has nothing.
    bob = sasl(acl_broker, "bob")
    assert produce(bob, "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topics_seen(bob) == set()
    # Neither does the anonymous PLAINTEXT principal.
    plaintext = {"bootstrap.servers": acl_broker.bootstrap}
    assert produce(plaintext, "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # A user may not change ACLs.
    alice_admin = AdminClient(alice)  # outlives its futures
    refused = wait(alice_admin.create_acls([allow("User:bob", ResourceType.TOPIC, "*", AclOperation.ALL)]))
    assert [e.code() for e in refused.values()] == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]

    # Described as created.
    described = admin.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    ).result(timeout=TIMEOUT_S)
    assert sorted(map(str, described)) == sorted(map(str, bindings))


def consume_with_group(conf: dict, topic: str, group: str) -> list:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return [msg.error()]
            c.commit(msg, asynchronous=False)
            return [msg]
        raise AssertionError("nothing consumed before the deadline")
    finally:
        c.close()


def test_a_group_needs_read_on_the_group_and_acls_survive_a_restart(acl_broker):
    admin = AdminClient(sasl(acl_broker, "admin"))
    assert wait(admin.create_topics([NewTopic("orders", num_partitions=1, replication_factor=1)])) == {"orders": None}
    assert produce(sasl(acl_broker, "admin"), "orders", b"first") is None
    grants = [
        allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.READ),
        allow("User:alice", ResourceType.GROUP, "alice-", AclOperation.READ, ResourcePatternType.PREFIXED),
    ]
    assert all(v is None for v in wait(admin.create_acls(grants)).values())
    alice = sasl(acl_broker, "alice")
    [msg] = consume_with_group(alice, "orders", "alice-consumers")
    assert msg.value() == b"first"
    [err] = consume_with_group(alice, "orders", "bobs-group")
    assert err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err

    acl_broker.stop()
    acl_broker.start()
    alice = sasl(acl_broker, "alice")
    [msg] = consume_with_group(alice, "orders", "alice-again")
    assert msg.value() == b"first"

    # Deleting the topic grant takes the right away.
    admin = AdminClient(sasl(acl_broker, "admin"))
    deleted = wait(admin.delete_acls([
        AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", None,
                         AclOperation.ANY, AclPermissionType.ANY)
    ]))  # fmt: skip
    assert [len(v) for v in deleted.values()] == [1]
    [err] = consume_with_group(alice, "orders", "alice-third")
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_kafka_python_and_kcat_see_the_same_rights(acl_broker):
    admin = AdminClient(sasl(acl_broker, "admin"))
    new = [NewTopic(t, num_partitions=1, replication_factor=1) for t in ("granted", "hidden")]
    assert all(v is None for v in wait(admin.create_topics(new)).values())
    assert all(
        v is None
        for v in wait(admin.create_acls([allow("User:alice", ResourceType.TOPIC, "granted", AclOperation.ALL)])).values()
    )
    addr = acl_broker.listener("SASL_PLAINTEXT")
    kp = dict(
        bootstrap_servers=addr, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice", sasl_plain_password=PASSWORDS["alice"],
    )  # fmt: skip
    p = KafkaProducer(**kp, max_block_ms=10_000)
    assert p.send("granted", b"ok").get(timeout=TIMEOUT_S).offset == 0
    with pytest.raises(TopicAuthorizationFailedError):
        p.send("hidden", b"no").get(timeout=TIMEOUT_S)
    p.close()

    x = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
         "-X", "sasl.username=alice", "-X", f"sasl.password={PASSWORDS['alice']}"]  # fmt: skip
    listing = subprocess.run(
        ["kcat", "-b", addr, *x, "-L", "-J"], text=True, capture_output=True, timeout=TIMEOUT_S, check=True
    ).stdout
    assert '"topic":"granted"' in listing.replace(" ", "") and "hidden" not in listing
    assert metric(acl_broker, "sluice_sasl_authentication_failures_total") == 0


def sluice(broker: TlsBroker, user: str | None, *args: str, stdin: str = "", check: bool = True):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SLUICE_")}
    login = []
    if user:
        env["SLUICE_PASSWORD"] = PASSWORDS[user]
        login = ["--user", user]
    proc = subprocess.run(
        [sluice_bin(), *args, "--brokers", broker.listener("SASL_PLAINTEXT"), *login],
        input=stdin, text=True, capture_output=True, timeout=60, env=env,
    )  # fmt: skip
    if check:
        assert proc.returncode == 0, f"{args}: {proc.stderr}"
    return proc


def test_sluice_acl_and_the_cli_log_in_over_sasl(acl_broker):
    import json

    sluice(acl_broker, "admin", "topic", "create", "orders")
    created = sluice(acl_broker, "admin", "acl", "create", "--allow-principal", "User:alice",
                     "--operation", "write,describe", "--topic", "orders", "--output", "json")  # fmt: skip
    assert len(json.loads(created.stdout)["acls"]) == 2
    listed = json.loads(sluice(acl_broker, "admin", "acl", "list", "--topic", "orders", "--output", "json").stdout)
    assert sorted(a["operation"] for a in listed["acls"]) == ["DESCRIBE", "WRITE"]
    assert {a["principal"] for a in listed["acls"]} == {"User:alice"}

    # alice produces with the CLI (SCRAM-SHA-256, then PLAIN is not enabled: refused).
    sluice(acl_broker, "alice", "produce", "orders", stdin="a\nb\n")
    plain = sluice(acl_broker, "alice", "produce", "orders", "--sasl-mechanism", "PLAIN", stdin="c\n", check=False)
    assert plain.returncode == 1 and "UnsupportedSaslMechanism" in plain.stderr, plain.stderr
    # A wrong password is refused with Kafka's message.
    env_wrong = sluice(acl_broker, None, "topic", "list", "--user", "alice", check=False)
    assert env_wrong.returncode != 0 and "SLUICE_PASSWORD" in env_wrong.stderr
    # alice may not change ACLs; bob may not produce.
    denied = sluice(acl_broker, "alice", "acl", "create", "--allow-principal", "User:alice", "--operation", "all",
                    "--cluster", check=False)  # fmt: skip
    assert denied.returncode != 0 and "ClusterAuthorizationFailed" in denied.stderr, denied.stderr
    refused = sluice(acl_broker, "bob", "produce", "orders", stdin="x\n", check=False)
    assert refused.returncode != 0 and "TopicAuthorizationFailed" in refused.stderr, refused.stderr

    deleted = sluice(acl_broker, "admin", "acl", "delete", "--allow-principal", "User:alice", "--topic", "orders",
                     "--output", "json")  # fmt: skip
    assert len(json.loads(deleted.stdout)["acls"]) == 2
    assert json.loads(sluice(acl_broker, "admin", "acl", "list", "--output", "json").stdout)["acls"] == []


def tagged(r) -> dict[int, bytes]:
    """A flexible struct's tag section: tag -> raw value."""
    out = {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        out[tag] = r.take(size)
    return out


def test_kafka_4_4_versions_check_what_kafka_checks(acl_broker):
    """The anonymous PLAINTEXT principal, granted CREATE on one topic and nothing else, over
    raw requests at Kafka 4.4's newest versions: CreateTopics v7 creates it but answers no
    configs without DESCRIBE_CONFIGS (KIP-525's TOPIC_AUTHORIZATION_FAILED config error);
    DescribeTopicPartitions hides an undescribable topic's id; FindCoordinator v6 (batched)
    refuses the group; ListConfigResources needs DESCRIBE_CONFIGS on the cluster,
    AlterReplicaLogDirs ALTER on it."""
    import kafka_spec

    import kafka_wire as kw
    from kafka_wire import KafkaConnection

    admin = AdminClient(sasl(acl_broker, "admin"))
    assert wait(admin.create_topics([NewTopic("hidden", num_partitions=1, replication_factor=1)])) == {"hidden": None}
    grant = allow("User:ANONYMOUS", ResourceType.TOPIC, "anon-made", AclOperation.CREATE)
    assert all(v is None for v in wait(admin.create_acls([grant])).values())

    with KafkaConnection(acl_broker.bootstrap) as conn:
        create = {"Topics": [{"Name": "anon-made", "NumPartitions": 2, "ReplicationFactor": 1}], "TimeoutMs": 30_000}
        r = conn.request(kw.API_CREATE_TOPICS, 7, kafka_spec.encode(kw.API_CREATE_TOPICS, 7, create))
        r.skip_tagged_fields()  # response header v1
        r.i32()  # throttle time

        def topic(x):
            name, topic_id, error, _message = x.compact_string(), x.take(16), x.i16(), x.compact_string()
            partitions, replication = x.i32(), x.i16()
            configs = x.compact_array(lambda c: (c.compact_string(), c.compact_string(), c.i8(), c.i8(), c.i8(), tagged(c)))
            return name, topic_id != bytes(16), error, partitions, replication, configs, tagged(x)

        [made] = r.compact_array(topic)
        assert made[:5] == ("anon-made", True, kw.NONE, 2, 1), made
        assert not made[5], "no configs without DESCRIBE_CONFIGS"
        assert made[6] == {0: kw.i16(29)}, "TOPIC_AUTHORIZATION_FAILED as the topic's config error code"

        body = kafka_spec.encode(kw.API_DESCRIBE_TOPIC_PARTITIONS, 0, {"Topics": [{"Name": "hidden"}], "ResponsePartitionLimit": 10})
        r = conn.request(kw.API_DESCRIBE_TOPIC_PARTITIONS, 0, body)
        r.skip_tagged_fields()
        r.i32()
        # Error, name, id, internal, partitions (none), authorized operations, tags.
        [hidden] = r.compact_array(
            lambda x: (x.i16(), x.compact_string(), x.take(16), x.i8(), x.compact_array(None), x.i32(), tagged(x))
        )
        assert hidden[:3] == (29, "hidden", bytes(16)), hidden

        body = kafka_spec.encode(kw.API_FIND_COORDINATOR, 6, {"KeyType": 0, "CoordinatorKeys": ["some-group"]})
        r = conn.request(kw.API_FIND_COORDINATOR, 6, body)
        r.skip_tagged_fields()
        r.i32()
        [coordinator] = r.compact_array(lambda x: (x.compact_string(), x.i32(), x.compact_string(), x.i32(), x.i16()))
        assert coordinator == ("some-group", -1, "", -1, 30), coordinator

        r = conn.request(kw.API_LIST_CONFIG_RESOURCES, 1, kafka_spec.encode(kw.API_LIST_CONFIG_RESOURCES, 1, {}))
        r.skip_tagged_fields()
        r.i32()
        assert r.i16() == 31, "CLUSTER_AUTHORIZATION_FAILED"

        # AlterReplicaLogDirs needs ALTER on the cluster: every partition refused without it.
        move = {"Dirs": [{"Path": "/anywhere", "Topics": [{"Name": "anon-made", "Partitions": [0, 1]}]}]}
        r = conn.request(34, 2, kafka_spec.encode(34, 2, move))
        r.skip_tagged_fields()
        r.i32()
        [moved] = r.compact_array(
            lambda x: (x.compact_string(), x.compact_array(lambda p: (p.i32(), p.i16(), tagged(p))), tagged(x))
        )
        assert [p[1] for p in moved[1]] == [31, 31], moved


def test_describe_cluster_needs_no_acl_but_its_operations_do(acl_broker):
    """As Kafka: DescribeCluster answers anyone (Metadata tells the same), and the cluster's
    authorized operations are those of a principal with DESCRIBE on the cluster, else none."""
    alice = AdminClient(sasl(acl_broker, "alice"))  # kept alive until the answers are in
    described = alice.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT_S).result(
        timeout=TIMEOUT_S
    )
    assert described.cluster_id and len(described.nodes) == 1
    assert not described.authorized_operations, described.authorized_operations
    admin = AdminClient(sasl(acl_broker, "admin"))
    as_admin = admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT_S).result(
        timeout=TIMEOUT_S
    )
    assert as_admin.cluster_id == described.cluster_id
    assert AclOperation.DESCRIBE in as_admin.authorized_operations, as_admin.authorized_operations
