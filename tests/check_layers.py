#!/usr/bin/env python3
"""Checks the rules ARCHITECTURE.md states about the code's structure; exits 1 on a breach.

Five kinds of rule, all read from ARCHITECTURE.md, not copied here:
- crate rules ("Layers"): which of our crates each crate may depend on (its `[dependencies]`,
  and the `sluice_*` paths its `src/` names), and which may not pull in an async runtime or
  sockets ("no async runtime" in its row);
- import rules ("Import rules"): inside a crate, a module that never imports another
  (`- broker/server: \`wire\` never imports \`handler\`, \`connection\`: why`), or a module
  only some import (`- broker/server: only \`listener\` imports \`admin\`: why`);
- external-crate rules ("Import rules"): the one module of one crate that may use a
  third-party crate (`- broker/server: only \`cluster\` uses the crate \`openraft\`: why`): no
  other module of that crate names it, and no other workspace member depends on it;
- the module DAG: in every crate the top-level modules form a DAG (no two import each other,
  however indirectly);
- the module maps: each crate's `lib.rs` (or `main.rs`) opens with a `# Layout` section that
  names every top-level module of the crate, so the crate's own map is complete.

Run from the repo root: `python3 tests/check_layers.py`.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCH = ROOT / "ARCHITECTURE.md"
RUNTIME_CRATES = {"tokio", "axum", "hyper", "mio", "socket2", "tokio-util", "tower"}
RUNTIME_PATHS = re.compile(r"\b(tokio|axum|hyper|mio|socket2)::|\bstd::net\b")
STRING = re.compile(r'"(?:\\.|[^"\\])*"')
TEST_START = re.compile(r"^\s*#\[cfg\(test\)\]")
# A proc-macro crate writes `::sluice_sdk::` paths into the code it generates, for the crate
# that uses it: those are not its own imports.
GENERATES_PATHS = {"sluice-sdk-macros"}


def section(title: str) -> str:
    text = ARCH.read_text(encoding="utf-8")
    heading = f"## {title}\n"
    if heading not in text:
        raise SystemExit(f"ARCHITECTURE.md has no `## {title}` section")
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def crate_dirs() -> dict[str, Path]:
    """Package name -> directory, for every member of the workspace."""
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))
    out = {}
    for member in workspace["workspace"]["members"]:
        manifest = tomllib.loads((ROOT / member / "Cargo.toml").read_text(encoding="utf-8"))
        out[manifest["package"]["name"]] = ROOT / member
    return out


def layers() -> tuple[dict[str, set[str]], set[str]]:
    """The "Layers" table: crate -> the crates of ours it may depend on; the crates that
    may have no async runtime."""
    allowed: dict[str, set[str]] = {}
    no_runtime: set[str] = set()
    for line in section("Layers").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([a-z0-9-]+)`", cells[0])
        deps = set(re.findall(r"`(sluice[a-z0-9-]*)`", cells[1]))
        for name in names:
            allowed[name] = deps
            if "no async runtime" in cells[1]:
                no_runtime.add(name)
    return allowed, no_runtime


def code_lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines without string literals' contents and `//` comments."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        code = STRING.sub('""', line).split("//", 1)[0]
        if code.strip():
            out.append((number, code))
    return out


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


def check_crates(dirs: dict[str, Path]) -> list[str]:
    errors = []
    allowed, no_runtime = layers()
    for name in sorted(dirs.keys() - allowed.keys()):
        errors.append(f"ARCHITECTURE.md's Layers table has no row for the crate `{name}`")
    for name in sorted(allowed.keys() - dirs.keys()):
        errors.append(f"ARCHITECTURE.md's Layers table names `{name}`, which is no workspace member")
    ours = set(dirs)
    for name, directory in sorted(dirs.items()):
        may = allowed.get(name, set())
        manifest = tomllib.loads((directory / "Cargo.toml").read_text(encoding="utf-8"))
        deps = set(manifest.get("dependencies", {}))
        for dep in sorted(deps & ours - may):
            errors.append(f"{name} depends on {dep}; ARCHITECTURE.md allows: {sorted(may) or 'none of ours'}")
        if name in no_runtime:
            for dep in sorted(deps & RUNTIME_CRATES):
                errors.append(f"{name} depends on {dep}: ARCHITECTURE.md says it has no async runtime or sockets")
        paths = {d.replace("-", "_") for d in may} | {name.replace("-", "_")}
        for path in sorted((directory / "src").rglob("*.rs")):
            rel = path.relative_to(ROOT)
            for number, code in code_lines(path):
                if name not in GENERATES_PATHS:
                    for used in re.findall(r"\b(sluice_[a-z_]+)::", code):
                        if used not in paths and used.replace("_", "-") in ours:
                            errors.append(f"{rel}:{number} uses {used}, which {name} may not depend on")
                if name in no_runtime and RUNTIME_PATHS.search(code):
                    errors.append(f"{rel}:{number} uses an async runtime or sockets: {code.strip()}")
    return errors


def module_graph(directory: Path) -> dict[str, dict[str, tuple[str, int]]]:
    """Top-level module -> imported top-level module -> (a file, line) that imports it."""
    src = directory / "src"
    modules = {p.stem for p in src.glob("*.rs") if p.stem not in ("lib", "main")}
    modules |= {p.name for p in src.iterdir() if p.is_dir()}
    graph: dict[str, dict[str, tuple[str, int]]] = {m: {} for m in modules}
    use = re.compile(r"\bcrate::(\{[^}]*\}|[a-z_0-9]+)")
    for path in sorted(src.rglob("*.rs")):
        owner = path.relative_to(src).parts[0].removesuffix(".rs")
        if owner not in graph:
            continue
        for number, code in non_test_lines(path):
            for match in use.finditer(code):
                names = re.findall(r"[a-z_0-9]+", match.group(1))
                for target in names if match.group(1).startswith("{") else names[:1]:
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


def check_cycles(dirs: dict[str, Path]) -> list[str]:
    errors = []
    for name, directory in sorted(dirs.items()):
        graph = module_graph(directory)
        for component in cycles(graph):
            edges = [f"{a} -> {b} ({graph[a][b][0]}:{graph[a][b][1]})" for a in component for b in component if b in graph[a]]
            errors.append(f"{name}: modules {', '.join(component)} import each other: " + "; ".join(edges))
    return errors


RULE = re.compile(r"^- (\S+): (?:only )?(`[^:]*?`) (never imports|imports?) (`[^:]*?`): (.+)$")


def import_rules() -> list[tuple[str, bool, set[str], set[str], str]]:
    """(crate dir, is "only", importers, imported, why) of each "Import rules" line."""
    out = []
    for line in section("Import rules").splitlines():
        match = RULE.match(line.strip())
        if not match:
            continue
        crate, who, verb, what, why = match.groups()
        only = line.strip().split(": ", 1)[1].startswith("only ")
        out.append((crate, only, set(re.findall(r"`([a-z_0-9]+)`", who)), set(re.findall(r"`([a-z_0-9]+)`", what)), why))
    if not out:
        raise SystemExit("ARCHITECTURE.md's Import rules section states no rule")
    return out


def check_import_rules() -> tuple[list[str], int]:
    errors = []
    rules = import_rules()
    for crate, only, who, what, why in rules:
        graph = module_graph(ROOT / crate)
        for module in sorted(who | what):
            if module not in graph:
                errors.append(f"ARCHITECTURE.md's import rule names `{module}`, which {crate} has no module of")
        for importer, imported in sorted(graph.items()):
            for target, (path, number) in sorted(imported.items()):
                if target not in what:
                    continue
                if (only and importer not in who) or (not only and importer in who):
                    errors.append(f"{path}:{number}: `{importer}` imports `{target}`: {why}")
    return errors, len(rules)


EXTERNAL_RULE = re.compile(r"^- (\S+): only `([a-z_0-9]+)` uses the crate `([a-z0-9_-]+)`: (.+)$")


def check_external_rules(dirs: dict[str, Path]) -> tuple[list[str], int]:
    """Each "only `m` uses the crate `c`" line: `c` in no other module's code of that crate
    (tests included) and in no other workspace member's `[dependencies]`."""
    errors = []
    rules = [m.groups() for line in section("Import rules").splitlines() if (m := EXTERNAL_RULE.match(line.strip()))]
    for crate_dir, module, external, why in rules:
        src = ROOT / crate_dir / "src"
        path_use = re.compile(rf"\b{re.escape(external.replace('-', '_'))}::")
        for path in sorted(src.rglob("*.rs")):
            owner = path.relative_to(src).parts[0].removesuffix(".rs")
            if owner == module:
                continue
            for number, code in code_lines(path):
                if path_use.search(code):
                    errors.append(f"{path.relative_to(ROOT)}:{number}: `{owner}` uses `{external}`: {why}")
        for name, directory in sorted(dirs.items()):
            if directory == ROOT / crate_dir:
                continue
            manifest = tomllib.loads((directory / "Cargo.toml").read_text(encoding="utf-8"))
            if external in manifest.get("dependencies", {}) or external in manifest.get("dev-dependencies", {}):
                errors.append(f"{name} depends on `{external}`: {why}")
    return errors, len(rules)


