"""__NAME__: a Velero delete action, run by velero-wasm as a WebAssembly component.

When a backup is deleted, it deletes for each of its PersistentVolumeClaims the ConfigMap
`<backup>-<pvc>` in the PVC's namespace (notes a backup action of yours may have left), if it is still
there: the same action as the Rust scaffold of `velero-wasm new --kind delete`, written in Python
against the same WIT (`wit/`, written by `velero-wasm new`; `componentize-py -d wit -w plugin bindings .`
writes the Python bindings it imports, for an editor). `velero-wasm build` turns it into a component
with componentize-py. The logic is in `forget`, given the function that deletes a ConfigMap: the
host's in the component, a fake in `test_app.py` (`python3 -m unittest`, no wasm needed). Its setting
`suspend` (the manifest's `[settings-schema]`, read by `settings.py`) turns it off.
"""

import json
from dataclasses import dataclass

from componentize_py_types import Err
from wit_world.exports import actions
from wit_world.imports import kube, types

# Imported here, not first inside a call: componentize-py snapshots what app.py imports, and the
# component can import nothing more once it runs.
import settings
from unimplemented import Unimplemented

ACTION = "example.io/__NAME__"
CONFIGMAPS = kube.ApiResource(group="", version="v1", resource="configmaps")


@dataclass
class Settings:
    """The module's settings, read typed (`settings.read`): each is declared in the manifest
    (`[settings-schema]`), where the host checks what an operator or a suite case sets and fills in its
    default; changing one needs no rebuild."""

    suspend: bool = False  # true: the action deletes nothing


def forget(
    item_json: str, backup_json: str, delete_configmap, current: Settings = Settings()
) -> None:
    """Deletes, through `delete_configmap(namespace, name)`, the ConfigMap `<backup>-<pvc>` of the PVC
    `item_json` of the deleted Backup `backup_json`; nothing while the settings `current` suspend the
    action."""
    if current.suspend:
        return
    metadata = json.loads(item_json).get("metadata", {})
    backup = json.loads(backup_json).get("metadata", {}).get("name", "")
    delete_configmap(metadata.get("namespace", ""), f"{backup}-{metadata.get('name', '')}")


def host_delete(namespace: str, name: str) -> None:
    """Deletes ConfigMap `namespace/name`; one that is gone already is fine."""
    try:
        kube.delete(CONFIGMAPS, namespace, name)
    except Err as e:
        if not isinstance(e.value, kube.Error_NotFound):
            raise Err(f"deleting ConfigMap {namespace}/{name}: {e.value.value}")


class Actions(Unimplemented):
    def describe(self):
        return [
            actions.ActionInfo(
                name=ACTION,
                kind=actions.Kind.DELETE,
                applies_to=actions.Selector(
                    included_namespaces=[],
                    excluded_namespaces=[],
                    included_resources=["persistentvolumeclaims"],
                    excluded_resources=[],
                    label_selector="",
                ),
                description="deletes the notes ConfigMap of each PVC of a deleted backup",
                # What it calls, and where (the item's namespace): `velero-wasm build` checks that
                # the manifest's grant covers it.
                needs=[actions.Need_Kube(("configmaps in @item", [types.Verb.DELETE]))],
            )
        ]

    def delete(self, action, item, backup):
        forget(item, backup, host_delete, settings.read(Settings))
