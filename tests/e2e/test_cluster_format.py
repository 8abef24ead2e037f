"""The cluster's keys and `sluice cluster format` (Kafka's `kafka-storage format`), as a user
meets them: a data dir formatted for a node of a cluster, a broker started with KRaft's keys
(`node.id`, `process.roles`, `controller.quorum.voters`, a CONTROLLER listener), the refusals
Kafka gives (an unformatted dir, another node's dir), and a data dir written by single-node
Sluice migrated on its first start with nothing lost.
"""

from __future__ import annotations

import json
import urllib.request
import socket
import subprocess

import pytest

from conftest import sluice_bin
from kafka_wire import ConnectionClosed, KafkaConnection, record_batch
from tls_support import TlsBroker

CLUSTER_ID = "SluiceTestCluster-0001"


def sluice(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run([sluice_bin(), *args], capture_output=True, text=True, timeout=60)
    if check:
        assert run.returncode == 0, run.stderr
    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def info(broker) -> dict:
    return json.loads(sluice("cluster", "--brokers", broker.bootstrap, "--output", "json", "info").stdout)


@pytest.fixture
def kraft_broker_factory(tmp_path_factory, request):
    """Brokers whose `listeners` come from their settings (a PLAINTEXT and a CONTROLLER one):
    `start(settings, prepare)`; stopped at teardown."""
    brokers: list[TlsBroker] = []

    def start(settings: dict[str, str], prepare=None) -> TlsBroker:
        root = tmp_path_factory.mktemp("broker")
        (root / "data").mkdir()
        if prepare is not None:
            prepare(root / "data")
        broker = TlsBroker(root / "data", root / "broker.log", settings, {})
        brokers.append(broker)
        return broker.start()

    yield start
    for broker in brokers:
        if broker.is_running():
            broker.stop()


def kraft_settings(node_id: int, controller_port: int) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller_port}",
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "controller.quorum.voters": f"{node_id}@127.0.0.1:{controller_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }


def test_format_then_a_kraft_configured_broker_starts_as_that_node(tmp_path, kraft_broker_factory):
    data = tmp_path / "node-7"
    out = sluice("cluster", "format", "--data-dir", str(data), "--cluster-id", CLUSTER_ID, "--node-id", "7").stdout
    assert f"node 7 of cluster {CLUSTER_ID}" in out
    meta = json.loads((data / "meta.json").read_text())
    assert (meta["cluster_id"], meta["node_id"], meta["version"]) == (CLUSTER_ID, 7, 1)
    again = sluice("cluster", "format", "--data-dir", str(data), "--node-id", "7", check=False)
    assert again.returncode != 0 and "already formatted" in again.stderr, again.stderr
    bad_id = sluice("cluster", "format", "--data-dir", str(tmp_path / "x"), "--cluster-id", "a b", check=False)
    assert bad_id.returncode != 0 and "--cluster-id" in bad_id.stderr, bad_id.stderr
    assert len(sluice("cluster", "random-id").stdout.strip()) == 22

    port = free_port()

    def prepare(dir_):
        dir_.rmdir()
        data.rename(dir_)

    broker = kraft_broker_factory(kraft_settings(7, port), prepare=prepare)
    got = info(broker)
    assert got["cluster_id"] == CLUSTER_ID
    assert [b["node_id"] for b in got["brokers"]] == [7] and got["controller_id"] == 7
    # The controller listener is the quorum's: a Kafka request there is refused (the
    # connection closed at its first frame, which is no controller hello).
    with pytest.raises((OSError, ConnectionClosed)):
        KafkaConnection(f"127.0.0.1:{port}").api_versions()


def test_voters_need_a_formatted_dir_of_the_same_node(kraft_broker_factory):
    port = free_port()
    with pytest.raises(AssertionError) as unformatted:
        kraft_broker_factory(kraft_settings(1, port))
    assert "sluice cluster format" in str(unformatted.value)

    def formatted_for_node_2(dir_):
        sluice("cluster", "format", "--data-dir", str(dir_), "--cluster-id", CLUSTER_ID, "--node-id", "2")

    with pytest.raises(AssertionError) as other_node:
        kraft_broker_factory(kraft_settings(1, port), prepare=formatted_for_node_2)
    assert "belongs to node 2" in str(other_node.value)


@pytest.mark.parametrize(
    "settings, named",
    [
        # A controller not among the voters, and a broker-only node among them (Kafka's checks).
        ({"node.id": "1", "controller.quorum.voters": "2@127.0.0.1:19093"}, "must be in controller.quorum.voters"),
        (
            {"node.id": "1", "process.roles": "broker", "controller.quorum.voters": "1@127.0.0.1:19093"},
            "process.roles has no controller",
        ),
        ({"controller.quorum.voters": "1@127.0.0.1:19093,1@127.0.0.2:19093"}, "listed twice"),
        ({"process.roles": "controller"}, "dedicated controller"),
        (
            {
                "node.id": "4",
                "process.roles": "controller",
                "controller.quorum.voters": "4@127.0.0.1:19093",
                "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
            },
            "must hold only controller listeners",
        ),
        # A broker-only node takes the log at a controller listener of its own.
        ({"node.id": "4", "process.roles": "broker", "controller.quorum.voters": "1@127.0.0.1:19093"}, "add one to listeners"),
        ({"broker.heartbeat.interval.ms": "10000"}, "broker.session.timeout.ms"),
    ],
)
def test_kraft_keys_are_checked_at_start(broker_factory, settings, named):
    with pytest.raises(AssertionError) as refused:
        broker_factory(settings=settings)
    assert named in str(refused.value)


