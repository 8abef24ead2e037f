// Native tests of the JavaScript JSON field partitioner: the shared vectors
// (plugins/testdata/json-field-partitioner.json, also run by the Rust and
// Python plugins).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { InvalidParams, Params, murmur2, record } from '../../sdk/js/sluice-sdk.js';
import { init, partition } from './json-field.js';

const vectors = JSON.parse(readFileSync(new URL('../testdata/json-field-partitioner.json', import.meta.url)));
const bytesOf = (r, name) => (r[`${name}_hex`] !== undefined ? Buffer.from(r[`${name}_hex`], 'hex') : (r[name] ?? null));

for (const c of vectors.cases) {
  test(`vector: ${c.name}`, () => {
    const path = init(new Params(c.params));
    const placed = c.records.map((r) =>
      partition(path, record({ key: bytesOf(r, 'key'), value: bytesOf(r, 'value') }), c.partition_count));
    assert.deepEqual(placed, c.records.map((r) => r.partition));
  });
}

test('murmur2 matches Kafka', () => {
  for (const [key, expected] of vectors.murmur2) assert.equal(murmur2(Buffer.from(key)), expected, key);
});

for (const c of vectors.invalid_params) {
  test(`invalid params: ${c.name}`, () => {
    assert.throws(() => init(new Params(c.params)), (e) => e instanceof InvalidParams && e.message === c.error);
  });
}
