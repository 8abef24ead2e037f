"""The API versions Kafka 4.4.0 added that Sluice serves with the vendored kafka-protocol's
codecs (broker/protocol/kafka-protocol/VENDORED.md), each sent over TCP at its newest version
and its answer read field by field.

Covers: ApiVersions v5 (KIP-1242: this cluster and node answered with the table, another
cluster or node REBOOTSTRAP_REQUIRED, a cluster id without a node id INVALID_REQUEST);
ListOffsets v11 (KIP-1023's -6, earliest pending upload: -1 without tiered storage, as Kafka);
OffsetCommit v10 and OffsetFetch v10 (KIP-848: topics by id, an unknown id UNKNOWN_TOPIC_ID);
WriteTxnMarkers v2 (KIP-1228: a transaction version 2 marker at the producer's current epoch
is INVALID_PRODUCER_EPOCH, a version 0 one is not); DescribeLogDirs v5 (IsCordoned false);
DeleteGroups v3 (the error message per group: null, as Kafka 4.4 leaves it for classic and
consumer groups).

Request bodies come from Kafka 4.4.0's request specs (kafka_spec.encode, by field name);
answers are read by hand from the response layouts (kafka-clients-4.4.0's response specs).
"""

from __future__ import annotations

import uuid

import kafka_messages as km
import kafka_spec
import kafka_wire as kw
from kafka_wire import KafkaConnection

UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
GROUP_ID_NOT_FOUND = 69
REBOOTSTRAP_REQUIRED = 129


def flexible_response(conn: KafkaConnection, api_key: int, version: int, values: dict) -> kw._Reader:
    """Sends a request built from its spec; the reader past the v1 response header."""
    r = conn.request(api_key, version, kafka_spec.encode(api_key, version, values))
    r.skip_tagged_fields()
    return r


def cluster_and_topic_id(conn: KafkaConnection, topic: str) -> tuple[str, bytes]:
    """The cluster id and `topic`'s id, from Metadata v12."""
    r = flexible_response(conn, kw.API_METADATA, 12, {"Topics": [{"Name": topic}]})
    r.i32()  # throttle time

    def broker(x):
        x.i32(), x.compact_string(), x.i32(), x.compact_string(), x.skip_tagged_fields()

    r.compact_array(broker)
    cluster_id = r.compact_string()
    r.i32()  # controller id

    def partition(x):
        x.i16(), x.i32(), x.i32(), x.i32()
        for _ in range(3):  # replicas, isr, offline
            x.compact_array(lambda y: y.i32())
        x.skip_tagged_fields()

    def topic_entry(x):
        error, name, topic_id = x.i16(), x.compact_string(), x.take(16)
        x.i8()  # is internal
        x.compact_array(partition)
        x.i32()  # authorized operations
        x.skip_tagged_fields()
        return error, name, topic_id

    (error, name, topic_id), = r.compact_array(topic_entry)
    assert (error, name) == (0, topic)
    return cluster_id, topic_id


def setup_topic(conn: KafkaConnection, topic: str, records: int = 3) -> None:
    assert km.create_topics(conn, [(topic, 2)])[topic][0] == 0
    batch = kw.record_batch([f"v{i}".encode() for i in range(records)])
    assert conn.produce(topic, 0, batch).error_code == 0


# --- ApiVersions v5 ----------------------------------------------------------------------------


def api_versions_v5(conn: KafkaConnection, cluster_id: str | None, node_id: int) -> tuple[int, dict]:
    """ApiVersions v5 (response header v0 always, KIP-511): (error, {key: (min, max)})."""
    values = {
        "ClientSoftwareName": "sluice-e2e",
        "ClientSoftwareVersion": "1.0",
        "ClusterId": cluster_id,
        "NodeId": node_id,
    }
    r = conn.request(kw.API_API_VERSIONS, 5, kafka_spec.encode(kw.API_API_VERSIONS, 5, values))
    error = r.i16()

    def entry(x):
        key, lo, hi = x.i16(), x.i16(), x.i16()
        x.skip_tagged_fields()
        return key, (lo, hi)

    keys = dict(r.compact_array(entry) or [])
    r.i32()  # throttle time
    r.skip_tagged_fields()
    assert r.pos == len(r.data), "bytes left after the ApiVersions v5 answer"
    return error, keys


def test_api_versions_v5_names_this_cluster_or_asks_to_rebootstrap(broker, topic_name):
    with KafkaConnection(broker.bootstrap) as conn:
        setup_topic(conn, topic_name, records=1)
        cluster_id, _ = cluster_and_topic_id(conn, topic_name)
        assert cluster_id

        error, keys = api_versions_v5(conn, None, -1)
        assert error == 0 and keys[kw.API_API_VERSIONS] == (0, 5)
        error, keys = api_versions_v5(conn, cluster_id, 0)
        assert error == 0 and keys[kw.API_API_VERSIONS] == (0, 5)

        # Another cluster, or another node of this one: go back to the bootstrap servers.
        assert api_versions_v5(conn, "another-cluster", 0) == (REBOOTSTRAP_REQUIRED, {})
        assert api_versions_v5(conn, cluster_id, 7) == (REBOOTSTRAP_REQUIRED, {})
        # Both or neither (Kafka's ApiVersionsRequest.isValid).
        assert api_versions_v5(conn, cluster_id, -1) == (INVALID_REQUEST, {})

        # The connection still serves requests after each answer.
        assert api_versions_v5(conn, cluster_id, 0)[0] == 0


