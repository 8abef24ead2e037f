"""`sluice plugin new` and `sluice plugin build` with nothing but the binary: no Sluice checkout,
no `--sdk`, no `SLUICE_SDK`. In an empty temporary directory (outside the repository, with
its own `XDG_CACHE_HOME`), for each language (one test each, so xdist runs them side by
side) and every kind: scaffold with the SDK built into the binary, check the scaffold carries
what it needs in `.sluice-sdk/` and names no absolute path, run its native unit test
(`cargo test`, pytest, `node --test`), build it with `sluice plugin build` (Python and
JavaScript install their pinned toolchain into the unpacked SDK on first use; Rust crates
use plugins/target as Cargo's build cache, which holds no SDK, as test_views.py's scaffold
test does: the wasm32 std, built from source on the Debian route, and the SDK's
dependencies are not built again after tests/run built plugins/), and run the
built `.wasm` with `sluice plugin test` on sample records: it loads in the broker's host as a
plugin of its kind and answers as the template says. Beside them, cheap checks that need no
build: inside a checkout `./sdk` is still used as is, an `sdk/` that is not Sluice's is not,
and a missing Python or JavaScript toolchain is named with what to install.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from plugin_support import murmur2_partition

from conftest import REPO_ROOT, sluice_bin

# Per language: cold, a test builds the SDK's dependencies natively and for wasm32, or
# installs componentize-py/-js, then compiles four components in the broker's host.
pytestmark = pytest.mark.timeout(900)

KINDS = ["partitioner", "filter", "transform", "validator"]
# One build or native test; a cold Rust one compiles syn, wit-bindgen and the SDK.
STEP_TIMEOUT_S = 600
NATIVE_TEST = {
    "rust": ["cargo", "test", "-q"],
    "python": ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
    "js": ["node", "--test"],
}
# keyed, keyless, keyed tombstone: what each template answers differs on exactly these.
SAMPLES = [{"key": "k1", "value": "abc"}, {"value": "def"}, {"key": "k2", "value": None}]
PARTITIONS = 6
# Cargo's build cache for the Rust scaffolds, native and wasm32 (see the docstring).
CARGO_CACHE = REPO_ROOT / "plugins" / "target"


def outside_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with only the binary: no SLUICE_* variables, a cache
    directory of its own (pip keeps its usual download cache, so only the install is cold)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    env.setdefault("PIP_CACHE_DIR", str(user_cache / "pip"))
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.pop("CARGO_TARGET_DIR", None)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, cwd=cwd, env=env)
    assert done.returncode == 0, f"{args} in {cwd}:\n{done.stdout}\n{done.stderr}"
    return done


def sluice_json(args: list[str], cwd: Path, env: dict[str, str]):
    return json.loads(run([sluice_bin(), *args, "--output", "json"], cwd, env).stdout)


def expected(lang: str, kind: str) -> list:
    """Per sample record, what the template of `lang` and `kind` answers (the Rust transform
    upper-cases values and the Rust validator wants a value; the Python and JS ones pass
    records through and want a key)."""
    if kind == "partitioner":
        return [murmur2_partition(b"k1", PARTITIONS), 0, murmur2_partition(b"k2", PARTITIONS)]
    if kind == "filter":
        return [True, False, True]
    if kind == "transform":
        return ["ABC", "DEF", None] if lang == "rust" else ["abc", "def", None]
    if lang == "rust":
        return [None, None, "a record needs a value"]
    return [None, "a record needs a key", None]


def answers(kind: str, doc: dict) -> list:
    field = {"partitioner": "partition", "filter": "kept", "transform": "value", "validator": "refused"}[kind]
    return [r[field] for r in doc["records"]]


def check_scaffold(plugin: Path, lang: str, tmp_path: Path) -> None:
    """The SDK part of its language is in .sluice-sdk/, and no file names an absolute path
    (the plugin can move, or be committed and cloned elsewhere)."""
    carried = plugin / ".sluice-sdk"
    marker = {"rust": "sdk/Cargo.toml", "python": "sdk/python/sluice_sdk.py", "js": "sdk/js/sluice-sdk.js"}[lang]
    assert (carried / marker).is_file(), sorted(p.name for p in carried.rglob("*"))
    if lang == "rust":
        assert (carried / "wit" / "sluice-plugin.wit").is_file()
        manifest = (carried / "sdk" / "Cargo.toml").read_text()
        assert "workspace = true" not in manifest and 'path = "macros"' in manifest, manifest
    for path in plugin.rglob("*"):
        if path.is_file() and carried not in path.parents:
            assert str(tmp_path) not in path.read_text(), path


@pytest.mark.parametrize("lang", ["rust", "python", "js"])
def test_every_kind_scaffolds_tests_and_builds_with_only_the_binary(tmp_path, lang):
    work = tmp_path / "work"
    work.mkdir()
    env = outside_env(tmp_path)
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    native_env = env | {"CARGO_TARGET_DIR": str(CARGO_CACHE)}
    for kind in KINDS:
        name = f"my-{kind}"
        made = sluice_json(["plugin", "new", name, "--lang", lang, "--kind", kind], work, env)
        assert made == {"created": name, "kind": kind, "lang": lang}
        check_scaffold(work / name, lang, tmp_path)
        run(NATIVE_TEST[lang], work / name, native_env)
        build = ["plugin", "build", name]
        if lang == "rust":
            build += ["--target-dir", str(CARGO_CACHE)]
        built = sluice_json(build, work, env)["built"]
        assert [p.rsplit("/", 1)[1] for p in built] == [f"{name}.wasm"], built
        args = ["plugin", "test", str(work / built[0]), "--records", str(samples)]
        doc = sluice_json([*args, "--partitions", str(PARTITIONS)] if kind == "partitioner" else args, work, env)
        assert doc["kind"] == kind and answers(kind, doc) == expected(lang, kind), doc
    # Nothing but the plugins in the work directory; the SDK unpacked once, by content.
    assert sorted(p.name for p in work.iterdir()) == sorted(f"my-{k}" for k in KINDS)
    assert [p.name[:4] for p in (tmp_path / "cache" / "sluice").iterdir()] == ["sdk-"]


def test_a_checkout_sdk_is_used_as_is_and_a_foreign_sdk_dir_is_not(tmp_path):
    env = outside_env(tmp_path)
    inside = sluice_json(["plugin", "new", str(tmp_path / "in-checkout")], REPO_ROOT, env)
    assert inside["created"] == "in-checkout"
    manifest = (tmp_path / "in-checkout" / "Cargo.toml").read_text()
    assert f'path = "{REPO_ROOT / "sdk"}"' in manifest, manifest
    assert not (tmp_path / "in-checkout" / ".sluice-sdk").exists()

    foreign = tmp_path / "project"
    (foreign / "sdk").mkdir(parents=True)
    (foreign / "sdk" / "README.md").write_text("the user's own sdk/, not Sluice's\n")
    sluice_json(["plugin", "new", "mine", "--lang", "js", "--kind", "filter"], foreign, env)
    assert "./.sluice-sdk/sdk/js/sluice-sdk.js" in (foreign / "mine" / "plugin.js").read_text()
    assert (foreign / "mine" / ".sluice-sdk" / "sdk" / "js" / "sluice-sdk.js").is_file()

    wrong = subprocess.run(
        [sluice_bin(), "plugin", "new", "x", "--sdk", str(foreign / "sdk")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert wrong.returncode == 1 and "must name a Sluice sdk/ directory" in wrong.stderr, wrong.stderr


@pytest.mark.parametrize(
    ("lang", "needs"),
    [("python", "Python plugins need python3 3.11 or later"), ("js", "JavaScript plugins need node 20 or later")],
)
def test_a_missing_guest_toolchain_is_named_with_what_to_install(tmp_path, lang, needs):
    """A PATH with only what build-guest.sh runs before it looks for the language's
    interpreter (bash and a few coreutils): the build stops naming what to install."""
    env = outside_env(tmp_path)
    sluice_json(["plugin", "new", "p", "--lang", lang, "--kind", "filter"], tmp_path, env)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ["bash", "dirname", "basename", "mkdir", "grep"]:
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True, check=True)
        (bin_dir / tool).symlink_to(found.stdout.strip())
    failed = subprocess.run(
        [sluice_bin(), "plugin", "build", "p"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env | {"PATH": str(bin_dir)},
    )  # fmt: skip
    assert failed.returncode == 1 and needs in failed.stderr and "apt-get install" in failed.stderr, failed.stderr
