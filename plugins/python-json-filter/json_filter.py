"""Keep records whose JSON value has a field that compares true.

The Python twin of plugins/json-filter (same parameters, same answers on
plugins/testdata/json-filter.json): the view `$.region == "eu"` is
`field=$.region, op===, value="eu"`.

- `field` (required): a path such as `$.region` or `$.order.total`;
- `op` (required): one of `==`, `!=`, `<`, `<=`, `>`, `>=`;
- `value` (required): a number (`10`, `-2.5`) compares numerically with a
  field that reads as one (`12`, or a string `"12"`); anything else is text:
  `"eu"` (quotes stripped) or a bare `eu`, compared byte-wise with the
  field's bytes as written (a string's contents, escapes not decoded).

A record whose value is missing, not JSON, lacks the field, or holds `null`
there is dropped, whatever the operator (as SQL's `NULL`).
"""

import operator
import re

from sluice_sdk import InvalidParams, Params, Path, Record

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt,
       "<=": operator.le, ">": operator.gt, ">=": operator.ge}

# Rust's `str::parse::<f64>` grammar, which the Rust plugin uses: Python's
# float() alone would also take spaces, `_` and `infinity` in any case mix.
_NUMBER = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?i:inf|infinity|nan)")


def parse_number(text: bytes):
    """The float `text` reads as, the Rust way, or None."""
    return float(text) if _NUMBER.fullmatch(text) else None


class Predicate:
    """`field op value`, built once per instance from the parameters."""

    def __init__(self, params: Params):
        params.only(["field", "op", "value"])
        field = params.require("field")
        try:
            self.path = Path(field)
        except ValueError as e:
            raise InvalidParams(f"parameter `field`: {e}") from None
        op = params.require("op")
        if op not in OPS:
            raise InvalidParams(f"parameter `op` = `{op}` is not one of ==, !=, <, <=, >, >=")
        self.op = OPS[op]
        value = params.require("value")
        quoted = len(value) >= 2 and value[0] == value[-1] == '"'
        number = None if quoted else parse_number(value.encode())
        # A number only when finite: `inf` or `1e999` as a value is text.
        if number is not None and abs(number) != float("inf") and number == number:
            self.operand = number
        else:
            self.operand = (value[1:-1] if quoted else value).encode()

    def holds(self, field: bytes) -> bool:
        if isinstance(self.operand, bytes):
            return self.op(field, self.operand)
        number = parse_number(field)
        # NaN compares false with everything in Python, and as "no ordering"
        # (dropped) in Rust: the same answer for every operator but `!=`.
        if number is None or number != number:
            return False
        return self.op(number, self.operand)


def keep(predicate: Predicate, record: Record) -> bool:
    field = predicate.path.find(record.value) if record.value is not None else None
    return field is not None and predicate.holds(field)
