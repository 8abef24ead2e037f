"""franz-go v1.22.3 (kgo) and kadm v1.20.0 against a real broker.

Covers: franz-go's default producer (idempotent, acks=all) with each codec (none, gzip,
snappy, lz4, zstd), records read back byte-exact (null and text keys, binary values, repeated
binary headers) by a direct partition consumer at the offsets ProduceSync reported, each
batch stored with its codec (raw Fetch); a consumer group (cooperative-sticky, franz-go's
default) committing every poll with CommitRecords before it allows a rebalance: one member,
a second joins and the partitions split, it leaves and the first takes them all, then a new
member starts exactly at the committed offsets; kadm: CreateTopic with configs, again
(TOPIC_ALREADY_EXISTS), ListTopics, DescribeTopicConfigs, AlterTopicConfigs (incremental set
and delete), CreatePartitions, DeleteRecords, ListStartOffsets/ListEndOffsets, CommitOffsets,
FetchOffsets, ListGroups, DescribeGroups, DeleteGroup, DeleteTopic; a transactional producer
committing, aborting and committing, read back read_committed (committed only) and
read_uncommitted (everything).

How: tests/clients/franz (a Go module) is built once per run by tests/clients/build.sh
(tests/run calls it) into target/clients/franz-check, and each scenario runs as a subcommand
that prints one JSON object.
"""

from __future__ import annotations

import pytest

from client_matrix import CODECS, assert_group_handover, assert_round_trip, build, record_spec, run_json, write_spec
from clients import create_topic

RUN_TIMEOUT_S = 120
GROUP_PARTITIONS = 4


@pytest.fixture(scope="session")
def franz_check() -> str:
    return str(build("franz"))


def franz(binary: str, bootstrap: str, *args: str) -> dict:
    return run_json([binary, *args, f"-bootstrap={bootstrap}", f"-timeout={RUN_TIMEOUT_S - 20}s"], RUN_TIMEOUT_S)


def test_every_codec_round_trips_byte_exact(broker, topic_name, franz_check, tmp_path):
    create_topic(broker.bootstrap, topic_name, partitions=len(CODECS))
    spec = record_spec(topic_name, CODECS)
    result = franz(franz_check, broker.bootstrap, "codecs", f"-spec={write_spec(tmp_path / 'spec.json', spec)}")
    assert_round_trip(spec, result, broker.bootstrap)
    # franz-go reports the batch attributes it read: the codec each partition was sent with.
    for c in result["consumed"]:
        assert c["codec"] in (0, c["partition"]), c


def test_group_members_split_and_hand_over_partitions_at_committed_offsets(broker, topic_name, franz_check):
    create_topic(broker.bootstrap, topic_name, partitions=GROUP_PARTITIONS)
    group = f"{topic_name}-group"
    result = franz(franz_check, broker.bootstrap, "group", f"-topic={topic_name}", f"-group={group}", "-per-phase=200")
    assert_group_handover(result, GROUP_PARTITIONS)
    described = result["described"]
    assert described["shared"]["state"] == "Stable" and described["shared"]["protocol"] == "cooperative-sticky"
    assert sorted(len(ps) for ps in described["shared"]["members"].values()) == [2, 2], described
    assert [sorted(ps) for ps in described["after-leave"]["members"].values()] == [list(range(GROUP_PARTITIONS))]


def test_kadm_topic_config_record_and_group_operations(broker, topic_name, franz_check):
    group = f"{topic_name}-group"
    r = franz(franz_check, broker.bootstrap, "admin", f"-topic={topic_name}", f"-group={group}")
    assert r["create"] == topic_name
    assert r["create_again"] == "TOPIC_ALREADY_EXISTS"
    assert r["partitions_after_create"] == 3
    assert r["configs_after_create"] == {"retention.ms": "3600000", "max.message.bytes": "500000"}
    assert r["configs_after_alter"] == {"retention.ms": "7200000"}
    assert r["partitions_after_create_partitions"] == 5
    assert r["delete_records"] == 6
    assert r["start_offsets"] == {"0": 0, "1": 0, "2": 0, "3": 0, "4": 6}
    assert r["end_offsets"] == {"0": 0, "1": 0, "2": 0, "3": 0, "4": 10}
    assert r["fetch_offsets"] == {"4": 8}
    assert group in r["list_groups"]
    assert r["describe_group"] == {"state": "Empty", "members": 0}
    assert r["fetch_offsets_after_delete_group"] == 0
    assert topic_name not in r["topics_after_delete"]


def test_transactions_commit_and_abort_read_committed(broker, topic_name, franz_check):
    create_topic(broker.bootstrap, topic_name)
    r = franz(franz_check, broker.bootstrap, "txn", f"-topic={topic_name}")
    committed = [f"commit-1-{i}" for i in range(10)] + [f"commit-2-{i}" for i in range(10)]
    assert r["read_committed"] == committed
    assert r["read_uncommitted"] == committed[:10] + [f"abort-{i}" for i in range(10)] + committed[10:]
