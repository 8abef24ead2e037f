"""Strict JSON well-formedness for Sluice plugins in Python (re-exported by sluice_sdk).

The Python twin of `sluice_sdk::json::check` (sdk/src/json/check.rs): `check_json`
says whether a document is exactly one well-formed JSON value (RFC 8259) and what
its top-level value is, or raises `NotJson` with the Rust SDK's message, byte
position included. `walk_json` is the byte-by-byte walk that gives those messages;
`check_json` asks the `json` module's C parser first, which is much faster on the
documents it accepts, and walks only the others (and the large ones).
"""

from __future__ import annotations

import json
import re
from typing import Optional

__all__ = ["JSON_DEPTH_MAX", "JSON_FAST_CHECK_BYTES_MAX", "NotJson", "check_json",
           "kind_of_raw", "walk_json"]


JSON_DEPTH_MAX = 128
"""Deepest nesting of arrays and objects `check_json` accepts (the Rust SDK's `DEPTH_MAX`)."""

JSON_FAST_CHECK_BYTES_MAX = 64 * 1024
"""Documents up to this size are first given to the `json` module's C parser, which
accepts a document several times faster than the walk of `_Checker` but builds the
parsed value (several times the document's size, in a 64 MiB sandbox); larger
documents, and any the parser refuses (for the walk's message), are only walked, which
allocates nothing."""


class NotJson(ValueError):
    """`check_json`'s refusal: `not JSON: <what> at byte <n>`, the Rust SDK's message."""


def check_json(doc: bytes) -> str:
    """Check that `doc` is exactly one well-formed JSON value (RFC 8259, whitespace
    around it allowed) and say what it is: `object`, `array`, `string`, `number`,
    `boolean` or `null`. Raises `NotJson` saying what is wrong and at which byte,
    as `sluice_sdk::json::check`: the same answers, messages and positions."""
    kind = _parsed_kind(doc) if len(doc) <= JSON_FAST_CHECK_BYTES_MAX else None
    return kind if kind is not None else walk_json(doc)


