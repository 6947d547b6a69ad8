// Typed settings: the module's `[settings]`, read into an object shaped like the defaults you give
// (the Rust SDK's `config::read`, settings.py's `read`).
//
//     import * as settings from './settings.js';
//     const DEFAULTS = { storageClasses: {}, retries: 3, dryRun: false };
//     const current = settings.read(DEFAULTS);                        // in the component: the host's settings
//     const current = settings.read(DEFAULTS, (key) => ({ retries: '5' })[key]);  // in a unit test
//
// Each key reads the setting of its name in kebab-case (`storageClasses` from `storage-classes`); a
// setting not given keeps its default; the host fills in the manifest's `[settings-schema]` defaults.
// The host passes lists and maps as JSON, other values as text; the default's type says how to read
// one: string, number, boolean, array or object. A value that does not read as its type throws a
// SettingError naming the key.

// The host's settings, imported statically: componentize-js snapshots the module with its imports,
// and the component can import nothing once it runs. Natively, fakes/hooks.js stands in for it.
import { get as hostGet } from 'velero-wasm:plugin/config@0.1.2';

/** A setting whose value does not read as its default's type. */
export class SettingError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SettingError';
  }
}

/** A copy of `defaults`, each key read from its setting through `get(key)` (text or undefined/null;
 * by default the host's `config.get`). */
export function read(defaults, get = hostGet) {
  const values = { ...defaults };
  for (const [name, fallback] of Object.entries(defaults)) {
    const key = kebab(name);
    const text = get(key);
    if (text !== undefined && text !== null) {
      values[name] = convert(key, text, fallback);
    }
  }
  return values;
}

/** `storageClasses` → `storage-classes`. */
export function kebab(name) {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** The setting `key`'s `text` read as the type of `fallback`. */
export function convert(key, text, fallback) {
  const wrong = (why) =>
    new SettingError(`setting ${key}: ${JSON.stringify(text)} is not a ${typeOf(fallback)}: ${why}`);
  switch (typeOf(fallback)) {
    case 'string':
      return text;
    case 'boolean':
      if (text === 'true' || text === 'false') return text === 'true';
      throw wrong('give true or false');
    case 'number': {
      const number = text.trim() === '' ? NaN : Number(text);
      if (Number.isNaN(number)) throw wrong('give a number');
      return number;
    }
    case 'array':
    case 'object': {
      let value;
      try {
        value = JSON.parse(text);
      } catch (e) {
        throw wrong(e.message);
      }
      if (typeOf(value) !== typeOf(fallback)) throw wrong(`JSON ${typeOf(value)}`);
      return value;
    }
    default:
      throw new SettingError(
        `setting ${key}: its default's type ${typeOf(fallback)} is not one a setting takes ` +
          '(string, number, boolean, array, object)',
      );
  }
}

function typeOf(value) {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  return typeof value;
}
