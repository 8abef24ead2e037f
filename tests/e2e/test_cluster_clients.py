"""The client matrix against a three-broker cluster whose topics are replicated to all
three brokers (`default.replication.factor` 3), bootstrapping from one broker only:
each client's codec round trip (byte-exact records, every codec stored as sent, read from
each partition's leader) and its consumer-group scenario (members split the partitions,
hand them over at the committed offsets), with the topics spread over the three brokers so
every client follows partitions to their leaders and groups to their coordinators.
librdkafka (confluent-kafka), kcat and kafka-python run in test_cluster.py; these are Java
(both group protocols), franz-go, kafka-go, KafkaJS and sarama, each run by its own suite's
scenario.

One cluster serves the module (each test its own topics and groups).
"""

from __future__ import annotations

import collections

import pytest
from confluent_kafka import Consumer, TopicPartition

import test_franz_go
import test_java_client
import test_kafka_go
import test_kafkajs
import test_sarama
import test_streams_eos
import kafka_wire as kw
from client_matrix import leader_of
from clients import create_topic
from cluster_support import Cluster
from conftest import wait_until
from java_support import run_driver
from kafka_wire import KafkaConnection
from test_franz_go import franz_check  # noqa: F401 (fixture)
from test_java_client import classpath  # noqa: F401 (fixture)
from test_kafka_go import kafkago_check  # noqa: F401 (fixture)
from test_kafkajs import kafkajs_dir  # noqa: F401 (fixture)
from test_sarama import sarama_check  # noqa: F401 (fixture)


class ClusterBroker:
    """What the single-broker scenarios use of a broker (`bootstrap`, `log_tail`), for a
    cluster reached through node 1."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.node(1).bootstrap

    def log_tail(self) -> str:
        return self.cluster.log_tails()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # Every topic the scenarios create is replicated to all three brokers (the broker's
    # default replication factor), so each client also runs against replicated partitions.
    replicated = {"default.replication.factor": "3"}
    cluster = Cluster(tmp_path_factory.mktemp("cluster"), 3, replicated).start()
    yield ClusterBroker(cluster)
    cluster.kill_all()


def test_java_codecs(broker, topic_name, classpath):  # noqa: F811
    # The Java suite's scenario; its checks of the data path, with each raw Fetch sent to
    # the partition's leader (the broker-side counters it also reads are per broker).
    result = run_driver(classpath, "codecs", broker.bootstrap, topic_name, "--records", str(test_java_client.RECORDS))
    assert sorted(result) == sorted(test_java_client.CODEC_IDS)
    for codec, got in result.items():
        want = {"sent": test_java_client.RECORDS, "acked_offsets_contiguous": True, "consumed": test_java_client.RECORDS}
        assert got == {**want, "mismatches": []}, codec
        topic = f"{topic_name}-{codec}"
        with KafkaConnection(leader_of(broker.bootstrap, topic, 0)) as conn:
            fetched = conn.fetch(topic, 0, 0, version=11)
        assert set(kw.batch_compression_codecs(fetched.records)) == {test_java_client.CODEC_IDS[codec]}, codec


def test_java_classic_group(broker, topic_name, classpath):  # noqa: F811
    result = test_java_client.run_group(broker, topic_name, classpath, "classic")
    described = result["described_with_two"]
    assert (described["type"], described["state"], described["assignor"]) == ("CLASSIC", "STABLE", "range")


def test_java_kip848_group(broker, topic_name, classpath):  # noqa: F811
    test_java_client.test_kip848_group_rebalances_with_the_brokers_assignor(broker, topic_name, classpath)


def test_franz_go_codecs(broker, topic_name, franz_check, tmp_path):  # noqa: F811
    test_franz_go.test_every_codec_round_trips_byte_exact(broker, topic_name, franz_check, tmp_path)


def test_franz_go_group(broker, topic_name, franz_check):  # noqa: F811
    test_franz_go.test_group_members_split_and_hand_over_partitions_at_committed_offsets(broker, topic_name, franz_check)


def test_kafka_go_codecs(broker, topic_name, kafkago_check, tmp_path):  # noqa: F811
    test_kafka_go.test_every_codec_round_trips_byte_exact(broker, topic_name, kafkago_check, tmp_path)


def test_kafka_go_group(broker, topic_name, kafkago_check):  # noqa: F811
    test_kafka_go.test_group_members_split_and_hand_over_partitions_at_committed_offsets(broker, topic_name, kafkago_check)


def test_kafkajs_codecs(broker, topic_name, kafkajs_dir, tmp_path):  # noqa: F811
    test_kafkajs.test_every_codec_round_trips_byte_exact(broker, topic_name, kafkajs_dir, tmp_path)


def test_kafkajs_group(broker, topic_name, kafkajs_dir):  # noqa: F811
    test_kafkajs.test_group_members_split_and_hand_over_partitions_at_committed_offsets(broker, topic_name, kafkajs_dir)


def test_sarama_group(broker, topic_name, sarama_check):  # noqa: F811
    # The sarama suite's checks (each message where SendMessages said, consumed once);
    # the group's final commits read with the Java-compatible AdminClient of librdkafka,
    # which finds the group's coordinator.
    create_topic(broker.bootstrap, topic_name, partitions=test_sarama.PARTITIONS)
    result = test_sarama.run_scenario(sarama_check, broker.bootstrap, topic_name, False)
    assert not result["group_errors"], result["group_errors"][:5]
    found = collections.Counter(c["value"] for c in result["consumed"])
    sent = result["sent_before"] + result["sent_after"]
    assert len(sent) == test_sarama.BEFORE + test_sarama.AFTER * test_sarama.ROUNDS
    assert all(found[m["value"]] == 1 for m in sent), "every message consumed once"
    group = f"{topic_name}-group"

    def committed():
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        try:
            tps = consumer.committed([TopicPartition(topic_name, p) for p in range(test_sarama.PARTITIONS)], timeout=30)
        finally:
            consumer.close()
        total = sum(tp.offset for tp in tps if tp.offset >= 0)
        return total == len(sent)

    wait_until(committed, test_sarama.COMMIT_DEADLINE_S, "the group's commits at the log end", 0.2)


def test_java_transactions(broker, topic_name, classpath):  # noqa: F811
    # The Java suite's transaction scenario (commit, abort, a fenced zombie, offsets in a
    # transaction), on the cluster's protocol v2 default.
    r = run_driver(classpath, "txn", broker.bootstrap, topic_name)
    committed = [f"committed-{t}-{i}" for t in (1, 2, 3) for i in range(5)]
    assert r["read_committed"] == committed
    assert r["read_uncommitted"] == committed[:5] + [f"aborted-{i}" for i in range(5)] + committed[5:]
    assert r["zombie_commit_error"] == "InvalidProducerEpochException caused by null, then ProducerFencedException"
    assert r["ghost_member_offsets_error"] == "CommitFailedException"
    assert r["offset_committed_in_txn"] == 3
    assert r["end_offset"] == 24


def test_kafka_streams_exactly_once_v2_across_kill_9(broker, tmp_path):
    # The Streams suite's scenario as it is (word count, windowed count, join; the app
    # killed -9 twice), its topics and stores spread over the three brokers.
    for topic in ["eos-text", "eos-counts", "eos-clicks", "eos-window-counts", "eos-orders", "eos-customers",
                  "eos-enriched"]:  # fmt: skip
        create_topic(broker.bootstrap, topic, partitions=test_streams_eos.PARTITIONS)
    test_streams_eos.test_streams_exactly_once_v2_is_exact_across_kill_9(broker, tmp_path)