# --- ListOffsets v11 ---------------------------------------------------------------------------


def test_list_offsets_v11_earliest_pending_upload_is_none_without_tiered_storage(broker, topic_name):
    with KafkaConnection(broker.bootstrap) as conn:
        setup_topic(conn, topic_name, records=3)
        # One entry per partition: a partition listed twice is INVALID_REQUEST, as in Kafka.
        partition = lambda index, ts: {"PartitionIndex": index, "CurrentLeaderEpoch": -1, "Timestamp": ts}  # noqa: E731
        values = {
            "ReplicaId": -1,
            "Topics": [{"Name": topic_name, "Partitions": [partition(0, -6), partition(1, -1)]}],
            "TimeoutMs": 30_000,
        }
        r = flexible_response(conn, kw.API_LIST_OFFSETS, 11, values)
        r.i32()  # throttle time

        def entry(x):
            p = (x.i32(), x.i16(), x.i64(), x.i64(), x.i32())  # index, error, timestamp, offset, epoch
            x.skip_tagged_fields()
            return p

        def topic_entry(x):
            name, partitions = x.compact_string(), x.compact_array(entry)
            x.skip_tagged_fields()
            return name, partitions

        ((name, (pending, latest)),) = r.compact_array(topic_entry)
        assert name == topic_name
        # Kafka's fetchEarliestPendingUploadOffset without remote storage: no offset.
        assert pending == (0, 0, -1, -1, -1)
        assert (latest[0], latest[1], latest[3]) == (1, 0, 0)


# --- OffsetCommit v10, OffsetFetch v10 ---------------------------------------------------------


def offset_commit_v10(conn, group: str, topics: list[tuple[bytes, list[tuple[int, int]]]]) -> list:
    """[(topic id, [(partition, error)])] of an OffsetCommit v10 by a simple committer."""
    values = {
        "GroupId": group,
        "GenerationIdOrMemberEpoch": -1,
        "MemberId": "",
        "Topics": [
            {
                "TopicId": topic_id,
                "Partitions": [
                    {"PartitionIndex": p, "CommittedOffset": o, "CommittedMetadata": "meta"} for p, o in parts
                ],
            }
            for topic_id, parts in topics
        ],
    }
    r = flexible_response(conn, kw.API_OFFSET_COMMIT, 10, values)
    r.i32()  # throttle time

    def partition(x):
        p = (x.i32(), x.i16())
        x.skip_tagged_fields()
        return p

    def topic_entry(x):
        t = (x.take(16), x.compact_array(partition))
        x.skip_tagged_fields()
        return t

    return r.compact_array(topic_entry)


def offset_fetch_v10(conn, group: str, topics: list[tuple[bytes, list[int]]]) -> tuple[int, list]:
    """(group error, [(topic id, [(partition, offset, metadata, error)])]) of OffsetFetch v10."""
    values = {
        "Groups": [
            {
                "GroupId": group,
                "Topics": [{"TopicId": t, "PartitionIndexes": parts} for t, parts in topics],
            }
        ]
    }
    r = flexible_response(conn, kw.API_OFFSET_FETCH, 10, values)
    r.i32()  # throttle time

    def partition(x):
        index, offset, _epoch, metadata, error = x.i32(), x.i64(), x.i32(), x.compact_string(), x.i16()
        x.skip_tagged_fields()
        return index, offset, metadata, error

    def topic_entry(x):
        t = (x.take(16), x.compact_array(partition))
        x.skip_tagged_fields()
        return t

    def group_entry(x):
        name, topics_out, error = x.compact_string(), x.compact_array(topic_entry), x.i16()
        x.skip_tagged_fields()
        return name, error, topics_out

    (name, error, topics_out), = r.compact_array(group_entry)
    assert name == group
    return error, topics_out


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker, topic_name):
    group = f"{topic_name}-group"
    unknown = uuid.uuid4().bytes
    with KafkaConnection(broker.bootstrap) as conn:
        setup_topic(conn, topic_name)
        _, topic_id = cluster_and_topic_id(conn, topic_name)

        committed = offset_commit_v10(conn, group, [(topic_id, [(0, 2), (1, 0)]), (unknown, [(0, 5)])])
        assert committed == [(topic_id, [(0, 0), (1, 0)]), (unknown, [(0, UNKNOWN_TOPIC_ID)])]

        error, fetched = offset_fetch_v10(conn, group, [(topic_id, [0, 1]), (unknown, [3])])
        assert error == 0
        assert fetched == [
            (topic_id, [(0, 2, "meta", 0), (1, 0, "meta", 0)]),
            (unknown, [(3, -1, "", UNKNOWN_TOPIC_ID)]),
        ]


