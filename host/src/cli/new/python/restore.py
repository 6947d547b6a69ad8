"""__NAME__: a Velero restore action, run by velero-wasm as a WebAssembly component.

It restores each PersistentVolumeClaim with the label `example.io/restored-by` naming the restore, and
skips a PVC that already exists in the cluster: the same action as the Rust scaffold of
`velero-wasm new --kind restore`, written in Python against the same WIT (`wit/`, written by
`velero-wasm new`; `componentize-py -d wit -w plugin bindings .` writes the Python bindings it
imports, for an editor). `velero-wasm build` turns it into a component with componentize-py. The
logic is in `restore`, given the function that reads a PVC: the host's in the component, a fake in
`test_app.py` (`python3 -m unittest`, no wasm needed). Its setting `suspend` (the manifest's
`[settings-schema]`, read by `settings.py`) turns it off.
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
LABEL = "example.io/restored-by"
PVCS = kube.ApiResource(group="", version="v1", resource="persistentvolumeclaims")


@dataclass
class Settings:
    """The module's settings, read typed (`settings.read`): each is declared in the manifest
    (`[settings-schema]`), where the host checks what an operator or a suite case sets and fills in its
    default; changing one needs no rebuild."""

    suspend: bool = False  # true: the action hands each item back as it came and calls nothing


def restore(
    item_json: str, restore_json: str, get_pvc, current: Settings = Settings()
) -> actions.RestoreResponse:
    """Restores the PVC `item_json` labelled with the name of the Restore `restore_json`, unless
    `get_pvc(namespace, name)` finds one of its name (it returns None when there is none); as it came
    while the settings `current` suspend the action."""
    if current.suspend:
        return response(item_json, skip=False)
    item = json.loads(item_json)
    metadata = item.setdefault("metadata", {})
    if get_pvc(metadata.get("namespace", ""), metadata.get("name", "")) is not None:
        return response(None, skip=True)
    name = json.loads(restore_json).get("metadata", {}).get("name", "")
    metadata.setdefault("labels", {})[LABEL] = name
    return response(json.dumps(item, separators=(",", ":")), skip=False)


def response(item, skip: bool) -> actions.RestoreResponse:
    return actions.RestoreResponse(
        item=item,
        additional_items=[],
        skip_restore=skip,
        operation_id=None,
        wait_for_additional_items=False,
        additional_items_timeout=None,
    )


def host_get(namespace: str, name: str):
    try:
        return kube.get(PVCS, namespace, name)
    except Err as e:
        if isinstance(e.value, kube.Error_NotFound):
            return None
        raise Err(f"reading PVC {namespace}/{name}: {e.value.value}")


class Actions(Unimplemented):
    def describe(self):
        return [
            actions.ActionInfo(
                name=ACTION,
                kind=actions.Kind.RESTORE,
                applies_to=actions.Selector(
                    included_namespaces=[],
                    excluded_namespaces=[],
                    included_resources=["persistentvolumeclaims"],
                    excluded_resources=[],
                    label_selector="",
                ),
                description="labels each restored PVC with its restore; skips PVCs that exist",
                # What it calls, and where (the item's namespace): `velero-wasm build` checks that
                # the manifest's grant covers it.
                needs=[actions.Need_Kube(("persistentvolumeclaims in @item", [types.Verb.GET]))],
            )
        ]

    def restore(self, action, request):
        return restore(request.item, request.restore, host_get, settings.read(Settings))
