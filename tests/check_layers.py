#!/usr/bin/env python3
"""Checks the import directions ARCHITECTURE.md documents ("Layers"); exits 1 on a breach.

Three kinds of rule:
- crate rules: which of our crates each crate may depend on (its `[dependencies]`, and the
  `sluice_*` paths its `src/` names), and which crates may not pull in an async runtime or
  sockets at all;
- module rules: inside a crate, which modules may not import which (`use crate::x` or a
  `crate::x::` path in code, comments ignored);
- module maps: for the crates in MAPPED, ARCHITECTURE.md's table for the crate (under a
  `### \`<crate dir>\`` heading: `| module | what it decides | may import |`) lists every
  top-level module of `src/` once, and each module imports only the modules its row names.

A rule marked `pending` is where the code is going (issue 19) but is not yet: its breaches are
listed and counted, and fail nothing, so progress shows in every run. Run from the repo root:

    python3 tests/check_layers.py
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Our crates, by directory: the crates of ours each may depend on (normal dependencies).
CRATES: dict[str, set[str]] = {
    "broker/storage": set(),
    "broker/group": set(),
    "broker/security": set(),
    "broker/plugin-host": {"sluice-storage"},
    "broker/server": {"sluice-storage", "sluice-group", "sluice-plugin-host"},
    "broker/cli": {"sluice-server", "sluice-storage", "sluice-group", "sluice-plugin-host"},
    "sdk/macros": set(),
    "sdk": {"sluice-sdk-macros"},
}

# A proc-macro crate writes `::sluice_sdk::` paths into the code it generates, for the crate
# that uses it: those are not its own imports.
GENERATES_PATHS = {"sdk/macros"}

# Crates that must stay synchronous and socket-free (ARCHITECTURE.md invariants).
NO_RUNTIME = ["broker/storage", "broker/group", "broker/security", "broker/plugin-host"]
RUNTIME_CRATES = {"tokio", "axum", "hyper", "mio", "socket2", "tokio-util", "tower"}
STRING = re.compile(r'"(?:\\.|[^"\\])*"')
RUNTIME_PATHS = re.compile(r"\b(tokio|axum|hyper|mio|socket2)::|\bstd::net\b")


@dataclass(frozen=True)
class ModuleRule:
    crate: str
    importers: str  # a module path prefix under src/, e.g. "handler/" or "connection.rs"
    imported: str  # a crate-relative module, e.g. "admin" for `crate::admin`
    why: str
    pending: bool = False


MODULE_RULES = [
    ModuleRule(
        "broker/server",
        "",
        "admin",
        "the admin API is a leaf: only the listener (which serves it) and the fuzz entries use it",
    ),
    ModuleRule(
        "broker/server",
        "handler/",
        "connection",
        "handlers take the request context from `wire`, never from connection.rs",
    ),
    ModuleRule(
        "broker/plugin-host",
        "pool.rs",
        "registry",
        "the registry sits above the pool: handles hold a `slot::PluginSlot`, not the registry",
    ),
    ModuleRule("broker/server", "wire.rs", "handler", "`wire` is below the handlers: it imports none"),
    ModuleRule("broker/server", "wire.rs", "connection", "`wire` is below the connection: it imports neither"),
    ModuleRule(
        "broker/server",
        "reroute/",
        "handler",
        "partition routing is a step produce calls, not a module that calls back into it",
    ),
]

# Crates whose ARCHITECTURE.md code map table lists each top-level module's allowed imports.
MAPPED = ["broker/security"]
CRATE_PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)|use crate::\{([^}]*)\}")


# Modules allowed to break a rule by design (the rule's exceptions), as (crate, file).
EXCEPTIONS = {
    ("broker/server", "listener.rs", "admin"),
    ("broker/server", "fuzz.rs", "admin"),
    ("broker/server", "fuzz/seeds.rs", "admin"),
}


def code_lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines without string literals' contents and `//` comments (doc comments
    included): generated source in a string is not an import."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        code = STRING.sub('""', line).split("//", 1)[0]
        if code.strip():
            out.append((number, code))
    return out


def imports_module(lines: list[tuple[int, str]], module: str) -> list[int]:
    pattern = re.compile(rf"\b(crate|super)::{re.escape(module)}\b|use crate::\{{[^}}]*\b{re.escape(module)}\b")
    return [n for n, code in lines if pattern.search(code)]


def check_crates() -> list[str]:
    errors = []
    ours = {f"sluice-{Path(d).name}" if d != "sdk" else "sluice-sdk" for d in CRATES}
    ours |= {"sluice-sdk-macros", "sluice"}
    for crate, allowed in CRATES.items():
        manifest = tomllib.loads((ROOT / crate / "Cargo.toml").read_text(encoding="utf-8"))
        deps = set(manifest.get("dependencies", {}))
        for dep in sorted(deps):
            if (dep.startswith("sluice") or dep in ours) and dep not in allowed:
                errors.append(f"{crate}/Cargo.toml depends on {dep}; allowed: {sorted(allowed) or 'none of ours'}")
        if crate in NO_RUNTIME:
            for dep in sorted(deps & RUNTIME_CRATES):
                errors.append(f"{crate}/Cargo.toml depends on {dep}: this crate has no async runtime or sockets")
        allowed_paths = {a.replace("-", "_") for a in allowed}
        for path in sorted((ROOT / crate / "src").rglob("*.rs")):
            rel = path.relative_to(ROOT)
            for number, code in code_lines(path):
                for name in [] if crate in GENERATES_PATHS else re.findall(r"\b(sluice_[a-z_]+)::", code):
                    own = manifest["package"]["name"].replace("-", "_")
                    if name != own and name not in allowed_paths:
                        errors.append(f"{rel}:{number} uses {name}, which {crate} may not depend on")
                if crate in NO_RUNTIME and RUNTIME_PATHS.search(code):
                    errors.append(f"{rel}:{number} uses an async runtime or sockets: {code.strip()}")
    return errors


def check_modules() -> tuple[list[str], list[str]]:
    errors, pending = [], []
    for rule in MODULE_RULES:
        src = ROOT / rule.crate / "src"
        for path in sorted(src.rglob("*.rs")):
            rel = path.relative_to(src).as_posix()
            if not rel.startswith(rule.importers) or rel.startswith(rule.imported + "/"):
                continue
            if rel in (f"{rule.imported}.rs", f"{rule.imported}/mod.rs"):
                continue
            if (rule.crate, rel, rule.imported) in EXCEPTIONS:
                continue
            for number in imports_module(code_lines(path), rule.imported):
                line = f"{rule.crate}/src/{rel}:{number} imports {rule.imported}: {rule.why}"
                (pending if rule.pending else errors).append(line)
    return errors, pending


def module_map(crate: str) -> dict[str, set[str]] | None:
    """The `may import` column of ARCHITECTURE.md's table for `crate`, by module."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    at = text.find(f"### `{crate}`")
    if at < 0:
        return None
    rows: dict[str, set[str]] = {}
    for line in text[at:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        rows[cells[0].strip("`")] = set(re.findall(r"`([a-z_]+)`", cells[2]))
    return rows


def top_level_modules(src: Path) -> dict[str, list[Path]]:
    modules: dict[str, list[Path]] = {}
    for path in sorted(src.iterdir()):
        if path.is_dir():
            modules[path.name] = sorted(path.rglob("*.rs"))
        elif path.suffix == ".rs" and path.name != "lib.rs":
            modules.setdefault(path.stem, []).append(path)
    return modules


def check_module_maps() -> list[str]:
    errors = []
    for crate in MAPPED:
        rows = module_map(crate)
        if rows is None:
            errors.append(f"ARCHITECTURE.md has no ### `{crate}` table of modules")
            continue
        modules = top_level_modules(ROOT / crate / "src")
        for name in sorted(set(rows) ^ set(modules)):
            where = "ARCHITECTURE.md lists" if name in rows else f"{crate}/src has"
            errors.append(f"{where} module {name} that the other does not")
        for name, files in modules.items():
            allowed = rows.get(name, set()) | {name}
            for path in files:
                for number, code in code_lines(path):
                    for single, group in CRATE_PATH.findall(code):
                        names = {single} if single else set(re.findall(r"\b([a-z_]+)\b(?:::|\s*[,}]|$)", group))
                        for used in sorted(names - allowed):
                            rel = path.relative_to(ROOT)
                            errors.append(f"{rel}:{number} imports {used}, not in {name}'s row of ARCHITECTURE.md")
    return errors


def main() -> int:
    errors = check_crates() + check_module_maps()
    module_errors, pending = check_modules()
    errors += module_errors
    for line in pending:
        print(f"pending: {line}")
    if pending:
        print(f"{len(pending)} imports against pending rules (issue 19; not a failure)")
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} imports against the documented layers (ARCHITECTURE.md)", file=sys.stderr)
        return 1
    rules = len(CRATES) + len(NO_RUNTIME) + len(MAPPED) + len([r for r in MODULE_RULES if not r.pending])
    print(f"layers: {rules} rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
