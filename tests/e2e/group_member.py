"""One confluent-kafka group consumer, run as a subprocess by test_groups.py so a test can
close it cleanly (SIGTERM) or kill it (SIGKILL).

Usage: group_member.py BOOTSTRAP GROUP TOPIC [KEY=VALUE ...]   (extra consumer config)

Prints one JSON object per line to stdout, flushed at once:
  {"event": "assigned", "partitions": [..]}   the full assignment after each rebalance
  {"event": "record", "partition": p, "offset": o}
  {"event": "closed"}                          after a clean close (commit + LeaveGroup)
Offsets are stored for commit only after their line is written (enable.auto.offset.store is
off), so a SIGKILL can cause re-delivery but never a skipped record.
"""

from __future__ import annotations

import json
import signal
import sys

from confluent_kafka import Consumer, KafkaError


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main():
    bootstrap, group, topic, *extra = sys.argv[1:]
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "enable.auto.offset.store": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    for item in extra:
        key, _, value = item.partition("=")
        conf[key] = value
    consumer = Consumer(conf)
    owned: set[int] = set()
    incremental = conf.get("partition.assignment.strategy") == "cooperative-sticky"

    def on_assign(c, partitions):
        if not incremental:
            owned.clear()
        owned.update(p.partition for p in partitions)
        emit(event="assigned", partitions=sorted(owned))

    def on_revoke(c, partitions):
        owned.difference_update(p.partition for p in partitions)
        if incremental:
            emit(event="assigned", partitions=sorted(owned))

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                emit(event="error", error=str(msg.error()))
            continue
        emit(event="record", partition=msg.partition(), offset=msg.offset())
        consumer.store_offsets(msg)
    consumer.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
