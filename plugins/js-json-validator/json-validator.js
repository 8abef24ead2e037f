// Refuse produced records whose value is not the JSON the topic expects.
//
// The JavaScript twin of plugins/json-validator (same parameters, same reasons on
// plugins/testdata/json-validator.json). Parameters, all optional:
//
// - `root`: `object` (the default) refuses any value that is not a JSON object;
//   `any` accepts any well-formed JSON value.
// - `required`: comma-separated paths that must be present and not `null`,
//   e.g. `$.id,$.customer.name`.
// - `types`: comma-separated `path:type` pairs, the type one of `string`,
//   `number`, `boolean`, `object`, `array`, e.g. `$.id:number,$.tags:array`; a
//   field that is present must have it (pair it with `required` to insist on
//   presence too).
// - `tombstones`: `refuse` (the default) or `allow` records with no value.
//
// With no parameters it refuses anything that is not a well-formed JSON object
// (strict: `checkJson`, with the Rust SDK's messages and byte positions).

import { InvalidParams, NotJson, Path, checkJson, kindOfRaw } from '../../sdk/js/sluice-sdk.js';

const KINDS = ['string', 'number', 'boolean', 'object', 'array'];

// Rust's `str::trim` strips Unicode White_Space, which `String.prototype.trim`
// does not quite: JavaScript's also takes U+FEFF and leaves U+0085. The list
// values are trimmed the Rust way.
const RUST_WHITESPACE = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const TRIM = new RegExp(`^[${RUST_WHITESPACE}]+|[${RUST_WHITESPACE}]+$`, 'gu');
export const trim = (text) => text.replace(TRIM, '');

/** A comma-separated list: entries trimmed, empty ones dropped. */
const items = (value) => (value ?? '').split(',').map(trim).filter((s) => s !== '');

function path(param, text) {
  try {
    return new Path(text);
  } catch (e) {
    throw new InvalidParams(`parameter \`${param}\`: ${e.message}`);
  }
}

/** Whether the parameter is the second of its two `options`. */
function choice(params, key, fallback, [first, second]) {
  const value = params.get(key) ?? fallback;
  if (value !== first && value !== second) {
    throw new InvalidParams(`parameter \`${key}\` = \`${value}\` is not \`${first}\` or \`${second}\``);
  }
  return value === second;
}

function typed(pair) {
  const colon = pair.lastIndexOf(':');
  if (colon < 0) throw new InvalidParams(`parameter \`types\`: \`${pair}\` is not \`path:type\``);
  const [p, t] = [pair.slice(0, colon), pair.slice(colon + 1)];
  if (!KINDS.includes(trim(t))) {
    throw new InvalidParams(`parameter \`types\`: \`${t}\` is not one of ${KINDS.join(', ')}`);
  }
  return { name: trim(p), path: path('types', trim(p)), want: trim(t) };
}

/** The schema, built once per instance from the parameters. */
export function init(params) {
  params.only(['root', 'required', 'types', 'tombstones']);
  const objectOnly = !choice(params, 'root', 'object', ['object', 'any']);
  const allowTombstones = choice(params, 'tombstones', 'refuse', ['refuse', 'allow']);
  const required = items(params.get('required')).map((p) => ({ name: p, path: path('required', p) }));
  const types = items(params.get('types')).map(typed);
  return { objectOnly, allowTombstones, required, types };
}

/** Nothing accepts the record; a reason refuses it. */
export function validate(schema, record) {
  const value = record.value;
  if (value === null) {
    if (schema.allowTombstones) return undefined;
    return 'a record with no value (tombstone) is refused (tombstones=allow takes them)';
  }
  let kind;
  try {
    kind = checkJson(value);
  } catch (e) {
    if (e instanceof NotJson) return e.message;
    throw e;
  }
  if (schema.objectOnly && kind !== 'object') return `the value is a JSON ${kind}, not an object`;
  for (const { name, path: p } of schema.required) {
    if (p.findRaw(value) === null) return `required field ${name} is missing or null`;
  }
  for (const { name, path: p, want } of schema.types) {
    const found = p.findRaw(value);
    if (found !== null && kindOfRaw(found) !== want) {
      return `field ${name} is of type ${kindOfRaw(found)}, expected ${want}`;
    }
  }
  return undefined;
}
