"""Apache Kafka's own tools (kafka-tools 4.4.0) against a three-broker Sluice cluster, each
bootstrapping from one broker: kafka-metadata-quorum (DescribeQuorum: the leader, its
epoch, the voters and their lag) and kafka-topics (a topic spread over the brokers).
"""

from __future__ import annotations

import re

import pytest

from cluster_support import cluster_factory  # noqa: F401 (fixture)
from java_support import java_classpath, run_java
from kafka_wire import Fields, KafkaConnection

CLUSTER_AUTHORIZATION_FAILED = 31

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
TOPICS = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_classpath()


def test_kafka_metadata_quorum_and_kafka_topics_on_three_brokers(cluster_factory, topic_name, classpath):
    cluster = cluster_factory(3)
    status = run_java(classpath, QUORUM, "--bootstrap-server", cluster.node(2).bootstrap, "describe", "--status").stdout
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.MULTILINE))
    leader = int(fields["LeaderId"])
    assert leader in (1, 2, 3), status
    assert int(fields["LeaderEpoch"]) >= 1, status
    assert int(fields["HighWatermark"]) > 0, status
    assert sorted(int(i) for i in re.findall(r'"id":\s*(\d+)', fields["CurrentVoters"])) == [1, 2, 3], status
    assert fields["CurrentObservers"].strip() == "[]", status
    # Asked of the leader, every voter's lag is known.
    replication = run_java(
        classpath, QUORUM, "--bootstrap-server", cluster.node(leader).bootstrap, "describe", "--replication"
    ).stdout
    rows = [line.split() for line in replication.splitlines()[1:] if line.strip()]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3], replication
    assert all(r[-1] in ("Leader", "Follower") for r in rows), replication

    b = cluster.node(3).bootstrap
    out = run_java(classpath, TOPICS, "--bootstrap-server", b, "--create", "--topic", topic_name, "--partitions", "6").stdout
    assert f"Created topic {topic_name}." in out
    described = run_java(classpath, TOPICS, "--bootstrap-server", cluster.node(1).bootstrap, "--describe", "--topic", topic_name).stdout
    leaders = sorted(int(m) for m in re.findall(r"Leader: (\d+)", described))
    assert leaders == [1, 1, 2, 2, 3, 3], described


def describe_quorum_v0(bootstrap: str) -> tuple[int, int, int]:
    """DescribeQuorum v0 (flexible) for __cluster_metadata-0: (error, partition error, leader)."""
    partition = Fields().i32(0).tagged_fields()
    topic = Fields().compact_string("__cluster_metadata").compact_array([partition]).tagged_fields()
    body = Fields().compact_array([topic]).tagged_fields()
    with KafkaConnection(bootstrap) as conn:
        r = conn.request(55, 0, body)
        r.skip_tagged_fields()  # the flexible response header's
        error = r.i16()
        if r.uvarint() - 1 < 1:
            return error, -1, -1
        r.compact_string()
        r.uvarint()
        r.i32()
        return error, r.i16(), r.i32()


def test_describe_quorum_needs_describe_on_the_cluster(broker_factory):
    closed = broker_factory(settings={"allow.everyone.if.no.acl.found": "false"})
    assert describe_quorum_v0(closed.bootstrap)[0] == CLUSTER_AUTHORIZATION_FAILED
    # A single node is a quorum of one, led by itself.
    assert describe_quorum_v0(broker_factory().bootstrap) == (0, 0, 0)


def test_a_broker_only_node_is_an_observer_until_kafka_cluster_unregisters_it(cluster_factory, classpath):
    """Three voters and a broker-only node: `kafka-metadata-quorum describe --status` lists it
    among the observers; once it is stopped for good, `kafka-cluster unregister --id 4`
    (UnregisterBroker) removes its registration and its place among the learners."""
    cluster = cluster_factory(4, voters=3)
    b = cluster.node(1).bootstrap

    def observers() -> list[int]:
        status = run_java(classpath, QUORUM, "--bootstrap-server", b, "describe", "--status").stdout
        fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.MULTILINE))
        return sorted(int(i) for i in re.findall(r'"id":\s*(\d+)', fields["CurrentObservers"]))

    assert observers() == [4]
    cluster.node(4).stop()
    run_java(classpath, CLUSTER_TOOL, "unregister", "--bootstrap-server", b, "--id", "4")  # exits 0 or raises
    assert observers() == []
    assert 4 not in cluster.live_brokers(1)
    # An id no broker has: Kafka's error, said by the tool.
    refused = run_java(classpath, CLUSTER_TOOL, "unregister", "--bootstrap-server", b, "--id", "9", check=False)
    assert refused.returncode != 0 and "BrokerIdNotRegistered" in (refused.stdout + refused.stderr).replace(" ", ""), refused
