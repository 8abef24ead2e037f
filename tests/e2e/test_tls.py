"""SSL listeners (rustls) with real clients over real TLS on 127.0.0.1 ephemeral ports.

Certificates are made at test time with Debian's `openssl` (a CA, a server certificate for
127.0.0.1/localhost, a client certificate, and a second CA with its own client certificate).
Each broker runs `listeners = PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0`; the bound ports come
from the `sluice listener NAME=HOST:PORT` stdout lines printed before the listening line.

Covers: kcat, confluent-kafka and kafka-python each producing and consuming over SSL; mutual
TLS with `ssl.client.auth=required` (no certificate, and one from another CA, are refused and
counted in `sluice_tls_handshake_failures_total`; a good one is served, and its principal is
the subject in RFC 2253 form); both listeners of one broker serving, each advertising its own
address in Metadata; and certificate reload (replacing the keystore file: a new connection
sees the new certificate while an old one still works, and a broken file keeps the old one);
and a client that never finishes its handshake holding its `max.connections.per.ip` slot only
until the handshake timeout (`TLS_HANDSHAKE_TIMEOUT_MS`, 10 s: this test takes that long).
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import kafka_wire as kw
from clients import Record, admin, consume_partition, create_topic, produce_all, producer
from conftest import wait_until
from kafka_wire import KafkaConnection
from tls_support import (
    CLIENT_TIMEOUT_S,
    certs,  # noqa: F401 (a fixture)
    librdkafka_ssl,
    metric,
    ssl_context,
    tls_broker,  # noqa: F401 (a fixture)
    tls_broker_factory,  # noqa: F401 (a fixture)
    tls_connection,
)

RELOAD_DEADLINE_S = 15.0

RECORDS = [Record(key=f"k{i}".encode(), value=f"value-{i}".encode()) for i in range(20)]


def test_kcat_produces_and_consumes_over_ssl(tls_broker, certs):
    ssl_addr = tls_broker.listener("SSL")
    x = [arg for k, v in librdkafka_ssl(certs).items() for arg in ("-X", f"{k}={v}")]
    lines = "".join(f"line-{i}\n" for i in range(10))
    subprocess.run(
        ["kcat", "-b", ssl_addr, *x, "-P", "-t", "kcat-tls", "-p", "0"],
        input=lines, text=True, check=True, capture_output=True, timeout=CLIENT_TIMEOUT_S,
    )  # fmt: skip
    out = subprocess.run(
        ["kcat", "-b", ssl_addr, *x, "-C", "-t", "kcat-tls", "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n"],
        text=True, check=True, capture_output=True, timeout=CLIENT_TIMEOUT_S,
    ).stdout  # fmt: skip
    assert out.splitlines() == [f"{i} line-{i}" for i in range(10)]


def test_confluent_kafka_produces_and_consumes_over_ssl(tls_broker, certs):
    ssl_addr = tls_broker.listener("SSL")
    create_topic(tls_broker.bootstrap, "ck-tls")
    delivered = produce_all(producer(ssl_addr, **librdkafka_ssl(certs)), "ck-tls", RECORDS)
    assert [d.offset for d in delivered] == list(range(len(RECORDS)))
    messages = consume_partition(ssl_addr, "ck-tls", 0, len(RECORDS), **librdkafka_ssl(certs))
    assert [(m.key(), m.value()) for m in messages] == [(r.key, r.value) for r in RECORDS]
    # About 600 KiB in one partition: a fetch's record set larger than TLS_FILE_CHUNK_BYTES
    # (256 KiB) goes out in several pieces, and must arrive whole and in order.
    create_topic(tls_broker.bootstrap, "ck-tls-big")
    big = [Record(key=b"%d" % i, value=os.urandom(1024)) for i in range(600)]
    produce_all(producer(tls_broker.bootstrap), "ck-tls-big", big)
    messages = consume_partition(ssl_addr, "ck-tls-big", 0, len(big), **librdkafka_ssl(certs))
    assert [(m.key(), m.value()) for m in messages] == [(r.key, r.value) for r in big]


def test_kafka_python_produces_and_consumes_over_ssl(tls_broker, certs):
    ssl_addr = tls_broker.listener("SSL")
    tls = {"security_protocol": "SSL", "ssl_cafile": str(certs / "ca.pem")}
    p = KafkaProducer(bootstrap_servers=ssl_addr, acks="all", **tls)
    futures = [p.send("kp-tls", key=r.key, value=r.value, partition=0) for r in RECORDS]
    offsets = [f.get(timeout=CLIENT_TIMEOUT_S).offset for f in futures]
    p.close()
    assert offsets == list(range(len(RECORDS)))
    c = KafkaConsumer(bootstrap_servers=ssl_addr, group_id=None, enable_auto_commit=False, **tls)
    tp = TopicPartition("kp-tls", 0)
    c.assign([tp])
    c.seek(tp, 0)
    got = []
    wait_until(
        lambda: got.extend(m for batch in c.poll(timeout_ms=500).values() for m in batch) or len(got) >= len(RECORDS),
        CLIENT_TIMEOUT_S,
        "kafka-python consuming over SSL",
    )
    c.close()
    assert [(m.key, m.value) for m in got] == [(r.key, r.value) for r in RECORDS]


def refused(bootstrap: str, ctx: ssl.SSLContext) -> bool:
    """True when the broker ends the TLS session before answering ApiVersions."""
    try:
        with tls_connection(bootstrap, ctx) as conn:
            conn.api_versions()
    except (ssl.SSLError, OSError, kw.ConnectionClosed):
        return True
    return False


def test_mutual_tls_required_refuses_missing_and_foreign_certificates(tls_broker_factory, certs):
    broker = tls_broker_factory(
        {"ssl.client.auth": "required", "ssl.truststore.location": str(certs / "ca.pem")},
        env={"SLUICE_LOG": "info,sluice_server::connection=debug"},
    )
    ssl_addr = broker.listener("SSL")
    before = metric(broker, "sluice_tls_handshake_failures_total")
    assert refused(ssl_addr, ssl_context(certs))
    assert refused(ssl_addr, ssl_context(certs, "stranger"))
    wait_until(
        lambda: metric(broker, "sluice_tls_handshake_failures_total") >= before + 2,
        10,
        "two failed handshakes counted",
    )
    with tls_connection(ssl_addr, ssl_context(certs, "client")) as conn:
        assert conn.api_versions().error_code == kw.NONE
    # A real client with a good certificate produces and consumes.
    create_topic(broker.bootstrap, "mtls")
    conf = librdkafka_ssl(certs, "client")
    produce_all(producer(ssl_addr, **conf), "mtls", RECORDS[:3])
    assert len(consume_partition(ssl_addr, "mtls", 0, 3, **conf)) == 3
    wait_until(
        lambda: "principal=User:CN=client,O=Test" in broker.log_path.read_text(errors="replace"),
        10,
        "the client certificate's principal in the debug log",
    )
    assert "TLS handshake failed" in broker.log_path.read_text(errors="replace")


def test_both_listeners_serve_and_each_advertises_its_own_address(tls_broker, certs):
    ssl_addr = tls_broker.listener("SSL")
    plain_addr = tls_broker.listener("PLAINTEXT")
    assert plain_addr == tls_broker.bootstrap
    assert ssl_addr != plain_addr
    for addr, conf in ((plain_addr, {}), (ssl_addr, librdkafka_ssl(certs))):
        client = admin(addr) if not conf else admin_with(addr, conf)
        brokers = client.list_topics(timeout=CLIENT_TIMEOUT_S).brokers
        assert [f"{b.host}:{b.port}" for b in brokers.values()] == [addr]
    # A plain client on the SSL port is not served (the bytes are not a TLS hello).
    assert refused_plain(ssl_addr)


def admin_with(addr: str, conf: dict[str, str]):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": addr, **conf})


def refused_plain(addr: str) -> bool:
    try:
        with KafkaConnection(addr, timeout_s=15) as conn:
            conn.api_versions()
    except (OSError, kw.ConnectionClosed):
        return True
    return False


def peer_subject(bootstrap: str, ctx: ssl.SSLContext) -> str:
    with socket.create_connection(bootstrap.rsplit(":", 1), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]


def test_certificates_reload_without_dropping_connections(tls_broker, certs):
    ssl_addr = tls_broker.listener("SSL")
    ctx = ssl_context(certs)
    assert peer_subject(ssl_addr, ctx) == "localhost"
    old = tls_connection(ssl_addr, ctx)
    assert old.api_versions().error_code == kw.NONE
    keystore = Path(tls_broker.settings["ssl.keystore.location"])
    # A broken file first: the broker keeps the old certificate (and says why in its log).
    keystore.write_text("not a certificate\n")
    wait_until(
        lambda: "TLS certificates not reloaded" in tls_broker.log_path.read_text(errors="replace"),
        RELOAD_DEADLINE_S,
        "the failed reload logged",
    )
    assert peer_subject(ssl_addr, ctx) == "localhost"
    # Then a good one, written beside and renamed over, as deploy tools do.
    staged = keystore.with_suffix(".new")
    shutil.copy(certs / "reloaded.pem", staged)
    os.replace(staged, keystore)
    wait_until(lambda: peer_subject(ssl_addr, ctx) == "reloaded.localhost", RELOAD_DEADLINE_S, "the new certificate")
    assert old.api_versions().error_code == kw.NONE
    old.close()


# TLS_HANDSHAKE_TIMEOUT_MS (broker/server/src/limits.rs), and how much later the close may come.
HANDSHAKE_TIMEOUT_S = 10.0
HANDSHAKE_CLOSE_SLACK_S = 10.0


def test_a_stalled_handshake_holds_its_slot_only_until_the_handshake_timeout(tls_broker_factory, certs):
    broker = tls_broker_factory({"max.connections.per.ip": "1"})
    ssl_addr = broker.listener("SSL")
    host, port = ssl_addr.rsplit(":", 1)
    before = metric(broker, "sluice_tls_handshake_failures_total")
    stalled = socket.create_connection((host, int(port)), timeout=HANDSHAKE_TIMEOUT_S + HANDSHAKE_CLOSE_SLACK_S)
    try:
        # Admitted and holding the address's one slot: a second connection is closed at once.
        wait_until(lambda: refused(ssl_addr, ssl_context(certs)), 10, "the second connection refused")
        # The broker closes the silent one at the handshake timeout (recv sees the end).
        assert stalled.recv(1) == b""
    finally:
        stalled.close()
    assert metric(broker, "sluice_tls_handshake_failures_total") >= before + 1
    wait_until(lambda: not refused(ssl_addr, ssl_context(certs)), 10, "a TLS client served once the slot is free")
