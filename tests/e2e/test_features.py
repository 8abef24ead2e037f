"""The features ApiVersions v3+ advertises (KIP-584), which decide what Kafka 4 clients speak:
`transaction.version` finalized at 2 makes the Java producer use the transaction protocol v2
(KIP-890 part 2), at 1 the protocol v1 (`test_java_client.py` checks what it then sends).
As Kafka's `ApiVersionsResponse`: v3 leaves out supported features whose minimum is 0 (older
clients cannot parse them, KAFKA-17011), and a finalized level of 0 is never listed.
"""

from __future__ import annotations

import pytest

from kafka_wire import NONE, Fields, KafkaConnection

API_API_VERSIONS = 18


def features(conn: KafkaConnection, version: int) -> dict:
    """ApiVersions v3/v4 by hand: the supported and finalized features and their epoch."""
    body = Fields().compact_string("sluice-test").compact_string("1.0").tagged_fields()
    r = conn.recv_response(conn.send_request(API_API_VERSIONS, version, body))
    assert r.i16() == NONE
    r.compact_array(lambda x: (x.i16(), x.i16(), x.i16(), x.skip_tagged_fields()))
    r.i32()  # throttle_time_ms
    out = {"supported": {}, "finalized": {}, "epoch": None}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag == 0:
            for name, lo, hi, _ in r.compact_array(lambda x: (x.compact_string(), x.i16(), x.i16(), x.skip_tagged_fields())):
                out["supported"][name] = (lo, hi)
        elif tag == 1:
            out["epoch"] = r.i64()
        elif tag == 2:
            for name, hi, lo, _ in r.compact_array(lambda x: (x.compact_string(), x.i16(), x.i16(), x.skip_tagged_fields())):
                out["finalized"][name] = (lo, hi)
        else:
            r.take(size)
    return out


@pytest.mark.parametrize("level", [None, "1"])
def test_transaction_version_is_advertised_at_its_configured_level(broker_factory, level):
    broker = broker_factory(settings={} if level is None else {"transaction.version": level})
    expected = int(level or 2)
    with KafkaConnection(broker.bootstrap) as conn:
        v4 = features(conn, 4)
        v3 = features(conn, 3)
    assert v4["supported"] == {"transaction.version": (0, 2), "group.version": (0, 1)}, v4
    assert v4["finalized"] == {"transaction.version": (expected, expected), "group.version": (1, 1)}, v4
    assert v4["epoch"] == 0
    # v3: the same finalized levels; no supported feature whose minimum is 0.
    assert v3["supported"] == {} and v3["finalized"] == v4["finalized"], v3


def test_an_unknown_transaction_version_is_refused_at_start(broker_factory):
    with pytest.raises(Exception) as refused:
        broker_factory(settings={"transaction.version": "3"})
    assert "transaction.version" in str(refused.value)
