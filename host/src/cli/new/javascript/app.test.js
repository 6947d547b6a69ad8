// Unit tests of the action, natively (`node --test`): the WIT's imports are the fakes in fakes/, since
// only componentize-js's build provides them.

import { register } from 'node:module';
import { test } from 'node:test';
import assert from 'node:assert/strict';

register('./fakes/hooks.js', import.meta.url);
const app = await import('./app.js');
const settings = await import('./settings.js');

__TESTS__
