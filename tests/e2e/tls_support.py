"""TLS for the e2e suites: certificates made at test time with Debian's `openssl` (a CA, a
server certificate for 127.0.0.1/localhost, client certificates, and a second CA), a broker
whose `listeners` come from its settings, and the clients' TLS settings. Used by test_tls.py
and test_sasl.py (which imports the `certs` fixture from here).
"""

from __future__ import annotations

import re
import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import Broker
from kafka_wire import KafkaConnection

OPENSSL_TIMEOUT_S = 30
CLIENT_TIMEOUT_S = 60
LISTENER_LINE = re.compile(r"^sluice listener (\w+)=(127\.0\.0\.1:\d+)\s*$")


def openssl(*args: str, cwd: Path):
    assert shutil.which("openssl"), "openssl is not installed (tests/run installs it)"
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)


def make_ca(dir: Path, name: str) -> None:
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=dir,
    )  # fmt: skip


def make_leaf(dir: Path, ca: str, name: str, subject: str, usage: str, san: str = "IP:127.0.0.1,DNS:localhost") -> None:
    """`name.key`, `name.crt` signed by `ca`, and `name.pem` (key + chain, a keystore)."""
    ext = dir / f"{name}.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        f"extendedKeyUsage={usage}\nsubjectAltName={san}\n"
    )
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
        cwd=dir,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", ext.name,
        cwd=dir,
    )  # fmt: skip
    (dir / f"{name}.pem").write_text((dir / f"{name}.key").read_text() + (dir / f"{name}.crt").read_text())


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    dir = tmp_path_factory.mktemp("certs")
    make_ca(dir, "ca")
    make_ca(dir, "otherca")
    make_leaf(dir, "ca", "server", "/CN=localhost", "serverAuth")
    make_leaf(dir, "ca", "reloaded", "/CN=reloaded.localhost", "serverAuth")
    make_leaf(dir, "ca", "client", "/O=Test/CN=client", "clientAuth")
    make_leaf(dir, "otherca", "stranger", "/CN=stranger", "clientAuth")
    return dir


class TlsBroker(Broker):
    """conftest's Broker, but `listeners` comes from the settings (no `--listen` flag)."""

    def command(self) -> list[str]:
        cmd = super().command()
        at = cmd.index("--listen")
        del cmd[at : at + 2]
        return cmd

    def listener(self, name: str) -> str:
        for line in self.stdout_lines_seen:
            match = LISTENER_LINE.match(line)
            if match and match.group(1) == name:
                return match.group(2)
        raise AssertionError(f"no listener line for {name}: {self.stdout_lines_seen!r}")


@pytest.fixture
def tls_broker_factory(tmp_path_factory, request, certs):
    """Starts TlsBrokers with the test certificate as keystore: `start(settings, env,
    prepare)`, where `prepare(data_dir)` runs before the first start (making users)."""
    brokers: list[TlsBroker] = []

    def start(settings: dict[str, str] | None = None, env: dict[str, str] | None = None, prepare=None) -> TlsBroker:
        root = tmp_path_factory.mktemp("broker")
        (root / "data").mkdir()
        if prepare is not None:
            prepare(root / "data")
        keystore = root / "keystore.pem"
        shutil.copy(certs / "server.pem", keystore)
        merged = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.type": "PEM",
            # An SSL listener makes unnamed resources closed by default (Kafka's rule);
            # these suites test TLS, and test_acls.py tests authorization.
            "allow.everyone.if.no.acl.found": "true",
        }
        merged.update(settings or {})
        broker = TlsBroker(root / "data", root / "broker.log", merged, env or {})
        brokers.append(broker)
        return broker.start()

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for broker in brokers:
        if failed:
            print(broker.log_tail())
        if broker.is_running():
            broker.stop()


@pytest.fixture
def tls_broker(tls_broker_factory) -> TlsBroker:
    return tls_broker_factory()


def librdkafka_ssl(certs: Path, client: str | None = None) -> dict[str, str]:
    conf = {"security.protocol": "ssl", "ssl.ca.location": str(certs / "ca.pem")}
    if client:
        conf["ssl.certificate.location"] = str(certs / f"{client}.crt")
        conf["ssl.key.location"] = str(certs / f"{client}.key")
    return conf


def ssl_context(certs: Path, client: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if client:
        ctx.load_cert_chain(str(certs / f"{client}.crt"), str(certs / f"{client}.key"))
    return ctx


def tls_connection(bootstrap: str, ctx: ssl.SSLContext) -> KafkaConnection:
    conn = KafkaConnection(bootstrap)
    conn.sock = ctx.wrap_socket(conn.sock, server_hostname="127.0.0.1")
    return conn


def metric(broker: Broker, name: str) -> float:
    """One value from `/metrics`, sent with the broker's `admin.token` if it has one (the
    admin API asks the ACLs, and a secured broker's anonymous caller may not DESCRIBE the
    cluster)."""
    req = urllib.request.Request(f"{broker.admin_url}/metrics")
    if token := broker.settings.get("admin.token"):
        req.add_header("Authorization", f"Bearer {token}")
    text = urllib.request.urlopen(req, timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")
