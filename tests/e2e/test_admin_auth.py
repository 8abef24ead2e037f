"""The admin HTTP API's security end to end (docs/admin-api.md), against the real binary on
ephemeral 127.0.0.1 ports, with users made by `sluice user create` before start and ACLs made
by confluent-kafka's AdminClient over a SASL_PLAINTEXT listener as the super user.

Covers: `admin.auth = basic` (401 with `WWW-Authenticate: Basic realm="sluice"` without or
with wrong credentials, 200 with the right ones, SCRAM-SHA-512 and -256 users, `/health` and
`/ready` open, the CLI's `--admin-user` with SLUICE_ADMIN_PASSWORD); the same ACLs as the
Kafka listener (a user without them gets 403 on a plugin upload, `/metrics` and a topic it
may not describe, and a filtered topic list, while the super user succeeds); the Host check
(421 for `evil.example` and a missing Host, `admin.allowed.hosts`); HTTPS with
`admin.ssl.enabled` and the broker's keystore; the refusal to start on 0.0.0.0 without
credentials and `admin.allow.insecure = true`; and `admin.max.connections` with
`sluice_admin_connections_refused_total`.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from conftest import Broker, sluice_bin, wait_until
from plugin_support import wasm
from tls_support import TlsBroker, certs, ssl_context  # noqa: F401 (certs is a fixture)

USERS = {
    "admin": ("admin-pw", "SCRAM-SHA-256"),
    "alice": ("alice-pw", "SCRAM-SHA-256"),
    "bob": ("bob-pw", "SCRAM-SHA-512"),
}
TIMEOUT_S = 30
START_DEADLINE_S = 30


def create_users(data_dir) -> None:
    for name, (password, mechanism) in USERS.items():
        proc = subprocess.run(
            [sluice_bin(), "user", "create", name, "--mechanism", mechanism, "--password-stdin",
             "--data-dir", str(data_dir)],
            input=password.encode(), capture_output=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()


@pytest.fixture
def admin_factory(tmp_path_factory, request):
    brokers: list[TlsBroker] = []

    def start(settings: dict[str, str] | None = None) -> TlsBroker:
        root = tmp_path_factory.mktemp("broker")
        data = root / "data"
        data.mkdir()
        create_users(data)
        merged = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "super.users": "User:admin",
            "admin.auth": "basic",
        }
        merged.update(settings or {})
        broker = TlsBroker(data, root / "broker.log", merged, {})
        brokers.append(broker)
        return broker.start()

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for broker in brokers:
        if failed:
            print(broker.log_tail())
        if broker.is_running():
            broker.stop()


def basic(user: str, password: str | None = None) -> dict[str, str]:
    password = USERS[user][0] if password is None else password
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def call(broker: Broker, method: str, path: str, headers: dict[str, str] | None = None, body: bytes | None = None,
         tls: ssl.SSLContext | None = None) -> tuple[int, http.client.HTTPMessage, object]:  # fmt: skip
    """One request; (status, headers, JSON body or text)."""
    if tls is None:
        conn = http.client.HTTPConnection("127.0.0.1", broker.admin_port, timeout=TIMEOUT_S)
    else:
        conn = http.client.HTTPSConnection("localhost", broker.admin_port, timeout=TIMEOUT_S, context=tls)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        parsed = json.loads(data) if data else None
    except ValueError:
        parsed = data.decode(errors="replace")
    return resp.status, resp.headers, parsed


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def test_basic_auth_is_required_and_checked_against_the_scram_users(admin_factory):
    broker = admin_factory()
    status, headers, body = call(broker, "GET", "/v1/topics")
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="sluice"', (status, body)
    assert body["code"] == "UNAUTHORIZED" and "--admin-user" in body["error"], body
    assert call(broker, "GET", "/v1/topics", basic("admin"))[0] == 200
    assert call(broker, "GET", "/metrics", basic("bob"))[0] == 403  # a SCRAM-SHA-512 user, no ACL
    status, headers, body = call(broker, "GET", "/v1/topics", basic("admin", "wrong-pw"))
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="sluice"', (status, body)
    assert call(broker, "GET", "/v1/topics", basic("nobody", "x"))[0] == 401
    for open_route in ["/health", "/ready"]:
        assert call(broker, "GET", open_route)[0] == 200, open_route
    log = broker.log_path.read_text()
    assert "admin API authentication failed" in log and "wrong-pw" not in log, log[-2000:]

    # The CLI: --admin-user with the password from the environment.
    cli = [sluice_bin(), "plugin", "list", "--admin-url", broker.admin_url, "--output", "json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    ok = subprocess.run([*cli, "--admin-user", "admin"], env={**env, "SLUICE_ADMIN_PASSWORD": "admin-pw"},
                        capture_output=True, timeout=60)  # fmt: skip
    assert ok.returncode == 0, ok.stderr.decode()
    refused = subprocess.run(cli, env=env, capture_output=True, timeout=60)
    assert refused.returncode != 0 and b"401" in refused.stderr, refused.stderr.decode()
    missing = subprocess.run([*cli, "--admin-user", "admin"], env=env, capture_output=True, timeout=60)
    assert missing.returncode != 0 and b"SLUICE_ADMIN_PASSWORD" in missing.stderr, missing.stderr.decode()

    # Failed logins count in the Kafka listeners' per-(address, user) limiter: past
    # LOGIN_FAILURES_PER_USER_MAX (10) that user is refused unchecked from this address, the
    # right password too; another user on the same address is not.
    statuses = [call(broker, "GET", "/v1/topics", basic("alice", f"guess-{i}"))[0] for i in range(12)]
    assert statuses[0] == 401 and statuses[-1] == 429, statuses
    status, headers, body = call(broker, "GET", "/v1/topics", basic("alice"))
    assert status == 429 and body["code"] == "TOO_MANY_FAILED_LOGINS" and int(headers["Retry-After"]) >= 1, body
    assert "LOGIN_FAILURES_PER_USER_MAX" in body["error"], body
    assert call(broker, "GET", "/v1/topics", basic("admin"))[0] == 200
    assert call(broker, "GET", "/health")[0] == 200
    assert metric(call(broker, "GET", "/metrics", basic("admin"))[2], "sluice_login_refusals_total") >= 2


def sasl(broker: TlsBroker, user: str) -> dict:
    return {
        "bootstrap.servers": broker.listener("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user][0],
    }


def grant(broker: TlsBroker, bindings: list[AclBinding]) -> None:
    admin = AdminClient(sasl(broker, "admin"))
    for future in admin.create_acls(bindings).values():
        try:
            assert future.result(timeout=TIMEOUT_S) is None
        except KafkaException as e:
            raise AssertionError(f"CreateAcls failed: {e}") from None


def test_the_kafka_acls_decide_what_each_user_may_do(admin_factory):
    broker = admin_factory()
    for name in ["visible", "hidden"]:
        headers = {**basic("admin"), "Content-Type": "application/json"}
        status, _, body = call(broker, "POST", "/v1/topics", headers, json.dumps({"name": name}).encode())
        assert status == 201, body
    grant(broker, [AclBinding(ResourceType.TOPIC, "visible", ResourcePatternType.LITERAL, "User:alice", "*",
                              AclOperation.DESCRIBE, AclPermissionType.ALLOW)])  # fmt: skip

    status, _, body = call(broker, "GET", "/v1/topics", basic("alice"))
    assert status == 200 and [t["name"] for t in body["topics"]] == ["visible"], body
    status, _, body = call(broker, "GET", "/v1/topics/hidden", basic("alice"))
    assert status == 403 and body["code"] == "FORBIDDEN", body
    assert "DESCRIBE" in body["error"] and "TOPIC" in body["error"] and "User:alice" in body["error"], body
    assert call(broker, "GET", "/v1/topics/visible", basic("alice"))[0] == 200
    status, _, body = call(broker, "DELETE", "/v1/topics/visible", basic("alice"))
    assert status == 403 and "DELETE" in body["error"], body

    plugin = wasm("murmur2")
    status, _, body = call(broker, "PUT", "/v1/plugins/router", basic("alice"), plugin)
    assert status == 403 and "ALTER" in body["error"] and "PLUGIN" in body["error"], body
    status, _, body = call(broker, "GET", "/metrics", basic("alice"))
    assert status == 403 and "CLUSTER" in body["error"], body

    status, _, body = call(broker, "PUT", "/v1/plugins/router", basic("admin"), plugin)
    assert status == 200 and body["name"] == "router", body
    status, _, body = call(broker, "GET", "/v1/plugins", basic("alice"))
    assert status == 200 and body == [], body
    status, _, body = call(broker, "GET", "/v1/plugins", basic("admin"))
    assert status == 200 and [p["name"] for p in body] == ["router"], body
    # A plugin's log needs ALTER on it (its owner's right: a guest may log record contents).
    status, _, body = call(broker, "GET", "/v1/plugins/router/logs", basic("alice"))
    assert status == 403 and "ALTER" in body["error"] and "PLUGIN" in body["error"], body
    status, _, body = call(broker, "GET", "/v1/plugins/router/logs", basic("admin"))
    assert status == 200 and body["lines"] == [], body
    status, _, body = call(broker, "GET", "/v1/topics", basic("admin"))
    assert sorted(t["name"] for t in body["topics"]) == ["hidden", "visible"], body
    assert call(broker, "GET", "/metrics", basic("admin"))[0] == 200


def test_the_host_check_refuses_other_names(admin_factory):
    broker = admin_factory({"admin.auth": "none", "admin.allowed.hosts": "sluice.test"})
    status, _, body = call(broker, "GET", "/v1/topics", {"Host": "evil.example"})
    assert status == 421 and body["code"] == "MISDIRECTED_REQUEST", body
    assert "admin.allowed.hosts" in body["error"], body
    assert call(broker, "GET", "/health", {"Host": f"evil.example:{broker.admin_port}"})[0] == 421
    for host in [f"localhost:{broker.admin_port}", "127.0.0.1", f"[::1]:{broker.admin_port}", "sluice.test:80"]:
        assert call(broker, "GET", "/health", {"Host": host})[0] == 200, host

    # HTTP/1.1 without a Host header.
    with socket.create_connection(("127.0.0.1", broker.admin_port), timeout=TIMEOUT_S) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 421"), reply


def test_https_with_the_broker_keystore(tmp_path, certs, admin_factory):  # noqa: F811
    keystore = tmp_path / "keystore.pem"
    shutil.copy(certs / "server.pem", keystore)
    broker = admin_factory({"admin.ssl.enabled": "true", "ssl.keystore.location": str(keystore), "admin.token": "tok"})
    ctx = ssl_context(certs)
    status, _, body = call(broker, "GET", "/v1/topics", basic("admin"), tls=ctx)
    assert status == 200 and body == {"topics": []}, body
    assert call(broker, "GET", "/v1/topics", {"Authorization": "Bearer tok"}, tls=ctx)[0] == 200
    assert call(broker, "GET", "/v1/topics", tls=ctx)[0] == 401
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        call(broker, "GET", "/health")  # plain HTTP to the HTTPS port

    # The CLI over HTTPS, trusting the test CA.
    url = f"https://localhost:{broker.admin_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    cli = [sluice_bin(), "plugin", "list", "--admin-url", url, "--output", "json", "--admin-user", "admin"]
    env["SLUICE_ADMIN_PASSWORD"] = "admin-pw"
    ok = subprocess.run([*cli, "--admin-ca-file", str(certs / "ca.pem")], env=env, capture_output=True, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout) == [], ok.stderr.decode()
    untrusted = subprocess.run([*cli, "--admin-ca-file", str(certs / "otherca.pem")], env=env, capture_output=True,
                               timeout=60)  # fmt: skip
    assert untrusted.returncode != 0 and b"certificate" in untrusted.stderr.lower(), untrusted.stderr.decode()


def serve(data_dir, *settings: str) -> subprocess.Popen:
    cmd = [sluice_bin(), "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0"]
    for setting in settings:
        cmd += ["--set", setting]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_an_open_admin_api_on_a_wildcard_address_is_refused_unless_allowed(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    refused = serve(data)
    _, stderr = refused.communicate(timeout=START_DEADLINE_S)
    assert refused.returncode != 0, stderr.decode()
    for key in [b"admin.listen", b"admin.auth", b"admin.token", b"admin.allow.insecure"]:
        assert key in stderr, (key, stderr.decode())

    allowed = serve(data, "admin.allow.insecure=true")
    try:
        line = allowed.stdout.readline().decode()
        match = re.search(r" admin=0\.0\.0\.0:(\d+)", line)
        assert match, line
        port = int(match.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
        conn.request("GET", "/v1/topics")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        allowed.send_signal(signal.SIGTERM)
        _, stderr = allowed.communicate(timeout=START_DEADLINE_S)
    assert allowed.returncode == 0, stderr.decode()
    assert b"asks no credentials on a non-loopback address" in stderr, stderr.decode()


def test_connections_past_the_cap_are_closed_and_counted(admin_factory):
    broker = admin_factory({"admin.max.connections": "2"})
    held = [socket.create_connection(("127.0.0.1", broker.admin_port), timeout=TIMEOUT_S) for _ in range(2)]
    # Both held connections are accepted (a request on each is answered) before the third.
    for s in held:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
    with socket.create_connection(("127.0.0.1", broker.admin_port), timeout=TIMEOUT_S) as third:
        third.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        try:
            assert third.recv(4096) == b""
        except ConnectionResetError:
            pass
    for s in held:
        s.close()

    def scrape() -> str | None:
        try:
            status, _, text = call(broker, "GET", "/metrics", basic("admin"))
        except (ConnectionError, http.client.HTTPException):
            return None
        return text if status == 200 else None

    wait_until(lambda: scrape() is not None, TIMEOUT_S, "a slot to be free again")
    assert metric(scrape(), "sluice_admin_connections_refused_total") >= 1


def test_an_idle_connection_gives_its_slot_back(admin_factory):
    broker = admin_factory({"admin.max.connections": "1", "connections.max.idle.ms": "500"})
    with socket.create_connection(("127.0.0.1", broker.admin_port), timeout=TIMEOUT_S) as idle:
        # Nothing sent: the broker closes it after connections.max.idle.ms.
        started = time.monotonic()
        assert idle.recv(4096) == b""
        assert time.monotonic() - started < TIMEOUT_S
    assert call(broker, "GET", "/health")[0] == 200


def test_plugin_acls_made_with_sluice_acl_let_a_user_deploy_its_own_plugins(admin_factory):
    """Sluice's own resource types (PLUGIN is 100) cannot be named by Kafka's tools;
    `sluice acl --plugin` grants them, and the admin API honours the grant."""
    broker = admin_factory()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env["SLUICE_PASSWORD"] = USERS["admin"][0]
    proc = subprocess.run(
        [sluice_bin(), "acl", "create", "--brokers", broker.listener("SASL_PLAINTEXT"), "--user", "admin",
         "--sasl-mechanism", USERS["admin"][1], "--allow-principal", "User:alice", "--operation", "alter,describe",
         "--plugin", "alice-", "--resource-pattern-type", "prefixed", "--output", "json"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert {a["resource_type"] for a in json.loads(proc.stdout)["acls"]} == {"PLUGIN"}
    plugin = wasm("murmur2")
    status, _, body = call(broker, "PUT", "/v1/plugins/alice-router", basic("alice"), plugin)
    assert status == 200 and body["name"] == "alice-router", body
    status, _, body = call(broker, "PUT", "/v1/plugins/router", basic("alice"), plugin)
    assert status == 403 and "PLUGIN" in body["error"], body
    status, _, body = call(broker, "GET", "/v1/plugins", basic("alice"))
    assert status == 200 and [p["name"] for p in body] == ["alice-router"], body


def test_transform_acls_made_with_sluice_acl_let_a_user_deploy_its_own_transforms(admin_factory):
    """TRANSFORM (102) is Sluice's own resource type: `sluice acl --transform` grants it. A
    deploy needs CREATE on the transform, READ on its source topic and plugin, and WRITE on
    its outputs: a transform writes as the broker, so only where its deployer may."""
    broker = admin_factory()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env["SLUICE_PASSWORD"] = USERS["admin"][0]

    def acl(*args: str) -> None:
        proc = subprocess.run(
            [sluice_bin(), "acl", "create", "--brokers", broker.listener("SASL_PLAINTEXT"), "--user", "admin",
             "--sasl-mechanism", USERS["admin"][1], "--allow-principal", "User:alice", *args],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr

    json_headers = {**basic("admin"), "Content-Type": "application/json"}
    for name in ["src", "out", "other"]:
        status, _, body = call(broker, "POST", "/v1/topics", json_headers, json.dumps({"name": name}).encode())
        assert status == 201, body
    status, _, body = call(broker, "PUT", "/v1/plugins/copy", basic("admin"), wasm("hostile-poison-transform"))
    assert status == 200, body
    acl("--operation", "create,describe,alter,delete", "--transform", "alice-", "--resource-pattern-type", "prefixed")
    acl("--operation", "read", "--topic", "src", "--plugin", "copy")
    acl("--operation", "write", "--topic", "out")

    alice = {**basic("alice"), "Content-Type": "application/json"}

    def deploy(name: str, output: str):
        body = {"name": name, "source": "src", "plugin": "copy", "outputs": [output]}
        return call(broker, "POST", "/v1/transforms", alice, json.dumps(body).encode())

    status, _, body = deploy("alice-copy", "out")
    assert status == 201 and body["principal"] == "User:alice", body
    status, _, body = deploy("copy", "out")
    assert status == 403 and "CREATE" in body["error"] and "TRANSFORM" in body["error"], body
    status, _, body = deploy("alice-other", "other")
    assert status == 403 and "WRITE" in body["error"] and "TOPIC" in body["error"], body
    status, _, body = call(broker, "POST", "/v1/transforms/alice-copy/pause", alice)
    assert status == 200 and body["paused"] is True, body
    status, _, body = call(broker, "POST", "/v1/transforms", json_headers, json.dumps({"name": "admins", "source": "src", "plugin": "copy", "outputs": ["other"]}).encode())
    assert status == 201, body
    status, _, body = call(broker, "GET", "/v1/transforms", basic("alice"))
    assert status == 200 and [t["name"] for t in body["transforms"]] == ["alice-copy"], body
    status, _, body = call(broker, "DELETE", "/v1/transforms/admins", basic("alice"))
    assert status == 403 and "DELETE" in body["error"], body
    status, _, body = call(broker, "DELETE", "/v1/transforms/alice-copy", basic("alice"))
    assert status == 200, body
