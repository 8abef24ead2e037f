#!/usr/bin/env python3
"""What a built plugin asks of the broker: sizes and counts against plugin-host's limits.

    guest-report.py [--compile] PLUGIN.wasm...     a Markdown table, one column per plugin

Run it with the toolchain's Python (sdk/guest-tools/.venv/bin/python, made by
`sdk/build-guest.sh --install python`). For each component (a core module, such
as a Rust plugin from sdk/build-plugins.sh, is made one first with
`wasm-tools component new`, as the broker does on upload) it reads the binary
itself: core modules (nested components included), core instances (each
`instantiate` of a module), the memories and tables those instances define,
the largest table's initial elements, functions, function bodies and locals,
data and element segments per module, and initial memory pages. Imports and
exports come from `wasm-tools component wit`. `--compile` also times a compile
with wasmtime-py 48 (the broker's wasmtime version, Cranelift defaults) and an
instantiation with WASI linked.

The limits it compares with are broker/plugin-host/src/limits.rs's, read from
that file, so the table stays true when they change.
"""

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMITS = ROOT / "broker/plugin-host/src/limits.rs"
TOOLS = Path(sys.executable).parent


def leb(data: bytes, at: int):
    """An unsigned LEB128 at `at`: (value, position after)."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def sections(data: bytes, at: int = 8):
    """(id, start, end) of each section of a module or component binary."""
    while at < len(data):
        sid = data[at]
        size, at = leb(data, at + 1)
        yield sid, at, at + size
        at += size


@dataclass
class Module:
    functions: int = 0
    body_bytes_max: int = 0
    locals_max: int = 0
    data_segments: int = 0
    element_segments: int = 0
    memories: list = field(default_factory=list)  # defined: (initial pages, max or None)
    tables: list = field(default_factory=list)  # defined: (initial elements, max or None)
    imported_memories: int = 0
    imported_tables: int = 0


def limits(data, at):
    flags = data[at]
    initial, at = leb(data, at + 1)
    maximum = None
    if flags & 1:
        maximum, at = leb(data, at)
    return (initial, maximum), at


def reftype(data, at):
    if data[at] in (0x63, 0x64):  # (ref null? ht): a heap type follows (s33)
        _, at = leb(data, at + 1)
        return at
    return at + 1


def valtype(data, at):
    return reftype(data, at) if data[at] in (0x63, 0x64) else at + 1


def parse_module(data: bytes) -> Module:
    m = Module()
    for sid, start, end in sections(data):
        if sid == 0:
            continue
        count, at = leb(data, start)
        if sid == 2:  # imports
            for _ in range(count):
                for _name in range(2):
                    n, at = leb(data, at)
                    at += n
                kind = data[at]
                at += 1
                if kind == 0x00:
                    _, at = leb(data, at)
                elif kind == 0x01:
                    m.imported_tables += 1
                    _, at = limits(data, reftype(data, at))
                elif kind == 0x02:
                    m.imported_memories += 1
                    _, at = limits(data, at)
                elif kind == 0x03:
                    at = valtype(data, at) + 1
                elif kind == 0x04:
                    _, at = leb(data, at + 1)
        elif sid == 3:
            m.functions = count
        elif sid == 4:
            for _ in range(count):
                init_expr = data[at] == 0x40  # 0x40 0x00: a table with an initializer
                lim, at = limits(data, reftype(data, at + 2 if init_expr else at))
                m.tables.append(lim)
                if init_expr:  # a constant expression: ends at its `end` (0x0b)
                    at = data.index(0x0B, at) + 1
        elif sid == 5:
            for _ in range(count):
                lim, at = limits(data, at)
                m.memories.append(lim)
        elif sid == 9:
            m.element_segments = count
        elif sid == 10:
            for _ in range(count):
                size, at = leb(data, at)
                body_end = at + size
                m.body_bytes_max = max(m.body_bytes_max, size)
                groups, p = leb(data, at)
                total = 0
                for _ in range(groups):
                    n, p = leb(data, p)
                    total += n
                    p = valtype(data, p)
                m.locals_max = max(m.locals_max, total)
                at = body_end
        elif sid == 11:
            m.data_segments = count
    return m


@dataclass
class Component:
    modules: list = field(default_factory=list)  # Module, in index order
    instantiations: list = field(default_factory=list)  # module index per core instance
    components: int = 0


def parse_component(data: bytes, into: Component) -> None:
    """Core modules and core instantiations, nested components included (each nested
    component's module indices are offset into the outer list)."""
    base = len(into.modules)
    for sid, start, end in sections(data):
        if sid == 1:
            into.modules.append(parse_module(data[start:end]))
        elif sid == 4:
            into.components += 1
            parse_component(data[start:end], into)
        elif sid == 2:
            count, at = leb(data, start)
            for _ in range(count):
                kind = data[at]
                at += 1
                if kind == 0x00:
                    module, at = leb(data, at)
                    into.instantiations.append(base + module)
                    args, at = leb(data, at)
                    for _ in range(args):
                        n, at = leb(data, at)
                        at += n + 1  # name, then the sort (0x12: instance)
                        _, at = leb(data, at)
                else:  # from exports: a bag of core items, no runtime instance
                    exports, at = leb(data, at)
                    for _ in range(exports):
                        n, at = leb(data, at)
                        at += n
                        sort = data[at]
                        at += 1
                        _, at = leb(data, at)
                        del sort


def component_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[4:8] == b"\x01\x00\x00\x00":  # a core module (Rust): make it a component
        data = subprocess.run([str(TOOLS / "wasm-tools"), "component", "new"], input=data,
                              capture_output=True, check=True).stdout
    return data


def world(data: bytes):
    text = subprocess.run([str(TOOLS / "wasm-tools"), "component", "wit"], input=data,
                          capture_output=True, check=True).stdout.decode()
    imports = re.findall(r"^\s*import ([\w:/.@-]+);", text, re.M)
    exports = re.findall(r"^\s*export ([\w:/.@-]+)[;:]", text, re.M)
    return imports, exports


def read_limits():
    consts = {}
    text = LIMITS.read_text()
    for name, value in re.findall(r"pub const (\w+): \w+ = ([^;]+);", text):
        try:
            consts[name] = eval(value.replace("_", ""), {}, dict(consts))  # 64 * 1024 * 1024
        except Exception:
            pass
    return consts


# The broker's pooling allocator (broker/plugin-host/src/engine.rs), with its limits.rs values.
BROKER_POOL = dict(
    total_component_instances=256, total_core_instances=256 * 4, total_memories=256,
    total_tables=256 * 2, max_core_instances_per_component=4, max_memories_per_component=1,
    max_tables_per_component=2, max_memories_per_module=1, max_tables_per_module=1,
    table_elements=4096, max_core_instance_size=256 * 1024,
    max_component_instance_size=512 * 1024, max_memory_size=64 << 20)


def instantiate(data: bytes, pool=None):
    """Compile and instantiate with WASI and a `log` linked: (compile s, .cwasm bytes,
    instantiate ms), or raises wasmtime's error. With `pool`, the pooling allocator."""
    from wasmtime import Config, Engine, Store, WasiConfig, _ffi as ffi
    from wasmtime.component import Component as WComponent, Linker
    config = Config()
    if pool is not None:
        pooling = ffi.wasmtime_pooling_allocation_config_new()
        for name, value in pool.items():
            getattr(ffi, f"wasmtime_pooling_allocation_config_{name}_set")(pooling, value)
        ffi.wasmtime_pooling_allocation_strategy_set(config.ptr(), pooling)
    engine = Engine(config)
    started = time.monotonic()
    component = WComponent(engine, data)
    compile_s = time.monotonic() - started
    linker = Linker(engine)
    linker.add_wasip2()
    version = next(n.rsplit("@", 1)[1] for n in component.type.exports(engine)
                   if n.startswith("sluice:plugin/"))
    with linker.root() as root:
        with root.add_instance(f"sluice:plugin/host@{version}") as host:
            host.add_func("log", lambda *_: None)
    store = Store(engine)
    store.set_wasi(WasiConfig())
    started = time.monotonic()
    linker.instantiate(store, component)
    return compile_s, len(component.serialize()), (time.monotonic() - started) * 1000


def pool_fit(data: bytes) -> str:
    """Instantiate under the broker's pool; each refusal names a limit, which is then
    raised until it fits: the refusals, in order."""
    pool, refusals = dict(BROKER_POOL), []
    for _ in range(8):
        try:
            instantiate(data, pool)
            return "<br>".join(refusals) or "fits"
        except Exception as e:
            message = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
            if "core module instances" in message:
                pool.update(max_core_instances_per_component=64, total_core_instances=256 * 64)
            elif "minimum element size" in message:
                pool.update(table_elements=1 << 20)
            elif "tables" in message:
                pool.update(max_tables_per_component=16, max_tables_per_module=16,
                            total_tables=256 * 16)
            elif "memories" in message:
                pool.update(max_memories_per_component=16, max_memories_per_module=16,
                            total_memories=256 * 16)
            elif "bytes" in message or "size" in message:
                pool.update(max_core_instance_size=64 << 20, max_component_instance_size=64 << 20)
            else:
                refusals.append(f"fails: {message[:160]}")
                break
            refusals.append(message[message.rfind(":", 0, message.find(" which")) + 1:][:160]
                            .strip() if " which" in message else message[:160])
    return "<br>".join(refusals)


def compile_times(data: bytes):
    try:
        compile_s, cwasm, instantiate_ms = instantiate(data)
        return f"{compile_s:.1f}", f"{cwasm:,}", f"{instantiate_ms:.1f} ms"
    except Exception as e:  # an import no linker here has (the denied ones): reported
        return "", "", f"fails: {str(e).splitlines()[0][:80]}"


def report(path: Path, do_compile: bool, lim: dict):
    data = component_bytes(path)
    c = Component()
    parse_component(data, c)
    inst = [c.modules[i] for i in c.instantiations]
    memories = sum(len(m.memories) for m in inst)
    tables = sum(len(m.tables) for m in inst)
    table_elements = max((t[0] for m in inst for t in m.tables), default=0)
    pages = [t[0] for m in inst for t in m.memories]
    imports, exports = world(data)
    row = {
        "file bytes": f"{path.stat().st_size:,}",
        "component bytes": f"{len(data):,}",
        "core modules (+ nested components)": f"{len(c.modules)} (+{c.components})",
        "core instances": len(c.instantiations),
        "memories defined (per module max)": f"{memories} ({max((len(m.memories) for m in c.modules), default=0)})",
        "tables defined (per module max)": f"{tables} ({max((len(m.tables) for m in c.modules), default=0)})",
        "largest table, initial elements": f"{table_elements:,}",
        "initial memory (64 KiB pages)": " + ".join(f"{p:,} ({p * 64 // 1024:,} MiB)" for p in pages),
        "functions per module": ", ".join(f"{m.functions:,}" for m in c.modules),
        "largest function body (bytes)": f"{max(m.body_bytes_max for m in c.modules):,}",
        "most locals in a function": f"{max(m.locals_max for m in c.modules):,}",
        "data segments per module": ", ".join(str(m.data_segments) for m in c.modules),
        "element segments per module": ", ".join(str(m.element_segments) for m in c.modules),
        "imports": "<br>".join(imports),
        "exports": "<br>".join(exports),
    }
    over = []
    checks = [
        ("PLUGIN_MODULE_BYTES_MAX_DEFAULT", len(data)),
        ("PLUGIN_MODULES_PER_COMPONENT_MAX", len(c.modules) + c.components),
        ("PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX", len(c.instantiations)),
        ("PLUGIN_MEMORIES_PER_COMPONENT_MAX", memories),
        ("PLUGIN_MEMORIES_PER_MODULE_MAX", max((len(m.memories) for m in c.modules), default=0)),
        ("PLUGIN_TABLES_PER_COMPONENT_MAX", tables),
        ("PLUGIN_TABLES_PER_MODULE_MAX", max((len(m.tables) for m in c.modules), default=0)),
        ("PLUGIN_TABLE_ELEMENTS_MAX", table_elements),
        ("PLUGIN_FUNCTIONS_PER_MODULE_MAX", max(m.functions for m in c.modules)),
        ("PLUGIN_FUNCTION_BODY_BYTES_MAX", max(m.body_bytes_max for m in c.modules)),
        ("PLUGIN_LOCALS_PER_FUNCTION_MAX", max(m.locals_max for m in c.modules)),
        ("PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX", max(m.data_segments for m in c.modules)),
        ("PLUGIN_ELEMENT_SEGMENTS_PER_MODULE_MAX", max(m.element_segments for m in c.modules)),
        ("PLUGIN_MEMORY_BYTES_MAX_DEFAULT", sum(pages) * 65536),
    ]
    for name, value in checks:
        if name in lim and value > lim[name]:
            over.append(f"{name} {lim[name]:,} < {value:,} ({value / lim[name]:.1f}x)")
    row["over the limits"] = "<br>".join(over) or "none"
    if do_compile:
        compile_s, cwasm, instantiate_ms = compile_times(data)
        row["compile (wasmtime-py 48, s)"] = compile_s
        row["compiled .cwasm bytes"] = cwasm
        row["instantiate, on-demand allocator"] = instantiate_ms
        row["broker's pooling allocator says"] = pool_fit(data)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("wasm", nargs="+", type=Path)
    args = parser.parse_args()
    lim = read_limits()
    rows = {p.stem: report(p, args.compile, lim) for p in args.wasm}
    keys = list(next(iter(rows.values())))
    print("| | " + " | ".join(rows) + " |")
    print("|---" * (len(rows) + 1) + "|")
    for k in keys:
        print(f"| {k} | " + " | ".join(str(r.get(k, "")) for r in rows.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
