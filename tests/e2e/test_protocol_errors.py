"""Error handling on the wire, driven from raw sockets (kafka_wire.py) and a real client.

Covers: a frame length above socket.request.max.bytes is refused by closing the connection
(without the broker reading or allocating the body) and the broker keeps serving; garbage
bytes, negative lengths, unknown API keys and truncated frames close that connection only;
the ApiVersions table matches the contract and an unknown ApiVersions version gets
UNSUPPORTED_VERSION with the table; Produce v2 -> UNSUPPORTED_VERSION; a record batch above
message.max.bytes -> MESSAGE_TOO_LARGE; a bad CRC -> CORRUPT_MESSAGE; unknown topic with
auto-create off -> UNKNOWN_TOPIC_OR_PARTITION; fetch past the end -> OFFSET_OUT_OF_RANGE
(while fetching at the end is fine); Fetch below v10 of zstd data and zstd batches in Produce
below v7 -> UNSUPPORTED_COMPRESSION_TYPE (KIP-110); acks=2 -> INVALID_REQUIRED_ACKS; rejected batches take no offsets; acks=0 produce gets no
answer, and a failed one closes the connection; 1,000 concurrent idle connections while a
producer keeps working.
"""

from __future__ import annotations

import resource
import socket

import pytest

import kafka_wire as kw
from clients import Record, create_topic, produce_all, producer
from kafka_wire import KafkaConnection

CLOSE_DEADLINE_S = 10.0
DEFAULT_SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024

# The contract's version table (api key -> advertised (min, max)).
CONTRACT_VERSIONS = {
    # Produce is served from v3 but advertised from v0, as Kafka 4.0 does: librdkafka only
    # compresses when the broker advertises Produce v0 (KAFKA-18659). v0-v2 get
    # UNSUPPORTED_VERSION (test_produce_v2_is_unsupported).
    0: (0, 13),  # v12 the transaction protocol v2, v13 topics by id
    1: (4, 18),  # Fetch (v12+ flexible, v13+ topics by id)
    2: (1, 11),  # ListOffsets (v6+ flexible; v7 max timestamp, KIP-734; v11 KIP-1023)
    3: (0, 13),  # Metadata (v9+ flexible)
    18: (0, 5),  # ApiVersions (v5: cluster and node checked, KIP-1242)
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    32: (0, 4),  # DescribeConfigs
}


def assert_serving(bootstrap: str):
    with KafkaConnection(bootstrap) as conn:
        assert conn.api_versions().error_code == kw.NONE


@pytest.fixture
def strict_broker(broker_factory):
    return broker_factory({"auto.create.topics.enable": "false", "message.max.bytes": "4096"})


@pytest.fixture
def topic(strict_broker, topic_name):
    create_topic(strict_broker.bootstrap, topic_name)
    return topic_name


# --- framing ---------------------------------------------------------------------------------


