"""The `sluice` CLI over TLS and SASL_SSL, with Kafka client properties (`-X KEY=VALUE` and
`--command-config FILE`), against real TLS listeners on 127.0.0.1 ephemeral ports.

Two brokers per module, certificates made at test time (tls_support.py):
- `secured`: PLAINTEXT, SSL and SASL_SSL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; the
  users made with `sluice user create --data-dir` first) and the admin API over HTTPS;
- `mutual`: PLAINTEXT and SSL with `ssl.client.auth=required`; its certificate names only
  `broker.test`, so its clients also show `ssl.endpoint.identification.algorithm=` (empty:
  no host name check) and, without it, the host name check failing.

Each way in (SSL, SASL_SSL with SCRAM-SHA-256/512 and PLAIN, mutual TLS with a certificate and
key or a PEM keystore; -X or --command-config, the file using Kafka's names, comments,
`key: value` and continuation lines) runs the same commands: topic create, list, describe,
produce, consume, consume --group, group list and describe, each parsed from `--output json`;
a SASL_SSL login is counted by the broker. Then the failures, each with its exit code (1, not 3:
the broker was reached) and a one-line message naming the cause: an untrusted CA, a missing or
foreign client certificate, a wrong or missing password, plaintext to a TLS listener and back,
a host name mismatch, an unknown key (with the file and line), a JKS truststore, an encrypted
key, properties the protocol would not use; a tuning key is only a warning. The admin API
commands (`plugin`, `view`, `transform`, `consume --filter`) over HTTPS with the same
properties. Last, on a broker with `connections.max.idle.ms` = 2 s, a group member whose idle
TLS connection the broker closed reconnects over TLS and takes over the partition.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer

from conftest import sluice_bin, wait_until
from plugin_support import built_plugins_dir
from test_cli_group_consume import CliMember, assignments
from tls_support import TlsBroker, certs, metric, openssl, ssl_context  # noqa: F401 (certs is a fixture)

TIMEOUT_S = 60
DEADLINE_S = 60.0
USERS = {"alice": "alice-secret-pw"}
RECORDS = 20
EXIT_FAILED = 1


def create_users(data_dir: Path) -> None:
    for name, password in USERS.items():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            proc = subprocess.run(
                [sluice_bin(), "user", "create", name, "--mechanism", mechanism, "--password-stdin",
                 "--data-dir", str(data_dir)],
                input=password.encode(), capture_output=True, timeout=TIMEOUT_S,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr.decode()


def make_leaf_named(dir: Path, name: str, san: str) -> None:
    """`name.pem`, a server keystore signed by `ca` whose certificate names only `san`."""
    (dir / f"{name}.ext").write_text(
        f"basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
    )
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=broker.test", cwd=dir,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=dir,
    )  # fmt: skip
    (dir / f"{name}.pem").write_text((dir / f"{name}.key").read_text() + (dir / f"{name}.crt").read_text())


def start_broker(tmp_path_factory, settings: dict[str, str], prepare=None) -> TlsBroker:
    root = tmp_path_factory.mktemp("broker")
    (root / "data").mkdir()
    if prepare is not None:
        prepare(root / "data")
    merged = {"allow.everyone.if.no.acl.found": "true", "ssl.keystore.type": "PEM", **settings}
    return TlsBroker(root / "data", root / "broker.log", merged, {}).start()


@pytest.fixture(scope="module")
def secured(tmp_path_factory, certs):  # noqa: F811
    broker = start_broker(
        tmp_path_factory,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.location": str(certs / "server.pem"),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "admin.ssl.enabled": "true",
        },
        prepare=create_users,
    )
    yield broker
    print(broker.log_tail())
    broker.stop()


@pytest.fixture(scope="module")
def mutual(tmp_path_factory, certs):  # noqa: F811
    make_leaf_named(certs, "elsewhere", "DNS:broker.test")
    broker = start_broker(
        tmp_path_factory,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(certs / "elsewhere.pem"),
            "ssl.truststore.location": str(certs / "ca.pem"),
            "ssl.client.auth": "required",
        },
    )
    yield broker
    print(broker.log_tail())
    broker.stop()


def sluice(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    clean.update(env or {})
    return subprocess.run(
        [sluice_bin(), *args], input=stdin, text=True, capture_output=True, timeout=TIMEOUT_S, env=clean
    )


def ok_json(*args: str, env: dict[str, str] | None = None, stdin: str = ""):
    proc = sluice(*args, "--output", "json", env=env, stdin=stdin)
    assert proc.returncode == 0, f"{args}: rc={proc.returncode} {proc.stderr}"
    return proc.stdout


def xs(props: dict[str, str]) -> list[str]:
    return [arg for k, v in props.items() for arg in ("-X", f"{k}={v}")]


class Way:
    """How a case reaches its broker: extra arguments and environment."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None):
        self.args = args
        self.env = env or {}


