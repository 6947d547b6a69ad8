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
