"""Materialized transforms on a cluster of three brokers (docs/cluster.md, docs/transforms.md):
each source partition's runner runs on the broker that leads the partition and writes its
output, exactly once, to output partitions other brokers lead, in transactions whose
coordinator may be a third broker.

Covers: split-transform uploaded to broker 1 and a transform deployed through broker 1 over
a source spread on all three brokers; confluent-kafka producing orders, read_committed
readers finding every order exactly once in the right output; each partition's runner on its
leader (`describe` from any broker); the broker running two of the runners killed with -9
in the middle of a stream, records produced meanwhile to the partitions that stay up, the
broker restarted, and still every record exactly once; another broker stopped gracefully
mid-stream, its runners committing before it leaves, and back; a transform whose source lives on
brokers 1 and 2 described, paused, resumed and restarted from an offset through broker 3,
which runs none of its runners, and described with `sluice transform`; the transform deleted
through one broker and gone from all.
"""

from __future__ import annotations

import json
import urllib.request

from cluster_support import cluster_factory  # noqa: F401 (fixture)
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from plugin_support import built_plugins_dir, murmur2_partition
from test_metrics import http
from test_transforms import SPLIT, check_exactly_once, order_value, source_values
from transform_support import cli, read_all

from conftest import wait_until

DEADLINE_S = 180.0


def create(bootstrap: str, name: str, assignment: list[list[int]]) -> None:
    """A topic with one partition on each listed broker, in order."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)], operation_timeout=30
    )
    futures[name].result(60)


def produce(bootstrap: str, ids: list[int]) -> None:
    """Orders `ids`, keyed by customer and placed by murmur2 (Java's partitioner), so a
    customer's orders are in one source partition and keep their order through the transform."""
    p = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, "partitioner": "murmur2_random"}
    )
    for i in ids:
        p.produce("orders", key=f"customer-{i % 101}".encode(), value=order_value(i))
    assert p.flush(60) == 0


def describe(node, name: str) -> dict:
    status, text = http(node, "GET", f"/v1/transforms/{name}")
    assert status == 200, text
    return json.loads(text)


def caught_up(node, name: str, partitions: int) -> dict:
    """Until `describe` through `node` shows every partition running with lag 0."""

    def done():
        t = describe(node, name)
        running = len(t["partitions"]) == partitions and all(p["state"] == "running" for p in t["partitions"])
        return t if running and t["lag"] == 0 else None

    return wait_until(done, DEADLINE_S, f"transform {name} to catch up through node {node.node_id}", interval_s=0.2)


