// The hooks of the WIT's `actions` interface that an action does not implement.
//
// `actions` in app.js spreads `unimplemented` and overrides `describe` and the hook of its kind; a call
// of any other hook fails with the error the host reports for it ("action X does not implement
// restore"), as the Rust SDK's defaults do. A hook fails by throwing: componentize-js makes the
// thrown string the `err` of the hook's `result`.

export const unimplemented = {
  backup(action) {
    throw `action ${action} does not implement backup`;
  },
  restore(action) {
    throw `action ${action} does not implement restore`;
  },
  relatedItems(action) {
    throw `action ${action} does not implement related-items`;
  },
  delete(action) {
    throw `action ${action} does not implement delete`;
  },
  progress(action) {
    throw `action ${action} does not implement progress`;
  },
  cancel(action) {
    throw `action ${action} does not implement cancel`;
  },
  itemsReady(action) {
    throw `action ${action} does not implement items-ready`;
  },
};

/** `hooks`, each failing with text whatever it throws: componentize-js makes a thrown string the `err`
 * of the hook's `result`, but anything else thrown (an Error from a bug, an import's error) traps
 * with nothing of it in the host's error. The text is the error's name, message and stack, bounded. */
export function failingWithText(hooks) {
  const wrapped = {};
  for (const [name, hook] of Object.entries(hooks)) {
    wrapped[name] =
      typeof hook !== 'function'
        ? hook
        : (...args) => {
            try {
              return hook.apply(wrapped, args);
            } catch (e) {
              throw asText(e);
            }
          };
  }
  return wrapped;
}

/** What was thrown, as text of at most 4 KiB: a string as it is, an Error with its stack, an import's
 * error (thrown with it as `payload`; a variant as `tag: val`). */
export function asText(thrown) {
  if (typeof thrown === 'string') return thrown;
  const error = thrown?.payload ?? thrown;
  let text;
  if (error instanceof Error) {
    text = `${error.name}: ${error.message}\n${error.stack ?? ''}`.trimEnd();
  } else if (error?.tag !== undefined) {
    text = `${error.tag}: ${error.val}`;
  } else {
    text = String(error);
  }
  return text.length > 4096 ? `${text.slice(0, 4096)}…` : text;
}
