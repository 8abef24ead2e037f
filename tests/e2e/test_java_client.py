"""Apache Kafka's own Java client (kafka-clients 4.4.0, Maven) against a real broker.

Covers, one driver subcommand per test (tests/clients/java, sluice.check.Main, which prints
one JSON object): a producer with acks=all and idempotence on and each codec (none, gzip,
snappy, lz4, zstd), read back byte-exact (keys, values, headers, timestamps, offsets) and
fetched raw to see the codec really stored; a consumer group of two members, under each
group protocol (classic, and KIP-848's consumer protocol with the broker's assignor), that
rebalances as the second joins and the first leaves, every record consumed exactly once and
the commits at the log end; a KIP-848 member subscribed by a broker-side regex picking up
a topic created after it subscribed; a KIP-848 member rejoining after a broker restart
(membership is not persisted) and committing everything it read; the AdminClient (createTopics, listTopics,
describeCluster/describeTopics, createPartitions, describeConfigs, incrementalAlterConfigs,
deleteRecords, listOffsets (with KIP-734's maxTimestamp), listGroups, describeConsumerGroups, listConsumerGroupOffsets,
listConfigResources, deleteTopics); transactions (commit, abort, sendOffsetsToTransaction, read_committed against
read_uncommitted, fencing by a second producer).

How: tests/run builds the Maven project once (java_support.py); each test starts one JVM.
"""

from __future__ import annotations

import collections
import json
import subprocess

import pytest
from clients import create_topic
from confluent_kafka import Producer
from java_support import RUN_TIMEOUT_S, java_classpath, run_driver
from test_metrics import scrape

import kafka_wire as kw
from kafka_wire import KafkaConnection

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS = 300


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_classpath()


def test_every_codec_round_trips_byte_exact(broker, topic_name, classpath):
    result = run_driver(classpath, "codecs", broker.bootstrap, topic_name, "--records", str(RECORDS))
    assert sorted(result) == sorted(CODEC_IDS)
    for codec, got in result.items():
        assert got == {"sent": RECORDS, "acked_offsets_contiguous": True, "consumed": RECORDS, "mismatches": []}, codec
        with KafkaConnection(broker.bootstrap) as conn:
            fetched = conn.fetch(f"{topic_name}-{codec}", 0, 0, version=11)
        codecs = kw.batch_compression_codecs(fetched.records)
        # The Java producer compresses every batch with the codec it is configured with.
        assert set(codecs) == {CODEC_IDS[codec]}, (codec, codecs)
    # The client negotiated the newest versions (Produce v13, topics by id, as the broker
    # finalizes transaction.version 2; Fetch v18, topics by id; Metadata v13), as the broker
    # counted them.
    samples = scrape(broker)
    assert samples.get('sluice_requests_total{api="Produce",version="13"}', 0) > 0, samples
    assert samples.get('sluice_requests_total{api="Fetch",version="18"}', 0) > 0, samples
    assert samples.get('sluice_requests_total{api="Metadata",version="13"}', 0) > 0, samples


def run_group(broker, topic_name, classpath, protocol: str) -> dict:
    """The two-member group under `protocol`; checks what both protocols guarantee: every
    record consumed exactly once across the rebalances, the commits at the log end, and
    the members' own checks (split, then everything to the one left)."""
    result = run_driver(
        classpath, "group", broker.bootstrap, topic_name, "--records", str(RECORDS), "--protocol", protocol
    )
    members = {name: {k: m[k] for k in ("assignments", "errors")} for name, m in result["members"].items()}
    assert result["failures"] == [], f"{result['failures']}\n{members}\n{broker.log_tail()}"
    assert result["produced"] == 3 * RECORDS
    a, b = result["members"]["a"], result["members"]["b"]
    assert a["errors"] == [] and b["errors"] == []
    consumed = collections.Counter(a["consumed"] + b["consumed"])
    duplicated = [r for r, n in consumed.items() if n > 1]
    assert not duplicated, f"consumed twice across the rebalances: {duplicated[:10]}"
    assert len(consumed) == 3 * RECORDS
    assert {int(r.split(":")[2].removeprefix("r-")) for r in consumed} == set(range(3 * RECORDS))
    per_partition = 3 * RECORDS // 6
    assert result["committed"] == {str(p): [per_partition, per_partition] for p in range(6)}
    described = result["described_with_two"]
    assert described["partitions"] == list(range(6)), described
    assert described["partitions_per_member"] == [3, 3], described
    return result


