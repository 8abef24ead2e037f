"""Refuse produced records whose value is not the JSON the topic expects.

The Python twin of plugins/json-validator (same parameters, same reasons on
plugins/testdata/json-validator.json). Parameters, all optional:

- `root`: `object` (the default) refuses any value that is not a JSON object;
  `any` accepts any well-formed JSON value.
- `required`: comma-separated paths that must be present and not `null`,
  e.g. `$.id,$.customer.name`.
- `types`: comma-separated `path:type` pairs, the type one of `string`,
  `number`, `boolean`, `object`, `array`, e.g. `$.id:number,$.tags:array`; a
  field that is present must have it (pair it with `required` to insist on
  presence too).
- `tombstones`: `refuse` (the default) or `allow` records with no value.

With no parameters it refuses anything that is not a well-formed JSON object
(strict: `check_json`, with the Rust SDK's messages and byte positions).
"""

from typing import Optional

from sluice_sdk import InvalidParams, NotJson, Params, Path, Record, check_json, kind_of_raw

KINDS = ("string", "number", "boolean", "object", "array")

# Rust's `str::trim` strips Unicode White_Space, which `str.strip()` does not quite:
# Python's also takes U+001C..U+001F. The list values are trimmed the Rust way.
RUST_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                   "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def trim(text: str) -> str:
    return text.strip(RUST_WHITESPACE)


def items(value: Optional[str]) -> list:
    """A comma-separated list: entries trimmed, empty ones dropped."""
    return [t for t in (trim(s) for s in (value or "").split(",")) if t]


def path(param: str, text: str) -> Path:
    try:
        return Path(text)
    except ValueError as e:
        raise InvalidParams(f"parameter `{param}`: {e}") from None


def choice(params: Params, key: str, default: str, options: tuple) -> bool:
    """Whether the parameter is the second of its two `options`."""
    value = params.get(key, default)
    if value not in options:
        raise InvalidParams(f"parameter `{key}` = `{value}` is not `{options[0]}` or `{options[1]}`")
    return value == options[1]


class Schema:
    """The schema, built once per instance from the parameters."""

    def __init__(self, params: Params):
        params.only(["root", "required", "types", "tombstones"])
        self.object_only = not choice(params, "root", "object", ("object", "any"))
        self.allow_tombstones = choice(params, "tombstones", "refuse", ("refuse", "allow"))
        self.required = [(p, path("required", p)) for p in items(params.get("required"))]
        self.types = [self._typed(pair) for pair in items(params.get("types"))]

    @staticmethod
    def _typed(pair: str):
        p, colon, t = pair.rpartition(":")
        if not colon:
            raise InvalidParams(f"parameter `types`: `{pair}` is not `path:type`")
        if trim(t) not in KINDS:
            raise InvalidParams(f"parameter `types`: `{t}` is not one of {', '.join(KINDS)}")
        return trim(p), path("types", trim(p)), trim(t)


def validate(schema: Schema, record: Record) -> Optional[str]:
    """None accepts the record; a reason refuses it."""
    value = record.value
    if value is None:
        if schema.allow_tombstones:
            return None
        return "a record with no value (tombstone) is refused (tombstones=allow takes them)"
    try:
        kind = check_json(value)
    except NotJson as e:
        return str(e)
    if schema.object_only and kind != "object":
        return f"the value is a JSON {kind}, not an object"
    for name, p in schema.required:
        if p.find_raw(value) is None:
            return f"required field {name} is missing or null"
    for name, p, want in schema.types:
        found = p.find_raw(value)
        if found is not None and kind_of_raw(found) != want:
            return f"field {name} is of type {kind_of_raw(found)}, expected {want}"
    return None
