// Write Sluice plugins in JavaScript: plain functions, the plumbing hidden.
//
// The JavaScript twin of the Rust crate `sluice-sdk` (sdk/src) and of
// sdk/python/sluice_sdk.py: a plugin is one plain function per kind, testable
// with `node --test`, and an entry module (plugin.js) that hands it to the
// export helper of its kind, which componentize-js builds into a component:
//
//   // my-filter.js                         // plugin.js (the component's entry point)
//   export const keep = (record) =>         import { filterApi as api } from '.../sluice-sdk.js';
//     record.key !== null;                  import { keep } from './my-filter.js';
//                                           export const filterApi = api(keep);
//
//   kind         function                                   export helper
//   partitioner  partition([state,] record, count) -> int   partitionerApi
//   filter       keep([state,] record) -> bool              filterApi
//   transform    transform([state,] record, out)            transformApi
//   validator    validate([state,] record) -> string?       validatorApi
//
// A validator returns nothing (undefined, or null) to accept a record and a
// string, the reason, to refuse it; one refusal refuses the whole batch.
//
// A stateful plugin also passes `init(params) -> state`; its function then gets
// the state first. `init` validates with `params.require` / `params.only` and
// throws `InvalidParams`; a stateless plugin rejects any parameter. Throw
// `Failed` for a batch the plugin cannot process; any other exception becomes
// `failed` with its message (JavaScript cannot trap on purpose).
//
// Helpers with the same results as the Rust SDK, byte for byte: `Path` (find
// one JSON field by scanning, escapes not decoded), `checkJson` (strict JSON,
// with the messages and byte positions of `sluice_sdk::json::check`; from
// sluice-json.js), `murmur2` / `murmur2Partition` (Kafka's Java client), `log`
// (set by the entry module with `setLog`, since only a component can import the
// host). `console.log` / `console.info` (stdout, logged at info) and
// `console.warn` / `console.error` / `console.debug` (stderr, logged at warn)
// go to the broker's log for this plugin too. Keys, values and header parts
// are Uint8Arrays, or null (no key / a tombstone).

export {
  JSON_DEPTH_MAX, JSON_FAST_CHECK_BYTES_MAX, NotJson, checkJson, isUtf8, kindOfRaw, walkJson,
} from './sluice-json.js';

export class PluginError extends Error {}

/** `init` rejected its parameters; the message names the parameter. */
export class InvalidParams extends PluginError {}

/** The plugin could not process the batch. */
export class Failed extends PluginError {}

/** The operator's parameters: string key/value pairs, in order. */
export class Params {
  constructor(pairs = []) {
    this.pairs = Array.isArray(pairs) ? pairs.map(([k, v]) => [k, v]) : Object.entries(pairs);
  }

  get(key) {
    const pair = this.pairs.find(([k]) => k === key);
    return pair === undefined ? null : pair[1];
  }

  require(key) {
    const value = this.get(key);
    if (value === null) throw new InvalidParams(`missing required parameter \`${key}\``);
    return value;
  }

  /** Reject any key not in `known`, so a typo is an error, not ignored. */
  only(known) {
    for (const [k] of this.pairs) {
      if (known.includes(k)) continue;
      throw new InvalidParams(
        known.length === 0
          ? `unknown parameter \`${k}\`: this plugin takes no parameters`
          : `unknown parameter \`${k}\`; known parameters: ${known.join(', ')}`,
      );
    }
  }
}

const encoder = new TextEncoder();

/** Text as UTF-8 bytes; bytes and null as they are. */
export const bytes = (v) => (typeof v === 'string' ? encoder.encode(v) : v);

/** A record for tests: `record({ key: 'k', value: '{"a":1}' })`. */
export function record({ key = null, value = null, headers = [], offset = 0n, timestamp = 0n } = {}) {
  return {
    key: bytes(key),
    value: bytes(value),
    headers: headers.map(([n, v]) => [bytes(n), bytes(v)]),
    offset,
    timestamp,
  };
}

const bit = (bitmap, i) => ((bitmap[i >> 3] >> (i & 7)) & 1) === 1;

