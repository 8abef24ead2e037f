"""Delegation tokens (KIP-48) with Apache Kafka's Java client 4.4.0, as a service uses them:
over SASL_PLAINTEXT (SCRAM-SHA-512), alice's AdminClient creates a token renewable by
admin; after a broker restart a producer and a consumer log in with the token
(`tokenauth=true`) and act as alice, with alice's ACLs; the token may not create tokens;
describe shows it to its owner and its renewer and filters by owner; the renewer renews it up
to its max lifetime; over PLAINTEXT no token may be created; alice expires it, the login
fails, and after another restart it stays gone. Without `delegation.token.secret.key` tokens
are disabled.

How: tests/clients/java (sluice.check.Tokens), one JVM per step; users made with
`sluice user create --data-dir` before the broker starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from java_support import java_classpath, run_driver
from test_sasl import create_user
from tls_support import (  # noqa: F401 (certs, tls_broker_factory: fixtures)
    LISTENER_LINE,
    TlsBroker,
    certs,
    tls_broker_factory,
)

USERS = {"alice": "alice-secret-pw", "admin": "admin-secret-pw"}
HOUR_MS = 3_600_000
RECORDS = 20
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_classpath()


def create_users(data_dir: Path):
    for name, password in USERS.items():
        create_user(data_dir, name, "SCRAM-SHA-512", password)


def listener(broker: TlsBroker, name: str) -> str:
    """The listener's address as the broker's latest start printed it (ports change on
    restart)."""
    for line in reversed(broker.stdout_lines_seen):
        match = LISTENER_LINE.match(line)
        if match and match.group(1) == name:
            return match.group(2)
    raise AssertionError(f"no listener line for {name}")


def token_broker(factory, secret: str | None) -> TlsBroker:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
        "delegation.token.expiry.time.ms": str(HOUR_MS),
        "delegation.token.max.lifetime.ms": str(2 * HOUR_MS),
    }
    if secret is not None:
        settings["delegation.token.secret.key"] = secret
    return factory(settings, prepare=create_users)


def as_admin(broker: TlsBroker) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": listener(broker, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": USERS["admin"],
        }
    )


def alice_may_use(broker: TlsBroker, topic: str):
    """The topic, and alice's rights on it: only hers (nobody else has any)."""
    admin = as_admin(broker)
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=TIMEOUT_S)
    binding = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(timeout=TIMEOUT_S)


def test_a_token_logs_in_as_its_owner_is_renewed_and_expired(tls_broker_factory, classpath, topic_name):  # noqa: F811
    broker = token_broker(tls_broker_factory, "a-long-random-secret")
    alice_may_use(broker, topic_name)
    alice = ["--user", "alice", "--password", USERS["alice"]]

    created = run_driver(
        classpath, "token-create", listener(broker, "SASL_PLAINTEXT"), topic_name, *alice, "--renewer", "admin"
    )
    assert "error" not in created, created
    assert (created["owner"], created["requester"], created["renewers"]) == ("User:alice", "User:alice", ["User:admin"])
    assert created["expiry_ms"] - created["issue_ms"] == HOUR_MS
    assert created["max_ms"] - created["issue_ms"] == 2 * HOUR_MS
    token = ["--token-id", created["token_id"], "--hmac", created["hmac"]]

    # The token is in the security log: a restart keeps it, and its HMAC (the secret is the same).
    broker.restart()
    sasl = listener(broker, "SASL_PLAINTEXT")
    used = run_driver(classpath, "token-use", sasl, topic_name, *token, "--records", str(RECORDS))
    assert used["consumed"] == [f"token-{i}" for i in range(RECORDS)], used
    # As alice: the one topic she may describe (and nothing of the others').
    assert used["topics_listed"] == [topic_name], used
    # A token-authenticated connection may not make tokens (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).
    assert used["create_with_token"] == "UnsupportedByAuthenticationException"
    assert f"delegation token {created['token_id']}" in broker.log_path.read_text(), "audit line"
    assert created["hmac"] not in broker.log_path.read_text(), "the HMAC is never logged"

    managed = run_driver(
        classpath,
        "token-manage",
        sasl,
        topic_name,
        *alice,
        "--renewer", "admin",
        "--renewer-password", USERS["admin"],
        "--hmac", created["hmac"],
        "--plain-bootstrap", listener(broker, "PLAINTEXT"),
    )  # fmt: skip
    tid = created["token_id"]
    assert managed["owner_sees"] == [tid] and managed["renewer_sees"] == [tid], managed
    assert managed["owner_filter"] == [tid] and managed["stranger_filter"] == [], managed
    # Renewed by its renewer for 2 h: capped at its max lifetime.
    assert managed["renewed_expiry_ms"] == created["max_ms"], managed
    assert managed["renew_unknown"] == "DelegationTokenNotFoundException"
    assert managed["create_over_plaintext"] == "UnsupportedByAuthenticationException"

    expired = run_driver(classpath, "token-expire", sasl, topic_name, *alice, *token)
    assert expired["left"] == [], expired
    assert expired["login_after_expiry"] == "SaslAuthenticationException", expired

    broker.restart()
    again = run_driver(
        classpath, "token-manage", listener(broker, "SASL_PLAINTEXT"), topic_name, *alice,
        "--renewer", "admin", "--renewer-password", USERS["admin"], "--hmac", created["hmac"],
        "--plain-bootstrap", listener(broker, "PLAINTEXT"),
    )  # fmt: skip
    assert again["owner_sees"] == [] and again["renewed_expiry_ms"] == "DelegationTokenNotFoundException", again


def test_without_a_secret_key_tokens_are_disabled(tls_broker_factory, classpath, topic_name):  # noqa: F811
    broker = token_broker(tls_broker_factory, None)
    created = run_driver(
        classpath,
        "token-create",
        listener(broker, "SASL_PLAINTEXT"),
        topic_name,
        "--user", "alice",
        "--password", USERS["alice"],
        "--renewer", "admin",
    )  # fmt: skip
    assert created == {"error": "DelegationTokenDisabledException"}
