"""__NAME__: a Velero backup action, run by velero-wasm as a WebAssembly component.

It labels each PersistentVolumeClaim it backs up with the number of PVCs in its namespace: the same
action as the Rust scaffold of `velero-wasm new`, written in Python against the same WIT
(`wit/`, written by `velero-wasm new`; `componentize-py -d wit -w plugin bindings .` writes the
Python bindings it imports, for an editor). `velero-wasm build` turns it into a component with
componentize-py. The logic is in `label`, given the function that lists PVCs: the host's in the
component, a fake in `test_app.py` (`python3 -m unittest`, no wasm needed). Its setting `suspend` (the
manifest's `[settings-schema]`, read by `settings.py`) turns it off.
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
LABEL = "example.io/pvcs-in-namespace"
PVCS = kube.ApiResource(group="", version="v1", resource="persistentvolumeclaims")


@dataclass
class Settings:
    """The module's settings, read typed (`settings.read`): each is declared in the manifest
    (`[settings-schema]`), where the host checks what an operator or a suite case sets and fills in its
    default; changing one needs no rebuild."""

    suspend: bool = False  # true: the action hands each item back as it came and calls nothing


def label(item_json: str, list_pvcs, current: Settings = Settings()) -> actions.BackupResponse:
    """Labels the PVC `item_json` with the number of PVCs `list_pvcs(namespace)` returns, unless the
    settings `current` suspend the action."""
    item = json.loads(item_json)
    if not current.suspend:
        namespace = item.get("metadata", {}).get("namespace", "")
        pvcs = list_pvcs(namespace)
        item.setdefault("metadata", {}).setdefault("labels", {})[LABEL] = str(len(pvcs))
    return actions.BackupResponse(
        item=json.dumps(item, separators=(",", ":")),
        additional_items=[],
        operation_id=None,
        post_operation_items=[],
    )


def host_list(namespace: str):
    try:
        return kube.list(PVCS, namespace, kube.ListOptions(label_selector="", field_selector=""))
    except Err as e:
        raise Err(f"listing the PVCs of {namespace}: {e.value}")


class Actions(Unimplemented):
    def describe(self):
        return [
            actions.ActionInfo(
                name=ACTION,
                kind=actions.Kind.BACKUP,
                applies_to=actions.Selector(
                    included_namespaces=[],
                    excluded_namespaces=[],
                    included_resources=["persistentvolumeclaims"],
                    excluded_resources=[],
                    label_selector="",
                ),
                description="labels each PVC with the number of PVCs in its namespace",
                # What it calls, and where (the item's namespace): `velero-wasm build` checks that
                # the manifest's grant covers it.
                needs=[actions.Need_Kube(("persistentvolumeclaims in @item", [types.Verb.LIST]))],
            )
        ]

    def backup(self, action, request):
        return label(request.item, host_list, settings.read(Settings))
