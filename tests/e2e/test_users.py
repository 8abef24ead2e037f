"""`sluice user` against a stopped broker's data dir (the way the first super user is made
before the first start), and users over the wire (AlterUserScramCredentials and
DescribeUserScramCredentials) from `sluice user` and confluent-kafka's AdminClient.

Users are created, listed and deleted with `--data-dir`; a broker started on that data dir
replays them from `<data.dir>/security-log` (its log says how many credentials it loaded);
while it runs, the data dir's lock makes `sluice user` refuse; the password is never
written to the data dir, only Kafka's salted, iterated credential. Over the wire, a super
user creates a user who can then log in, a user who is not super may not, and a deleted
user can no longer log in.
"""

from __future__ import annotations

import json
import os
import subprocess

from conftest import Broker, sluice_bin, wait_until


def user(data_dir, *args: str, stdin: bytes = b"", check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sluice_bin(), "user", *args, "--data-dir", str(data_dir), "--output", "json"],
        input=stdin,
        capture_output=True,
        timeout=60,
    )
    if check:
        assert proc.returncode == 0, f"{args}: rc={proc.returncode} {proc.stderr.decode()}"
    return proc


def listed(data_dir) -> dict[str, list[str]]:
    doc = json.loads(user(data_dir, "list").stdout)
    return {u["user"]: sorted(m["mechanism"] for m in u["mechanisms"]) for u in doc["users"]}


def test_users_in_a_stopped_data_dir_are_loaded_by_the_broker(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    password = b"correct horse battery staple"
    user(data, "create", "admin", "--mechanism", "SCRAM-SHA-512", "--password-stdin", stdin=password + b"\n")
    user(data, "create", "alice", "--mechanism", "SCRAM-SHA-256", "--password-stdin", stdin=b"alice-pw")
    user(data, "create", "alice", "--mechanism", "SCRAM-SHA-512", "--password-stdin", stdin=b"alice-pw")
    assert listed(data) == {"admin": ["SCRAM-SHA-512"], "alice": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}

    for path in data.rglob("*"):
        if path.is_file():
            assert password not in path.read_bytes(), f"the password is in {path}"

    bad = user(data, "create", "bob", "--mechanism", "SCRAM-SHA-1", "--password-stdin", stdin=b"x", check=False)
    assert bad.returncode != 0 and b"SCRAM-SHA-256 or SCRAM-SHA-512" in bad.stderr
    few = user(data, "create", "bob", "--mechanism", "SCRAM-SHA-256", "--password-stdin", "--iterations", "10",
               stdin=b"x", check=False)  # fmt: skip
    assert few.returncode != 0 and b"4096" in few.stderr, few.stderr
    empty = user(data, "create", "bob", "--mechanism", "SCRAM-SHA-256", "--password-stdin", stdin=b"", check=False)
    assert empty.returncode != 0 and b"empty password" in empty.stderr

    broker = Broker(data, tmp_path / "broker.log", {}, {}).start()
    try:
        wait_until(lambda: "credentials=3" in broker.log_tail(), 10, "the broker to load 3 credentials")
        locked = user(data, "list", check=False)
        assert locked.returncode != 0 and b"in use by another sluice broker" in locked.stderr
    finally:
        broker.stop()

    user(data, "delete", "alice", "--mechanism", "SCRAM-SHA-256")
    assert listed(data) == {"admin": ["SCRAM-SHA-512"], "alice": ["SCRAM-SHA-512"]}
    gone = user(data, "delete", "alice", "--mechanism", "SCRAM-SHA-256", check=False)
    assert gone.returncode != 0 and b"no SCRAM-SHA-256 credential" in gone.stderr


def wire_user(broker, login: str | None, password: str | None, *args: str, stdin: bytes = b"", check: bool = True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    cmd = [sluice_bin(), "user", *args, "--brokers", broker.listener("SASL_PLAINTEXT"), "--output", "json"]
    if login:
        cmd += ["--user", login, "--sasl-mechanism", "SCRAM-SHA-512"]
        env["SLUICE_PASSWORD"] = password
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=60, env=env)
    if check:
        assert proc.returncode == 0, f"{args}: {proc.stderr.decode()}"
    return proc


def can_log_in(broker, name: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    from confluent_kafka.admin import AdminClient

    conf = {
        "bootstrap.servers": broker.listener("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism, "sasl.username": name, "sasl.password": password,
    }  # fmt: skip
    try:
        AdminClient(conf).list_topics(timeout=5)
        return True
    except Exception:  # noqa: BLE001 (librdkafka raises KafkaException on a failed login)
        return False


def test_users_over_the_wire(tmp_path):
    from confluent_kafka.admin import AdminClient, ScramMechanism, UserScramCredentialUpsertion, ScramCredentialInfo
    from tls_support import TlsBroker

    data = tmp_path / "data"
    data.mkdir()
    user(data, "create", "admin", "--mechanism", "SCRAM-SHA-512", "--password-stdin", stdin=b"admin-pw")
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "super.users": "User:admin"}
    broker = TlsBroker(data, tmp_path / "broker.log", settings, {}).start()
    try:
        wire_user(broker, "admin", "admin-pw", "create", "alice", "--mechanism", "SCRAM-SHA-256", "--password-stdin",
                  stdin=b"alice-pw\n")  # fmt: skip
        assert can_log_in(broker, "alice", "alice-pw")
        assert not can_log_in(broker, "alice", "wrong")
        doc = json.loads(wire_user(broker, "admin", "admin-pw", "list").stdout)
        got = {u["user"]: sorted(m["mechanism"] for m in u["mechanisms"]) for u in doc["users"]}
        assert got == {"admin": ["SCRAM-SHA-512"], "alice": ["SCRAM-SHA-256"]}

        # A user who is not a super user may not create users (ALTER on the cluster).
        refused = wire_user(broker, None, None, "create", "mallory", "--mechanism", "SCRAM-SHA-256",
                            "--password-stdin", "--user", "alice", "--sasl-mechanism", "SCRAM-SHA-256",
                            stdin=b"x", check=False)  # fmt: skip
        assert refused.returncode != 0

        # confluent-kafka's AdminClient: AlterUserScramCredentials and DescribeUserScramCredentials.
        admin = AdminClient({
            "bootstrap.servers": broker.listener("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": "admin-pw",
        })  # fmt: skip
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        upsert = UserScramCredentialUpsertion("carol", info, b"carol-pw")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            assert future.result(timeout=30) is None
        assert can_log_in(broker, "carol", "carol-pw", "SCRAM-SHA-512")
        described = admin.describe_user_scram_credentials(["carol"])
        desc = described["carol"].result(timeout=30)
        assert [(c.mechanism, c.iterations) for c in desc.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]

        wire_user(broker, "admin", "admin-pw", "delete", "alice", "--mechanism", "SCRAM-SHA-256")
        assert not can_log_in(broker, "alice", "alice-pw")
        # The changes are in the security log: a restart keeps them.
        broker.stop()
        broker.start()
        assert can_log_in(broker, "carol", "carol-pw", "SCRAM-SHA-512")
        assert not can_log_in(broker, "alice", "alice-pw")
    finally:
        if broker.is_running():
            broker.stop()
