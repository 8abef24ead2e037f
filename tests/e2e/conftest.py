"""Fixtures that run a real `sluice` broker process for the end-to-end suites.

Each test gets its own broker: a fresh temp data dir, `--listen 127.0.0.1:0` (an ephemeral
port, so tests run in parallel and beside a broker already on 9092), the port parsed from the
one stdout line `sluice listening kafka=127.0.0.1:PORT admin=127.0.0.1:PORT` with a deadline
(the admin API also on an ephemeral port: `broker.admin_url`). At teardown the broker
gets SIGTERM and must exit 0. Its stderr goes to `broker.log` in the test's temp dir and the
tail is printed when a test fails.

The binary comes from $SLUICE_BIN (tests/run sets it); without it, target/debug/sluice.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LISTENING_LINE = re.compile(r"^sluice listening kafka=(127\.0\.0\.1:(\d+))(?: admin=(127\.0\.0\.1:(\d+)))?\s*$")
START_DEADLINE_S = 30.0
STOP_DEADLINE_S = 30.0
LOG_TAIL_BYTES = 8000


def sluice_bin() -> str:
    path = os.environ.get("SLUICE_BIN") or str(REPO_ROOT / "target" / "debug" / "sluice")
    if not os.access(path, os.X_OK):
        pytest.fail(f"broker binary {path} not found: build it (tests/run does) or set SLUICE_BIN")
    return path


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.02):
    """Polls `predicate` until it returns a truthy value (returned) or fails after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


class Broker:
    """One `sluice serve` process over a data dir that outlives restarts."""

    def __init__(self, data_dir: Path, log_path: Path, settings: dict[str, str], env: dict[str, str]):
        self.data_dir = data_dir
        self.log_path = log_path
        self.settings = dict(settings)
        self.env = dict(env)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        # The Kafka listener's address: ephemeral unless a restart keeps the port.
        self.listen = "127.0.0.1:0"
        # The port of the latest start (kept after stop, unlike `port`).
        self.last_port: int | None = None
        # The admin HTTP API's port of the latest start.
        self.admin_port: int | None = None
        # How long a start may take to print its listening line (plugins compile first).
        self.start_deadline_s = START_DEADLINE_S
        # Every stdout line of the latest start; complete once the process has exited.
        self.stdout_lines_seen: list[str] = []
        self._stdout_lines: queue.Queue[str | None] = queue.Queue()
        self._stdout_reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "broker is not running"
        return f"127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        assert self.admin_port is not None, "broker is not running with the admin API"
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        cmd = [
            sluice_bin(),
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            self.listen,
            "--admin-listen",
            "127.0.0.1:0",
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def start(self) -> "Broker":
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        env.update(self.env)
        log = open(self.log_path, "ab")
        log.write(f"\n=== start {' '.join(self.command())}\n".encode())
        log.flush()
        self._stdout_lines = queue.Queue()
        self.stdout_lines_seen = []
        self.proc = subprocess.Popen(
            self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env
        )
        log.close()
        self._stdout_reader = threading.Thread(
            target=self._drain_stdout, args=(self.proc, self._stdout_lines, self.stdout_lines_seen), daemon=True
        )
        self._stdout_reader.start()
        self.port = self.last_port = self._wait_for_listening_line()
        return self

    @staticmethod
    def _drain_stdout(proc: subprocess.Popen, lines: queue.Queue, seen: list[str]):
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            seen.append(line)
            lines.put(line)
        lines.put(None)

    def _join_stdout_reader(self):
        if self._stdout_reader is not None:
            self._stdout_reader.join(timeout=STOP_DEADLINE_S)

    def _wait_for_listening_line(self) -> int:
        deadline = time.monotonic() + self.start_deadline_s
        seen = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise AssertionError(
                    f"no listening line within {self.start_deadline_s}s; stdout={seen!r}\n{self.log_tail()}"
                )
            try:
                line = self._stdout_lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                rc = self.proc.wait(timeout=STOP_DEADLINE_S)
                raise AssertionError(f"broker exited {rc} before listening; stdout={seen!r}\n{self.log_tail()}")
            seen.append(line)
            match = LISTENING_LINE.match(line)
            if match:
                self.admin_port = int(match.group(4)) if match.group(4) else None
                return int(match.group(2))

    def stop(self) -> int:
        """SIGTERM, wait for exit, assert exit code 0 (graceful shutdown)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"broker ignored SIGTERM for {STOP_DEADLINE_S}s\n{self.log_tail()}") from None
        self.port = None
        self._join_stdout_reader()
        assert rc == 0, f"broker exited {rc} after SIGTERM\n{self.log_tail()}"
        return rc

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything that is not already durable."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_DEADLINE_S)
        self.port = None
        self._join_stdout_reader()

    def restart(self, keep_port: bool = False) -> "Broker":
        """Graceful stop (asserting exit 0) then start on the same data dir. The port changes
        unless `keep_port` (for clients that must reconnect to the broker they knew; the
        listener binds with SO_REUSEADDR, so the port is free again at once)."""
        port = self.port
        self.stop()
        if keep_port:
            self.listen = f"127.0.0.1:{port}"
        return self.start()

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_ticks(self) -> int:
        """utime + stime of the broker process, in clock ticks (from /proc/PID/stat)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[11]) + int(fields[12])

    def log_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()[-LOG_TAIL_BYTES:]
        except FileNotFoundError:
            return "(no broker log)"
        return "--- broker log tail ---\n" + data.decode(errors="replace")


@pytest.fixture
def broker_factory(tmp_path_factory, request):
    """`start(settings={...}, env={...}, prepare=fn)` starts another broker (`prepare(data_dir)`
    runs first, to seed the data dir); all are stopped at teardown.

    Teardown asserts each still-running broker exits 0 on SIGTERM.
    """
    brokers: list[Broker] = []

    def start(
        settings: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        prepare: Callable[[Path], None] | None = None,
    ) -> Broker:
        root = tmp_path_factory.mktemp("broker")
        broker = Broker(root / "data", root / "broker.log", settings or {}, env or {})
        (root / "data").mkdir()
        if prepare is not None:
            prepare(root / "data")
        brokers.append(broker)
        return broker.start()

    yield start

    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    errors = []
    for broker in brokers:
        if failed:
            print(broker.log_tail())
        if broker.is_running():
            try:
                broker.stop()
            except AssertionError as err:
                errors.append(str(err))
    assert not errors, "\n".join(errors)


@pytest.fixture
def broker(broker_factory) -> Broker:
    """A broker with default settings."""
    return broker_factory()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


_topic_counter = iter(range(1_000_000))


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:180]
    return f"{base}-{next(_topic_counter)}"
