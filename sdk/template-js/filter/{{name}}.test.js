import assert from 'node:assert/strict';
import { test } from 'node:test';

import { record } from '{{sdk_path}}/js/sluice-sdk.js';
import { keep } from './{{name}}.js';

test('keeps keyed records only', () => {
  assert.equal(keep(record({ key: 'k', value: 'v' })), true);
  assert.equal(keep(record({ value: 'v' })), false);
});