def test_a_single_node_data_dir_is_migrated_on_first_start(broker_factory, topic_name):
    broker = broker_factory()
    before = info(broker)
    sluice("topic", "create", topic_name, "-p", "2", "--brokers", broker.bootstrap)
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.produce(topic_name, 1, record_batch([b"kept-1", b"kept-2"])).error_code == 0
    broker.stop()
    # The layout single-node Sluice wrote: cluster.json with the id, no meta.json.
    meta = json.loads((broker.data_dir / "meta.json").read_text())
    (broker.data_dir / "meta.json").unlink()
    (broker.data_dir / "cluster.json").write_text(json.dumps({"cluster_id": meta["cluster_id"]}))
    broker.start()
    after = info(broker)
    assert after["cluster_id"] == before["cluster_id"] == meta["cluster_id"]
    assert not (broker.data_dir / "cluster.json").exists()
    assert json.loads((broker.data_dir / "meta.json").read_text())["cluster_id"] == meta["cluster_id"]
    with KafkaConnection(broker.bootstrap) as conn:
        fetched = conn.fetch(topic_name, 1, 0)
    assert b"kept-1" in fetched.records and b"kept-2" in fetched.records
    assert "migrated a single-node data dir" in broker.log_tail()


def test_a_single_node_joins_a_quorum_with_its_topics_users_and_records(broker_factory, kraft_broker_factory, topic_name):
    """A broker that ran alone, restarted as a voter (its own quorum of one): its topics keep
    their ids, records and place, its users log in, nothing is lost (kraft/migrate.rs)."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    alone = broker_factory()
    sluice("topic", "create", topic_name, "-p", "2", "--brokers", alone.bootstrap)
    with KafkaConnection(alone.bootstrap) as conn:
        assert conn.produce(topic_name, 1, record_batch([b"kept-1", b"kept-2"])).error_code == 0
    admin = AdminClient({"bootstrap.servers": alone.bootstrap})
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-pw")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        assert f.result(timeout=30) is None
    topic_id = json.loads((alone.data_dir / "topics" / topic_name / "topic.json").read_text())["topic_id"]
    from plugin_support import built_plugins_dir
    from test_metrics import http

    wasm = (built_plugins_dir() / "murmur2.wasm").read_bytes()
    put = urllib.request.Request(alone.admin_url + "/v1/plugins/router", data=wasm, method="PUT")
    sha = json.loads(urllib.request.urlopen(put, timeout=120).read())["sha256"]
    alone.stop()
    data = alone.data_dir

    def same_dir(dir_):
        dir_.rmdir()
        data.rename(dir_)

    port = free_port()
    joined = kraft_broker_factory(kraft_settings(0, port), prepare=same_dir)

    def migrated():
        meta = subprocess.run(["kcat", "-b", joined.bootstrap, "-L", "-J", "-t", topic_name], capture_output=True, text=True)
        return meta.returncode == 0 and json.loads(meta.stdout)["topics"][0].get("partitions")

    from conftest import wait_until

    wait_until(migrated, 30, "the topic to be the cluster's")
    assert json.loads((joined.data_dir / "topics" / topic_name / "topic.json").read_text())["topic_id"] == topic_id
    with KafkaConnection(joined.bootstrap) as conn:
        fetched = conn.fetch(topic_name, 1, 0)
    assert b"kept-1" in fetched.records and b"kept-2" in fetched.records
    after = AdminClient({"bootstrap.servers": joined.bootstrap})  # outlives its futures

    def carol_migrated():
        # The migration submits topics first, then users: wait for them too.
        try:
            return after.describe_user_scram_credentials(["carol"])["carol"].result(timeout=30).scram_credential_infos
        except Exception:  # noqa: BLE001 (RESOURCE_NOT_FOUND until it is applied)
            return None

    wait_until(carol_migrated, 30, "carol to be the cluster's")
    assert (joined.data_dir / "__cluster_metadata" / "migrated").exists()
    # Its plugin is the cluster's (recorded by the migration: a restart keeps it loaded).
    wait_until(lambda: b"router" in urllib.request.urlopen(joined.admin_url + "/v1/plugins", timeout=30).read(), 30, "the plugin")
    # A restart leaves it as it is (the migration ran once).
    joined.stop()
    joined.start()
    wait_until(migrated, 30, "the topic after a restart")
    status, text = http(joined, "GET", "/v1/plugins/router")
    assert status == 200 and json.loads(text)["sha256"] == sha, text
