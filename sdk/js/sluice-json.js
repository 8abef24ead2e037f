// Strict JSON well-formedness for Sluice plugins in JavaScript (re-exported by
// sluice-sdk.js).
//
// The JavaScript twin of `sluice_sdk::json::check` (sdk/src/json/check.rs) and
// of sdk/python/sluice_json.py: `checkJson` says whether a document (a
// Uint8Array) is exactly one well-formed JSON value (RFC 8259) and what its
// top-level value is, or throws `NotJson` with the Rust SDK's message, byte
// position included. `walkJson` is the byte-by-byte walk that gives those
// messages; `checkJson` asks JSON.parse first, which is much faster on the
// documents it accepts, and walks only the others (and the large ones).

const QUOTE = 0x22;
const encoder = new TextEncoder();

/** Deepest nesting of arrays and objects `checkJson` accepts (the Rust SDK's `DEPTH_MAX`). */
export const JSON_DEPTH_MAX = 128;

/** `checkJson`'s refusal: `not JSON: <what> at byte <n>`, the Rust SDK's message. */
export class NotJson extends Error {}

/**
 * Documents up to this size are first given to the engine's JSON.parse, which
 * accepts a document several times faster than the walk of `Checker` but builds
 * the parsed value (several times the document's size, in a 64 MiB sandbox);
 * larger documents, and any the parser refuses (for the walk's message), are
 * only walked, which allocates nothing.
 */
export const JSON_FAST_CHECK_BYTES_MAX = 64 * 1024;

/**
 * Check that `doc` (a Uint8Array) is exactly one well-formed JSON value (RFC
 * 8259, whitespace around it allowed) and say what it is: `object`, `array`,
 * `string`, `number`, `boolean` or `null`. Throws `NotJson` saying what is wrong
 * and at which byte, as `sluice_sdk::json::check`: the same answers, messages
 * and positions.
 */
export function checkJson(doc) {
  const kind = doc.length <= JSON_FAST_CHECK_BYTES_MAX ? parsedKind(doc) : null;
  return kind ?? walkJson(doc);
}

/** `checkJson` byte by byte, as the Rust SDK, without the parser's fast path. */
export function walkJson(doc) {
  const c = new Checker(doc);
  const kind = c.document();
  c.ws();
  if (c.at !== doc.length) throw c.error('unexpected data after the value');
  return kind;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The kind of `doc` when JSON.parse accepts it and so would the walk, else null
 * (the walk decides). JSON.parse is as strict as the walk (same whitespace,
 * numbers, escapes; no NaN; control characters refused; the text must be UTF-8)
 * but for nesting, which it does not bound: a document with more than
 * JSON_DEPTH_MAX brackets is left to the walk. So is one starting with EF (a
 * byte-order mark, refused by the walk), which a decoder may drop.
 */
function parsedKind(doc) {
  if (doc[0] === 0xef || brackets(doc) > JSON_DEPTH_MAX) return null;
  let value;
  try {
    value = JSON.parse(UTF8.decode(doc));
  } catch {
    return null;
  }
  if (value === null) return 'null';
  return Array.isArray(value) ? 'array' : typeof value; // object, string, number, boolean
}

/** How many `[` and `{` `doc` holds, counted up to one past JSON_DEPTH_MAX. */
function brackets(doc) {
  let n = 0;
  for (const b of [0x5b, 0x7b]) {
    for (let at = doc.indexOf(b); at >= 0 && n <= JSON_DEPTH_MAX; at = doc.indexOf(b, at + 1)) n++;
  }
  return n;
}

const KIND_BY_FIRST = new Map([
  [QUOTE, 'string'], [0x7b, 'object'], [0x5b, 'array'], [0x74, 'boolean'], [0x66, 'boolean'], [0x6e, 'null'],
]);

/**
 * The kind of a value as written (as `Path.findRaw` returns it), told by its
 * first byte; the value is not checked (`sluice_sdk::json::Kind::of_raw`).
 */
export const kindOfRaw = (value) => KIND_BY_FIRST.get(value[0]) ?? 'number';

const JSON_WS = new Set([0x20, 0x09, 0x0a, 0x0d]); // JSON's whitespace: no form feed
const ESCAPES = new Set([QUOTE, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74]); // " \ / b f n r t
const LITERALS = new Map([
  [0x74, [encoder.encode('true'), 'boolean']],
  [0x66, [encoder.encode('false'), 'boolean']],
  [0x6e, [encoder.encode('null'), 'null']],
]);
const isDigit = (b) => b >= 0x30 && b <= 0x39;
const isHex = (b) => isDigit(b) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);

/** `checkJson`'s cursor: the Rust SDK's `Checker`. */
class Checker {
  constructor(doc) {
    this.doc = doc;
    this.at = 0;
  }

  error(what) {
    return new NotJson(`not JSON: ${what} at byte ${this.at}`);
  }

