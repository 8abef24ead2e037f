"""Network partitions of a real three-broker cluster: each broker runs in its own network
namespace (`ip netns`), joined to this one by a veth pair (10.213.k.2 in namespace k,
10.213.k.1 here, this namespace routing between them), so cutting a broker off is taking
its link down: its TCP connections stall and time out as on a real network (no kill, no
signal). Root only (the suite runs as root in CI); skipped otherwise.

The trials: (1) Jepsen-style, clients create topics through the majority's brokers while the
active controller is cut off, and one client inside the cut-off broker's namespace tries to
create a topic through it; afterwards every acknowledged creation is on every broker, the
minority's attempt was never acknowledged (and is on every broker or none), and every
broker's metadata is the same. (2) A broker that is not the controller cut off: fenced, its
partitions leaderless (replication factor 1) while the others serve, then leading them again
after the heal with every acknowledged record. (3) The leader of a replicated partition
(replication factor 3) cut off: never acknowledges an acks=all write from its side, is
replaced, and truncates what only it had after the heal.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_support import Cluster
from conftest import wait_until

SIZE = 3
SUBNET = "10.213"
KAFKA_PORT, CONTROLLER_PORT = 19092, 19093

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


class Namespaces:
    """Namespace k with `lo` and a veth pair to this namespace."""

    def __init__(self, size: int):
        tag = os.getpid() % 10000
        self.names = {k: f"slp{tag}n{k}" for k in range(1, size + 1)}
        self.links = {k: f"slp{tag}r{k}" for k in range(1, size + 1)}
        self.forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()

    def host(self, k: int) -> str:
        return f"{SUBNET}.{k}.2"

    def create(self) -> None:
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        for k, ns in self.names.items():
            peer = f"{self.links[k]}p"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", self.links[k], "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "addr", "add", f"{SUBNET}.{k}.1/24", "dev", self.links[k])
            sh("ip", "link", "set", self.links[k], "up")
            inside = ["ip", "netns", "exec", ns]
            sh(*inside, "ip", "addr", "add", f"{self.host(k)}/24", "dev", peer)
            sh(*inside, "ip", "link", "set", peer, "up")
            sh(*inside, "ip", "link", "set", "lo", "up")
            sh(*inside, "ip", "route", "add", "default", "via", f"{SUBNET}.{k}.1")

    def cut(self, k: int) -> None:
        sh("ip", "link", "set", self.links[k], "down")

    def heal(self, k: int) -> None:
        sh("ip", "link", "set", self.links[k], "up")
        # Taking the link down dropped its address's route: back as it was.
        sh("ip", "route", "replace", f"{SUBNET}.{k}.0/24", "dev", self.links[k], check=False)

    def prefix(self, k: int) -> list[str]:
        return ["ip", "netns", "exec", self.names[k]]

    def destroy(self) -> None:
        for k, ns in self.names.items():
            sh("ip", "link", "del", self.links[k], check=False)
            sh("ip", "netns", "del", ns, check=False)
        Path("/proc/sys/net/ipv4/ip_forward").write_text(self.forward + "\n")


@pytest.fixture
def netns_cluster(tmp_path):
    # One trial at a time on this machine: the subnet and the ports are fixed.
    with open("/tmp/sluice-netns.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        spaces = Namespaces(SIZE)
        spaces.destroy()
        spaces.create()
        cluster = None
        try:
            cluster = Cluster(
                tmp_path,
                SIZE,
                # The admin API listens on the namespace's address (not loopback): open, on
                # this private link.
                {"admin.allow.insecure": "true"},
                hosts=[spaces.host(k) for k in range(1, SIZE + 1)],
                prefixes={k: spaces.prefix(k) for k in range(1, SIZE + 1)},
                ports=(KAFKA_PORT, CONTROLLER_PORT),
            )
            cluster.start()
            yield cluster, spaces
        finally:
            if cluster is not None:
                cluster.kill_all()
            spaces.destroy()


def topics_on(cluster: Cluster, k: int) -> dict[str, tuple]:
    """Topic name -> its partitions and their leaders, as node k's Metadata says."""
    try:
        data = cluster.metadata(k)
    except AssertionError:  # no answer (cut off, or electing)
        return {}
    return {t["topic"]: tuple((p["partition"], p["leader"]) for p in t["partitions"]) for t in data["topics"]}


