// Unit tests of the action, natively (`node --test`): the WIT's imports are the fakes in fakes/, since
// only componentize-js's build provides them.

import { register } from 'node:module';
import { test } from 'node:test';
import assert from 'node:assert/strict';

register('./fakes/hooks.js', import.meta.url);
const app = await import('./app.js');
const settings = await import('./settings.js');
const { failingWithText } = await import('./unimplemented.js');

test('a hook that throws an Error fails with its text, which the host reports, not a trap', () => {
  const hooks = failingWithText({
    broken() {
      return null.labels;
    },
    refused() {
      throw { payload: { tag: 'forbidden', val: 'not granted' } };
    },
  });
  assert.throws(() => hooks.broken(), (e) => typeof e === 'string' && e.startsWith('TypeError: '));
  assert.throws(() => hooks.refused(), (e) => e === 'forbidden: not granted');
});

__TESTS__
