import assert from 'node:assert/strict';
import { test } from 'node:test';

import { record } from '{{sdk_path}}/js/sluice-sdk.js';
import { partition } from './{{name}}.js';

test('same key, same partition', () => {
  const first = partition(record({ key: 'customer-1' }), 12);
  assert.equal(partition(record({ key: 'customer-1' }), 12), first);
  assert.ok(first >= 0 && first < 12);
});

test('keyless records go to partition 0', () => {
  assert.equal(partition(record({ value: '{}' }), 12), 0);
});
