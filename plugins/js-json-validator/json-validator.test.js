// Native tests of the JavaScript JSON validator: the shared vectors
// (plugins/testdata/json-validator.json, also run by the Rust and Python
// plugins), then the export object on a columnar batch as the host sends it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import {
  InvalidParams, JSON_FAST_CHECK_BYTES_MAX, NotJson, Params, checkJson, record, refusal, validatorApi, walkJson,
} from '../../sdk/js/sluice-sdk.js';
import { init, validate } from './json-validator.js';

const vectors = JSON.parse(readFileSync(new URL('../testdata/json-validator.json', import.meta.url)));
const valueOf = (r) => (r.value_hex !== undefined ? Buffer.from(r.value_hex, 'hex') : r.value);

for (const c of vectors.cases) {
  test(`vector: ${c.name}`, () => {
    const schema = init(new Params(c.params));
    const reasons = c.records.map((r) => validate(schema, record({ value: valueOf(r) })) ?? null);
    assert.deepEqual(reasons, c.records.map((r) => r.reason));
  });
}

for (const c of vectors.invalid_params) {
  test(`invalid params: ${c.name}`, () => {
    assert.throws(() => init(new Params(c.params)), (e) => e instanceof InvalidParams && e.message === c.error);
  });
}

const answer = (check, doc) => {
  try {
    return check(doc);
  } catch (e) {
    if (e instanceof NotJson) return e.message;
    throw e;
  }
};

test('the walk alone gives the same answers as the parser first', () => {
  // checkJson accepts through JSON.parse when it can; documents over
  // JSON_FAST_CHECK_BYTES_MAX are only walked, so the walk must accept them too.
  for (const c of vectors.cases) {
    for (const r of c.records) {
      const doc = record({ value: valueOf(r) }).value;
      if (doc !== null) assert.equal(answer(walkJson, doc), answer(checkJson, doc), c.name);
    }
  }
});

test('documents over the fast check size are walked', () => {
  const items = Array.from({ length: 4000 }, (_, i) => `{"n": ${i}, "s": "caf\\u00e9"}`).join(',');
  const doc = Buffer.from(`{"items": [${items}]}`);
  assert.ok(doc.length > JSON_FAST_CHECK_BYTES_MAX);
  const schema = init(new Params({ types: '$.items:array' }));
  assert.equal(validate(schema, record({ value: doc })), undefined);
  assert.equal(
    validate(schema, record({ value: doc.subarray(0, -1) })),
    `not JSON: expected \`,\` or the end of the container at byte ${doc.length - 1}`,
  );
});

test('the export answers a columnar batch with the refused records, in order', () => {
  const api = validatorApi(validate, init);
  api.init([{ key: 'required', value: '$.id' }]);
  const values = ['{"id":1}', '{"no":1}', '[1]', '{"id":2}'].map((v) => Buffer.from(v));
  let end = 0;
  const batch = {
    offsets: new BigInt64Array([0n, 1n, 2n, 3n, 4n]),
    timestamps: new BigInt64Array(5),
    keyBytes: new Uint8Array(), keyEnds: new Uint32Array(5), keyNulls: new Uint8Array([0b11111]),
    valueBytes: new Uint8Array(Buffer.concat(values)),
    valueEnds: new Uint32Array([...values.map((v) => (end += v.length)), end]),
    valueNulls: new Uint8Array([0b10000]),
    headerCounts: new Uint32Array(5), headerBytes: new Uint8Array(), headerEnds: new Uint32Array(),
  };
  assert.deepEqual(api.validate(batch), [
    { index: 1, reason: 'required field $.id is missing or null' },
    { index: 2, reason: 'the value is a JSON array, not an object' },
    { index: 4, reason: 'a record with no value (tombstone) is refused (tombstones=allow takes them)' },
  ]);
  assert.throws(() => api.init([{ key: 'root', value: 'list' }]), {
    tag: 'invalid-params',
    val: 'parameter `root` = `list` is not `object` or `any`',
  });
});

test('a validator answers nothing or a reason', () => {
  assert.equal(refusal(undefined), null);
  assert.equal(refusal(null), null);
  assert.equal(refusal(''), ''); // an empty reason still refuses, as Err(String::new()) in Rust
  for (const wrong of [true, false, 0, {}]) assert.throws(() => refusal(wrong), TypeError);
  const api = validatorApi(() => true);
  assert.throws(() => api.validate({ offsets: [0n], keyEnds: [0], valueEnds: [0], keyNulls: [1], valueNulls: [1], headerCounts: [0] }), {
    tag: 'failed',
  });
});