def create_through(bootstrap: str, name: str, timeout_s: float = 15.0) -> bool:
    """Whether CreateTopics through `bootstrap` was acknowledged."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000)})
    try:
        admin.create_topics([NewTopic(name, 1)], request_timeout=timeout_s)[name].result(timeout=timeout_s + 5)
        return True
    except Exception:  # noqa: BLE001 (any failure: not acknowledged)
        return False


MINORITY_CLIENT = """
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
try:
    admin.create_topics([NewTopic(sys.argv[2], 1)], request_timeout=15)[sys.argv[2]].result(timeout=25)
    print("ACKED")
except Exception as e:
    print("FAILED", e)
"""


def test_the_active_controller_cut_off_by_a_network_partition(netns_cluster, topic_name):
    cluster, spaces = netns_cluster
    leader = cluster.controller(1)
    majority = [k for k in range(1, SIZE + 1) if k != leader]
    assert create_through(cluster.node(majority[0]).bootstrap, f"{topic_name}-before")

    spaces.cut(leader)
    # A client on the cut-off broker's side asks it to create a topic: it cannot commit.
    minority = subprocess.Popen(
        [
            *spaces.prefix(leader),
            "python3",
            "-c",
            MINORITY_CLIENT,
            cluster.node(leader).bootstrap,
            f"{topic_name}-minority",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    acked = []
    deadline = time.monotonic() + 60
    i = 0
    while len(acked) < 5 and time.monotonic() < deadline:
        name = f"{topic_name}-during-{i}"
        if create_through(cluster.node(majority[i % 2]).bootstrap, name):
            acked.append(name)
        i += 1
    assert len(acked) == 5, f"the majority kept taking changes: {acked}"
    new_leader = cluster.controller(majority[0])
    assert new_leader in majority, new_leader
    minority_out, _ = minority.communicate(timeout=60)
    assert "ACKED" not in minority_out, f"the cut-off controller acknowledged a change: {minority_out}"

    spaces.heal(leader)
    expected = {f"{topic_name}-before", *acked}

    def converged():
        seen = [topics_on(cluster, k) for k in range(1, SIZE + 1)]
        return all(expected <= set(s) for s in seen) and all(s == seen[0] for s in seen)

    wait_until(converged, 60, "every broker's metadata the same, with every acknowledged topic")
    # The minority's attempt was never acknowledged: on every broker or none (converged), and
    # every acknowledged topic has its partition.
    assert all(topics_on(cluster, 1)[name] for name in expected)
    # The cut-off node is a follower of the new leader and takes changes again.
    assert cluster.controller(leader) == cluster.controller(majority[0])
    assert create_through(cluster.node(leader).bootstrap, f"{topic_name}-after")
    wait_until(lambda: all(f"{topic_name}-after" in topics_on(cluster, k) for k in range(1, SIZE + 1)), 30, "after")


def test_a_broker_cut_off_loses_its_partitions_until_the_heal_and_keeps_its_records(netns_cluster, topic_name):
    """A broker that is not the controller, cut off: the cluster fences it after
    `broker.session.timeout.ms` and its partitions have no leader (replication factor 1:
    LEADER_NOT_AVAILABLE, said so), while the others keep serving theirs. After the heal it
    registers again, leads its partitions again, and every record acknowledged before the cut
    is there."""
    from confluent_kafka import Producer

    from clients import consume_partition

    cluster, spaces = netns_cluster
    leader = cluster.controller(1)
    victim = next(k for k in range(1, SIZE + 1) if k != leader)
    other = next(k for k in range(1, SIZE + 1) if k not in (leader, victim))
    bootstrap = cluster.node(other).bootstrap
    cluster.sluice("topic", "create", topic_name, "-p", "3", via=other)
    leaders = cluster.leaders(other, topic_name)
    assert sorted(leaders.values()) == [1, 2, 3]
    mine = next(p for p, b in leaders.items() if b == victim)
    theirs = next(p for p, b in leaders.items() if b == other)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in (mine, theirs):
        for i in range(50):
            producer.produce(topic_name, partition=p, value=f"{p}-{i}".encode())
    assert producer.flush(30) == 0

    spaces.cut(victim)
    wait_until(
        lambda: cluster.leaders(other, topic_name)[mine] == -1,
        30,
        "the cut-off broker fenced, its partition leaderless",
    )
    assert cluster.live_brokers(other) == set(range(1, SIZE + 1)) - {victim}
    # The others' partitions go on taking records.
    for i in range(50, 100):
        producer.produce(topic_name, partition=theirs, value=f"{theirs}-{i}".encode())
    assert producer.flush(30) == 0

    spaces.heal(victim)
    wait_until(lambda: cluster.leaders(other, topic_name)[mine] == victim, 60, "its partition led by it again")
    got = consume_partition(bootstrap, topic_name, mine, 50)
    assert [m.value() for m in got] == [f"{mine}-{i}".encode() for i in range(50)]
    got = consume_partition(bootstrap, topic_name, theirs, 100)
    assert [m.value() for m in got] == [f"{theirs}-{i}".encode() for i in range(100)]


MINORITY_PRODUCER = """
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "acks": "all", "message.timeout.ms": 15000, "retries": 0})
out = []
p.produce(sys.argv[2], value=b"minority", partition=0, on_delivery=lambda err, msg: out.append(err))
p.flush(30)
print("ACKED" if out and out[0] is None else f"FAILED {out}")
"""


def test_a_replicated_leader_cut_off_never_acknowledges_and_truncates_after_the_heal(netns_cluster, topic_name):
    """Replication factor 3, min.insync.replicas 2: the leader of a partition cut off by a
    network partition (its process running, its link down). Its followers stop fetching and it
    cannot reach the controller to shrink the ISR, so a producer on its side of the partition is
    never acknowledged at acks=all; the majority fences it, another ISR member leads with a new
    epoch and takes acks=all writes. After the heal the old leader follows, truncating what only
    it had: the minority's write is nowhere, every acknowledged write is everywhere, byte for
    byte."""
    from confluent_kafka import Producer

    from clients import consume_partition
    from test_replication import create_replicated, partitions_of, wait_identical

    cluster, spaces = netns_cluster
    controller = cluster.controller(1)
    create_replicated(cluster.node(controller).bootstrap, topic_name, 1, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: partitions_of(cluster, controller, topic_name)[0]["isr"] == [1, 2, 3], 30, "a full ISR")
    producer = Producer({"bootstrap.servers": cluster.node(controller).bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic_name, partition=0, value=f"before-{i}".encode())
    assert producer.flush(30) == 0
    leader_before = partitions_of(cluster, controller, topic_name)[0]["leader"]
    spaces.cut(leader_before)
    minority = subprocess.Popen(
        [
            *spaces.prefix(leader_before),
            "python3",
            "-c",
            MINORITY_PRODUCER,
            cluster.node(leader_before).bootstrap,
            topic_name,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    majority = [k for k in range(1, SIZE + 1) if k != leader_before]
    wait_until(
        lambda: partitions_of(cluster, majority[0], topic_name)[0]["leader"] in majority,
        60,
        "a majority replica to lead",
    )
    after = Producer({"bootstrap.servers": cluster.node(majority[0]).bootstrap, "acks": "all"})
    for i in range(20):
        after.produce(topic_name, partition=0, value=f"during-{i}".encode())
    assert after.flush(60) == 0
    out, _ = minority.communicate(timeout=90)
    assert "ACKED" not in out, f"the cut-off leader acknowledged an acks=all write: {out}"

    spaces.heal(leader_before)
    wait_until(
        lambda: partitions_of(cluster, majority[0], topic_name)[0]["isr"] == [1, 2, 3],
        90,
        "the old leader back in sync",
    )
    wait_identical(cluster, [1, 2, 3], topic_name, 1)
    got = [m.value() for m in consume_partition(cluster.node(majority[0]).bootstrap, topic_name, 0, 40)]
    assert got == [f"before-{i}".encode() for i in range(20)] + [f"during-{i}".encode() for i in range(20)], got
