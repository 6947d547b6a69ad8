// __NAME__: a Velero restore action, run by velero-wasm as a WebAssembly component.
//
// It restores each PersistentVolumeClaim with the label `example.io/restored-by` naming the restore,
// and skips a PVC that already exists in the cluster: the same action as the Rust scaffold of
// `velero-wasm new --kind restore`, written in JavaScript against the same WIT (`wit/`, written by
// `velero-wasm new`). `velero-wasm build` turns it into a component with componentize-js. The logic is
// in `restore`, given the function that reads a PVC: the host's in the component, a fake in
// app.test.js (`node --test`, no wasm needed). Its setting `suspend` (the manifest's
// `[settings-schema]`, read by settings.js) turns it off.

import { get } from 'velero-wasm:plugin/kube@0.1.2';

import * as settings from './settings.js';
import { failingWithText, unimplemented } from './unimplemented.js';

export const ACTION = 'example.io/__NAME__';
export const LABEL = 'example.io/restored-by';
const PVCS = { group: '', version: 'v1', resource: 'persistentvolumeclaims' };

// The module's settings and their defaults, read typed (`settings.read`): each is declared in the
// manifest (`[settings-schema]`), where the host checks what an operator or a suite case sets and
// fills in its default; changing one needs no rebuild.
export const SETTINGS = {
  suspend: false, // true: the action hands each item back as it came and calls nothing
};

/** Restores the PVC `itemJson` labelled with the name of the Restore `restoreJson`, unless
 * `getPvc(namespace, name)` finds one of its name (it returns null when there is none); as it came
 * while the settings `current` suspend the action. */
export function restore(itemJson, restoreJson, getPvc, current = SETTINGS) {
  if (current.suspend) return response(itemJson, false);
  const item = JSON.parse(itemJson);
  item.metadata ??= {};
  const { namespace = '', name = '' } = item.metadata;
  if (getPvc(namespace, name) !== null) return response(undefined, true);
  item.metadata.labels ??= {};
  item.metadata.labels[LABEL] = JSON.parse(restoreJson).metadata?.name ?? '';
  return response(JSON.stringify(item), false);
}

function response(item, skip) {
  return {
    item,
    additionalItems: [],
    skipRestore: skip,
    operationId: undefined,
    waitForAdditionalItems: false,
    additionalItemsTimeout: undefined,
  };
}

function hostGet(namespace, name) {
  try {
    return get(PVCS, namespace, name);
  } catch (e) {
    // componentize-js throws the `err` of a result with it as `payload`: here a kube `error` variant.
    const error = e?.payload ?? e;
    if (error?.tag === 'not-found') return null;
    throw `reading PVC ${namespace}/${name}: ${error?.val ?? String(error)}`;
  }
}

// failingWithText: a bug's exception fails the call with its message and stack instead of trapping.
export const actions = failingWithText({
  ...unimplemented,
  describe() {
    return [
      {
        name: ACTION,
        kind: 'restore',
        appliesTo: {
          includedNamespaces: [],
          excludedNamespaces: [],
          includedResources: ['persistentvolumeclaims'],
          excludedResources: [],
          labelSelector: '',
        },
        description: 'labels each restored PVC with its restore; skips PVCs that exist',
        needs: [{ tag: 'kube', val: ['persistentvolumeclaims in @item', ['get']] }],
      },
    ];
  },
  restore(action, request) {
    return restore(request.item, request.restore, hostGet, settings.read(SETTINGS));
  },
});
