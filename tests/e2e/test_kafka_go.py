"""segmentio/kafka-go v0.4.51 against a real broker.

Covers: a `kafka.Writer` per codec (none, gzip, snappy, lz4, zstd; acks=all, synchronous)
whose `Completion` reports each message's partition and offset, read back byte-exact (null
and text keys, binary values, repeated binary headers) by a partition `kafka.Reader` at
those offsets, each batch stored with its codec (raw Fetch); a `kafka.ConsumerGroup`
(range balancer, kafka-go's default) whose members read their assigned partitions from the
generation's offsets and commit every record through `Generation.CommitOffsets` before it
counts: one member, a second joins and the partitions split, it leaves and the first takes
them all, then a new member starts exactly at the committed offsets; a `kafka.Reader` with a
GroupID (FetchMessage, then a synchronous CommitMessages) reading a topic, then a second
Reader of the group resuming at the committed offsets; `kafka.Client`:
CreateTopics with configs, again (TOPIC_ALREADY_EXISTS), Metadata, DescribeConfigs,
AlterConfigs (replacing the set), IncrementalAlterConfigs (set and delete),
CreatePartitions, Produce (gzip), ListOffsets, OffsetCommit outside a generation with
metadata, OffsetFetch, ConsumerOffsets, OffsetDelete, FindCoordinator, ListGroups,
DescribeGroups, DeleteGroups, DeleteTopics; and the `kafka.Conn` calls of kafka-go's README
(Controller, CreateTopics, ReadPartitions, DeleteTopics).

Not covered, because kafka-go has none: an idempotent or transactional producer (its
batches always carry producer id -1), DeleteRecords, and dropping aborted records (its
Reader reads a read_committed fetch's aborted-transactions list and ignores it).

How: tests/clients/kafkago (a Go module) is built once per run by tests/clients/build.sh
(tests/run calls it) into target/clients/kafkago-check, and each scenario runs as a
subcommand that prints one JSON object.
"""

from __future__ import annotations

import pytest

from client_matrix import CODECS, assert_group_handover, assert_round_trip, build, record_spec, run_json, write_spec
from clients import create_topic

RUN_TIMEOUT_S = 120
GROUP_PARTITIONS = 4
TOPIC_ALREADY_EXISTS = 36


@pytest.fixture(scope="session")
def kafkago_check() -> str:
    return str(build("kafkago"))


def kafkago(binary: str, bootstrap: str, *args: str) -> dict:
    return run_json([binary, *args, f"-bootstrap={bootstrap}", f"-timeout={RUN_TIMEOUT_S - 20}s"], RUN_TIMEOUT_S)


def test_every_codec_round_trips_byte_exact(broker, topic_name, kafkago_check, tmp_path):
    create_topic(broker.bootstrap, topic_name, partitions=len(CODECS))
    spec = record_spec(topic_name, CODECS)
    result = kafkago(kafkago_check, broker.bootstrap, "codecs", f"-spec={write_spec(tmp_path / 'spec.json', spec)}")
    assert set(result["produced"]) == set(CODECS)
    assert_round_trip(spec, result, broker.bootstrap)


def test_group_members_split_and_hand_over_partitions_at_committed_offsets(broker, topic_name, kafkago_check):
    create_topic(broker.bootstrap, topic_name, partitions=GROUP_PARTITIONS)
    group = f"{topic_name}-group"
    result = kafkago(
        kafkago_check, broker.bootstrap, "group", f"-topic={topic_name}", f"-group={group}", "-per-phase=200"
    )
    assert_group_handover(result, GROUP_PARTITIONS)
    described = result["described"]
    assert described["shared"]["state"] == "Stable", described
    # kafka-go's range balancer: two contiguous halves.
    assert sorted(described["shared"]["members"].values()) == [[0, 1], [2, 3]], described
    assert list(described["after-leave"]["members"].values()) == [list(range(GROUP_PARTITIONS))], described


def test_group_readers_fetch_and_commit_then_a_new_reader_resumes(broker, topic_name, kafkago_check):
    create_topic(broker.bootstrap, topic_name, partitions=GROUP_PARTITIONS)
    group = f"{topic_name}-group"
    args = [f"-topic={topic_name}", f"-group={group}", "-per-phase=100", "-second=20"]
    r = kafkago(kafkago_check, broker.bootstrap, "reader", *args)
    assert sorted(x["value"] for x in r["first"]) == sorted(f"first-{i}" for i in range(100))
    assert sorted(x["value"] for x in r["second"]) == sorted(f"second-{i}" for i in range(20))
    # Each partition read in order, the second Reader exactly where the first committed.
    for p in range(GROUP_PARTITIONS):
        offsets = [x["offset"] for x in r["first"] + r["second"] if x["partition"] == p]
        assert offsets == list(range(len(offsets))), (p, offsets)
    ends = {p: last for p, (_, last) in r["log_end"].items()}
    assert r["committed"] == ends and sum(ends.values()) == 120, (r["committed"], ends)


def test_client_topic_config_offset_and_group_calls(broker, topic_name, kafkago_check):
    group = f"{topic_name}-group"
    r = kafkago(kafkago_check, broker.bootstrap, "admin", f"-topic={topic_name}", f"-group={group}")
    assert r["create"] == 0
    assert r["create_again"] == TOPIC_ALREADY_EXISTS
    assert r["partitions_after_create"] == 3
    assert r["configs_after_create"] == {"retention.ms": "3600000", "max.message.bytes": "500000"}
    # AlterConfigs replaces every topic key; the incremental form sets one and deletes one.
    assert r["configs_after_alter"] == {"retention.ms": "7200000"}
    assert r["configs_after_incremental_alter"] == {"max.message.bytes": "400000"}
    assert r["partitions_after_create_partitions"] == 5
    assert (r["produce"], r["produce_again"]) == (0, 10)
    # [FirstOffset, LastOffset] of an earliest, then a latest query: the other stays -1.
    assert r["start_offsets"] == {str(p): [0, -1] for p in range(5)}
    assert r["end_offsets"] == {**{str(p): [-1, 0] for p in range(4)}, "4": [-1, 11]}
    assert r["fetch_offsets"] == {"3": 0, "4": 8}
    assert r["fetch_metadata"] == "admin"
    assert r["consumer_offsets"] == {"0": -1, "1": -1, "2": -1, "3": 0, "4": 8}
    assert r["fetch_offsets_after_offset_delete"] == {"4": 8}
    assert r["find_coordinator"] == 0
    assert group in r["list_groups"]
    assert r["describe_group"] == {"group": group, "state": "Empty", "members": 0}
    assert r["fetch_offsets_after_delete_group"] == {}
    assert topic_name not in r["topics_after_delete"]
    assert r["conn_controller"] == 0
    assert r["conn_read_partitions"] == [0, 1]
    assert f"{topic_name}-conn" not in r["topics_after_conn_delete"]
