"""What the broker benchmarks in tests/bench/*.py share: start a release broker on ephemeral
ports in a temp dir, run librdkafka's rdkafka_performance against it, read the broker's CPU
time from /proc, and take medians.

rdkafka_performance is built by tests/bench/client_bench.sh into target/client-bench/ (with
the `-K <cnt>` random-keys patch); the broker is target/release/sluice or $SLUICE_BIN.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLUICE = os.environ.get("SLUICE_BIN") or str(ROOT / "target" / "release" / "sluice")
PERF = os.environ.get("PERF") or str(ROOT / "target" / "client-bench" / "rdkafka_performance")
PLUGINS_DIR = Path(os.environ.get("SLUICE_PLUGINS_DIR") or ROOT / "plugins" / "target" / "wasm")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# One rdkafka_performance run; a run that takes longer is a hang, not a result.
PERF_TIMEOUT_S = 600
START_TIMEOUT_S = 30


@dataclass
class Broker:
    proc: subprocess.Popen
    bootstrap: str
    admin: str | None

    def cpu_s(self) -> tuple[float, float]:
        """(user, system) CPU seconds the broker has used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def start_broker(tmp: Path, plugins: list[str], admin: bool = False, settings: dict[str, str] | None = None) -> Broker:
    """A broker with its data in `tmp/data` and the named plugins (`<name>.wasm` from the
    guest build) in its plugin dir. acks=all is not fsynced: the benchmarks measure CPU
    paths, not the disk."""
    (tmp / "plugins").mkdir()
    for name in plugins:
        shutil.copyfile(PLUGINS_DIR / f"{name}.wasm", tmp / "plugins" / f"{name}.wasm")
    cmd = [
        SLUICE,
        "serve",
        "--data-dir",
        str(tmp / "data"),
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0" if admin else "",
        "--set",
        f"plugin.dir={tmp / 'plugins'}",
        "--set",
        "sluice.acks.all.fsync=false",
    ]
    for key, value in (settings or {}).items():
        cmd += ["--set", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(tmp / "broker.log", "wb"), env=env)
    line = proc.stdout.readline().decode()
    match = re.search(r"kafka=(\S+)(?: admin=(\S+))?", line)
    assert match, f"no listening line: {line!r}; log: {(tmp / 'broker.log').read_text()[-2000:]}"
    return Broker(proc, match.group(1), match.group(2))


@dataclass
class Run:
    """One rdkafka_performance run and what the broker spent on it."""

    msgs_per_s: float
    mb_per_s: float
    broker_us_per_record: float
    broker_sys_us_per_record: float


def perf(broker: Broker, args: list[str], records: int) -> Run:
    """Runs rdkafka_performance (-P or -C in `args`) for `records` records; checks that every
    record was delivered (or consumed)."""
    cmd = [PERF, "-b", broker.bootstrap, "-q", "-c", str(records), *args]
    user0, sys0 = broker.cpu_s()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=PERF_TIMEOUT_S)
    user1, sys1 = broker.cpu_s()
    out = done.stdout
    if "-P" in args:
        line = next((l for l in out.splitlines() if "messages produced" in l), None)
        assert line and f" {records} delivered" in line and " 0 failed" in line, f"{cmd}: {line or out + done.stderr}"
        mb = float(re.search(r" ([0-9.]+) MB/s", line).group(1))
    else:
        lines = [l for l in out.splitlines() if "messages (" in l and "consumed" in l]
        assert lines and lines[-1].startswith(f"% {records} messages"), f"{cmd}: {out[-2000:]}{done.stderr[-2000:]}"
        line = lines[-1]
        mb = float(re.search(r"\(([0-9.]+) MB/s\)", line).group(1))
    rate = float(re.search(r" ([0-9]+) msgs/s", line).group(1))
    us = 1e6 / records
    return Run(rate, mb, ((user1 - user0) + (sys1 - sys0)) * us, (sys1 - sys0) * us)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
