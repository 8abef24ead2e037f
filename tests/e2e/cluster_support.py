"""Clusters of real `sluice serve` processes for the e2e suites: node k listens on 127.0.0.k
(all of 127/8 is loopback), every node on the same Kafka and controller ports, each with its
own data dir formatted by `sluice cluster format` for one cluster id, every node a voter
(`broker,controller`). Clients bootstrap from one node and find the others through Metadata.

`cluster_factory(size)` starts one; at teardown its nodes are killed (a graceful stop is what
the tests that test it do themselves). On a failure each node's log tail is printed.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Broker, sluice_bin, wait_until

NODE_LISTENING_LINE = re.compile(r"^sluice listening (?:kafka|controller)=(\d+\.\d+\.\d+\.\d+):(\d+)(?: admin=\S+:(\d+))?\s*$")


def ports_free_on(hosts: list[str]) -> tuple[int, int]:
    """Two ports free on every host of `hosts` (the Kafka and the controller port), and the
    one after them (an extra listener's)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        ports = (first, first + 1, first + 2)
        if first + 2 > 65535:
            continue
        sockets = []
        try:
            for host in hosts:
                for port in ports:
                    s = socket.socket()
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((host, port))
                    sockets.append(s)
            return ports[0], ports[1]
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise AssertionError("no port pair free on every node's address")


class Node(Broker):
    """One node of a cluster: its listeners come from the settings (PLAINTEXT and
    CONTROLLER on 127.0.0.k), its admin API on 127.0.0.k too."""

    def __init__(
        self,
        node_id: int,
        data_dir: Path,
        log_path: Path,
        settings: dict[str, str],
        host: str | None = None,
        prefix: list[str] | None = None,
    ):
        super().__init__(data_dir, log_path, settings, {})
        self.node_id = node_id
        self.host = host or f"127.0.0.{node_id}"
        # What the command runs under (`ip netns exec NS`: test_cluster_partitions.py).
        self.prefix = prefix or []

    def command(self) -> list[str]:
        cmd = [*self.prefix, sluice_bin(), "serve", "--data-dir", str(self.data_dir), "--admin-listen", f"{self.host}:0"]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    @property
    def bootstrap(self) -> str:
        assert self.port is not None, f"node {self.node_id} is not running"
        return f"{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        assert self.admin_port is not None, f"node {self.node_id} has no admin API"
        return f"http://{self.host}:{self.admin_port}"

    def _wait_for_listening_line(self) -> int:
        deadline = time.monotonic() + self.start_deadline_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise AssertionError(f"node {self.node_id}: no listening line\n{self.log_tail()}")
            try:
                line = self._stdout_lines.get(timeout=remaining)
            except Exception:  # queue.Empty
                continue
            if line is None:
                rc = self.proc.wait(timeout=30)
                raise AssertionError(f"node {self.node_id} exited {rc} before listening\n{self.log_tail()}")
            match = NODE_LISTENING_LINE.match(line)
            if match:
                self.admin_port = int(match.group(3)) if match.group(3) else None
                return int(match.group(2))


class Cluster:
    """`size` nodes of one cluster (module docs)."""

    def __init__(
        self,
        root: Path,
        size: int,
        settings: dict[str, str] | None = None,
        hosts: list[str] | None = None,
        prefixes: dict[int, list[str]] | None = None,
        ports: tuple[int, int] | None = None,
        voters: int | None = None,
        controllers: int = 0,
        extra_listener: str | None = None,
    ):
        """Nodes 1..`voters` (all by default) are voters, the first `controllers` of them
        dedicated controllers (`process.roles=controller`: only a controller listener, no
        clients, no partitions) and the others `broker,controller`; the rest are broker-only
        nodes (`process.roles=broker`), which follow the metadata log as learners."""
        self.size = size
        hosts = hosts or [f"127.0.0.{k}" for k in range(1, size + 1)]
        self.kafka_port, self.controller_port = ports or ports_free_on(hosts)
        voter_count = voters or size
        voters = ",".join(f"{k}@{hosts[k - 1]}:{self.controller_port}" for k in range(1, voter_count + 1))
        cluster_id = subprocess.run(
            [sluice_bin(), "cluster", "random-id"], capture_output=True, text=True, check=True
        ).stdout.strip()
        self.cluster_id = cluster_id
        self.nodes: dict[int, Node] = {}
        self.brokers = set(range(controllers + 1, size + 1))
        for k in range(1, size + 1):
            data = root / f"node-{k}"
            subprocess.run(
                [sluice_bin(), "cluster", "format", "--data-dir", str(data), f"--cluster-id={cluster_id}", "--node-id", str(k)],
                capture_output=True,
                text=True,
                check=True,
            )
            node_settings = {
                "node.id": str(k),
                "listeners": f"PLAINTEXT://{hosts[k - 1]}:{self.kafka_port},CONTROLLER://{hosts[k - 1]}:{self.controller_port}",
                "controller.quorum.voters": voters,
                # Faster failure detection than Kafka's 9 s default keeps the suite short.
                "broker.session.timeout.ms": "3000",
                "broker.heartbeat.interval.ms": "500",
            }
            if extra_listener:
                # Another client listener on the port after the controller's (e.g. an SSL
                # inter-broker listener).
                node_settings["listeners"] += f",{extra_listener}://{hosts[k - 1]}:{self.controller_port + 1}"
            if k > voter_count:
                node_settings["process.roles"] = "broker"
            elif k <= controllers:
                node_settings["process.roles"] = "controller"
                node_settings["listeners"] = f"CONTROLLER://{hosts[k - 1]}:{self.controller_port}"
            node_settings.update(settings or {})
            prefix = (prefixes or {}).get(k)
            self.nodes[k] = Node(k, data, root / f"node-{k}.log", node_settings, hosts[k - 1], prefix)

    def start(self) -> "Cluster":
        for node in self.nodes.values():
            node.start()
        self.wait_for_brokers(self.brokers)
        return self

    def node(self, k: int) -> Node:
        return self.nodes[k]

    def running(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.is_running()]

    def metadata(self, via: int, topic: str | None = None) -> dict:
        """kcat -L -J from node `via`."""
        cmd = ["kcat", "-b", self.node(via).bootstrap, "-L", "-J", "-m", "10"]
        if topic:
            cmd += ["-t", topic]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    def live_brokers(self, via: int) -> set[int]:
        try:
            return {b["id"] for b in self.metadata(via)["brokers"]}
        except AssertionError:  # no answer yet (the quorum is electing)
            return set()

    def wait_for_brokers(self, expected: set[int], via: int | None = None, timeout_s: float = 30.0):
        """Until every running node (or `via`) lists exactly `expected` as its live brokers."""
        vias = [via] if via is not None else [n.node_id for n in self.running() if n.node_id in self.brokers]
        for v in vias:
            wait_until(lambda v=v: self.live_brokers(v) == expected, timeout_s, f"node {v} to list brokers {expected}")

    def controller(self, via: int) -> int:
        """The active controller (the quorum's leader), from DescribeQuorum."""
        from kafka_wire import Fields, KafkaConnection

        partition = Fields().i32(0).tagged_fields()
        topic = Fields().compact_string("__cluster_metadata").compact_array([partition]).tagged_fields()

        def leader():
            with KafkaConnection(self.node(via).bootstrap) as conn:
                r = conn.request(55, 0, Fields().compact_array([topic]).tagged_fields())
                r.skip_tagged_fields()
                assert r.i16() == 0
                r.uvarint()
                r.compact_string()
                r.uvarint()
                r.i32()
                r.i16()
                found = r.i32()
            return found if found > 0 else None

        return wait_until(leader, 30, "a quorum leader")

    def leaders(self, via: int, topic: str) -> dict[int, int]:
        """Partition -> leader (-1: none), as node `via` says."""
        data = self.metadata(via, topic)
        [t] = [t for t in data["topics"] if t["topic"] == topic]
        return {p["partition"]: p["leader"] for p in t["partitions"]}

    def sluice(self, *args: str, via: int = 1, check: bool = True) -> subprocess.CompletedProcess:
        run = subprocess.run(
            [sluice_bin(), *args, "--brokers", self.node(via).bootstrap], capture_output=True, text=True, timeout=120
        )
        if check:
            assert run.returncode == 0, run.stderr
        return run

    def kill_all(self):
        for node in self.nodes.values():
            node.kill()

    def log_tails(self) -> str:
        return "\n".join(f"--- node {k}\n{n.log_tail()}" for k, n in self.nodes.items())


@pytest.fixture
def cluster_factory(tmp_path_factory, request):
    """`start(size, settings)`: a running cluster of `size` nodes; killed at teardown."""
    clusters: list[Cluster] = []

    def start(
        size: int = 3,
        settings: dict[str, str] | None = None,
        voters: int | None = None,
        controllers: int = 0,
        extra_listener: str | None = None,
    ) -> Cluster:
        cluster = Cluster(
            tmp_path_factory.mktemp("cluster"),
            size,
            settings,
            voters=voters,
            controllers=controllers,
            extra_listener=extra_listener,
        )
        clusters.append(cluster)
        return cluster.start()

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for cluster in clusters:
        if failed:
            print(cluster.log_tails())
        cluster.kill_all()
