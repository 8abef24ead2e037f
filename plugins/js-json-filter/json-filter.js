// Keep records whose JSON value has a field that compares true.
//
// The JavaScript twin of plugins/json-filter (same parameters, same answers on
// plugins/testdata/json-filter.json): the view `$.region == "eu"` is
// `field=$.region, op===, value="eu"`.
//
// - `field` (required): a path such as `$.region` or `$.order.total`;
// - `op` (required): one of `==`, `!=`, `<`, `<=`, `>`, `>=`;
// - `value` (required): a number (`10`, `-2.5`) compares numerically with a
//   field that reads as one (`12`, or a string `"12"`); anything else is text:
//   `"eu"` (quotes stripped) or a bare `eu`, compared byte-wise with the
//   field's bytes as written (a string's contents, escapes not decoded).
//
// A record whose value is missing, not JSON, lacks the field, or holds `null`
// there is dropped, whatever the operator (as SQL's `NULL`).

import { InvalidParams, Path } from '../../sdk/js/sluice-sdk.js';

// Each op holds for an ordering: -1, 0 or 1 (`field` against `value`).
const OPS = {
  '==': (o) => o === 0,
  '!=': (o) => o !== 0,
  '<': (o) => o < 0,
  '<=': (o) => o <= 0,
  '>': (o) => o > 0,
  '>=': (o) => o >= 0,
};

// Rust's `str::parse::<f64>` grammar, which the Rust plugin uses: Number()
// alone would also take spaces, `0x10`, the empty string and `Infinity` only.
const NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const SPECIAL = /^([+-]?)(inf|infinity|nan)$/i;

/** The number `text` reads as, the Rust way, or null. */
export function parseNumber(text) {
  if (NUMBER.test(text)) return Number(text);
  const special = SPECIAL.exec(text);
  if (special === null) return null;
  if (special[2].toLowerCase() === 'nan') return NaN;
  return special[1] === '-' ? -Infinity : Infinity;
}

const decoder = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return Math.sign(a.length - b.length);
}

/** `field op value`, built once per instance from the parameters. */
export function init(params) {
  params.only(['field', 'op', 'value']);
  const field = params.require('field');
  let path;
  try {
    path = new Path(field);
  } catch (e) {
    throw new InvalidParams(`parameter \`field\`: ${e.message}`);
  }
  const op = params.require('op');
  if (!Object.hasOwn(OPS, op)) {
    throw new InvalidParams(`parameter \`op\` = \`${op}\` is not one of ==, !=, <, <=, >, >=`);
  }
  const value = params.require('value');
  const quoted = value.length >= 2 && value.startsWith('"') && value.endsWith('"');
  const number = quoted ? null : parseNumber(value);
  // A number only when finite: `inf` or `1e999` as a value is text.
  const operand = number !== null && Number.isFinite(number)
    ? number
    : encoder.encode(quoted ? value.slice(1, -1) : value);
  return { path, holds: OPS[op], operand };
}

/** How `field` compares with the operand: -1, 0, 1, or null when it cannot. */
function compare(operand, field) {
  if (typeof operand !== 'number') return compareBytes(field, operand);
  let text;
  try {
    text = decoder.decode(field);
  } catch {
    return null; // not UTF-8, so not a number
  }
  const number = parseNumber(text);
  if (number === null || Number.isNaN(number)) return null;
  return number < operand ? -1 : number > operand ? 1 : 0;
}

export function keep(predicate, record) {
  const field = record.value === null ? null : predicate.path.find(record.value);
  if (field === null) return false;
  const ordering = compare(predicate.operand, field);
  return ordering !== null && predicate.holds(ordering);
}