def test_classic_group_rebalances_as_members_join_and_leave(broker, topic_name, classpath):
    result = run_group(broker, topic_name, classpath, "classic")
    a, b = result["members"]["a"], result["members"]["b"]
    everything = list(range(6))
    assert a["assignments"][0] == everything
    # Eager (range): after b joined, the two held disjoint halves; after a left, b held everything.
    assert len(a["assignments"]) >= 2 and 0 < len(a["assignments"][-1]) < 6
    assert len(b["assignments"][0]) == 6 - len(a["assignments"][-1])
    assert b["assignments"][-1] == everything
    described = result["described_with_two"]
    assert (described["type"], described["state"], described["assignor"]) == ("CLASSIC", "STABLE", "range")
    assert (described["listed_type"], described["listed_state"]) == ("CLASSIC", "STABLE")
    # The client negotiated Kafka 4.4's newest classic group versions, as the broker counted.
    samples = scrape(broker)
    for api, version in (
        ("FindCoordinator", 6), ("JoinGroup", 9), ("SyncGroup", 5), ("Heartbeat", 4), ("LeaveGroup", 5), ("DescribeGroups", 6)
    ):
        assert samples.get(f'sluice_requests_total{{api="{api}",version="{version}"}}', 0) > 0, (api, version)


def test_kip848_group_rebalances_with_the_brokers_assignor(broker, topic_name, classpath):
    result = run_group(broker, topic_name, classpath, "consumer")
    a, b = result["members"]["a"], result["members"]["b"]
    # Incremental: a got everything first; b only ever got partitions a gave up, then all.
    assert a["assignments"][0] == list(range(6))
    assert b["assignments"][-1] == list(range(6))
    described = result["described_with_two"]
    # ConsumerGroupDescribe (KIP-848), the server-side `uniform` assignor.
    assert (described["type"], described["state"], described["assignor"]) == ("CONSUMER", "STABLE", "uniform")
    assert (described["listed_type"], described["listed_state"]) == ("CONSUMER", "STABLE")


def test_kip848_regex_subscription_follows_new_topics(broker, topic_name, classpath):
    r = run_driver(classpath, "regex", broker.bootstrap, topic_name)
    assert r["read"] == {f"{topic_name}-a": 20, f"{topic_name}-b": 20}, f"{r}\n{broker.log_tail()}"
    assert r["assigned"] == [f"{topic_name}-a-0", f"{topic_name}-a-1", f"{topic_name}-b-0"]


