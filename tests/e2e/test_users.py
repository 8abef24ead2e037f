"""`sluice user` against a stopped broker's data dir: the way the first super user is made
before the first start (issue 14; managing users over the wire comes with SASL).

Users are created, listed and deleted with `--data-dir`; a broker started on that data dir
replays them from `<data.dir>/security-log` (its log says how many credentials it loaded);
while it runs, the data dir's lock makes `sluice user` refuse; the password is never
written to the data dir, only Kafka's salted, iterated credential.
"""

from __future__ import annotations

import json
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
