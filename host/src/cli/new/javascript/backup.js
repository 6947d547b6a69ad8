// __NAME__: a Velero backup action, run by velero-wasm as a WebAssembly component.
//
// It labels each PersistentVolumeClaim it backs up with the number of PVCs in its namespace: the same
// action as the Rust scaffold of `velero-wasm new`, written in JavaScript against the same WIT (`wit/`,
// written by `velero-wasm new`). `velero-wasm build` turns it into a component with componentize-js.
// The logic is in `label`, given the function that lists PVCs: the host's in the component, a fake in
// app.test.js (`node --test`, no wasm needed). Its setting `suspend` (the manifest's
// `[settings-schema]`, read by settings.js) turns it off.

import { list } from 'velero-wasm:plugin/kube@0.1.2';

import * as settings from './settings.js';
import { failingWithText, unimplemented } from './unimplemented.js';

export const ACTION = 'example.io/__NAME__';
export const LABEL = 'example.io/pvcs-in-namespace';
const PVCS = { group: '', version: 'v1', resource: 'persistentvolumeclaims' };

// The module's settings and their defaults, read typed (`settings.read`): each is declared in the
// manifest (`[settings-schema]`), where the host checks what an operator or a suite case sets and
// fills in its default; changing one needs no rebuild.
export const SETTINGS = {
  suspend: false, // true: the action hands each item back as it came and calls nothing
};

/** Labels the PVC `itemJson` with the number of PVCs `listPvcs(namespace)` returns, unless the
 * settings `current` suspend the action. */
export function label(itemJson, listPvcs, current = SETTINGS) {
  const item = JSON.parse(itemJson);
  if (!current.suspend) {
    const namespace = item.metadata?.namespace ?? '';
    const pvcs = listPvcs(namespace);
    item.metadata ??= {};
    item.metadata.labels ??= {};
    item.metadata.labels[LABEL] = String(pvcs.length);
  }
  return {
    item: JSON.stringify(item),
    additionalItems: [],
    operationId: undefined,
    postOperationItems: [],
  };
}

function hostList(namespace) {
  try {
    return list(PVCS, namespace, { labelSelector: '', fieldSelector: '' });
  } catch (e) {
    throw `listing the PVCs of ${namespace}: ${describeError(e)}`;
  }
}

/** A WIT error as text: componentize-js throws the `err` of a result with it as `payload`. */
function describeError(e) {
  const error = e?.payload ?? e;
  return error?.val ?? String(error);
}

// failingWithText: a bug's exception fails the call with its message and stack instead of trapping.
export const actions = failingWithText({
  ...unimplemented,
  describe() {
    return [
      {
        name: ACTION,
        kind: 'backup',
        appliesTo: {
          includedNamespaces: [],
          excludedNamespaces: [],
          includedResources: ['persistentvolumeclaims'],
          excludedResources: [],
          labelSelector: '',
        },
        description: 'labels each PVC with the number of PVCs in its namespace',
        // What it calls, and where (the item's namespace): `velero-wasm build` checks that the
        // manifest's grant covers it.
        needs: [{ tag: 'kube', val: ['persistentvolumeclaims in @item', ['list']] }],
      },
    ];
  },
  backup(action, request) {
    return label(request.item, hostList, settings.read(SETTINGS));
  },
});
