// A fake of the WIT's `config` import for native tests: the settings a test put in `settings`.

export const settings = {};

export function get(key) {
  return settings[key];
}

export function all() {
  return Object.entries(settings);
}
