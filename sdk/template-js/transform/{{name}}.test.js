import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Output, record } from '{{sdk_path}}/js/sluice-sdk.js';
import { transform } from './{{name}}.js';

test('passes records through', () => {
  const out = new Output();
  transform(record({ key: 'k', value: 'v', headers: [['h', '1']], timestamp: 7n }), out);
  const batch = out.batch();
  assert.deepEqual([...batch.offsets], [0n]);
  assert.deepEqual([...batch.timestamps], [7n]);
  assert.deepEqual(Buffer.from(batch.valueBytes).toString(), 'v');
  assert.deepEqual(Buffer.from(batch.headerBytes).toString(), 'h1');
});
