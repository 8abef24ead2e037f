"""sarama 1.22.1 (Debian's golang-github-shopify-sarama-dev) against a real broker.

Covers: a SyncProducer as Go services configure it (Version V2_1_0_0, hash partitioner,
WaitForAll, Snappy, Return.Successes) sending 2,000 keyed messages in one SendMessages, a
sarama consumer group joining and reading the topic, then more SendMessages calls while the
group is live and committing (every Consumer.Offsets.CommitInterval, with OffsetCommit v1,
sarama's default). Every message SendMessages reports must be found by the group at exactly
that partition and offset, exactly once, the group must see no connection errors, and its
committed offsets must reach the log end. Run both with separate clients and with one
sarama.Client shared by producer and group (one connection per broker: a connection the broker
closes takes the producer's requests with it).

How: tests/clients/sarama/main.go is built once per session in GOPATH mode against the Debian
source tree in /usr/share/gocode (no network), cached under target/sarama-check/, and run as
a subprocess that prints one JSON object. Skips only when Go is absent; tests/run installs
the sarama package (and golang-go when there is no Go on PATH).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from clients import create_topic
from conftest import REPO_ROOT, sluice_bin, wait_until

SOURCE_DIR = REPO_ROOT / "tests" / "clients" / "sarama"
GOPATH = Path("/usr/share/gocode")
SARAMA_SRC = GOPATH / "src" / "github.com" / "Shopify" / "sarama"
CACHE_DIR = REPO_ROOT / "target" / "sarama-check"
BUILD_TIMEOUT_S = 600
RUN_TIMEOUT_S = 120
PARTITIONS = 6
BEFORE = 2000
AFTER = 5
ROUNDS = 3
COMMIT_DEADLINE_S = 30.0


def find_go() -> str | None:
    return shutil.which("go") or next((p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.access(p, os.X_OK)), None)


@pytest.fixture(scope="session")
def sarama_check() -> Path:
    """The built client, rebuilt when main.go is newer than the cached binary."""
    go = find_go()
    if go is None:
        pytest.skip("Go is absent (no `go` on PATH): the sarama suite needs it; tests/run installs golang-go")
    assert SARAMA_SRC.is_dir(), f"{SARAMA_SRC} missing: apt-get install golang-github-shopify-sarama-dev (tests/run does)"
    binary = CACHE_DIR / "sarama-check"
    source = SOURCE_DIR / "main.go"
    if binary.exists() and binary.stat().st_mtime >= source.stat().st_mtime:
        return binary
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    # Built to a private name, then renamed: pytest-xdist workers may build side by side.
    partial = CACHE_DIR / f"sarama-check.{os.getpid()}"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOFLAGS": "",
        "GOTOOLCHAIN": "local",
        "GOCACHE": str(CACHE_DIR / "gocache"),
        "CGO_ENABLED": "1",  # DataDog/zstd (a sarama dependency) is cgo over libzstd
    }
    built = subprocess.run(
        [go, "build", "-o", str(partial), "."],
        cwd=SOURCE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert built.returncode == 0, f"go build failed:\n{built.stderr}"
    os.replace(partial, binary)
    return binary


def run_scenario(binary: Path, bootstrap: str, topic: str, shared_client: bool) -> dict:
    command = [
        str(binary),
        f"-bootstrap={bootstrap}",
        f"-topic={topic}",
        f"-group={topic}-group",
        f"-before={BEFORE}",
        f"-after={AFTER}",
        f"-rounds={ROUNDS}",
        f"-timeout={RUN_TIMEOUT_S - 20}s",
        "-verbose",
    ]
    if shared_client:
        command.append("-shared-client")
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    result = json.loads(done.stdout)
    assert done.returncode == 0 and not result.get("error"), f"{result.get('error')}\n{done.stderr[-4000:]}"
    result["log"] = done.stderr
    return result


def committed_offsets(bootstrap: str, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, log end offset), from `sluice group describe`."""
    out = subprocess.run(
        [sluice_bin(), "group", "describe", "--brokers", bootstrap, "--output", "json", group],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return {o["partition"]: (o["committed_offset"], o["log_end_offset"]) for o in json.loads(out.stdout)["offsets"]}


@pytest.mark.parametrize("shared_client", [False, True], ids=["separate-clients", "shared-client"])
def test_send_messages_reports_where_the_group_finds_each_message(broker, topic_name, sarama_check, shared_client):
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    result = run_scenario(sarama_check, broker.bootstrap, topic_name, shared_client)

    assert len(result["sent_before"]) == BEFORE
    assert len(result["sent_after"]) == AFTER * ROUNDS
    assert sorted(result["claims"]) == list(range(PARTITIONS))
    assert not result["group_errors"], f"the group saw errors: {result['group_errors'][:5]}\n{broker.log_tail()}"

    found = collections.defaultdict(list)
    for c in result["consumed"]:
        found[c["value"]].append((c["partition"], c["offset"]))
    duplicated = {v: at for v, at in found.items() if len(at) > 1}
    assert not duplicated, f"consumed more than once: {list(duplicated.items())[:5]}"
    for phase in ("sent_before", "sent_after"):
        wrong = [
            (m["value"], (m["partition"], m["offset"]), found.get(m["value"]))
            for m in result[phase]
            if found.get(m["value"]) != [(m["partition"], m["offset"])]
        ]
        assert not wrong, f"{phase}: (value, SendMessages said, consumer found) {wrong[:10]}"
    # The hash partitioner spread the keys: a stuck partition choice would show here.
    assert len({m["partition"] for m in result["sent_before"]}) == PARTITIONS

    # The group's final commit (sarama commits on Close) reached the broker.
    def caught_up():
        offsets = committed_offsets(broker.bootstrap, f"{topic_name}-group")
        done = len(offsets) == PARTITIONS and all(c == end for c, end in offsets.values())
        return offsets if done else None

    offsets = wait_until(caught_up, COMMIT_DEADLINE_S, "the group's committed offsets at the log end", 0.1)
    assert sum(end for _, end in offsets.values()) == BEFORE + AFTER * ROUNDS
