"""Request bodies from Kafka's own message specs (broker/protocol/messages, vendored from
Kafka 4.4.0): `encode(api_key, version, values)` writes every field the version has, in the
spec's order and layout (compact lengths and an empty tag section from the flexible
versions on), each from `values` by the spec's field name, else its default. Tagged fields
are left out (their defaults). The fuzzer's catalog (kafka_messages.py) uses it for the
flexible versions its hand-written bodies do not know."""

from __future__ import annotations

from kafka_wire import Fields, request_spec, versions_contain

PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "bool", "float64", "string", "bytes", "records", "uuid"}


def encode(api_key: int, version: int, values: dict) -> Fields:
    spec = request_spec(api_key)
    flexible = versions_contain(spec.get("flexibleVersions", "none"), version)
    common = {s["name"]: s for s in spec.get("commonStructs", [])}
    out = Fields()
    _struct(out, spec["fields"], values, version, flexible, common)
    return out


def _struct(out: Fields, fields: list, values: dict, version: int, flexible: bool, common: dict) -> None:
    for field in fields:
        if not versions_contain(field.get("versions", "0+"), version):
            continue
        if "tag" in field and versions_contain(field.get("taggedVersions", "none"), version):
            continue
        value = values[field["name"]] if field["name"] in values else _default(field)
        _field(out, field, value, version, flexible, common)
    if flexible:
        out.tagged_fields()


def _field(out: Fields, field: dict, value, version: int, flexible: bool, common: dict) -> None:
    kind = field["type"]
    if kind.startswith("[]"):
        item = kind[2:]
        items = None if value is None else [_item(field, item, v, version, flexible, common) for v in value]
        (out.compact_array if flexible else out.array)(items)
    elif kind in PRIMITIVES:
        _primitive(out, kind, value, flexible)
    else:  # a struct, nullable ones with a presence byte
        if versions_contain(field.get("nullableVersions", "none"), version):
            if value is None:
                out.i8(-1)
                return
            out.i8(1)
        _struct(out, _fields_of(field, kind, common), value or {}, version, flexible, common)


def _item(field: dict, kind: str, value, version: int, flexible: bool, common: dict) -> Fields:
    item = Fields()
    if kind in PRIMITIVES:
        _primitive(item, kind, value, flexible)
    else:
        _struct(item, _fields_of(field, kind, common), value, version, flexible, common)
    return item


def _fields_of(field: dict, kind: str, common: dict) -> list:
    return field["fields"] if "fields" in field else common[kind]["fields"]


def _primitive(out: Fields, kind: str, value, flexible: bool) -> None:
    if kind in ("string",):
        (out.compact_string if flexible else out.string)(value)
    elif kind in ("bytes", "records"):
        (out.compact_bytes if flexible else out.nbytes)(value)
    elif kind == "uuid":
        out.uuid(value)
    elif kind == "bool":
        out.bool(value)
    elif kind == "float64":
        out.f64(value)
    elif kind == "uint16":
        out.i16(value if value < 1 << 15 else value - (1 << 16))
    else:
        getattr(out, {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64"}[kind])(value)


def _default(field: dict):
    kind, default = field["type"], field.get("default")
    if default == "null":
        return None
    if kind.startswith("[]"):
        return []
    if kind == "bool":
        return default == "true"
    if kind in ("int8", "int16", "int32", "int64", "uint16"):
        return int(default, 0) if default is not None else 0
    if kind == "float64":
        return float(default) if default is not None else 0.0
    if kind == "string":
        return default if default is not None else ""
    if kind in ("bytes", "records"):
        return b""
    if kind == "uuid":
        return bytes(16)
    return None if "nullableVersions" in field else {}