  ws() {
    while (JSON_WS.has(this.doc[this.at])) this.at++;
  }

  /** The next byte after whitespace, or undefined at the end. */
  peek() {
    this.ws();
    return this.doc[this.at];
  }

  /** The whole document, iteratively: `stack` holds the open containers (true: an object). */
  document() {
    const stack = [];
    let top = null;
    for (;;) {
      // A value is expected here (after `[`, `,`, `:` or at the start).
      const first = this.peek();
      if (first === undefined) throw this.error('a value is missing');
      if (first === 0x7b || first === 0x5b) {
        if (stack.length === JSON_DEPTH_MAX) throw this.error(`nesting deeper than ${JSON_DEPTH_MAX}`);
        const object = first === 0x7b;
        this.at++;
        top ??= object ? 'object' : 'array';
        if (this.peek() !== (object ? 0x7d : 0x5d)) {
          stack.push(object);
          if (object) this.memberKey();
          continue;
        }
        this.at++;
      } else {
        const kind = this.scalar();
        top ??= kind;
      }
      // After a value: close containers or go on to the next element.
      if (this.close(stack)) return top;
    }
  }

  /** Closes what can be closed; true when the document's value is complete. */
  close(stack) {
    while (stack.length > 0) {
      const object = stack[stack.length - 1];
      const after = this.peek();
      if (after === 0x2c) {
        this.at++;
        if (object) this.memberKey();
        return false;
      }
      if (after !== (object ? 0x7d : 0x5d)) throw this.error('expected `,` or the end of the container');
      this.at++;
      stack.pop();
    }
    return true;
  }

  /** `"key":` of an object member. */
  memberKey() {
    if (this.peek() !== QUOTE) throw this.error('expected a member name');
    this.string();
    if (this.peek() !== 0x3a) throw this.error('expected `:`');
    this.at++;
  }

  scalar() {
    const first = this.doc[this.at];
    if (first === QUOTE) {
      this.string();
      return 'string';
    }
    const literal = LITERALS.get(first);
    if (literal !== undefined) {
      const [word, kind] = literal;
      if (!word.every((b, i) => this.doc[this.at + i] === b)) throw this.error('unknown literal');
      this.at += word.length;
      return kind;
    }
    if (first === 0x2d || isDigit(first)) {
      this.number();
      return 'number';
    }
    throw this.error('unexpected character');
  }

  digits() {
    const start = this.at;
    while (isDigit(this.doc[this.at])) this.at++;
    return this.at - start;
  }

  number() {
    if (this.doc[this.at] === 0x2d) this.at++;
    const first = this.doc[this.at];
    if (first === 0x30) this.at++;
    else if (first >= 0x31 && first <= 0x39) this.digits();
    else throw this.error('a number needs digits');
    if (this.doc[this.at] === 0x2e) {
      this.at++;
      if (this.digits() === 0) throw this.error('a fraction needs digits');
    }
    if (this.doc[this.at] === 0x65 || this.doc[this.at] === 0x45) {
      this.at++;
      if (this.doc[this.at] === 0x2b || this.doc[this.at] === 0x2d) this.at++;
      if (this.digits() === 0) throw this.error('an exponent needs digits');
    }
  }

  /** A string: escapes checked, control characters refused, UTF-8 checked. */
  string() {
    this.at++;
    const start = this.at;
    for (;;) {
      const byte = this.doc[this.at];
      if (byte === undefined) throw this.error('unterminated string');
      if (byte === QUOTE) break;
      if (byte === 0x5c) {
        this.at++;
        const escaped = this.doc[this.at];
        if (ESCAPES.has(escaped)) {
          this.at++;
        } else if (escaped === 0x75) {
          for (let i = 1; i <= 4; i++) {
            if (!isHex(this.doc[this.at + i])) throw this.error('bad \\u escape');
          }
          this.at += 5;
        } else {
          throw this.error('bad escape');
        }
      } else if (byte < 0x20) {
        throw this.error('a control character in a string');
      } else {
        this.at++;
      }
    }
    if (!isUtf8(this.doc, start, this.at)) throw this.error('a string that is not UTF-8');
    this.at++;
  }
}

/**
 * Whether `bytes[start..end]` is UTF-8 as Rust's `str::from_utf8` has it: no
 * overlong forms, no surrogates, nothing past U+10FFFF, nothing cut short.
 */
export function isUtf8(bytes, start = 0, end = bytes.length) {
  let i = start;
  while (i < end) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    const more = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : 0;
    if (more === 0 || i + more >= end) return false;
    // The second byte's range is narrower after E0 (overlong), ED (surrogates),
    // F0 (overlong) and F4 (past U+10FFFF).
    const low = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const high = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    if (bytes[i + 1] < low || bytes[i + 1] > high) return false;
    for (let k = 2; k <= more; k++) if ((bytes[i + k] & 0xc0) !== 0x80) return false;
    i += more + 1;
  }
  return true;
}
