import assert from 'node:assert/strict';
import { test } from 'node:test';

import { record } from '{{sdk_path}}/js/sluice-sdk.js';
import { validate } from './{{name}}.js';

test('refuses records without a key', () => {
  assert.equal(validate(record({ key: 'k', value: 'v' })), undefined);
  assert.equal(validate(record({ value: 'v' })), 'a record needs a key');
});