def command_config(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return ["--command-config", str(path)]


def ways(case: str, certs: Path, tmp_path: Path) -> Way:  # noqa: F811
    ca, keystore = certs / "ca.pem", certs / "client.pem"
    no_host_check = "ssl.endpoint.identification.algorithm"
    match case:
        case "ssl-x":
            return Way(xs({"security.protocol": "SSL", "ssl.ca.location": str(ca)}))
        case "ssl-file":
            text = (
                "# Kafka's names, as kafka-topics.sh --command-config takes them\n"
                "security.protocol = SSL\n"
                f"ssl.truststore.location: {ca}\n"
                "ssl.truststore.type PEM\n"
                "ssl.endpoint.identification.algorithm=https\n"
                "client.id=ops-cli\n"
            )
            return Way(command_config(tmp_path, text))
        case "scram-256-x":
            props = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca), "sasl.mechanism": "SCRAM-SHA-256",
                     "sasl.username": "alice", "sasl.password": USERS["alice"]}  # fmt: skip
            return Way(xs(props))
        case "scram-512-file":
            text = (
                "security.protocol=SASL_SSL\n"
                f"ssl.truststore.location={ca}\n"
                "sasl.mechanism=SCRAM-SHA-512\n"
                "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                '    username="alice" \\\n'
                f'    password="{USERS["alice"]}";\n'
            )
            return Way(command_config(tmp_path, text))
        case "plain-file":
            text = (
                "! librdkafka's names in a file\n"
                "security.protocol=sasl_ssl\n"
                f"ssl.ca.location={ca}\n"
                "sasl.mechanisms=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="alice" password="{USERS["alice"]}";\n'
            )
            return Way(command_config(tmp_path, text))
        case "plain-x-and-flags":
            # The properties say how to connect; --user, --sasl-mechanism and SLUICE_PASSWORD
            # who logs in (they fill what the properties leave out).
            args = xs({"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca)})
            return Way([*args, "--user", "alice", "--sasl-mechanism", "PLAIN"], {"SLUICE_PASSWORD": USERS["alice"]})
        case "mutual-x":
            props = {"security.protocol": "SSL", "ssl.ca.location": str(ca), no_host_check: "",
                     "ssl.certificate.location": str(certs / "client.crt"),
                     "ssl.key.location": str(certs / "client.key")}  # fmt: skip
            return Way(xs(props))
        case "mutual-file":
            text = (
                "security.protocol=SSL\n"
                f"ssl.truststore.location={ca}\n"
                "ssl.truststore.type=PEM\n"
                f"ssl.keystore.location={keystore}\n"
                "ssl.keystore.type=PEM\n"
                "ssl.endpoint.identification.algorithm=\n"
            )
            # -X wins over the file: the file's CA, which does not exist, is replaced.
            config = command_config(tmp_path, text.replace(str(ca), "/nonexistent.pem"))
            return Way([*config, "-X", f"ssl.ca.location={ca}"])
    raise AssertionError(case)


CASES = [
    ("ssl-x", "secured", "SSL"),
    ("ssl-file", "secured", "SSL"),
    ("scram-256-x", "secured", "SASL_SSL"),
    ("scram-512-file", "secured", "SASL_SSL"),
    ("plain-file", "secured", "SASL_SSL"),
    ("plain-x-and-flags", "secured", "SASL_SSL"),
    ("mutual-x", "mutual", "SSL"),
    ("mutual-file", "mutual", "SSL"),
]


@pytest.mark.parametrize("case,broker_name,listener", CASES)
def test_topic_produce_consume_and_group_commands(request, certs, tmp_path, case, broker_name, listener):  # noqa: F811
    broker = request.getfixturevalue(broker_name)
    addr = broker.listener(listener)
    if case == "ssl-file":
        addr = addr.replace("127.0.0.1", "localhost")  # the certificate names localhost too
    way = ways(case, certs, tmp_path)
    common = ["--brokers", addr, *way.args]
    topic = f"cli-{case}"

    def run(*args: str, stdin: str = ""):
        return json.loads(ok_json(*args, *common, env=way.env, stdin=stdin))

    assert run("topic", "create", topic, "-p", "2")["created"][0]["topic"] == topic
    assert {"topic": topic, "partitions": 2} in run("topic", "list")["topics"]
    assert [p["partition"] for p in run("topic", "describe", topic)["partitions"]] == [0, 1]
    lines = "".join(f"k{i}:value-{i}\n" for i in range(RECORDS))
    assert run("produce", topic, "-K", ":", stdin=lines)["records"] == RECORDS
    out = ok_json("consume", topic, "-e", *common, env=way.env)
    assert sorted(json.loads(line)["value"] for line in out.splitlines()) == sorted(
        f"value-{i}" for i in range(RECORDS)
    )
    group = f"g-{case}"
    out = ok_json("consume", topic, "--group", group, "-n", str(RECORDS), *common, env=way.env)
    assert len(out.splitlines()) == RECORDS
    assert group in [g["group"] for g in run("group", "list")["groups"]]
    offsets = run("group", "describe", group)["offsets"]
    assert [(o["partition"], o["lag"]) for o in offsets] == [(0, 0), (1, 0)], offsets
    assert sum(o["committed_offset"] for o in offsets) == RECORDS, offsets


def https_metric(broker: TlsBroker, certs: Path, name: str) -> float:  # noqa: F811
    url = f"https://localhost:{broker.admin_port}/metrics"
    text = urllib.request.urlopen(url, timeout=TIMEOUT_S, context=ssl_context(certs)).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def test_sasl_ssl_logins_are_counted(secured, certs, tmp_path):  # noqa: F811
    before = https_metric(secured, certs, "sluice_sasl_authentications_total")
    way = ways("scram-256-x", certs, tmp_path)
    ok_json("topic", "list", "--brokers", secured.listener("SASL_SSL"), *way.args)
    assert https_metric(secured, certs, "sluice_sasl_authentications_total") == before + 1


def failure(*args: str, env: dict[str, str] | None = None) -> str:
    proc = sluice(*args, env=env)
    assert proc.returncode == EXIT_FAILED, f"{args}: rc={proc.returncode} {proc.stderr}"
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


def test_tls_failures_say_why(secured, mutual, certs, tmp_path):  # noqa: F811
    ssl = ["topic", "list", "--brokers", secured.listener("SSL")]
    err = failure(*ssl, *xs({"security.protocol": "SSL", "ssl.ca.location": str(certs / "otherca.pem")}))
    assert "TLS handshake with" in err and "not signed by a CA you trust" in err and "ssl.ca.location" in err, err

    # Plaintext to the TLS listener, and TLS to the plaintext one.
    err = failure(*ssl)
    assert "security.protocol" in err, err
    plain = ["topic", "list", "--brokers", secured.bootstrap]
    err = failure(*plain, *xs({"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}))
    assert "is this an SSL or SASL_SSL listener" in err, err

    # The mutual-TLS broker: its certificate names broker.test, not 127.0.0.1.
    base = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    mtls = ["topic", "list", "--brokers", mutual.listener("SSL")]
    err = failure(*mtls, *xs(base))
    assert "does not name the host" in err and "ssl.endpoint.identification.algorithm" in err, err
    base["ssl.endpoint.identification.algorithm"] = ""
    err = failure(*mtls, *xs(base))
    assert "client certificate" in err and "ssl.certificate.location" in err, err
    stranger = {**base, "ssl.certificate.location": str(certs / "stranger.crt"),
                "ssl.key.location": str(certs / "stranger.key")}  # fmt: skip
    err = failure(*mtls, *xs(stranger))
    assert "refused" in err and "client certificate" in err, err


def test_a_wrong_password_is_refused(secured, certs, tmp_path):  # noqa: F811
    props = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs / "ca.pem"),
             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "wrong-pw-7731"}  # fmt: skip
    err = failure("topic", "list", "--brokers", secured.listener("SASL_SSL"), *xs(props))
    assert "logging in to" in err and "SaslAuthenticationFailed" in err, err
    assert "wrong-pw-7731" not in err, err
    # No password anywhere: the error says where one goes.
    del props["sasl.password"]
    err = failure("topic", "list", "--brokers", secured.listener("SASL_SSL"), *xs(props))
    assert "SLUICE_PASSWORD" in err and "sasl.password" in err, err


def test_bad_properties_are_errors_naming_the_key_and_the_file(secured, certs, tmp_path):  # noqa: F811
    ssl = ["topic", "list", "--brokers", secured.listener("SSL")]
    config = command_config(tmp_path, "security.protocol=SSL\n\n# next: a typo\nssl.ca.locaton=/ca.pem\n")
    err = failure(*ssl, *config)
    assert "ssl.ca.locaton" in err and f"{tmp_path / 'client.properties'} line 4" in err, err

    err = failure(*ssl, *xs({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}))
    assert "ssl.truststore.type=JKS" in err and "PEM" in err, err
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + os.urandom(64))
    err = failure(*ssl, *xs({"security.protocol": "SSL", "ssl.truststore.location": str(jks)}))
    assert str(jks) in err and "not a PEM file" in err, err

    shutil.copy(certs / "client.key", tmp_path / "plain.key")
    openssl("pkey", "-in", "plain.key", "-aes256", "-passout", "pass:pw", "-out", "encrypted.key", cwd=tmp_path)
    props = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
             "ssl.certificate.location": str(certs / "client.crt"),
             "ssl.key.location": str(tmp_path / "encrypted.key"), "ssl.key.password": "pw"}  # fmt: skip
    err = failure(*ssl, *xs(props))
    assert "encrypted" in err and "ssl.key.location" in err and "openssl pkey" in err, err

    # ssl.* without a TLS protocol, sasl.* without SASL: refused, not ignored.
    err = failure(*ssl, *xs({"ssl.ca.location": str(certs / "ca.pem")}))
    assert "security.protocol is PLAINTEXT (the default)" in err, err
    err = failure(*ssl, *xs({"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
                             "sasl.username": "alice"}))  # fmt: skip
    assert "sasl.username=alice" in err and "SASL_SSL" in err, err

    # A tuning key is a warning, and the command runs.
    proc = sluice(*ssl, *xs({"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
                             "request.timeout.ms": "5000"}))  # fmt: skip
    assert proc.returncode == 0 and "warning: request.timeout.ms=5000 (from -X) is ignored" in proc.stderr, proc.stderr


def test_the_admin_commands_over_https(secured, certs, tmp_path):  # noqa: F811
    url = ["--admin-url", f"https://localhost:{secured.admin_port}"]
    ca = certs / "ca.pem"
    assert json.loads(ok_json("plugin", "list", *url, "-X", f"ssl.ca.location={ca}")) == []
    config = command_config(tmp_path, f"ssl.truststore.location={ca}\nssl.keystore.location={certs / 'client.pem'}\n")
    assert json.loads(ok_json("view", "list", *url, *config)) == {"views": []}
    assert "transforms" in json.loads(ok_json("transform", "list", *url, *config))
    # -X wins over --admin-ca-file.
    err = failure("plugin", "list", *url, "--admin-ca-file", str(ca), "-X", f"ssl.ca.location={certs / 'otherca.pem'}")
    assert "not signed by a CA you trust" in err, err

    # consume --filter: the Kafka client over SSL and the admin client over HTTPS share -X.
    wasm = built_plugins_dir() / "json-filter.wasm"
    assert wasm.is_file(), f"{wasm} missing: build the plugins (sdk/build-plugins.sh)"
    ok_json("plugin", "deploy", str(wasm), "--name", "json-filter", *url, "-X", f"ssl.ca.location={ca}")
    ssl = xs({"security.protocol": "SSL", "ssl.ca.location": str(ca)})
    brokers = ["--brokers", secured.listener("SSL")]
    ok_json("topic", "create", "orders", *brokers, *ssl)
    orders = "".join(json.dumps({"region": r, "n": i}) + "\n" for i, r in enumerate(["eu", "us"] * 5))
    ok_json("produce", "orders", *brokers, *ssl, stdin=orders)
    filtered = ["--filter", "json-filter", "--param", "field=$.region", "--param", "op===", "--param", "value=eu"]
    out = ok_json("consume", "orders", "-e", *filtered, *brokers, *url, *ssl)
    assert [json.loads(json.loads(line)["value"])["region"] for line in out.splitlines()] == ["eu"] * 5


def test_an_idle_member_reconnects_over_tls_and_takes_over(tmp_path_factory, certs):  # noqa: F811
    broker = start_broker(
        tmp_path_factory,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(certs / "server.pem"),
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            "connections.max.idle.ms": "2000",
        },
    )
    props = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    ssl = ["--brokers", broker.listener("SSL"), *xs(props)]
    busy = idle = None
    try:
        ok_json("topic", "create", "idle-tls", "-p", "1", *ssl)
        busy = CliMember(broker, "idle", "idle-tls", *ssl)
        wait_until(lambda: assignments(broker, "idle") == [[0]], DEADLINE_S, "the first member")
        idle = CliMember(broker, "idle", "idle-tls", *ssl)
        wait_until(lambda: assignments(broker, "idle") == [[], [0]], DEADLINE_S, "one member with the partition")
        # Two fetching or heartbeating connections per member, less the idle one's main.
        wait_until(lambda: metric(broker, "sluice_connections_open") == 3, DEADLINE_S, "the idle connection closed")
        busy.stop()
        wait_until(lambda: assignments(broker, "idle") == [[0]], DEADLINE_S, "the idle member to take over")
        produce_one = Producer({"bootstrap.servers": broker.bootstrap})
        produce_one.produce("idle-tls", value=b"late", partition=0)
        assert produce_one.flush(30) == 0
        wait_until(lambda: idle.seen() == [(0, 0)], DEADLINE_S, "the late record")
        idle.stop()
    finally:
        for member in (busy, idle):
            if member is not None:
                member.kill()
        broker.stop()