def test_kip848_member_rejoins_after_a_broker_restart(broker, topic_name, classpath):
    """Membership is not persisted: after the restart the member's heartbeat is
    UNKNOWN_MEMBER_ID, and the Java consumer rejoins and resumes from its commits."""
    half = 200
    create_topic(broker.bootstrap, topic_name, 2)

    def produce(start: int) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(start, start + half):
            producer.produce(topic_name, f"r-{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0

    produce(0)
    port = broker.port
    java = subprocess.Popen(
        ["java", "-cp", classpath, "sluice.check.Main", "restart", "--bootstrap", f"127.0.0.1:{port}",
         "--topic", topic_name, "--records", str(2 * half)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for line in java.stdout:
            if line.startswith("committed ") and int(line.split()[1]) == half:
                break
        else:
            pytest.fail(f"the consumer ended before reading the first {half} records")
        broker.restart(keep_port=True)
        produce(half)
        rest = java.stdout.read()
        assert java.wait(timeout=RUN_TIMEOUT_S) == 0
    finally:
        java.kill()
    result = json.loads(rest.strip().splitlines()[-1])
    assert result["distinct"] == 2 * half, f"{result}\n{broker.log_tail()}"
    # At-least-once: a commit lost in the restart may replay what it covered, no more.
    assert result["reads"] <= 3 * half, result
    # Commits failed (UNKNOWN_MEMBER_ID) until the member rejoined; then they covered all.
    assert result["committed_total"] == 2 * half, result


def test_admin_client_calls(broker, topic_name, classpath):
    r = run_driver(classpath, "admin", broker.bootstrap, topic_name)
    other = f"{topic_name}-other"
    assert r["create_existing_error"] == "TopicExistsException"
    assert {topic_name, other} <= set(r["list_topics"])
    assert r["cluster_nodes"] == 1
    assert r["describe_topic"] == {
        "name": topic_name, "internal": False, "partitions": 3, "leaders": [0, 0, 0], "replicas": [1, 1, 1], "isr": [1, 1, 1]
    }
    assert r["partitions_after_create_partitions"] == 5

    created, altered = r["topic_configs_created"], r["topic_configs_altered"]
    assert created["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert created["cleanup.policy"] == {"value": "delete", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert created["max.message.bytes"]["source"] == "DEFAULT_CONFIG"
    assert altered["retention.ms"] == {"value": "7200000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert altered["max.message.bytes"] == {"value": "500000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert altered["cleanup.policy"] == {"value": "delete", "source": "DEFAULT_CONFIG"}
    brokers = r["broker_configs"]
    assert brokers["log.retention.ms"] == {"value": "604800000", "source": "DEFAULT_CONFIG"}
    assert brokers["data.dir"]["source"] == "STATIC_BROKER_CONFIG"

    assert r["delete_records_low_watermark"] == 4
    assert (r["earliest_after_delete"], r["latest_after_delete"]) == (4, 10)
    assert r["first_offset_read_after_delete"] == 4

    group = f"{topic_name}-group"
    assert r["list_groups_live"][group] == "STABLE/CLASSIC"
    live = r["describe_group_live"]
    assert (live["state"], live["type"], live["assignor"]) == ("STABLE", "CLASSIC", "range")
    assert [m["partitions"] for m in live["members"]] == [[f"{topic_name}-{p}" for p in range(5)]]
    assert r["describe_group_after_close"] == {"state": "EMPTY", "type": "CLASSIC", "assignor": "", "members": []}
    assert r["group_offsets"] == {f"{topic_name}-0": 10, **{f"{topic_name}-{p}": 0 for p in range(1, 5)}}
    # OffsetSpec.maxTimestamp() (KIP-734): the first of two records at the largest timestamp.
    assert (r["max_timestamp_offset"], r["max_timestamp_delta"]) == (1, 900)
    assert (r["earliest_local"], r["latest_tiered"]) == (0, -1)

    assert {"BROKER:0", f"TOPIC:{topic_name}", f"TOPIC:{other}"} <= set(r["config_resources"])
    assert all(c.split(":")[0] in ("BROKER", "TOPIC") for c in r["config_resources"])
    assert other not in r["list_topics_after_delete"] and topic_name in r["list_topics_after_delete"]
    # The admin client negotiated Kafka 4.4's newest topic and config versions.
    samples = scrape(broker)
    # Admin.describeTopics pages through DescribeTopicPartitions (KIP-966) from 3.8 on.
    for api, version in (
        ("CreateTopics", 7), ("DeleteTopics", 6), ("DescribeConfigs", 4), ("Metadata", 13),
        ("DescribeTopicPartitions", 0), ("ListConfigResources", 1),
    ):
        assert samples.get(f'sluice_requests_total{{api="{api}",version="{version}"}}', 0) > 0, (api, version)


# What the Java producer speaks at each finalized `transaction.version` (KIP-890 part 2):
# at 2 the transaction protocol v2 (Produce v13 adds each partition, TxnOffsetCommit v6 its
# group, EndTxn v5 bumps the epoch; no AddPartitionsToTxn or AddOffsetsToTxn), at 1 the v1
# protocol (Produce v11, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v4).
TXN_VERSIONS_USED = {
    "2": ({"Produce": 13, "TxnOffsetCommit": 6, "EndTxn": 5}, ("AddPartitionsToTxn", "AddOffsetsToTxn")),
    "1": ({"Produce": 11, "AddOffsetsToTxn": 4, "TxnOffsetCommit": 4, "EndTxn": 4}, ("AddPartitionsToTxn",)),
}


@pytest.mark.parametrize("transaction_version", ["2", "1"])
def test_transactions_commit_abort_and_fencing(broker_factory, topic_name, classpath, transaction_version):
    broker = broker_factory(settings={"transaction.version": transaction_version})
    r = run_driver(classpath, "txn", broker.bootstrap, topic_name)
    committed = [f"committed-{t}-{i}" for t in (1, 2, 3) for i in range(5)]
    assert r["read_committed"] == committed
    assert r["read_uncommitted"] == committed[:5] + [f"aborted-{i}" for i in range(5)] + committed[5:]
    # The zombie is fenced: at protocol v1 by AddPartitionsToTxn; at v2 its produce is
    # refused INVALID_PRODUCER_EPOCH (as Kafka maps PRODUCER_FENCED for Produce) and the
    # abort that follows gets PRODUCER_FENCED from EndTxn v5.
    assert r["zombie_commit_error"] == {
        "1": "ProducerFencedException",
        "2": "InvalidProducerEpochException caused by null, then ProducerFencedException",
    }[transaction_version]
    # KIP-447: a member the group does not know may not commit offsets in a transaction.
    assert r["ghost_member_offsets_error"] == "CommitFailedException"
    assert r["offset_committed_in_txn"] == 3
    # 4 transactions of 5 records, each closed by one control marker.
    assert r["end_offset"] == 24
    samples = scrape(broker)
    used, then = TXN_VERSIONS_USED[transaction_version]
    for api, version in used.items():
        assert samples.get(f'sluice_requests_total{{api="{api}",version="{version}"}}', 0) > 0, (api, version)
    requests = {k: n for k, n in samples.items() if k.startswith("sluice_requests_total{")}
    for api in ("EndTxn", "Produce"):
        newer = [k for k, n in requests.items() if n > 0 and f'api="{api}"' in k and int(k.split('version="')[1].rstrip('"}')) > used[api]]
        assert not newer, newer
    sent = {api: sum(n for k, n in requests.items() if f'api="{api}"' in k) for api in then}
    if transaction_version == "2":
        assert sent == {api: 0 for api in then}, sent
    else:
        assert all(n > 0 for n in sent.values()), sent