def walk_json(doc: bytes) -> str:
    """`check_json` byte by byte, as the Rust SDK, without the parser's fast path."""
    c = _Checker(doc)
    kind = c.document()
    c.ws()
    if c.at != len(doc):
        raise c.error("unexpected data after the value")
    return kind


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _parsed_kind(doc: bytes) -> Optional[str]:
    """The kind of `doc` when the `json` module accepts it and so would the walk, else
    None (the walk decides). The parser is as strict as the walk (same whitespace,
    numbers, escapes; control characters and a leading BOM refused; the text must be
    UTF-8) except for NaN and Infinity, refused here, and nesting, which it bounds only
    by recursion: a document with more than JSON_DEPTH_MAX brackets is left to the walk."""
    if doc.count(b"[") + doc.count(b"{") > JSON_DEPTH_MAX:
        return None
    try:
        value = json.loads(doc.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # bad JSON or UTF-8, or an int too long for str()
        return None
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


_KIND_BY_FIRST = {0x22: "string", 0x7B: "object", 0x5B: "array", 0x74: "boolean",
                  0x66: "boolean", 0x6E: "null"}


def kind_of_raw(value: bytes) -> str:
    """The kind of a value as written (as `Path.find_raw` returns it), told by its
    first byte; the value is not checked (`sluice_sdk::json::Kind::of_raw`)."""
    return _KIND_BY_FIRST.get(value[0], "number") if value else "number"


class _Checker:
    """`check_json`'s cursor: the Rust SDK's `Checker`, with regexes for the runs."""

    _WS = re.compile(rb"[ \t\n\r]*")  # JSON's whitespace: no form feed
    _DIGITS = re.compile(rb"[0-9]*")
    _PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')  # string bytes needing no look
    _HEX = frozenset(b"0123456789abcdefABCDEF")
    _LITERALS = {0x74: (b"true", "boolean"), 0x66: (b"false", "boolean"), 0x6E: (b"null", "null")}

    def __init__(self, doc: bytes):
        self.doc, self.at = doc, 0

    def error(self, what: str) -> NotJson:
        return NotJson(f"not JSON: {what} at byte {self.at}")

    def byte(self) -> Optional[int]:
        return self.doc[self.at] if self.at < len(self.doc) else None

    def ws(self) -> None:
        self.at = self._WS.match(self.doc, self.at).end()

    def peek(self) -> Optional[int]:
        self.ws()
        return self.byte()

    def document(self) -> str:
        """The whole document, iteratively: `stack` holds the open containers
        (True for an object), at most JSON_DEPTH_MAX."""
        stack, top = [], None
        while True:
            # A value is expected here (after `[`, `,`, `:` or at the start).
            first = self.peek()
            if first is None:
                raise self.error("a value is missing")
            if first in (0x7B, 0x5B):
                if len(stack) == JSON_DEPTH_MAX:
                    raise self.error(f"nesting deeper than {JSON_DEPTH_MAX}")
                is_object = first == 0x7B
                self.at += 1
                top = top or ("object" if is_object else "array")
                if self.peek() != (0x7D if is_object else 0x5D):
                    stack.append(is_object)
                    if is_object:
                        self.member_key()
                    continue
                self.at += 1
            else:
                kind = self.scalar()
                top = top or kind
            # After a value: close containers or go on to the next element; the
            # document ends when the last one closes (the loop's `else`).
            while stack:
                is_object = stack[-1]
                after = self.peek()
                if after == 0x2C:
                    self.at += 1
                    if is_object:
                        self.member_key()
                    break
                if after != (0x7D if is_object else 0x5D):
                    raise self.error("expected `,` or the end of the container")
                self.at += 1
                stack.pop()
            else:
                return top

    def member_key(self) -> None:
        if self.peek() != 0x22:
            raise self.error("expected a member name")
        self.string()
        if self.peek() != 0x3A:
            raise self.error("expected `:`")
        self.at += 1

    def scalar(self) -> str:
        first = self.doc[self.at]
        if first == 0x22:
            self.string()
            return "string"
        if first in self._LITERALS:
            word, kind = self._LITERALS[first]
            if not self.doc.startswith(word, self.at):
                raise self.error("unknown literal")
            self.at += len(word)
            return kind
        if first == 0x2D or 0x30 <= first <= 0x39:
            self.number()
            return "number"
        raise self.error("unexpected character")

    def digits(self) -> int:
        start = self.at
        self.at = self._DIGITS.match(self.doc, self.at).end()
        return self.at - start

    def number(self) -> None:
        if self.doc[self.at] == 0x2D:
            self.at += 1
        first = self.byte()
        if first == 0x30:
            self.at += 1
        elif first is not None and 0x31 <= first <= 0x39:
            self.digits()
        else:
            raise self.error("a number needs digits")
        if self.byte() == 0x2E:
            self.at += 1
            if not self.digits():
                raise self.error("a fraction needs digits")
        if self.byte() in (0x65, 0x45):
            self.at += 1
            if self.byte() in (0x2B, 0x2D):
                self.at += 1
            if not self.digits():
                raise self.error("an exponent needs digits")

    def string(self) -> None:
        """A string: escapes checked, control characters refused, UTF-8 checked."""
        self.at += 1
        start = self.at
        while True:
            self.at = self._PLAIN.match(self.doc, self.at).end()
            byte = self.byte()
            if byte is None:
                raise self.error("unterminated string")
            if byte == 0x22:
                break
            if byte != 0x5C:
                raise self.error("a control character in a string")
            self.at += 1
            escaped = self.byte()
            if escaped is not None and escaped in b'"\\/bfnrt':
                self.at += 1
            elif escaped == 0x75:
                hex_digits = self.doc[self.at + 1:self.at + 5]
                if len(hex_digits) != 4 or not all(h in self._HEX for h in hex_digits):
                    raise self.error("bad \\u escape")
                self.at += 5
            else:
                raise self.error("bad escape")
        try:
            self.doc[start:self.at].decode("utf-8")
        except UnicodeDecodeError:
            raise self.error("a string that is not UTF-8") from None
        self.at += 1
