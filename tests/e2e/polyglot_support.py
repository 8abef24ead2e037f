"""Python and JavaScript plugins in the e2e suites: their compiled forms shared by every
broker of a run.

A componentize-py guest is about 19 MB and a componentize-js one 12.5 MB; compiling one
takes the broker 5-15 s of CPU. Each test broker has its own data dir and so its own
compile cache (`<data.dir>/plugin-cache`, trusted by digest, docs/plugins.md). So the
first test that needs them starts one broker over all of them, once per run and sluice
binary (a file lock serialises pytest-xdist workers), keeps its cache under
target/e2e-plugin-cache/, and every broker after it starts with hard links to those files
in its own cache: the digest check still runs, the compile does not.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from pathlib import Path

from plugin_support import built_plugins_dir

from conftest import REPO_ROOT, Broker, sluice_bin

CACHE_ROOT = REPO_ROOT / "target" / "e2e-plugin-cache"
# The warming broker compiles every polyglot plugin before it listens: 5-15 s each.
WARM_START_DEADLINE_S = 600.0

# Every polyglot plugin the suites deploy (the built file names in plugins/target/wasm).
POLYGLOT = [
    "python-json-filter",
    "js-json-filter",
    "python-json-field-partitioner",
    "js-json-field-partitioner",
    "python-json-validator",
    "js-json-validator",
    "hostile-python-infinite-loop",
    "hostile-js-infinite-loop",
    "hostile-python-memory-bomb",
    "hostile-js-memory-bomb",
]


def _cache_key() -> str:
    """Identifies the sluice binary (its compile cache keys include the engine build) and
    the built plugins (a rebuilt one has another digest)."""
    parts = []
    for path in [Path(sluice_bin())] + [built_plugins_dir() / f"{n}.wasm" for n in POLYGLOT]:
        if path.exists():
            st = path.stat()
            parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def warm_cache() -> Path:
    """The shared plugin-cache dir holding every polyglot plugin compiled by this binary."""
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(CACHE_ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        here = CACHE_ROOT / _cache_key()
        if (here / "done").exists():
            return here / "data" / "plugin-cache"
        shutil.rmtree(here, ignore_errors=True)
        for stale in CACHE_ROOT.iterdir():
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
        plugins = here / "plugins"
        plugins.mkdir(parents=True)
        for name in POLYGLOT:
            src = built_plugins_dir() / f"{name}.wasm"
            if src.exists():
                shutil.copyfile(src, plugins / f"{name}.wasm")
        (here / "data").mkdir()
        broker = Broker(here / "data", here / "broker.log", {"plugin.dir": str(plugins)}, {})
        broker.start_deadline_s = WARM_START_DEADLINE_S
        broker.start()  # loads (compiles) every plugin before it listens
        broker.stop()
        (here / "done").touch()
        return here / "data" / "plugin-cache"


def seed_cache(data_dir: Path) -> None:
    """A broker `prepare` hook: hard links to the warm cache's files in its own cache."""
    cache = warm_cache()
    mine = data_dir / "plugin-cache"
    mine.mkdir(parents=True, exist_ok=True)
    for f in cache.iterdir():
        if f.is_file():
            os.link(f, mine / f.name)
