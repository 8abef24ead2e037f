"""SASL listeners with real clients: SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_SSL (real
TLS, certificates made at test time), PLAIN over SASL_PLAINTEXT, with kcat, confluent-kafka
and kafka-python; users made with `sluice user create --data-dir` before the broker starts.

Also, on raw sockets: a wrong password is refused (SASL_AUTHENTICATION_FAILED, then the
connection closes) and counted; a request before authentication closes the connection;
failed logins of one user from one address are limited (LOGIN_FAILURES_PER_USER_MAX, 10, in a
minute: that user's next attempt is refused even with the right password, another user's is
not), and a confluent-kafka producer retrying a wrong password beside correctly configured
clients on the same address locks out nobody else; KIP-368 re-authentication (the
session lifetime is returned, a connection that outlives it without re-authenticating is
closed, re-authenticating keeps it, and a different user cannot take it over); and
librdkafka re-authenticating under load without losing a record.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import kafka_messages as km
import kafka_wire as kw
from clients import Record, consume_partition, create_topic, produce_all, producer
from conftest import sluice_bin
from kafka_wire import KafkaConnection
from tls_support import (  # noqa: F401 (certs, tls_broker_factory: fixtures)
    CLIENT_TIMEOUT_S,
    TlsBroker,
    certs,
    metric,
    tls_broker_factory,
)

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
METADATA = 3
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
UNSUPPORTED_VERSION = 35
LOGIN_FAILURES_PER_USER_MAX = 10

USERS = {"alice": "alice-secret-pw", "admin": "admin-secret-pw"}
RECORDS = [Record(key=f"k{i}".encode(), value=f"sasl-{i}".encode()) for i in range(20)]


def create_user(data_dir: Path, name: str, mechanism: str, password: str):
    proc = subprocess.run(
        [sluice_bin(), "user", "create", name, "--mechanism", mechanism, "--password-stdin", "--data-dir", str(data_dir)],
        input=password.encode(), capture_output=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()


def create_users(data_dir: Path):
    for name, password in USERS.items():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            create_user(data_dir, name, mechanism, password)


@pytest.fixture
def sasl_broker_factory(tls_broker_factory):  # noqa: F811 (the fixture)
    def start(settings: dict[str, str] | None = None) -> TlsBroker:
        merged = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        }
        merged.update(settings or {})
        return tls_broker_factory(merged, prepare=create_users)

    return start


@pytest.fixture
def sasl_broker(sasl_broker_factory) -> TlsBroker:
    return sasl_broker_factory()


def librdkafka_sasl(certs: Path, protocol: str, mechanism: str, user: str = "alice", password: str | None = None):  # noqa: F811
    conf = {
        "security.protocol": protocol,
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": USERS[user] if password is None else password,
    }
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    return conf


CASES = [
    ("SASL_SSL", "SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "PLAIN"),
]


@pytest.mark.parametrize("protocol,mechanism", CASES)
def test_kcat_over_sasl(sasl_broker, certs, protocol, mechanism):  # noqa: F811
    addr = sasl_broker.listener(protocol)
    x = [arg for k, v in librdkafka_sasl(certs, protocol, mechanism).items() for arg in ("-X", f"{k}={v}")]
    topic = f"kcat-{mechanism.lower()}"
    lines = "".join(f"line-{i}\n" for i in range(10))
    subprocess.run(
        ["kcat", "-b", addr, *x, "-P", "-t", topic, "-p", "0"],
        input=lines, text=True, check=True, capture_output=True, timeout=CLIENT_TIMEOUT_S,
    )  # fmt: skip
    out = subprocess.run(
        ["kcat", "-b", addr, *x, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n"],
        text=True, check=True, capture_output=True, timeout=CLIENT_TIMEOUT_S,
    ).stdout  # fmt: skip
    assert out.splitlines() == [f"{i} line-{i}" for i in range(10)]


def test_kcat_with_a_wrong_password_is_refused(sasl_broker, certs):  # noqa: F811
    addr = sasl_broker.listener("SASL_SSL")
    conf = librdkafka_sasl(certs, "SASL_SSL", "SCRAM-SHA-256", password="wrong")
    x = [arg for k, v in conf.items() for arg in ("-X", f"{k}={v}")]
    proc = subprocess.run(
        ["kcat", "-b", addr, *x, "-L", "-m", "5"], text=True, capture_output=True, timeout=CLIENT_TIMEOUT_S
    )
    assert proc.returncode != 0
    assert "Authentication failed" in proc.stderr, proc.stderr
    assert metric(sasl_broker, "sluice_sasl_authentication_failures_total") >= 1


@pytest.mark.parametrize("protocol,mechanism", CASES)
def test_confluent_kafka_over_sasl(sasl_broker, certs, protocol, mechanism):  # noqa: F811
    addr = sasl_broker.listener(protocol)
    topic = f"ck-{mechanism.lower()}"
    create_topic(sasl_broker.bootstrap, topic)
    conf = librdkafka_sasl(certs, protocol, mechanism)
    delivered = produce_all(producer(addr, **conf), topic, RECORDS)
    assert [d.offset for d in delivered] == list(range(len(RECORDS)))
    messages = consume_partition(addr, topic, 0, len(RECORDS), **conf)
    assert [(m.key(), m.value()) for m in messages] == [(r.key, r.value) for r in RECORDS]


def test_confluent_kafka_with_a_wrong_password_fails_to_produce(sasl_broker, certs):  # noqa: F811
    addr = sasl_broker.listener("SASL_SSL")
    errors, reports = [], []
    conf = librdkafka_sasl(certs, "SASL_SSL", "SCRAM-SHA-512", password="wrong")
    p = Producer({"bootstrap.servers": addr, "message.timeout.ms": 5000, "error_cb": errors.append, **conf})
    p.produce("ck-wrong", value=b"x", on_delivery=lambda err, msg: reports.append(err))
    p.flush(CLIENT_TIMEOUT_S)
    assert len(reports) == 1 and reports[0] is not None, reports
    assert any("Authentication failed" in e.str() for e in errors), [e.str() for e in errors]


def kafka_python_sasl(certs: Path, protocol: str, mechanism: str) -> dict:  # noqa: F811
    conf = {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
    }
    if protocol == "SASL_SSL":
        conf["ssl_cafile"] = str(certs / "ca.pem")
        conf["ssl_check_hostname"] = False
    return conf


@pytest.mark.parametrize("protocol,mechanism", CASES)
def test_kafka_python_over_sasl(sasl_broker, certs, protocol, mechanism):  # noqa: F811
    addr = sasl_broker.listener(protocol)
    topic = f"kp-{mechanism.lower()}"
    create_topic(sasl_broker.bootstrap, topic)
    conf = kafka_python_sasl(certs, protocol, mechanism)
    p = KafkaProducer(bootstrap_servers=addr, **conf)
    for r in RECORDS:
        p.send(topic, key=r.key, value=r.value, partition=0)
    p.flush(timeout=CLIENT_TIMEOUT_S)
    p.close()
    c = KafkaConsumer(bootstrap_servers=addr, consumer_timeout_ms=10_000, **conf)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while len(got) < len(RECORDS) and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=1000).values():
            got.extend((m.key, m.value) for m in batch)
    c.close()
    assert got == [(r.key, r.value) for r in RECORDS]


# Raw SASL on the wire (SASL_PLAINTEXT, PLAIN): exact codes and the connection's fate.


def handshake(conn: KafkaConnection, mechanism: str) -> tuple[int, list[str]]:
    r = conn.request(SASL_HANDSHAKE, 1, kw.string(mechanism))
    return r.i16(), r.array(lambda x: x.string())


def authenticate(conn: KafkaConnection, auth: bytes) -> tuple[int, str | None, bytes | None, int]:
    r = conn.request(SASL_AUTHENTICATE, 1, kw.nbytes(auth))
    return r.i16(), r.string(), r.nbytes(), r.i64()


def plain_login(addr: str, user: str, password: str) -> tuple[KafkaConnection, tuple]:
    conn = KafkaConnection(addr)
    code, mechanisms = handshake(conn, "PLAIN")
    assert code == 0 and "PLAIN" in mechanisms, (code, mechanisms)
    return conn, authenticate(conn, b"\0" + user.encode() + b"\0" + password.encode())


def metadata_works(conn: KafkaConnection) -> bool:
    try:
        r = conn.request(METADATA, 1, km.metadata_body(1, []))
        r.array(lambda x: (x.i32(), x.string(), x.i32(), x.string()))
        return True
    except (kw.ConnectionClosed, OSError):
        return False


def test_raw_sasl_plain_codes_and_connection_fate(sasl_broker):
    addr = sasl_broker.listener("SASL_PLAINTEXT")
    # Before authentication, only ApiVersions and the SASL requests are served.
    with KafkaConnection(addr) as conn:
        assert conn.api_versions(0).error_code == 0
        assert not metadata_works(conn)
    # SaslHandshake v0 (raw-token mode, not built) is answered UNSUPPORTED_VERSION; v1 still
    # works on the same connection.
    with KafkaConnection(addr) as conn:
        assert conn.request(SASL_HANDSHAKE, 0, kw.string("PLAIN")).i16() == UNSUPPORTED_VERSION
        assert handshake(conn, "PLAIN")[0] == 0
    with KafkaConnection(addr) as conn:
        code, mechanisms = handshake(conn, "GSSAPI")
        assert code == UNSUPPORTED_SASL_MECHANISM
        assert sorted(mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert conn.wait_closed(10)
    conn, (code, message, _, lifetime) = plain_login(addr, "alice", "not-the-pw-7351")
    with conn:
        assert code == SASL_AUTHENTICATION_FAILED
        assert message == "Authentication failed: Invalid username or password"
        assert conn.wait_closed(10)
    conn, (code, message, _, lifetime) = plain_login(addr, "alice", USERS["alice"])
    with conn:
        assert (code, message, lifetime) == (0, None, 0)
        assert metadata_works(conn)
    # The password is never logged.
    assert USERS["alice"] not in sasl_broker.log_tail()
    assert "not-the-pw-7351" not in sasl_broker.log_tail()


def test_failed_logins_are_limited_per_address_and_user(sasl_broker_factory):
    broker = sasl_broker_factory({"connection.failed.authentication.delay.ms": "0"})
    addr = broker.listener("SASL_PLAINTEXT")
    for _ in range(LOGIN_FAILURES_PER_USER_MAX):
        conn, (code, _, _, _) = plain_login(addr, "alice", "guess")
        conn.close()
        assert code == SASL_AUTHENTICATION_FAILED
    conn, (code, message, _, _) = plain_login(addr, "alice", USERS["alice"])
    conn.close()
    assert code == SASL_AUTHENTICATION_FAILED
    assert "Too many failed authentication attempts for user alice from 127.0.0.1" in message, message
    assert metric(broker, "sluice_sasl_authentication_failures_total") == LOGIN_FAILURES_PER_USER_MAX + 1
    assert metric(broker, "sluice_login_refusals_total") == 1
    # Another user on the same address logs in, over PLAIN and SCRAM alike.
    conn, (code, message, _, _) = plain_login(addr, "admin", USERS["admin"])
    conn.close()
    assert code == 0, message
    create_topic(broker.bootstrap, "limited")
    conf = librdkafka_sasl(Path("."), "SASL_PLAINTEXT", "SCRAM-SHA-512", user="admin")
    produce_all(producer(addr, **conf), "limited", [RECORDS[0]])


def test_a_client_retrying_a_wrong_password_locks_out_nobody_else(sasl_broker_factory):
    """One misconfigured confluent-kafka producer (alice with a stale password) reconnects
    over and over, as every Kafka client does, past alice's failure limit; the correctly
    configured producers and consumer of another user on the same address (127.0.0.1) keep
    logging in, and every record they produce arrives."""
    broker = sasl_broker_factory({"connection.failed.authentication.delay.ms": "20"})
    addr = broker.listener("SASL_PLAINTEXT")
    topic = "beside-a-bad-client"
    create_topic(broker.bootstrap, topic)
    good_conf = librdkafka_sasl(Path("."), "SASL_PLAINTEXT", "SCRAM-SHA-256", user="admin")
    bad = Producer({
        "bootstrap.servers": addr,
        **librdkafka_sasl(Path("."), "SASL_PLAINTEXT", "SCRAM-SHA-256", password="stale"),
        "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50, "message.timeout.ms": 60_000,
    })  # fmt: skip
    bad.produce(topic, b"never")
    deadline = time.monotonic() + 60
    while metric(broker, "sluice_login_refusals_total") < 5:
        bad.poll(0.1)
        assert time.monotonic() < deadline, "the bad client never reached its failure limit"
    sent = [Record(key=f"k{i}".encode(), value=f"good-{i}".encode()) for i in range(50)]
    for batch in range(5):
        # A fresh producer each round: each logs in anew while alice is refused.
        bad.poll(0.1)
        produce_all(producer(addr, **good_conf), topic, sent[batch * 10 : (batch + 1) * 10])
    bad.purge()
    got = consume_partition(addr, topic, 0, len(sent), **good_conf)
    assert [(m.key(), m.value()) for m in got] == [(r.key, r.value) for r in sent]
    assert metric(broker, "sluice_sasl_authentication_failures_total") > LOGIN_FAILURES_PER_USER_MAX


REAUTH_MS = 2_000


def test_reauthentication_extends_the_session_and_an_ended_one_closes(sasl_broker_factory):
    broker = sasl_broker_factory({"connections.max.reauth.ms": str(REAUTH_MS)})
    addr = broker.listener("SASL_PLAINTEXT")
    # Not re-authenticated: closed at the first request after the session ends.
    stale, (code, _, _, lifetime) = plain_login(addr, "alice", USERS["alice"])
    assert (code, lifetime) == (0, REAUTH_MS)
    # Re-authenticated before the end: kept.
    kept, (code, _, _, _) = plain_login(addr, "alice", USERS["alice"])
    assert code == 0
    time.sleep(REAUTH_MS / 2000)
    assert handshake(kept, "PLAIN")[0] == 0
    code, _, _, lifetime = authenticate(kept, b"\0alice\0" + USERS["alice"].encode())
    assert (code, lifetime) == (0, REAUTH_MS)
    time.sleep(REAUTH_MS / 2000 + 0.5)
    assert not metadata_works(stale)
    assert metadata_works(kept)
    # Another user cannot take over a session by re-authenticating.
    assert handshake(kept, "PLAIN")[0] == 0
    code, message, _, _ = authenticate(kept, b"\0admin\0" + USERS["admin"].encode())
    assert code == SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals during re-authentication" in message
    assert kept.wait_closed(10)
    stale.close()
    kept.close()


def test_librdkafka_reauthenticates_without_losing_records(sasl_broker_factory, certs):  # noqa: F811
    broker = sasl_broker_factory({"connections.max.reauth.ms": str(REAUTH_MS)})
    addr = broker.listener("SASL_SSL")
    create_topic(broker.bootstrap, "reauth")
    conf = librdkafka_sasl(certs, "SASL_SSL", "SCRAM-SHA-256")
    p = producer(addr, **conf)
    records = [Record(key=b"%d" % i, value=b"v%d" % i) for i in range(40)]
    connections = metric(broker, "sluice_connections_accepted_total")
    logins = metric(broker, "sluice_sasl_authentications_total")
    # About three session lifetimes of producing, one record every 150 ms.
    delivered = []
    for r in records:
        delivered += produce_all(p, "reauth", [r])
        time.sleep(0.15)
    assert [d.offset for d in delivered] == list(range(len(records)))
    # More logins than new connections: connections re-authenticated instead of reconnecting.
    new_connections = metric(broker, "sluice_connections_accepted_total") - connections
    new_logins = metric(broker, "sluice_sasl_authentications_total") - logins
    assert new_logins > new_connections, (new_logins, new_connections)
    messages = consume_partition(addr, "reauth", 0, len(records), **conf)
    assert [m.value() for m in messages] == [r.value for r in records]