/** The records of a columnar `record-batch` (see wit/sluice-plugin.wit). */
export function* records(batch) {
  let keyStart = 0;
  let valueStart = 0;
  let header = 0;
  const e = batch.headerEnds;
  for (let i = 0; i < batch.offsets.length; i++) {
    const keyEnd = batch.keyEnds[i];
    const valueEnd = batch.valueEnds[i];
    const headers = [];
    for (let h = 0; h < batch.headerCounts[i]; h++, header++) {
      const nameStart = header === 0 ? 0 : e[2 * header - 1];
      headers.push([
        batch.headerBytes.subarray(nameStart, e[2 * header]),
        batch.headerBytes.subarray(e[2 * header], e[2 * header + 1]),
      ]);
    }
    yield {
      key: bit(batch.keyNulls, i) ? null : batch.keyBytes.subarray(keyStart, keyEnd),
      value: bit(batch.valueNulls, i) ? null : batch.valueBytes.subarray(valueStart, valueEnd),
      headers,
      offset: batch.offsets[i],
      timestamp: batch.timestamps[i],
    };
    keyStart = keyEnd;
    valueStart = valueEnd;
  }
}

/** What a transform writes its output records to, as columns. */
export class Output {
  constructor() {
    this.source = 0; // index of the input record being transformed
    this.rows = [];
  }

  /** Emit the input record unchanged. */
  keep(rec) {
    this.push(rec.key, rec.value, rec.headers, rec.timestamp);
  }

  /** Emit a record made from the current input record. */
  push(key, value, headers = [], timestamp = 0n) {
    this.rows.push({
      key: bytes(key),
      value: bytes(value),
      headers: headers.map(([n, v]) => [bytes(n), bytes(v)]),
      offset: BigInt(this.source),
      timestamp: BigInt(timestamp),
    });
  }

  /** The WIT `record-batch` of the records emitted. */
  batch() {
    const col = (part) => {
      const parts = this.rows.map(part);
      const ends = [];
      const nulls = new Uint8Array((parts.length + 7) >> 3);
      let end = 0;
      parts.forEach((p, i) => {
        if (p === null) nulls[i >> 3] |= 1 << (i & 7);
        else end += p.length;
        ends.push(end);
      });
      return [concat(parts.filter((p) => p !== null)), new Uint32Array(ends), nulls];
    };
    const [keyBytes, keyEnds, keyNulls] = col((r) => r.key);
    const [valueBytes, valueEnds, valueNulls] = col((r) => r.value);
    const flat = this.rows.flatMap((r) => r.headers.flat());
    const headerEnds = [];
    flat.reduce((end, p) => (headerEnds.push(end + p.length), end + p.length), 0);
    return {
      offsets: new BigInt64Array(this.rows.map((r) => r.offset)),
      timestamps: new BigInt64Array(this.rows.map((r) => r.timestamp)),
      keyBytes, keyEnds, keyNulls, valueBytes, valueEnds, valueNulls,
      headerCounts: new Uint32Array(this.rows.map((r) => r.headers.length)),
      headerBytes: concat(flat),
      headerEnds: new Uint32Array(headerEnds),
    };
  }
}

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => (out.set(p, at), at + p.length), 0);
  return out;
}

// Rust's `u8::is_ascii_whitespace` (space, \t, \n, form feed, \r), and the
// bytes that end a literal (`,}]` and space, \t, \r, \n: no form feed).
const WS = new Set([0x20, 0x09, 0x0a, 0x0c, 0x0d]);
const LITERAL_END = new Set([0x2c, 0x7d, 0x5d, 0x20, 0x09, 0x0d, 0x0a]);
const QUOTE = 0x22;
const NULL = encoder.encode('null');

/**
 * A JSON path, `$.a.b` or `a.b` (object members only), found by scanning.
 *
 * `find` returns the field's bytes as written: a string's contents without its
 * quotes (escapes not decoded), other values as their literal text (`42`,
 * `true`, `{...}`); null when the document is not an object along the path,
 * the field is missing, or it is `null` (a string whose contents read `null`
 * too, as in the Rust SDK). The rest of the document is not parsed.
 */
export class Path {
  constructor(path) {
    const rest = path.startsWith('$.') ? path.slice(2) : path.startsWith('$') ? path.slice(1) : path;
    if (rest === '') throw new Error(`path \`${path}\` names no field; expected e.g. \`$.customer_id\``);
    this.segments = rest.split('.').map((s) => encoder.encode(s));
    if (this.segments.some((s) => s.length === 0)) throw new Error(`path \`${path}\` has an empty segment`);
  }

