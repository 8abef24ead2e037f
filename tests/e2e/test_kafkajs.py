"""KafkaJS 2.2.4 (Node) against a real broker.

Covers: an idempotent producer (acks=all) sending each codec's records in one `send()`:
gzip (built in), snappy (kafkajs-snappy 1.1.0), lz4 (lz4js 0.2.0) and zstd (zstd-codec
0.1.5), all pure JavaScript, plugged into `CompressionCodecs`; the base offset each send
reports is where a consumer group reads every record back byte-exact (null and text keys,
binary values, repeated binary headers), each batch stored with its codec (raw Fetch); a
consumer group of `eachMessage` members committing every record (autoCommit, threshold 1):
one member, a second joins and the partitions split, it leaves and the first takes them
all, then a new member starts exactly at the committed offsets; the admin client:
createTopics with configs, again (false: it exists), listTopics, fetchTopicMetadata,
describeConfigs, alterConfigs (replacing the set), createPartitions, deleteTopicRecords,
fetchTopicOffsets, fetchTopicOffsetsByTimestamp, setOffsets, fetchOffsets and resetOffsets
(earliest), each followed by a member consuming from the committed offsets, listGroups, describeGroups, deleteGroups,
deleteTopics, describeCluster; a transactional producer committing, aborting and committing
with sendOffsets in each transaction (the group's offset moves only on commit), read back
read_committed (KafkaJS's default) and readUncommitted.

How: tests/clients/kafkajs (package.json and package-lock.json pinned) is installed once per
run by tests/clients/build.sh (`npm ci --ignore-scripts`; tests/run calls it), and each
scenario runs as `node main.js SCENARIO`, which prints one JSON object.
"""

from __future__ import annotations

import pytest

from client_matrix import CODECS, assert_group_handover, assert_round_trip, build, record_spec, run_json, write_spec
from clients import create_topic

RUN_TIMEOUT_S = 120
GROUP_PARTITIONS = 4


@pytest.fixture(scope="session")
def kafkajs_dir() -> str:
    return str(build("kafkajs"))


def kafkajs(package_dir: str, bootstrap: str, *args: str) -> dict:
    command = ["node", "main.js", *args, f"--bootstrap={bootstrap}", f"--timeout-ms={(RUN_TIMEOUT_S - 20) * 1000}"]
    return run_json(command, RUN_TIMEOUT_S, cwd=package_dir)


def test_every_codec_round_trips_byte_exact(broker, topic_name, kafkajs_dir, tmp_path):
    create_topic(broker.bootstrap, topic_name, partitions=len(CODECS))
    spec = record_spec(topic_name, CODECS)
    result = kafkajs(kafkajs_dir, broker.bootstrap, "codecs", f"--spec={write_spec(tmp_path / 'spec.json', spec)}")
    assert set(result["produced"]) == set(CODECS)
    assert_round_trip(spec, result, broker.bootstrap)


def test_group_members_split_and_hand_over_partitions_at_committed_offsets(broker, topic_name, kafkajs_dir):
    create_topic(broker.bootstrap, topic_name, partitions=GROUP_PARTITIONS)
    group = f"{topic_name}-group"
    result = kafkajs(
        kafkajs_dir, broker.bootstrap, "group", f"--topic={topic_name}", f"--group={group}", "--per-phase=200"
    )
    assert_group_handover(result, GROUP_PARTITIONS)
    described = result["described"]
    shared = described["shared"]
    # KafkaJS's only built-in assignor is its RoundRobinAssigner.
    assert (shared["state"], shared["protocolType"], shared["protocol"]) == ("Stable", "consumer", "RoundRobinAssigner")
    assert set(shared["members"]) == {"member-a", "member-b"}, shared
    assert sorted(p for ps in shared["members"].values() for p in ps) == list(range(GROUP_PARTITIONS)), shared
    assert described["after-leave"]["members"] == {"member-a": list(range(GROUP_PARTITIONS))}, described


def test_admin_topic_config_record_offset_and_group_calls(broker, topic_name, kafkajs_dir):
    group = f"{topic_name}-group"
    r = kafkajs(kafkajs_dir, broker.bootstrap, "admin", f"--topic={topic_name}", f"--group={group}")
    assert (r["create"], r["create_again"], r["listed"]) == (True, False, True)
    assert r["partitions_after_create"] == [{"partition": p, "leader": 0} for p in range(3)]
    assert r["configs_after_create"] == {"retention.ms": "3600000", "max.message.bytes": "500000"}
    assert r["alter_configs"] == [0]
    assert r["configs_after_alter"] == {"retention.ms": "7200000"}
    assert [p["partition"] for p in r["partitions_after_create_partitions"]] == list(range(5))
    assert r["produce"] == 0
    assert r["topic_offsets"] == {**{str(p): {"low": 0, "high": 0} for p in range(4)}, "4": {"low": 6, "high": 10}}
    # Timestamp 0: the first record at or after it; KafkaJS shows an empty partition's -1 as
    # its high watermark.
    assert r["offsets_by_timestamp"] == {"0": 0, "1": 0, "2": 0, "3": 0, "4": 6}
    none_but_4 = {str(p): -1 for p in range(4)}
    assert r["fetch_offsets"] == {**none_but_4, "4": 8}
    assert r["consumed_after_set"] == {"4": [8, 9]}
    assert r["fetch_offsets_after_consume"] == {**none_but_4, "4": 10}
    # resetOffsets commits Kafka's "earliest" sentinel (-2) itself; a member subscribed
    # fromBeginning then starts at each partition's log start offset.
    assert r["fetch_offsets_after_reset"] == {str(p): -2 for p in range(5)}
    assert r["consumed_after_reset"] == {"4": [6, 7, 8, 9]}
    assert r["list_groups"] == [{"groupId": group, "protocolType": "consumer"}]
    assert r["describe_group"] == [{"groupId": group, "state": "Empty", "members": 0}]
    assert r["delete_groups"] == [{"groupId": group, "errorCode": 0}]
    assert r["fetch_offsets_after_delete_group"] == {str(p): -1 for p in range(5)}
    assert r["listed_after_delete"] is False
    assert r["cluster"] == {"brokers": [0], "controller": 0}


def test_transactions_commit_and_abort_read_committed(broker, topic_name, kafkajs_dir):
    create_topic(broker.bootstrap, topic_name)
    group = f"{topic_name}-group"
    r = kafkajs(kafkajs_dir, broker.bootstrap, "txn", f"--topic={topic_name}", f"--group={group}")
    assert r["committed_offsets"] == {"commit-1": 10, "abort": 10, "commit-2": 30}
    committed = [f"commit-1-{i}" for i in range(10)] + [f"commit-2-{i}" for i in range(10)]
    assert r["read_committed"] == committed
    assert r["read_uncommitted"] == committed[:10] + [f"abort-{i}" for i in range(10)] + committed[10:]
