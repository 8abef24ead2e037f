#!/usr/bin/env python3
"""Run built plugins (components) in wasmtime 48, outside the broker.

    run-guest.py vectors PLUGIN.wasm VECTORS.json   the shared test vectors through the component
                                                     (`keep`, `partition` or `reason` per record)
    run-guest.py call PLUGIN.wasm [--param k=v]... [--key K] [--value V] [--partitions N]
                                                     one call on one record; prints the outcome

Run it with the toolchain's Python (sdk/guest-tools/.venv/bin/python, made by
`sdk/build-guest.sh --install python`), which has wasmtime-py 48.0.0: the same
wasmtime major version as the broker, so a component that instantiates and
answers here links the same way there. A core module (a Rust plugin from
sdk/build-plugins.sh) is made a component first with `wasm-tools component new`,
as the broker does on upload.

The store mirrors the broker's sandbox: WASI 0.2 linked with nothing granted (no
preopens, no environment, no network: wasmtime's defaults), stdout and stderr
captured a line at a time (the broker logs them at info and warn),
`sluice:plugin/host.log` printed, memory capped at 64 MiB
(`plugin.memory.bytes.max`), every call stopped 100 ms after it starts
(`plugin.call.timeout.ms`, epoch ticks of 5 ms). It does not use the pooling
allocator, so the per-component limits of broker/plugin-host/src/limits.rs are
checked by sdk/guest-report.sh instead.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from wasmtime import Config, Engine, Store, WasiConfig
from wasmtime.component import Component, Linker, Record, Variant

MEMORY_BYTES_MAX = 64 * 1024 * 1024
CALL_TIMEOUT_MS = 100
EPOCH_TICK_MS = 5
PACKAGE = "sluice:plugin"
KINDS = ("partitioner", "filter", "transform", "validator")


class Plugin:
    """One component, compiled once; `instance()` makes a fresh store and instance."""

    def __init__(self, path: Path):
        config = Config()
        config.epoch_interruption = True
        self.engine = Engine(config)
        started = time.monotonic()
        self.component = Component(self.engine, component_bytes(path))
        self.compile_s = time.monotonic() - started
        # The kind and the WIT version, from the export `sluice:plugin/<kind>-api@<version>`.
        self.kind, self.version = next(
            (kind, name.rsplit("@", 1)[1])
            for name in self.component.type.exports(self.engine)
            for kind in KINDS if name.startswith(f"{PACKAGE}/{kind}-api@"))
        self.linker = Linker(self.engine)
        self.linker.add_wasip2()
        self.log = []
        self.partial = {}  # the unfinished last line of stdout and of stderr
        with self.linker.root() as root:
            with root.add_instance(f"{PACKAGE}/host@{self.version}") as host:
                host.add_func("log", lambda _store, level, message:
                              self.log.append((level, message)))
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()

    def _stdio(self, stream: str, data) -> None:
        """What the guest writes to stdout or stderr, as lines, as the broker logs them."""
        *lines, self.partial[stream] = (self.partial.get(stream, b"") + bytes(data)).split(b"\n")
        self.log += [(stream, line.decode(errors="replace").rstrip("\r")) for line in lines]

    def _tick(self):
        while True:
            time.sleep(EPOCH_TICK_MS / 1000)
            self.engine.increment_epoch()

    def instance(self):
        store = Store(self.engine)
        wasi = WasiConfig()
        wasi.stdout_custom = lambda data: self._stdio("stdout", data)
        wasi.stderr_custom = lambda data: self._stdio("stderr", data)
        store.set_wasi(wasi)
        store.set_limits(memory_size=MEMORY_BYTES_MAX)
        store.set_epoch_deadline(CALL_TIMEOUT_MS // EPOCH_TICK_MS)
        started = time.monotonic()
        instance = self.linker.instantiate(store, self.component)
        return Instance(self, store, instance, time.monotonic() - started)


class Instance:
    def __init__(self, plugin, store, instance, instantiate_s):
        self.store, self.instance, self.instantiate_s = store, instance, instantiate_s
        self.api = instance.get_export_index(
            store, f"{PACKAGE}/{plugin.kind}-api@{plugin.version}")

    def call(self, name, *args):
        """The function's result: its `ok` value, or the `plugin-error` Variant."""
        func = self.instance.get_func(self.store, self.instance.get_export_index(
            self.store, name, self.api))
        self.store.set_epoch_deadline(CALL_TIMEOUT_MS // EPOCH_TICK_MS)
        result = func(self.store, *args)
        func.post_return(self.store)
        return result

    def init(self, params):
        pairs = []
        for key, value in params:
            p = Record()
            p.key, p.value = key, value
            pairs.append(p)
        return self.call("init", pairs)


def component_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[4:8] == b"\x01\x00\x00\x00":  # a core module: version 1, layer 0
        tool = Path(sys.executable).parent / "wasm-tools"
        data = subprocess.run([str(tool), "component", "new"], input=data,
                              capture_output=True, check=True).stdout
    return data


def batch(records) -> Record:
    """The columnar `record-batch` of (key, value) pairs (bytes or None)."""
    b = Record()
    for part in ("key", "value"):
        data, ends, nulls = bytearray(), [], bytearray((len(records) + 7) // 8)
        for i, rec in enumerate(records):
            if rec[part] is None:
                nulls[i >> 3] |= 1 << (i & 7)
            else:
                data += rec[part]
            ends.append(len(data))
        setattr(b, f"{part}-bytes", bytes(data))
        setattr(b, f"{part}-ends", ends)
        setattr(b, f"{part}-nulls", bytes(nulls))
    b.offsets = list(range(len(records)))
    b.timestamps = [0] * len(records)
    setattr(b, "header-counts", [0] * len(records))
    setattr(b, "header-bytes", b"")
    setattr(b, "header-ends", [])
    return b


def part(record, name):
    if f"{name}_hex" in record:
        return bytes.fromhex(record[f"{name}_hex"])
    text = record.get(name)
    return None if text is None else text.encode()


def reasons(rejections, count: int) -> list:
    """A validator's answer as one reason (or None: accepted) per record, after the
    checks the broker makes: indexes in range, increasing, none twice."""
    if isinstance(rejections, Variant):
        return [f"plugin-error {rejections.tag}: {rejections.payload}"] * count
    got, last = [None] * count, -1
    for r in rejections:
        if not last < r.index < count:
            return [f"bad rejection index {r.index} after {last} (batch of {count})"] * count
        got[r.index], last = r.reason, r.index
    return got


def run_vectors(plugin: Plugin, vectors: dict) -> int:
    """Every case in a fresh instance, as the broker makes one per parameters."""
    failed = passed = 0
    for case in vectors["cases"]:
        inst = plugin.instance()
        result = inst.init(case["params"])
        assert result is None, f"{case['name']}: init failed: {result}"
        records = [{"key": part(r, "key"), "value": part(r, "value")} for r in case["records"]]
        if plugin.kind == "filter":
            bitmap = inst.call("filter", batch(records))
            got = [bool(bitmap[i >> 3] >> (i & 7) & 1) for i in range(len(records))]
            want = [r["keep"] for r in case["records"]]
        elif plugin.kind == "validator":
            got = reasons(inst.call("validate", batch(records)), len(records))
            want = [r["reason"] for r in case["records"]]
        else:
            got = inst.call("partition", batch(records), case["partition_count"])
            want = [r["partition"] for r in case["records"]]
        if got == want:
            passed += 1
        else:
            failed += 1
            wrong = [f"record {i}: got {g!r}, want {w!r}"
                     for i, (g, w) in enumerate(zip(got, want)) if g != w]
            print(f"FAIL {case['name']}: " + ("; ".join(wrong) if len(got) == len(want) and wrong
                                               else f"got {got}, want {want}"))
    for case in vectors["invalid_params"]:
        error = plugin.instance().init(case["params"])
        if isinstance(error, Variant) and error.tag == "invalid-params" \
                and error.payload == case["error"]:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {case['name']}: init gave {error!r}, want {case['error']!r}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def run_call(plugin: Plugin, args) -> int:
    started = time.monotonic()
    try:
        inst = plugin.instance()
        print(f"instantiated in {inst.instantiate_s * 1000:.1f} ms")
        result = inst.init([p.split("=", 1) for p in args.param])
        print(f"init -> {result!r}")
        rec = [{"key": args.key and args.key.encode(), "value": args.value and args.value.encode()}]
        if plugin.kind == "partitioner":
            result = inst.call("partition", batch(rec), args.partitions)
        elif plugin.kind == "filter":
            result = inst.call("filter", batch(rec))
        elif plugin.kind == "validator":
            result = inst.call("validate", batch(rec))
            if isinstance(result, list):  # the rejections, as (index, reason)
                result = [(r.index, r.reason) for r in result]
        else:
            result = inst.call("transform", batch(rec))
        if isinstance(result, Record):  # a transform's output batch: its columns
            result = {name: value for name, value in vars(result).items()}
        print(f"{plugin.kind} -> {result!r}")
    except Exception as e:  # the outcome is what we print: trap, timeout, link error
        # The message without the wasm backtrace's frames: what stopped the call.
        lines = [line for line in str(e).strip().splitlines()
                 if line.strip() and not line.strip()[0].isdigit()
                 and not line.strip().startswith("at ")]
        print(f"stopped after {(time.monotonic() - started) * 1000:.0f} ms: "
              f"{type(e).__name__}: {' / '.join(lines[:6])}")
    for level, message in plugin.log[:10]:
        print(f"log {level}: {message[:200]!r}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    vec = sub.add_parser("vectors")
    vec.add_argument("wasm", type=Path)
    vec.add_argument("vectors", type=Path)
    call = sub.add_parser("call")
    call.add_argument("wasm", type=Path)
    call.add_argument("--param", action="append", default=[])
    call.add_argument("--key")
    call.add_argument("--value")
    call.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    plugin = Plugin(args.wasm)
    print(f"{args.wasm.name}: {plugin.kind} ({PACKAGE}@{plugin.version}), "
          f"compiled in {plugin.compile_s:.1f} s")
    if args.command == "vectors":
        return run_vectors(plugin, json.loads(args.vectors.read_text()))
    return run_call(plugin, args)


if __name__ == "__main__":
    code = main()
    # Leave without the interpreter's teardown: after a guest wrote to WASI stdout or
    # stderr, wasmtime-py 48's runtime thread panics ("panic in a function that cannot
    # unwind") while Python exits, which reads like a failure of the run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
