#!/usr/bin/env python3
"""Checks the import directions ARCHITECTURE.md documents ("Layers"); exits 1 on a breach.

Two kinds of rule:
- crate rules: which of our crates each crate may depend on (its `[dependencies]`, and the
  `sluice_*` paths its `src/` names), and which crates may not pull in an async runtime or
  sockets at all;
- module rules: inside a crate, which modules may not import which (`use crate::x` or a
  `crate::x::` path in code, comments ignored).

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
    "broker/kafka": set(),
    "broker/storage": {"sluice-kafka"},
    "broker/group": {"sluice-kafka"},
    "broker/txn": {"sluice-kafka"},
    "broker/transform": {"sluice-hash", "sluice-kafka"},
    "broker/security": {"sluice-kafka"},
    "broker/protocol": set(),
    "broker/plugin-host": {"sluice-kafka", "sluice-storage", "sluice-columns"},
    "broker/server": {
        "sluice-kafka",
        "sluice-storage",
        "sluice-group",
        "sluice-plugin-host",
        "sluice-security",
        "sluice-txn",
        "sluice-transform",
        "sluice-protocol",
    },
    "broker/cli": {
        "sluice-kafka",
        "sluice-server",
        "sluice-storage",
        "sluice-group",
        "sluice-plugin-host",
        "sluice-security",
        "sluice-hash",
    },
    "sdk/macros": set(),
    "sdk/columns": set(),
    "sdk/hash": set(),
    "sdk": {"sluice-sdk-macros", "sluice-columns", "sluice-hash"},
}

# A proc-macro crate writes `::sluice_sdk::` paths into the code it generates, for the crate
# that uses it: those are not its own imports.
GENERATES_PATHS = {"sdk/macros"}

# Crates that must stay synchronous and socket-free (ARCHITECTURE.md invariants).
NO_RUNTIME = [
    "broker/kafka",
    "broker/storage",
    "broker/group",
    "broker/txn",
    "broker/transform",
    "broker/security",
    "broker/protocol",
    "broker/plugin-host",
]
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


# Crates whose top-level modules must form a DAG (no two modules import each other, however
# indirectly); `pending` lists crates still on the way there (their cycles are printed only).
ACYCLIC = [
    "broker/kafka",
    "broker/storage",
    "broker/group",
    "broker/txn",
    "broker/transform",
    "broker/security",
    "broker/protocol",
    "broker/server",
    "broker/plugin-host",
    "broker/cli",
]
ACYCLIC_PENDING: set[str] = set()
# Test code may reach across (a test module imports what it checks against).
TEST_START = re.compile(r"^\s*#\[cfg\(test\)\]")


def non_test_lines(path: Path) -> list[tuple[int, str]]:
    """`code_lines` up to the file's first `#[cfg(test)]` item (test modules sit at the end)."""
    if path.name == "tests.rs" or path.stem.endswith("_tests"):
        return []
    out = []
    for number, code in code_lines(path):
        if TEST_START.match(code):
            break
        out.append((number, code))
    return out


def module_graph(crate: str) -> dict[str, dict[str, tuple[str, int]]]:
    """Top-level module -> imported top-level module -> (a file, line) that imports it."""
    src = ROOT / crate / "src"
    modules = {p.stem for p in src.glob("*.rs") if p.stem not in ("lib", "main")}
    modules |= {p.name for p in src.iterdir() if p.is_dir()}
    graph: dict[str, dict[str, tuple[str, int]]] = {m: {} for m in modules}
    use = re.compile(r"\bcrate::(\{[^}]*\}|[a-z_0-9]+)")
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        owner = rel.parts[0].removesuffix(".rs")
        if owner not in graph:
            continue
        for number, code in non_test_lines(path):
            for match in use.finditer(code):
                names = re.findall(r"[a-z_0-9]+", match.group(1))
                targets = names if match.group(1).startswith("{") else names[:1]
                for target in targets:
                    if target in graph and target != owner:
                        graph[owner].setdefault(target, (str(path.relative_to(ROOT)), number))
    return graph


def cycles(graph: dict[str, dict[str, tuple[str, int]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def check_cycles() -> tuple[list[str], list[str]]:
    errors, pending = [], []
    for crate in ACYCLIC:
        graph = module_graph(crate)
        for component in cycles(graph):
            edges = [
                f"{a} -> {b} ({graph[a][b][0]}:{graph[a][b][1]})"
                for a in component
                for b in component
                if b in graph[a]
            ]
            line = f"{crate}: modules {', '.join(component)} import each other: " + "; ".join(edges)
            (pending if crate in ACYCLIC_PENDING else errors).append(line)
    return errors, pending


# Crates whose modules ARCHITECTURE.md's code map lists one by one, with their imports.
MAPPED = [
    "broker/kafka",
    "broker/storage",
    "broker/group",
    "broker/txn",
    "broker/transform",
    "broker/security",
    "broker/protocol",
    "broker/server",
    "broker/plugin-host",
    "broker/cli",
    "sdk",
]


def code_map() -> dict[str, dict[str, set[str]]]:
    """ARCHITECTURE.md's module tables: crate -> module -> the modules it may import."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    tables: dict[str, dict[str, set[str]]] = {}
    crate = None
    for line in text.split("## Code map", 1)[-1].splitlines():
        if line.startswith("## "):
            break
        if line.startswith("### "):
            crate = line[4:].strip()
            tables[crate] = {}
        elif crate and line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 3:
                # A `|` inside a cell (even in a code span) splits a Markdown table row.
                raise SystemExit(f"ARCHITECTURE.md code map, {crate}: a row with {len(cells)} cells, not 3: {line}")
            module = cells[0].strip("`")
            imports = set(re.findall(r"`([a-z_0-9]+)`", cells[-1]))
            tables[crate][module] = imports
    return tables


def check_code_map() -> list[str]:
    errors = []
    tables = code_map()
    for crate in MAPPED:
        table = tables.get(crate)
        if table is None:
            errors.append(f"ARCHITECTURE.md has no code-map table `### {crate}`")
            continue
        graph = module_graph(crate)
        for module in sorted(set(graph) - set(table)):
            errors.append(f"{crate}/src: module `{module}` is missing from ARCHITECTURE.md's code map")
        for module in sorted(set(table) - set(graph)):
            errors.append(f"ARCHITECTURE.md's code map lists `{module}` of {crate}, which has no such module")
        for module in sorted(set(graph) & set(table)):
            for imported, (path, number) in sorted(graph[module].items()):
                if imported not in table[module]:
                    errors.append(
                        f"{path}:{number}: `{module}` imports `{imported}`, which ARCHITECTURE.md's code map"
                        f" does not list under \"may import\" for {crate}"
                    )
    return errors


def main() -> int:
    errors = check_crates()
    errors += check_code_map()
    module_errors, pending = check_modules()
    errors += module_errors
    cycle_errors, cycle_pending = check_cycles()
    errors += cycle_errors
    pending += cycle_pending
    for line in pending:
        print(f"pending: {line}")
    if pending:
        print(f"{len(pending)} imports against pending rules (issue 19; not a failure)")
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} imports against the documented layers (ARCHITECTURE.md)", file=sys.stderr)
        return 1
    rules = len(CRATES) + len(NO_RUNTIME) + len([r for r in MODULE_RULES if not r.pending])
    rules += len(ACYCLIC) - len(ACYCLIC_PENDING) + len(MAPPED)
    print(f"layers: {rules} rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