def test_frame_above_default_socket_request_max_bytes_is_refused(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        conn.send_raw(kw.i32(DEFAULT_SOCKET_REQUEST_MAX_BYTES + 1) + b"\0" * 64)
        assert conn.wait_closed(CLOSE_DEADLINE_S), "oversized frame did not close the connection"
    assert_serving(broker.bootstrap)


def test_configured_socket_request_max_bytes(broker_factory, topic_name):
    limit = 1024 * 1024
    broker = broker_factory({"socket.request.max.bytes": str(limit), "message.max.bytes": str(limit // 2)})
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        # A frame just under the limit is read and answered (its batch is too large for
        # message.max.bytes, which proves the broker parsed it).
        result = conn.produce(topic_name, 0, kw.record_batch([b"x" * (limit - 4096)]))
        assert result.error_code == kw.MESSAGE_TOO_LARGE
        ok = conn.produce(topic_name, 0, kw.record_batch([b"y" * (limit // 4)]))
        assert (ok.error_code, ok.base_offset) == (kw.NONE, 0)
    with KafkaConnection(broker.bootstrap) as conn:
        conn.send_raw(kw.i32(limit + 1) + b"\0" * 64)
        assert conn.wait_closed(CLOSE_DEADLINE_S)
    assert_serving(broker.bootstrap)


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"\xff" * 64, id="negative-length"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", id="http-request"),
        pytest.param(kw.i32(10) + kw.i16(32000) + kw.i16(0) + kw.i32(1) + kw.i16(-1), id="unknown-api-key"),
        pytest.param(kw.i32(3) + b"\x00\x12\x00", id="frame-shorter-than-header"),
        pytest.param(
            kw.i32(40) + kw.i16(0) + kw.i16(3) + kw.i32(1) + kw.i16(500) + b"ab" * 15, id="string-past-frame-end"
        ),
        pytest.param(kw.i32(1020) + b"\xfe\xed" + (bytes(range(256)) * 4)[:1018], id="random-body"),
    ],
)
def test_garbage_closes_only_that_connection(broker, garbage):
    with KafkaConnection(broker.bootstrap) as bystander, KafkaConnection(broker.bootstrap) as victim:
        assert bystander.api_versions().error_code == kw.NONE
        victim.send_raw(garbage)
        assert victim.wait_closed(CLOSE_DEADLINE_S), "garbage did not close the connection"
        assert bystander.api_versions().error_code == kw.NONE
    assert_serving(broker.bootstrap)


def test_truncated_frame_then_eof_closes_connection(broker):
    with KafkaConnection(broker.bootstrap) as bystander, KafkaConnection(broker.bootstrap) as victim:
        victim.send_raw(kw.i32(100) + b"\x00\x12\x00\x00" + b"x" * 10)
        victim.sock.shutdown(socket.SHUT_WR)
        assert victim.wait_closed(CLOSE_DEADLINE_S), "half-sent frame + EOF did not close the connection"
        assert bystander.api_versions().error_code == kw.NONE


# --- versions --------------------------------------------------------------------------------


def test_api_versions_table_matches_contract(broker):
    for version in (0, 1, 2):
        with KafkaConnection(broker.bootstrap) as conn:
            result = conn.api_versions(version) if version == 0 else api_versions_v1_v2(conn, version)
            assert result.error_code == kw.NONE
            assert {k: result.versions.get(k) for k in CONTRACT_VERSIONS} == CONTRACT_VERSIONS


def api_versions_v1_v2(conn: KafkaConnection, version: int) -> kw.ApiVersionsResult:
    cid = conn.send_request(kw.API_API_VERSIONS, version, b"")
    r = conn.recv_response(cid)
    error = r.i16()
    entries = r.array(lambda x: (x.i16(), x.i16(), x.i16()))
    r.i32()  # throttle time
    return kw.ApiVersionsResult(error, {k: (lo, hi) for k, lo, hi in entries})


def test_api_versions_unknown_version_lists_supported_versions(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        result = conn.api_versions(version=99)
        assert result.error_code == kw.UNSUPPORTED_VERSION
        assert result.versions.get(18) == CONTRACT_VERSIONS[18], result.versions
        assert result.versions.get(0) == CONTRACT_VERSIONS[0]
        # The connection stays usable: a client retries with a version it now knows.
        assert conn.api_versions(version=0).error_code == kw.NONE


def test_produce_v2_is_unsupported(strict_broker, topic):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        result = conn.produce(topic, 0, kw.record_batch([b"old"]), version=2)
        assert result.error_code == kw.UNSUPPORTED_VERSION
        assert conn.fetch(topic, 0, 0).high_watermark == 0, "a refused produce appended records"


# --- produce errors ----------------------------------------------------------------------------


def test_batch_above_message_max_bytes(strict_broker, topic):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        big = conn.produce(topic, 0, kw.record_batch([b"b" * 5000]))
        assert big.error_code == kw.MESSAGE_TOO_LARGE
        small = conn.produce(topic, 0, kw.record_batch([b"s" * 100]))
        assert (small.error_code, small.base_offset) == (kw.NONE, 0)


def test_bad_crc_is_corrupt_message(strict_broker, topic):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        bad = conn.produce(topic, 0, kw.record_batch([b"a", b"b"], corrupt_crc=True))
        assert bad.error_code == kw.CORRUPT_MESSAGE
        good = conn.produce(topic, 0, kw.record_batch([b"c", b"d"]))
        assert (good.error_code, good.base_offset) == (kw.NONE, 0)
        fetched = conn.fetch(topic, 0, 0)
        assert fetched.error_code == kw.NONE
        assert kw.batch_record_values(fetched.records) == [(0, b"c"), (1, b"d")]


def test_unknown_topic_with_auto_create_off(strict_broker, topic_name):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        assert conn.produce(topic_name, 0, kw.record_batch([b"x"])).error_code == kw.UNKNOWN_TOPIC_OR_PARTITION
        assert conn.metadata_topic_errors([topic_name]) == {topic_name: kw.UNKNOWN_TOPIC_OR_PARTITION}
        assert conn.fetch(topic_name, 0, 0).error_code == kw.UNKNOWN_TOPIC_OR_PARTITION
        # Still unknown: neither request created it.
        assert conn.metadata_topic_errors([topic_name]) == {topic_name: kw.UNKNOWN_TOPIC_OR_PARTITION}


def test_invalid_required_acks(strict_broker, topic):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        assert conn.produce(topic, 0, kw.record_batch([b"x"]), acks=2).error_code == kw.INVALID_REQUIRED_ACKS
        assert conn.fetch(topic, 0, 0).high_watermark == 0


def test_unknown_partition_of_known_topic(strict_broker, topic):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        assert conn.produce(topic, 7, kw.record_batch([b"x"])).error_code == kw.UNKNOWN_TOPIC_OR_PARTITION


def test_acks_0_produce_gets_no_response(strict_broker, topic):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        conn.send_produce(topic, 0, kw.record_batch([b"fire", b"forget"]), acks=0)
        # The next answer on this connection is for the next request (recv checks the id).
        assert conn.api_versions().error_code == kw.NONE
        fetched = conn.fetch(topic, 0, 0)
        assert kw.batch_record_values(fetched.records) == [(0, b"fire"), (1, b"forget")]


def test_failed_acks_0_produce_closes_connection(strict_broker, topic):
    """With acks=0 the client hears of no error, so the broker closes the connection, as Kafka
    does, to make the client notice."""
    with KafkaConnection(strict_broker.bootstrap) as bystander, KafkaConnection(strict_broker.bootstrap) as conn:
        conn.send_produce(topic, 0, kw.record_batch([b"bad"], corrupt_crc=True), acks=0)
        assert conn.wait_closed(CLOSE_DEADLINE_S), "failed acks=0 produce left the connection open"
        assert bystander.fetch(topic, 0, 0).high_watermark == 0


# --- fetch errors ------------------------------------------------------------------------------


def test_fetch_below_v10_of_zstd_data_is_unsupported_compression(strict_broker, topic):
    """KIP-110: zstd needs Fetch v10+; an older fetcher gets UNSUPPORTED_COMPRESSION_TYPE
    instead of batches it cannot decode."""
    produce_all(producer(strict_broker.bootstrap, compression_type="zstd"), topic, [Record(None, b"z" * 500)] * 5)
    with KafkaConnection(strict_broker.bootstrap) as conn:
        new = conn.fetch(topic, 0, 0, version=11)
        assert new.error_code == kw.NONE and 4 in kw.batch_compression_codecs(new.records)
        assert conn.fetch(topic, 0, 0, version=4).error_code == kw.UNSUPPORTED_COMPRESSION_TYPE


def test_produce_below_v7_of_zstd_data_is_unsupported_compression(strict_broker, topic):
    """KIP-110: zstd batches need Produce v7+. The zstd batch is one librdkafka wrote, fetched
    back raw and sent again."""
    produce_all(producer(strict_broker.bootstrap, compression_type="zstd"), topic, [Record(None, b"z" * 500)] * 5)
    with KafkaConnection(strict_broker.bootstrap) as conn:
        records = conn.fetch(topic, 0, 0, version=11).records
        batch_len = int.from_bytes(records[8:12], "big")
        zstd_batch = records[: 12 + batch_len]
        assert kw.batch_compression_codecs(zstd_batch) == [4]
        old = conn.produce(topic, 0, zstd_batch, version=3)
        assert old.error_code == kw.UNSUPPORTED_COMPRESSION_TYPE
        new = conn.produce(topic, 0, zstd_batch, version=7)
        assert (new.error_code, new.base_offset) == (kw.NONE, 5)


def test_fetch_out_of_range(strict_broker, topic):
    with KafkaConnection(strict_broker.bootstrap) as conn:
        assert conn.produce(topic, 0, kw.record_batch([b"1", b"2", b"3"])).error_code == kw.NONE
        at_end = conn.fetch(topic, 0, 3)
        assert (at_end.error_code, at_end.high_watermark) == (kw.NONE, 3)
        assert not at_end.records
        assert conn.fetch(topic, 0, 100).error_code == kw.OFFSET_OUT_OF_RANGE
        assert conn.fetch(topic, 0, -5).error_code == kw.OFFSET_OUT_OF_RANGE
        middle = conn.fetch(topic, 0, 1)
        assert middle.error_code == kw.NONE
        assert [o for o, _ in kw.batch_record_values(middle.records) if o >= 1] == [1, 2]


# --- many connections ------------------------------------------------------------------------


IDLE_CONNECTIONS = 1000


def raise_nofile_limit(wanted: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.fail(f"RLIMIT_NOFILE hard limit {hard} < {wanted}: raise it (ulimit -Hn) to run this test")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def test_thousand_idle_connections_while_producing(broker_factory, topic_name):
    # The broker inherits the raised limit: it needs an fd per connection too.
    raise_nofile_limit(IDLE_CONNECTIONS * 2 + 512)
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name)
    idle = []
    try:
        for _ in range(IDLE_CONNECTIONS):
            idle.append(KafkaConnection(broker.bootstrap))
        # Every 100th proves its connection was accepted and is served.
        for conn in idle[::100]:
            assert conn.api_versions().error_code == kw.NONE
        records = [Record(None, f"busy-{i}".encode()) for i in range(5000)]
        delivered = produce_all(producer(broker.bootstrap), topic_name, records)
        assert [d.offset for d in delivered] == list(range(len(records)))
        # The idle ones were not dropped meanwhile.
        for conn in idle[50::100]:
            assert conn.api_versions().error_code == kw.NONE
    finally:
        for conn in idle:
            conn.close()
    assert_serving(broker.bootstrap)
