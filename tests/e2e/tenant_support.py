"""The multi-tenant authorization suite's broker and principals (tests/e2e/test_tenants_*.py).

One broker with a PLAINTEXT and a SASL_PLAINTEXT listener, ACLs on (`allow.everyone.if.no.acl.found`
false, `super.users = User:admin`) and `admin.auth = basic`, and four SCRAM-SHA-256 users:

- `tenant-a` owns everything named `a-*` (prefixed ALL on topics, groups, transactional ids,
  views, transforms and plugins) and may create topics (cluster CREATE, Kafka's usual grant);
- `tenant-b` owns `b-*` the same way;
- `attacker` has WRITE and DESCRIBE on the one shared topic `shared` and nothing else, plus
  cluster CREATE where a test says so (the "may create topics" grant it abuses);
- `admin` is the super user that sets things up.

Each test performs one attack with real clients (confluent-kafka, the `sluice` CLI) or raw
frames (`kafka_wire`), logged in as the attacker, against a victim tenant's resources, over
the Kafka protocol and over the admin API, and asserts it is refused and that the victim's
data and plugins are unchanged.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from conftest import sluice_bin
from kafka_wire import KafkaConnection
from tls_support import TlsBroker

PASSWORDS = {"admin": "admin-pw", "tenant-a": "a-pw", "tenant-b": "b-pw", "attacker": "evil-pw"}
TIMEOUT_S = 30
# Every resource type a tenant owns by prefix (the `sluice acl` flag of each).
OWNED_RESOURCES = ["topic", "group", "transactional-id", "view", "transform", "plugin"]
SHARED_TOPIC = "shared"


def create_users(data_dir: Path) -> None:
    for name, password in PASSWORDS.items():
        proc = subprocess.run(
            [sluice_bin(), "user", "create", name, "--mechanism", "SCRAM-SHA-256", "--password-stdin",
             "--data-dir", str(data_dir)],
            input=password.encode(), capture_output=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()


def sluice(broker: TlsBroker, user: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The `sluice` CLI as `user`, over SASL to the Kafka listener and HTTP Basic to the admin
    API (the password from the environment, as users run it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env.update({
        "SLUICE_BROKERS": broker.listener("SASL_PLAINTEXT"),
        "SLUICE_USER": user,
        "SLUICE_PASSWORD": PASSWORDS[user],
        "SLUICE_ADMIN_URL": broker.admin_url,
        "SLUICE_ADMIN_USER": user,
        "SLUICE_ADMIN_PASSWORD": PASSWORDS[user],
    })  # fmt: skip
    proc = subprocess.run([sluice_bin(), *args], env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, f"sluice {' '.join(args)} as {user}: {proc.stderr}"
    return proc


def grant(broker: TlsBroker, principal: str, resource: str, name: str, operations: str,
          pattern: str = "literal") -> None:  # fmt: skip
    """`sluice acl create` as the super user: `operations` (comma-separated) on one resource."""
    flag = [f"--{resource}"] if resource == "cluster" else [f"--{resource}", name]
    sluice(broker, "admin", "acl", "create", "--allow-principal", f"User:{principal}", "--operation", operations,
           *flag, "--resource-pattern-type", pattern)  # fmt: skip


def revoke(broker: TlsBroker, principal: str, resource: str, name: str, operations: str,
           pattern: str = "literal") -> None:  # fmt: skip
    flag = [f"--{resource}"] if resource == "cluster" else [f"--{resource}", name]
    sluice(broker, "admin", "acl", "delete", "--allow-principal", f"User:{principal}", "--operation", operations,
           *flag, "--resource-pattern-type", pattern)  # fmt: skip


def kafka_conf(broker: TlsBroker, user: str) -> dict:
    """confluent-kafka settings logging in as `user`."""
    return {
        "bootstrap.servers": broker.listener("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def raw_login(broker: TlsBroker, user: str) -> KafkaConnection:
    """A raw connection (`kafka_wire`) logged in as `user` with SASL/PLAIN, for requests no
    client library sends as an attacker would."""
    conn = KafkaConnection(broker.listener("SASL_PLAINTEXT"))
    r = conn.request(17, 1, kw.string("PLAIN"))  # SaslHandshake v1
    assert r.i16() == 0
    r = conn.request(36, 1, kw.nbytes(b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode()))
    code, message = r.i16(), r.string()
    assert code == 0, f"login as {user}: {code} {message}"
    return conn


def create_topics(broker: TlsBroker, user: str, *names: str, partitions: int = 1) -> None:
    admin = AdminClient(kafka_conf(broker, user))
    futures = admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names])
    for name, future in futures.items():
        try:
            future.result(timeout=TIMEOUT_S)
        except KafkaException as e:
            raise AssertionError(f"create topic {name} as {user}: {e}") from None


def admin_call(broker: TlsBroker, user: str, method: str, path: str, body: object = None,
               raw: bytes | None = None) -> tuple[int, object]:  # fmt: skip
    """One admin API request as `user` (HTTP Basic): (status, JSON body or text)."""
    headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()}
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", broker.admin_port, timeout=120)
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(text) if text else None
    except ValueError:
        return resp.status, text.decode(errors="replace")


def audit_lines(broker: TlsBroker) -> list[str]:
    """The broker log's audit lines (`sluice::audit`), as a user would grep them."""
    return [line for line in broker.log_path.read_text().splitlines() if "audit" in line]


@pytest.fixture
def tenants(tmp_path, request):
    """The multi-tenant broker, its tenants' prefixes granted and the shared topic made."""
    data = tmp_path / "data"
    data.mkdir()
    create_users(data)
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "super.users": "User:admin",
        "admin.auth": "basic",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    }
    broker = TlsBroker(data, tmp_path / "broker.log", settings, {}).start()
    try:
        for tenant, prefix in (("tenant-a", "a-"), ("tenant-b", "b-")):
            for resource in OWNED_RESOURCES:
                grant(broker, tenant, resource, prefix, "all", pattern="prefixed")
            grant(broker, tenant, "cluster", "", "create")
        create_topics(broker, "admin", SHARED_TOPIC)
        grant(broker, "attacker", "topic", SHARED_TOPIC, "write,describe")
        yield broker
    finally:
        failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
        if failed:
            print(broker.log_tail())
        if broker.is_running():
            broker.stop()
