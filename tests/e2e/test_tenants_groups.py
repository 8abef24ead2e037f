"""Multi-tenant authorization: KIP-848 regex subscriptions (issue 35, finding 3). `tenant-b`,
a member of its own group `b-readers` (READ on it), subscribes by regex `.*` with raw
ConsumerGroupHeartbeat v1 frames. Kafka drops the matches a member may not DESCRIBE,
silently, at every resolution: the answer carries no error and no message naming another
tenant's topics, the assignment holds only `b-*` topics, a topic `tenant-a` creates later
is never assigned, and a DESCRIBE grant made later is picked up (and lost again when it is
revoked) without the member doing anything but heartbeat.
"""

from __future__ import annotations

import time

import kafka_wire as kw
from kafka_wire import Fields
from tenant_support import (  # noqa: F401 (tenants is a fixture)
    create_topics,
    grant,
    raw_login,
    revoke,
    tenants,
)

DEADLINE_S = 30.0


def heartbeat(conn, member_id: str, epoch: int, regex: str | None) -> dict:
    """One ConsumerGroupHeartbeat v1 of group `b-readers`; the answer's fields, with the
    assignment as {topic id hex: partitions} (None: unchanged)."""
    f = Fields().compact_string("b-readers").compact_string(member_id).i32(epoch)
    f.compact_string(None).compact_string(None)  # instance id, rack id
    f.i32(30_000 if epoch == 0 else -1)
    f.compact_array(None)  # topic names: null (subscribed by regex)
    f.compact_string(regex)
    f.compact_string(None)  # server assignor
    f.compact_array([] if epoch == 0 else None)  # owned partitions
    r = conn.request(kw.API_CONSUMER_GROUP_HEARTBEAT, 1, f.tagged_fields())
    r.skip_tagged_fields()
    answer = {"throttle": r.i32(), "error": r.i16(), "message": r.compact_string(),
              "member_id": r.compact_string(), "epoch": r.i32(), "interval": r.i32()}  # fmt: skip
    answer["assignment"] = None
    if r.i8() >= 0:
        topics = {}
        for _ in range(r.uvarint() - 1):
            topic_id = r.take(16).hex()
            topics[topic_id] = sorted(r.i32() for _ in range(r.uvarint() - 1))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        answer["assignment"] = topics
    return answer


class Member:
    """A consumer-protocol member that heartbeats as the Java consumer does, adopting each
    assignment it is given."""

    def __init__(self, conn, regex: str):
        self.conn = conn
        first = heartbeat(conn, "", 0, regex)
        assert first["error"] == 0, first
        assert first["message"] is None, first
        self.id, self.epoch, self.owned = first["member_id"], first["epoch"], first["assignment"] or {}

    def beat(self) -> dict:
        answer = heartbeat(self.conn, self.id, self.epoch, None)
        assert answer["error"] == 0 and answer["message"] is None, answer
        self.epoch = answer["epoch"]
        if answer["assignment"] is not None:
            self.owned = answer["assignment"]
        return answer

    def owns_until(self, want, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not want(self.owned):
            assert time.monotonic() < deadline, f"{what}: owns {self.owned}"
            self.beat()
            time.sleep(0.05)


def test_a_regex_never_discloses_or_assigns_another_tenants_topics(tenants):
    broker = tenants
    create_topics(broker, "tenant-a", "a-orders", partitions=2)
    create_topics(broker, "tenant-b", "b-orders")
    member = Member(raw_login(broker, "tenant-b"), ".*")
    # Only b-orders: one topic, one partition (a-orders and the shared topic are not visible).
    member.owns_until(lambda owned: owned != {}, "b-orders assigned")
    assert list(member.owned.values()) == [[0]], member.owned
    b_orders = next(iter(member.owned))
    # tenant-a's new topic matches the regex but is never assigned.
    create_topics(broker, "tenant-a", "a-new", partitions=3)
    for _ in range(10):
        member.beat()
    assert set(member.owned) == {b_orders}, member.owned
    # Granted DESCRIBE on a-new: the regex resolves again and picks it up; revoked: it goes.
    grant(broker, "tenant-b", "topic", "a-new", "describe")
    member.owns_until(lambda owned: len(owned) == 2, "a-new assigned after the grant")
    assert sorted(member.owned.values()) == [[0], [0, 1, 2]], member.owned
    revoke(broker, "tenant-b", "topic", "a-new", "describe")
    member.owns_until(lambda owned: set(owned) == {b_orders}, "a-new revoked after the grant is deleted")