  find(doc) {
    const s = new Scanner(doc);
    for (const segment of this.segments) if (!s.enterMember(segment)) return null;
    const value = s.value();
    return value === null || equal(value, NULL) ? null : value;
  }

  /**
   * The field's value as written (a string with its quotes, so `kindOfRaw` can
   * tell it), or null when missing or `null`, as `find`.
   */
  findRaw(doc) {
    const s = new Scanner(doc);
    for (const segment of this.segments) if (!s.enterMember(segment)) return null;
    s.skipWs();
    const start = s.at;
    if (s.value() === null) return null;
    const value = doc.subarray(start, s.at);
    return equal(value, NULL) ? null : value;
  }
}

const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/** A cursor over a JSON document, as `sluice_sdk::json::Scanner`. */
class Scanner {
  constructor(doc) {
    this.doc = doc;
    this.at = 0;
    // Where the next of each byte looked for is, by byte (-1: not looked for yet),
    // found with the native indexOf: the scanner only moves forward, so each byte
    // costs one pass over the document, not one per token.
    this.next = new Int32Array(128).fill(-1);
  }

  /** The position of the next `byte` (ASCII) at or after `from`, or the document's length. */
  nextOf(byte, from) {
    let at = this.next[byte];
    if (at < from) {
      at = this.doc.indexOf(byte, from);
      if (at < 0) at = this.doc.length;
      this.next[byte] = at;
    }
    return at;
  }

  skipWs() {
    while (this.at < this.doc.length && WS.has(this.doc[this.at])) this.at++;
  }

  eat(byte) {
    this.skipWs();
    if (this.doc[this.at] !== byte) return false;
    this.at++;
    return true;
  }

  /** Position at the value of member `name` of the object that starts here. */
  enterMember(name) {
    if (!this.eat(0x7b)) return false;
    for (;;) {
      this.skipWs();
      if (this.doc[this.at] === 0x7d) return false;
      const key = this.string();
      if (key === null || !this.eat(0x3a)) return false;
      if (equal(key, name)) return true;
      if (this.value() === null) return false;
      this.skipWs();
      if (this.doc[this.at] !== 0x2c) return false;
      this.at++;
    }
  }

  /** The next `{`, `[`, `}` or `]` at or after `from`, or the document's length. */
  nextBracket(from) {
    return Math.min(this.nextOf(0x7b, from), this.nextOf(0x5b, from), this.nextOf(0x7d, from),
      this.nextOf(0x5d, from));
  }

  /** Where the string whose contents start at `from` ends (after its quote), or -1. */
  stringEnd(from) {
    for (let at = from; ;) {
      const quote = this.nextOf(QUOTE, at);
      if (quote >= this.doc.length) return -1;
      const backslash = this.nextOf(0x5c, at);
      if (quote < backslash) return quote + 1;
      at = backslash + 2; // a backslash skips the byte after it, whatever it is
    }
  }

  /** A string's raw contents; the scanner ends after the closing quote. */
  string() {
    if (!this.eat(QUOTE)) return null;
    const start = this.at;
    const end = this.stringEnd(start);
    if (end < 0) return null;
    this.at = end;
    return this.doc.subarray(start, end - 1);
  }

  /** Any value: a string's contents, or the literal text of the rest. */
  value() {
    this.skipWs();
    const start = this.at;
    const first = this.doc[this.at];
    if (first === undefined) return null;
    if (first === QUOTE) return this.string();
    if (first === 0x7b || first === 0x5b) {
      // From bracket to bracket, skipping the strings in between whole.
      let depth = 0;
      let bracket = -1;
      for (let at = start; ;) {
        if (bracket < at) bracket = this.nextBracket(at);
        const quote = this.nextOf(QUOTE, at);
        if (quote < bracket) {
          at = this.stringEnd(quote + 1);
          if (at < 0) return null;
          continue;
        }
        if (bracket >= this.doc.length) return null;
        at = bracket + 1;
        if (this.doc[bracket] === 0x7b || this.doc[bracket] === 0x5b) depth++;
        else if (--depth === 0) {
          this.at = at;
          return this.doc.subarray(start, at);
        }
      }
    }
    while (this.at < this.doc.length && !LITERAL_END.has(this.doc[this.at])) this.at++;
    return this.at > start ? this.doc.subarray(start, this.at) : null;
  }
}

