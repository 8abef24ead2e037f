#!/usr/bin/env python3
"""Claims in the docs that can be checked against the tree, checked (tests/run runs this
beside check_layers.py; a failure names the doc, the claim and what the tree says).

- plugins/README.md lists every plugin directory (plugins/<name>, plugins/hostile/<name>,
  plugins/compat/<name>) once, in its section, with the kind and language its sources
  declare, and nothing that is not there.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
LANGUAGES = {"rust": "Rust", "python": "Python", "js": "JavaScript"}
SECTIONS = {"": "## Examples and built-ins", "hostile": "## Hostile plugins", "compat": "## Compatibility plugins"}
RUST_KIND = re.compile(r"#\[(?:sluice_sdk::)?(partitioner|filter|transform|validator)\b")


def declared(path: Path) -> tuple[str, str] | None:
    """(kind, language) a plugin directory's sources declare; None if it is no plugin."""
    if (path / "pyproject.toml").is_file():
        tool = tomllib.loads((path / "pyproject.toml").read_text()).get("tool", {}).get("sluice", {})
        return tool.get("kind", "?"), "python"
    if (path / "package.json").is_file():
        return json.loads((path / "package.json").read_text()).get("sluice", {}).get("kind", "?"), "js"
    if (path / "Cargo.toml").is_file():
        sources = "".join(p.read_text() for p in (path / "src").rglob("*.rs"))
        match = RUST_KIND.search(sources)
        kind = match.group(1) if match else "filter" if "filter" in path.name else "?"
        return kind, "rust"
    return None


def plugin_dirs() -> dict[tuple[str, str], Path]:
    out = {}
    for section in SECTIONS:
        base = PLUGINS / section if section else PLUGINS
        for path in sorted(base.iterdir()):
            if path.is_dir() and path.name not in ("target", "testdata", "hostile", "compat", "node_modules"):
                if declared(path) is not None:
                    out[(section, path.name)] = path
    return out


def readme_rows() -> dict[tuple[str, str], tuple[str, str]]:
    text = (PLUGINS / "README.md").read_text()
    rows = {}
    for section, heading in SECTIONS.items():
        body = text.split(heading, 1)[1].split("\n## ", 1)[0] if heading in text else ""
        for line in body.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("`"):
                key = (section, cells[0].strip("`"))
                if key in rows:
                    raise SystemExit(f"plugins/README.md lists {key[1]} twice")
                rows[key] = (cells[1], cells[2])
    return rows


def main() -> int:
    errors = []
    dirs = plugin_dirs()
    rows = readme_rows()
    for key, path in dirs.items():
        kind, language = declared(path)
        if key not in rows:
            errors.append(f"plugins/README.md: {path.relative_to(ROOT)} ({kind}, {LANGUAGES[language]}) is not listed")
        elif rows[key] != (kind, LANGUAGES[language]):
            errors.append(f"plugins/README.md: {key[1]} is listed as {rows[key]}, its sources say ({kind}, {LANGUAGES[language]})")
    for key in rows.keys() - dirs.keys():
        errors.append(f"plugins/README.md: lists {key[1]}, which is no plugin directory under plugins/{key[0]}")
    for e in errors:
        print(f"error: {e}")
    print(f"docs: {len(dirs)} plugins listed" if not errors else f"{len(errors)} doc claims do not hold")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
