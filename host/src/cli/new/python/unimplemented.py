"""The hooks of the WIT's `actions` interface that an action does not implement.

`Actions` in app.py derives from `Unimplemented` and overrides `describe` and the hook of its kind; a
call of any other hook fails with the error the host reports for it ("action X does not implement
restore"), as the Rust SDK's defaults do.
"""

from componentize_py_types import Err
from wit_world import exports


class Unimplemented(exports.Actions):
    def backup(self, action, request):
        raise Err(f"action {action} does not implement backup")

    def restore(self, action, request):
        raise Err(f"action {action} does not implement restore")

    def related_items(self, action, item, backup):
        raise Err(f"action {action} does not implement related-items")

    def delete(self, action, item, backup):
        raise Err(f"action {action} does not implement delete")

    def progress(self, action, operation_id, subject):
        raise Err(f"action {action} does not implement progress")

    def cancel(self, action, operation_id, subject):
        raise Err(f"action {action} does not implement cancel")

    def items_ready(self, action, items, restore):
        raise Err(f"action {action} does not implement items-ready")
