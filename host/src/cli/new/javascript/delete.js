// __NAME__: a Velero delete action, run by velero-wasm as a WebAssembly component.
//
// When a backup is deleted, it deletes for each of its PersistentVolumeClaims the ConfigMap
// `<backup>-<pvc>` in the PVC's namespace (notes a backup action of yours may have left), if it is
// still there: the same action as the Rust scaffold of `velero-wasm new --kind delete`, written in
// JavaScript against the same WIT (`wit/`, written by `velero-wasm new`). `velero-wasm build` turns it
// into a component with componentize-js. The logic is in `forget`, given the function that deletes a
// ConfigMap: the host's in the component, a fake in app.test.js (`node --test`, no wasm needed). Its
// setting `suspend` (the manifest's `[settings-schema]`, read by settings.js) turns it off.

import { delete as kubeDelete } from 'velero-wasm:plugin/kube@0.1.2';

import * as settings from './settings.js';
import { failingWithText, unimplemented } from './unimplemented.js';

export const ACTION = 'example.io/__NAME__';
const CONFIGMAPS = { group: '', version: 'v1', resource: 'configmaps' };

// The module's settings and their defaults, read typed (`settings.read`): each is declared in the
// manifest (`[settings-schema]`), where the host checks what an operator or a suite case sets and
// fills in its default; changing one needs no rebuild.
export const SETTINGS = {
  suspend: false, // true: the action deletes nothing
};

/** Deletes, through `deleteConfigMap(namespace, name)`, the ConfigMap `<backup>-<pvc>` of the PVC
 * `itemJson` of the deleted Backup `backupJson`; nothing while the settings `current` suspend the
 * action. */
export function forget(itemJson, backupJson, deleteConfigMap, current = SETTINGS) {
  if (current.suspend) return;
  const metadata = JSON.parse(itemJson).metadata ?? {};
  const backup = JSON.parse(backupJson).metadata?.name ?? '';
  deleteConfigMap(metadata.namespace ?? '', `${backup}-${metadata.name ?? ''}`);
}

/** Deletes ConfigMap `namespace/name`; one that is gone already is fine. */
function hostDelete(namespace, name) {
  try {
    kubeDelete(CONFIGMAPS, namespace, name);
  } catch (e) {
    // componentize-js throws the `err` of a result with it as `payload`: here a kube `error` variant.
    const error = e?.payload ?? e;
    if (error?.tag !== 'not-found') {
      throw `deleting ConfigMap ${namespace}/${name}: ${error?.val ?? String(error)}`;
    }
  }
}

// failingWithText: a bug's exception fails the call with its message and stack instead of trapping.
export const actions = failingWithText({
  ...unimplemented,
  describe() {
    return [
      {
        name: ACTION,
        kind: 'delete',
        appliesTo: {
          includedNamespaces: [],
          excludedNamespaces: [],
          includedResources: ['persistentvolumeclaims'],
          excludedResources: [],
          labelSelector: '',
        },
        description: 'deletes the notes ConfigMap of each PVC of a deleted backup',
        needs: [{ tag: 'kube', val: ['configmaps in @item', ['delete']] }],
      },
    ];
  },
  delete(action, item, backup) {
    forget(item, backup, hostDelete, settings.read(SETTINGS));
  },
});