def test_a_transform_runs_on_the_source_leaders_exactly_once_across_kill_9(cluster_factory):  # noqa: F811
    cluster = cluster_factory(3)
    bootstrap = cluster.node(1).bootstrap
    wasm = (built_plugins_dir() / "split-transform.wasm").read_bytes()
    request = urllib.request.Request(cluster.node(1).admin_url + "/v1/plugins/split-transform", data=wasm, method="PUT")
    assert json.loads(urllib.request.urlopen(request, timeout=120).read())["kind"] == "transform"
    create(bootstrap, "orders", [[1], [2], [3], [1], [2], [3]])
    create(bootstrap, "orders-eu", [[2], [3], [1]])
    create(bootstrap, "orders-us", [[3], [1], [2]])
    create(bootstrap, "orders-dlq", [[2]])
    body = {
        "name": "orders-split",
        "source": "orders",
        "plugin": "split-transform",
        "outputs": ["orders-eu", "orders-us", "orders-dlq"],
        "params": SPLIT,
    }
    status, text = http(cluster.node(1), "POST", "/v1/transforms", body)
    assert status == 201, text
    produce(bootstrap, list(range(600)))
    t = caught_up(cluster.node(2), "orders-split", 6)
    leaders = cluster.leaders(1, "orders")
    assert sorted(set(leaders.values())) == [1, 2, 3], leaders
    # Each partition's runner is on the broker leading it, and every broker shows all six.
    assert {p["partition"]: p["broker"] for p in t["partitions"]} == leaders, t["partitions"]
    assert sum(p["records_in"] for p in t["partitions"]) == 600
    check_exactly_once(bootstrap, source_values(bootstrap))
    listed = json.loads(http(cluster.node(3), "GET", "/v1/transforms")[1])["transforms"]
    assert [(x["name"], len(x["partitions"])) for x in listed] == [("orders-split", 6)]

    # Broker 3 (partitions 2 and 5, and output partitions) dies with -9 mid-stream.
    produce(bootstrap, list(range(600, 900)))
    cluster.node(3).kill()
    cluster.wait_for_brokers({1, 2}, via=1)
    down = {p for p, leader in leaders.items() if leader == 3}
    meanwhile = [i for i in range(900, 1500) if murmur2_partition(f"customer-{i % 101}".encode(), 6) not in down]
    produce(bootstrap, meanwhile)

    def unavailable() -> bool:
        states = {p["partition"]: p["state"] for p in describe(cluster.node(1), "orders-split")["partitions"]}
        return all(states[p] == "unavailable" for p in down) and len(states) == 6

    wait_until(unavailable, 30, "the dead broker's partitions to show unavailable")
    cluster.node(3).start()
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(lambda: -1 not in cluster.leaders(1, "orders").values(), 30, "node 3 to lead again")
    produce(bootstrap, list(range(1500, 1800)))
    t = caught_up(cluster.node(1), "orders-split", 6)
    assert {p["partition"]: p["broker"] for p in t["partitions"]} == cluster.leaders(1, "orders")
    values = source_values(bootstrap)
    assert len(values) == 1200 + len(meanwhile), len(values)
    check_exactly_once(cluster.node(2).bootstrap, values)

    # Broker 2 stopped gracefully mid-stream: its runners commit through the other brokers
    # before it leaves the quorum (none abandoned), and it takes over again on its return.
    produce(bootstrap, list(range(1800, 2100)))
    cluster.node(2).stop()
    log = cluster.node(2).log_path.read_text()
    stopping = log[log.rindex("SIGTERM: shutting down") :].splitlines()
    unfinished = [line for line in stopping if "transforms::runner" in line and "shut down" in line]
    assert not unfinished and "did not stop in time" not in log, unfinished
    cluster.node(2).start()
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(lambda: -1 not in cluster.leaders(1, "orders").values(), 30, "node 2 to lead again")
    caught_up(cluster.node(3), "orders-split", 6)
    values = source_values(bootstrap)
    assert len(values) == 1500 + len(meanwhile), len(values)
    check_exactly_once(bootstrap, values)

    # A transform whose source is on brokers 1 and 2 only, driven through broker 3.
    create(bootstrap, "mini-in", [[1], [2]])
    create(bootstrap, "mini-out", [[3]])
    mini = {
        "name": "mini",
        "source": "mini-in",
        "plugin": "split-transform",
        "outputs": ["mini-out"],
        "params": {"field": "$.region", "value": "eu"},
    }
    status, text = http(cluster.node(3), "POST", "/v1/transforms", mini)
    assert status == 201, text
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        p.produce("mini-in", partition=i % 2, value=json.dumps({"id": i, "region": "eu"}).encode())
    assert p.flush(30) == 0
    t = caught_up(cluster.node(3), "mini", 2)
    assert [(p["broker"], p["position"]) for p in t["partitions"]] == [(1, 20), (2, 20)], t["partitions"]
    status, text = http(cluster.node(3), "POST", "/v1/transforms/mini/pause")
    assert status == 200, text
    wait_until(
        lambda: all(p["state"] == "paused" for p in describe(cluster.node(1), "mini")["partitions"]),
        30,
        "paused everywhere",
    )
    status, text = http(cluster.node(3), "POST", "/v1/transforms/mini/resume")
    assert status == 200, text
    caught_up(cluster.node(2), "mini", 2)
    # Restarted through broker 3 from offset 10: resolved on each partition's leader, the
    # runners on brokers 1 and 2 replay 10 records each in a new generation.
    status, text = http(cluster.node(3), "POST", "/v1/transforms/mini/restart", {"from_offset": "10"})
    assert status == 200, text
    assert json.loads(text)["start_offsets"] == [10, 10], text
    t = caught_up(cluster.node(1), "mini", 2)
    assert t["generation"] == 1 and [p["position"] for p in t["partitions"]] == [20, 20], t
    assert len(read_all(bootstrap, "mini-out", 1)) == 60
    # The CLI, pointed at broker 3's admin API, shows every partition of both transforms.
    run = cli(cluster.node(3), "describe", "orders-split", "--output", "json")
    assert run.returncode == 0, run.stderr
    assert sorted(p["broker"] for p in json.loads(run.stdout)["partitions"]) == [1, 1, 2, 2, 3, 3]
    run = cli(cluster.node(3), "list")
    assert run.returncode == 0 and "orders-split" in run.stdout and "mini" in run.stdout, run.stdout + run.stderr
    # Deleted through broker 2: gone from every broker, and its runners stop.
    status, text = http(cluster.node(2), "DELETE", "/v1/transforms/mini")
    assert status == 200, text
    for k in (1, 2, 3):
        wait_until(
            lambda k=k: http(cluster.node(k), "GET", "/v1/transforms/mini")[0] == 404, 30, f"node {k} dropped it"
        )
    # A name taken is refused through any broker.
    status, text = http(cluster.node(2), "POST", "/v1/transforms", body)
    assert status == 409 and "TOPIC_ALREADY_EXISTS" in text, text
