// Native tests of the JavaScript JSON filter: the shared vectors
// (plugins/testdata/json-filter.json, also run by the Rust and Python plugins),
// then the export object on a columnar batch as the host sends it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { InvalidParams, Params, record } from '../../sdk/js/sluice-sdk.js';
import { filterApi } from '../../sdk/js/sluice-sdk.js';
import { init, keep } from './json-filter.js';

const vectors = JSON.parse(readFileSync(new URL('../testdata/json-filter.json', import.meta.url)));
const valueOf = (r) => (r.value_hex !== undefined ? Buffer.from(r.value_hex, 'hex') : r.value);

for (const c of vectors.cases) {
  test(`vector: ${c.name}`, () => {
    const predicate = init(new Params(c.params));
    const kept = c.records.map((r) => keep(predicate, record({ value: valueOf(r) })));
    assert.deepEqual(kept, c.records.map((r) => r.keep));
  });
}

for (const c of vectors.invalid_params) {
  test(`invalid params: ${c.name}`, () => {
    assert.throws(() => init(new Params(c.params)), (e) => e instanceof InvalidParams && e.message === c.error);
  });
}

test('the export answers a columnar batch with a keep bitmap', () => {
  const api = filterApi(keep, init);
  api.init([{ key: 'field', value: '$.region' }, { key: 'op', value: '==' }, { key: 'value', value: 'eu' }]);
  const values = ['{"region":"eu"}', '{"region":"us"}', '{"region":"eu"}'].map((v) => Buffer.from(v));
  const batch = {
    offsets: new BigInt64Array([0n, 1n, 2n, 3n]),
    timestamps: new BigInt64Array(4),
    keyBytes: new Uint8Array(), keyEnds: new Uint32Array(4), keyNulls: new Uint8Array([0b1111]),
    valueBytes: new Uint8Array(Buffer.concat(values)),
    valueEnds: new Uint32Array([15, 30, 45, 45]),
    valueNulls: new Uint8Array([0b1000]),
    headerCounts: new Uint32Array(4), headerBytes: new Uint8Array(), headerEnds: new Uint32Array(),
  };
  assert.deepEqual(api.filter(batch), new Uint8Array([0b0101]));
  assert.throws(() => api.init([{ key: 'op', value: '==' }]), { tag: 'invalid-params', val: 'missing required parameter `field`' });
});