def check_module_maps(dirs: dict[str, Path]) -> list[str]:
    errors = []
    for name, directory in sorted(dirs.items()):
        root = directory / "src" / "lib.rs"
        if not root.is_file():
            root = directory / "src" / "main.rs"
        docs = "\n".join(line for line in root.read_text(encoding="utf-8").splitlines() if line.startswith("//!"))
        if "# Layout" not in docs:
            errors.append(f"{root.relative_to(ROOT)}: no `# Layout` section (each crate's lib.rs is its module map)")
            continue
        layout = docs.split("# Layout", 1)[1]
        for module in sorted(module_graph(directory)):
            if not re.search(rf"\b{re.escape(module)}\b", layout):
                errors.append(f"{root.relative_to(ROOT)}: its `# Layout` does not name the module `{module}`")
    return errors


def main() -> int:
    dirs = crate_dirs()
    errors = check_crates(dirs)
    rule_errors, rules = check_import_rules()
    errors += rule_errors
    external_errors, external_rules = check_external_rules(dirs)
    errors += external_errors
    rules += external_rules
    errors += check_cycles(dirs)
    errors += check_module_maps(dirs)
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} breaches of the structure ARCHITECTURE.md states", file=sys.stderr)
        return 1
    print(f"layers: {len(dirs)} crates, {rules} import rules, {len(dirs)} module DAGs and maps hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