/** Kafka's `Utils.murmur2` (the Java client's key hash), as a signed 32-bit int. */
export function murmur2(data) {
  const m = 0x5bd1e995;
  let h = (0x9747b28c ^ data.length) | 0;
  const whole = data.length - (data.length % 4);
  for (let i = 0; i < whole; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  const tail = data.length - whole;
  if (tail > 0) {
    for (let i = tail - 1; i >= 0; i--) h ^= data[whole + i] << (8 * i);
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/** Kafka's `Utils.toPositive`: clears the sign bit (not `abs`). */
export const toPositive = (n) => n & 0x7fffffff;

/** `toPositive(murmur2(key)) % partitionCount`, the Java client's choice. */
export const murmur2Partition = (key, partitionCount) => toPositive(murmur2(key)) % partitionCount;

const LEVELS = ['debug', 'info', 'warn', 'error'];
let hostLog = (level, message) => console.error(`[plugin ${level}] ${message}`);

/** Write to the broker's log for this plugin (natively: to stderr). */
export const log = (level, message) => hostLog(level, message);

/** Called by the entry module with the host's `log` import. */
export function setLog(host) {
  hostLog = (level, message) => host(LEVELS.includes(level) ? level : 'info', String(message));
}

// --- Exports: the objects componentize-js exports (one per kind). ---

/** Runs `body`; a thrown error becomes the WIT `plugin-error`. */
function reported(body) {
  try {
    return body();
  } catch (e) {
    const tag = e instanceof InvalidParams ? 'invalid-params' : 'failed';
    throw { tag, val: e instanceof PluginError ? e.message : `${e?.name ?? 'error'}: ${e?.message ?? e}` };
  }
}

function exported(init, fn) {
  let state = null;
  const call = init ? fn : (_state, ...args) => fn(...args);
  return {
    init(params) {
      reported(() => {
        const given = new Params(params.map(({ key, value }) => [key, value]));
        if (init) state = init(given);
        else given.only([]);
      });
    },
    call: (...args) => call(state, ...args),
  };
}

/** The `partitionerApi` export: one partition per record. */
export function partitionerApi(partition, init = null) {
  const e = exported(init, partition);
  return {
    init: e.init,
    partition: (batch, count) => reported(() => Uint32Array.from(records(batch), (r) => e.call(r, count))),
  };
}

/** The `filterApi` export: a keep bitmap, bit i set keeps record i. */
export function filterApi(keep, init = null) {
  const e = exported(init, keep);
  return {
    init: e.init,
    filter: (batch) =>
      reported(() => {
        const bitmap = new Uint8Array((batch.offsets.length + 7) >> 3);
        let i = 0;
        for (const r of records(batch)) {
          if (e.call(r)) bitmap[i >> 3] |= 1 << (i & 7);
          i++;
        }
        return bitmap;
      }),
  };
}

/**
 * A validator's answer for one record: null accepts (undefined too), a string
 * (the reason) refuses. Anything else is a bug in the plugin (a filter's
 * true/false, say) and throws a TypeError, which fails the call.
 */
export function refusal(reason) {
  if (reason === undefined || reason === null) return null;
  if (typeof reason === 'string') return reason;
  throw new TypeError(
    `a validator returns nothing to accept a record or a reason string to refuse it, not ${typeof reason} ${String(reason)}`,
  );
}

/** The `validatorApi` export: the refused records, in order, each with its reason. */
export function validatorApi(validate, init = null) {
  const e = exported(init, validate);
  return {
    init: e.init,
    validate: (batch) =>
      reported(() => {
        const rejections = [];
        let index = 0;
        for (const r of records(batch)) {
          const reason = refusal(e.call(r));
          if (reason !== null) rejections.push({ index, reason });
          index++;
        }
        return rejections;
      }),
  };
}

/** The `transformApi` export: the records `transform` emitted, as a batch. */
export function transformApi(transform, init = null) {
  const e = exported(init, transform);
  return {
    init: e.init,
    transform: (batch) =>
      reported(() => {
        const out = new Output();
        let i = 0;
        for (const r of records(batch)) {
          out.source = i++;
          e.call(r, out);
        }
        return out.batch();
      }),
  };
}
