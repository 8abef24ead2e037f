"""The admin APIs Kafka's tools and UIs call, through real clients: CreatePartitions,
DescribeCluster, ElectLeaders, DescribeLogDirs, DeleteRecords, AlterConfigs, OffsetDelete.

Covers:
- confluent-kafka's AdminClient grows a topic (validate_only first, which changes nothing);
  producers then write to the new partitions and consumers read them; a keyless producer
  spreads over all of them after its metadata refresh; the new count survives a restart with
  the data in place; asking for fewer or the same partitions is INVALID_PARTITIONS, an
  unknown topic UNKNOWN_TOPIC_OR_PARTITION, assignments naming another broker
  INVALID_REPLICA_ASSIGNMENT;
- kafka-python's KafkaAdminClient.create_partitions;
- `sluice topic add-partitions` (dry run, text and JSON output, an unknown topic);
- confluent-kafka's describe_cluster (with authorized operations) and elect_leaders
  (ELECTION_NOT_NEEDED on a single broker, UNKNOWN_TOPIC_OR_PART), kafka-python's
  describe_log_dirs (v0: partition sizes on disk);
- DeleteRecords from confluent-kafka (an offset and -1, the high watermark) and kafka-python:
  the log start moves, consumers from the beginning start there, the move survives kill -9,
  an offset past the high watermark is OFFSET_OUT_OF_RANGE;
- the legacy AlterConfigs from confluent-kafka and kafka-python replaces a topic's overrides
  as a whole; a bad value is INVALID_CONFIG;
- OffsetDelete through `sluice group delete-offsets`: refused (GROUP_SUBSCRIBED_TO_TOPIC) for
  the topic a live confluent-kafka consumer group reads, allowed for its other topic and,
  once the group is empty, for any partition.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewPartitions
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions

from clients import Record, admin, admin_op, consume_partition, create_topic, produce_all, producer, watermarks

TIMEOUTS = {"operation_timeout": 30, "request_timeout": 30}


def partition_count(bootstrap: str, topic: str) -> int:
    return len(admin(bootstrap).list_topics(topic, timeout=30).topics[topic].partitions)


def test_create_partitions_grows_a_topic_that_clients_then_use(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, [Record(None, b"before")], partition=0)

    checked = admin_op(broker.bootstrap, "create_partitions", [NewPartitions(topic_name, 3)], validate_only=True, **TIMEOUTS)
    assert checked == {topic_name: None}, checked
    assert partition_count(broker.bootstrap, topic_name) == 1, "validate_only changed the topic"

    grown = admin_op(broker.bootstrap, "create_partitions", [NewPartitions(topic_name, 3)], **TIMEOUTS)
    assert grown == {topic_name: None}, grown
    assert partition_count(broker.bootstrap, topic_name) == 3
    fresh = producer(broker.bootstrap)
    for part in (1, 2):
        [d] = produce_all(fresh, topic_name, [Record(None, f"new-{part}".encode())], partition=part)
        assert (d.partition, d.offset) == (part, 0)
    spread = produce_all(fresh, topic_name, [Record(f"k{i}".encode(), b"x") for i in range(60)], partition=None)
    assert {d.partition for d in spread} == {0, 1, 2}, "keyed records land on every partition"

    broker.restart()
    assert partition_count(broker.bootstrap, topic_name) == 3
    assert [m.value() for m in consume_partition(broker.bootstrap, topic_name, 0, 1)] == [b"before"]
    for part in (1, 2):
        assert consume_partition(broker.bootstrap, topic_name, part, 1)[0].value() == f"new-{part}".encode()

    refused = admin_op(
        broker.bootstrap,
        "create_partitions",
        [NewPartitions(topic_name, 3), NewPartitions(f"{topic_name}-none", 2)],
        **TIMEOUTS,
    )
    assert refused[topic_name].code() == KafkaError.INVALID_PARTITIONS, refused
    assert refused[f"{topic_name}-none"].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, refused
    elsewhere = admin_op(
        broker.bootstrap, "create_partitions", [NewPartitions(topic_name, 4, replica_assignment=[[7]])], **TIMEOUTS
    )
    assert elsewhere[topic_name].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, elsewhere
    assert partition_count(broker.bootstrap, topic_name) == 3


def test_kafka_python_create_partitions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        client.create_partitions({topic_name: KpNewPartitions(total_count=5)})
    finally:
        client.close()
    assert partition_count(broker.bootstrap, topic_name) == 5


def test_sluice_topic_add_partitions(broker, topic_name):
    from test_cli import sluice, sluice_json

    create_topic(broker.bootstrap, topic_name, 2)
    dry = sluice_json(broker, "topic", "add-partitions", topic_name, "--num", "3", "--dry-run")
    assert dry["grown"] == [
        {"topic": topic_name, "partitions": 5, "dry_run": True, "error": None, "message": None}
    ], dry
    assert partition_count(broker.bootstrap, topic_name) == 2
    text = sluice(broker, "topic", "add-partitions", topic_name, "-n", "3").stdout.decode()
    assert text == f"grew {topic_name} to 5 partitions\n", text
    assert partition_count(broker.bootstrap, topic_name) == 5
    missing = sluice(broker, "topic", "add-partitions", f"{topic_name}-none", "-n", "1", check=False)
    assert missing.returncode != 0 and "unknown topic" in missing.stderr.decode()


def test_describe_cluster_elect_leaders_and_log_dirs(broker, topic_name):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AclOperation

    create_topic(broker.bootstrap, topic_name, 2)
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"x" * 100) for _ in range(10)], partition=1)
    client = admin(broker.bootstrap)
    cluster = client.describe_cluster(include_authorized_operations=True, request_timeout=30).result(timeout=30)
    assert cluster.cluster_id and len(cluster.nodes) == 1 and cluster.controller.id == 0
    assert AclOperation.DESCRIBE in cluster.authorized_operations, cluster.authorized_operations

    elected = client.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(topic_name, 0), TopicPartition(topic_name, 9)]
    ).result(timeout=30)
    codes = {tp.partition: (err.code() if err else None) for tp, err in elected.items()}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 9: KafkaError.UNKNOWN_TOPIC_OR_PART}, codes

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        dirs = kp.describe_log_dirs()
    finally:
        kp.close()
    [(error, log_dir, topics)] = dirs.log_dirs
    assert error == 0 and log_dir.endswith("data"), (error, log_dir)
    sizes = {p[0]: p[1] for name, parts in topics if name == topic_name for p in parts}
    assert set(sizes) == {0, 1} and sizes[1] > 1000 > sizes[0], sizes


def test_delete_records_moves_the_log_start_for_every_client(broker, topic_name):
    from confluent_kafka import TopicPartition

    create_topic(broker.bootstrap, topic_name, 2)
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, [Record(None, f"r{i}".encode()) for i in range(20)], partition=0)
    produce_all(p, topic_name, [Record(None, f"s{i}".encode()) for i in range(5)], partition=1)

    client = admin(broker.bootstrap)  # outlives its futures
    deleted = client.delete_records(
        [TopicPartition(topic_name, 0, 12), TopicPartition(topic_name, 1, -1)], request_timeout=30
    )
    results = {tp.partition: f.result(timeout=30) for tp, f in deleted.items()}
    assert results[0].low_watermark == 12 and results[1].low_watermark == 5, results
    assert watermarks(broker.bootstrap, topic_name, 0) == (12, 20)
    # A consumer from the beginning starts at the new log start.
    got = consume_partition(broker.bootstrap, topic_name, 0, 8, start_offset=-2)
    assert [m.offset() for m in got] == list(range(12, 20))

    broker.kill()  # the new start is durable before the answer
    broker.start()
    assert watermarks(broker.bootstrap, topic_name, 0) == (12, 20)
    assert watermarks(broker.bootstrap, topic_name, 1) == (5, 5)

    client = admin(broker.bootstrap)
    past = client.delete_records([TopicPartition(topic_name, 0, 99)], request_timeout=30)
    [future] = past.values()
    try:
        future.result(timeout=30)
        raise AssertionError("an offset past the high watermark was accepted")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, e

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        from kafka.structs import TopicPartition as KpTopicPartition

        kp.delete_records({KpTopicPartition(topic_name, 0): 15})
    finally:
        kp.close()
    assert watermarks(broker.bootstrap, topic_name, 0) == (15, 20)


def test_legacy_alter_configs_replaces_a_topics_overrides(broker, topic_name):
    from confluent_kafka.admin import ConfigResource, ResourceType

    create_topic(broker.bootstrap, topic_name, 1, {"retention.ms": "3600000", "max.message.bytes": "100000"})
    resource = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"segment.bytes": "1048576"})
    assert admin_op(broker.bootstrap, "alter_configs", [resource], request_timeout=30) == {resource: None}

    described = admin_op(broker.bootstrap, "describe_configs", [ConfigResource(ResourceType.TOPIC, topic_name)])
    [entries] = described.values()
    overridden = {k: e.value for k, e in entries.items() if not e.is_default}
    assert overridden == {"segment.bytes": "1048576"}, f"the set replaces every override: {overridden}"

    bad = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"retention.ms": "soon"})
    [error] = admin_op(broker.bootstrap, "alter_configs", [bad], request_timeout=30).values()
    assert error.code() == KafkaError.INVALID_CONFIG, error
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        from kafka.admin import ConfigResource as KpConfigResource
        from kafka.admin import ConfigResourceType

        kp.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"retention.ms": "60000"})])
    finally:
        kp.close()
    [entries] = admin_op(broker.bootstrap, "describe_configs", [ConfigResource(ResourceType.TOPIC, topic_name)]).values()
    assert {k: e.value for k, e in entries.items() if not e.is_default} == {"retention.ms": "60000"}


def test_offset_delete_through_sluice_group_delete_offsets(broker, topic_name):
    from confluent_kafka import Consumer, TopicPartition
    from test_cli import sluice, sluice_json

    create_topic(broker.bootstrap, topic_name, 2)
    create_topic(broker.bootstrap, f"{topic_name}-other", 1)
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"v")], partition=0)
    group = f"{topic_name}-g"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(
            offsets=[
                TopicPartition(topic_name, 0, 1),
                TopicPartition(topic_name, 1, 0),
                TopicPartition(f"{topic_name}-other", 0, 0),
            ],
            asynchronous=False,
        )
        c.subscribe([topic_name])
        deadline = 60
        while not c.assignment() and deadline:
            c.poll(0.5)
            deadline -= 1
        assert c.assignment(), "the consumer never got its partitions"
        # The group reads topic_name: its offsets stay; the other topic's go.
        refused = sluice(broker, "group", "delete-offsets", group, "--topic", topic_name, check=False)
        assert refused.returncode != 0 and "GroupSubscribedToTopic" in refused.stderr.decode(), refused.stderr
        other = sluice_json(broker, "group", "delete-offsets", group, "--topic", f"{topic_name}-other")
        assert other["deleted"] == [{"topic": f"{topic_name}-other", "partition": 0, "error": None}], other
    finally:
        c.close()
    # Empty now: every partition may go.
    text = sluice(broker, "group", "delete-offsets", group, "--topic", topic_name, "--partition", "0").stdout.decode()
    assert text == f"deleted the committed offset of {topic_name}-0 for group {group}\n", text
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = probe.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=30)
    finally:
        probe.close()
    assert [tp.offset for tp in committed] == [-1001, 0], committed
