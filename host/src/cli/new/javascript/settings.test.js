// Unit tests of `settings.read`, natively (`node --test`).

import { register } from 'node:module';
import { test } from 'node:test';
import assert from 'node:assert/strict';

register('./fakes/hooks.js', import.meta.url);
const settings = await import('./settings.js');
const host = await import('./fakes/config.js');

const EXAMPLE = {
  storageClasses: {},
  namespaces: [],
  retries: 3,
  ratio: 0.5,
  dryRun: false,
  mode: 'fast',
};

const from = (given) => (key) => given[key];

test('each key reads its kebab-case setting as its default\'s type', () => {
  const read = settings.read(
    EXAMPLE,
    from({
      'storage-classes': '{"gp2": "gp3"}',
      namespaces: '["apps", "web"]',
      retries: '5',
      ratio: '0.25',
      'dry-run': 'true',
      mode: 'thorough',
    }),
  );
  assert.deepEqual(read, {
    storageClasses: { gp2: 'gp3' },
    namespaces: ['apps', 'web'],
    retries: 5,
    ratio: 0.25,
    dryRun: true,
    mode: 'thorough',
  });
});

test('a setting not given keeps its default', () => {
  assert.deepEqual(settings.read(EXAMPLE, from({})), EXAMPLE);
});

test('a value of the wrong type names its key', () => {
  for (const [key, text] of [
    ['retries', 'many'],
    ['dry-run', 'yes'],
    ['storage-classes', '["gp2"]'],
    ['namespaces', '{"a": 1}'],
    ['namespaces', 'not json'],
  ]) {
    assert.throws(
      () => settings.read(EXAMPLE, from({ [key]: text })),
      (e) => e instanceof settings.SettingError && e.message.startsWith(`setting ${key}: ${JSON.stringify(text)}`),
      `${key} = ${text}`,
    );
  }
});

test('by default the host\'s settings are read (config.get)', () => {
  host.settings.retries = '7';
  try {
    assert.equal(settings.read(EXAMPLE).retries, 7);
  } finally {
    delete host.settings.retries;
  }
});