# --- DeleteGroups v3 ---------------------------------------------------------------------------


def test_delete_groups_v3_answers_each_group(broker, topic_name):
    group = f"{topic_name}-group"
    missing = f"{topic_name}-missing"
    with KafkaConnection(broker.bootstrap) as conn:
        setup_topic(conn, topic_name)
        _, topic_id = cluster_and_topic_id(conn, topic_name)
        assert offset_commit_v10(conn, group, [(topic_id, [(0, 1)])]) == [(topic_id, [(0, 0)])]

        r = flexible_response(conn, kw.API_DELETE_GROUPS, 3, {"GroupsNames": [group, missing]})
        r.i32()  # throttle time

        def result(x):
            out = (x.compact_string(), x.i16(), x.compact_string())
            x.skip_tagged_fields()
            return out

        results = {g: (e, m) for g, e, m in r.compact_array(result)}
        assert results == {
            group: (0, None),
            missing: (GROUP_ID_NOT_FOUND, None),
        }


# --- WriteTxnMarkers v2 ------------------------------------------------------------------------


def write_marker_v2(conn, topic: str, producer_id: int, epoch: int, transaction_version: int) -> int:
    """The error of an ABORT marker for partition 0, at WriteTxnMarkers v2."""
    values = {
        "Markers": [
            {
                "ProducerId": producer_id,
                "ProducerEpoch": epoch,
                "TransactionResult": False,
                "Topics": [{"Name": topic, "PartitionIndexes": [0]}],
                "CoordinatorEpoch": 0,
                "TransactionVersion": transaction_version,
            }
        ]
    }
    r = flexible_response(conn, kw.API_WRITE_TXN_MARKERS, 2, values)

    def partition(x):
        p = (x.i32(), x.i16())
        x.skip_tagged_fields()
        return p

    def topic_entry(x):
        t = (x.compact_string(), x.compact_array(partition))
        x.skip_tagged_fields()
        return t

    def marker(x):
        m = (x.i64(), x.compact_array(topic_entry))
        x.skip_tagged_fields()
        return m

    ((pid, [(name, [(index, error)])]),) = r.compact_array(marker)
    assert (pid, name, index) == (producer_id, topic, 0)
    return error


def test_write_txn_markers_v2_transaction_version_2_needs_a_newer_epoch(broker, topic_name):
    with KafkaConnection(broker.bootstrap) as conn:
        setup_topic(conn, topic_name, records=1)
        producer_id = 4242
        assert write_marker_v2(conn, topic_name, producer_id, 5, transaction_version=2) == 0
        # The producer is at epoch 5 here now: a transaction version 2 marker must be above it.
        assert write_marker_v2(conn, topic_name, producer_id, 5, transaction_version=2) == INVALID_PRODUCER_EPOCH
        assert write_marker_v2(conn, topic_name, producer_id, 6, transaction_version=2) == 0
        # Transaction versions 0-1 keep the older rule: refused only below the current epoch.
        assert write_marker_v2(conn, topic_name, producer_id, 6, transaction_version=0) == 0
        assert write_marker_v2(conn, topic_name, producer_id, 5, transaction_version=0) == INVALID_PRODUCER_EPOCH


# --- DescribeLogDirs v5 ------------------------------------------------------------------------


def test_describe_log_dirs_v5_says_the_dir_is_not_cordoned(broker, topic_name):
    with KafkaConnection(broker.bootstrap) as conn:
        setup_topic(conn, topic_name, records=2)
        values = {"Topics": [{"Topic": topic_name, "Partitions": [0, 1]}]}
        r = flexible_response(conn, kw.API_DESCRIBE_LOG_DIRS, 5, values)
        r.i32()  # throttle time
        assert r.i16() == 0

        def partition(x):
            index, size, _lag, _future = x.i32(), x.i64(), x.i64(), x.i8()
            x.skip_tagged_fields()
            return index, size

        def topic_entry(x):
            t = (x.compact_string(), x.compact_array(partition))
            x.skip_tagged_fields()
            return t

        def result(x):
            error, log_dir, topics = x.i16(), x.compact_string(), x.compact_array(topic_entry)
            total, usable, cordoned = x.i64(), x.i64(), x.i8()
            x.skip_tagged_fields()
            return error, log_dir, topics, total, usable, cordoned

        ((error, log_dir, topics, total, usable, cordoned),) = r.compact_array(result)
        r.skip_tagged_fields()
        assert r.pos == len(r.data)
        assert (error, cordoned) == (0, 0)
        assert log_dir and total >= usable >= 0
        ((name, partitions),) = topics
        assert name == topic_name
        sizes = dict(partitions)
        assert sizes[0] > 0 and sizes[1] >= 0
