//! The Restore labels that give a restored machine a new identity (docs/kubevirt.md#s6-1 steps 3–4): no fixed MAC
//! addresses, a new firmware UUID. Applied to a VM's template, and in extended mode to a standalone
//! VMI's spec as well (upstream drops those edits for VMIs, docs/kubevirt.md#s6-2 step 4).

use serde_json::Value;
use velero_wasm_sdk::{random, Object};

use crate::keys;

/// Applies `clear-mac-address` and `generate-new-firmware-uuid` (when the Restore carries them) to
/// the domain at `domain` (`/spec/template/spec/domain` or `/spec/domain`).
pub fn apply(item: &mut Object, restore: &Object, domain: &str) -> Result<(), String> {
    if restore.has_label(keys::CLEAR_MAC_ADDRESS) {
        if let Some(Value::Array(interfaces)) =
            item.pointer_mut(&format!("{domain}/devices/interfaces"))
        {
            for interface in interfaces.iter_mut().filter_map(Value::as_object_mut) {
                interface.remove("macAddress");
            }
        }
    }
    if restore.has_label(keys::GENERATE_NEW_FIRMWARE_UUID) {
        item.set(
            &format!("{domain}/firmware/uuid"),
            Value::String(random::uuid_v4()),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn restore(labels: Value) -> Object {
        Object::from_value(json!({"kind": "Restore", "metadata": {"name": "r", "labels": labels}}))
            .unwrap()
    }

    #[test]
    fn checklist_92_macs_go_whatever_the_label_value() {
        let mut vm = Object::from_value(
            json!({"spec": {"template": {"spec": {"domain": {"devices": {"interfaces": [
            {"name": "a", "macAddress": "02:00:00:00:00:01", "masquerade": {}},
            {"name": "b", "macAddress": "02:00:00:00:00:02"}]}}}}}}),
        )
        .unwrap();
        apply(
            &mut vm,
            &restore(json!({"velero.kubevirt.io/clear-mac-address": ""})),
            "/spec/template/spec/domain",
        )
        .unwrap();
        for i in vm.array_at("/spec/template/spec/domain/devices/interfaces") {
            assert!(i.get("macAddress").is_none(), "{i}");
            assert!(i.get("name").is_some());
        }
    }

    #[test]
    fn checklist_93_a_new_uuid_replaces_the_old_one_or_creates_firmware() {
        let mut vm = Object::from_value(json!({"spec": {"template": {"spec": {"domain": {
            "firmware": {"uuid": "original-uuid", "serial": "s", "bootloader": {"efi": {}}}}}}}}))
        .unwrap();
        let r = restore(json!({"velero.kubevirt.io/generate-new-firmware-uuid": "true"}));
        apply(&mut vm, &r, "/spec/template/spec/domain").unwrap();
        let uuid = vm
            .str_at("/spec/template/spec/domain/firmware/uuid")
            .unwrap()
            .to_string();
        assert!(
            uuid.len() == 36 && uuid != "original-uuid" && uuid.as_bytes()[14] == b'4',
            "{uuid}"
        );
        assert_eq!(
            vm.str_at("/spec/template/spec/domain/firmware/serial"),
            Some("s")
        );
        assert!(vm
            .pointer("/spec/template/spec/domain/firmware/bootloader/efi")
            .is_some());

        let mut bare =
            Object::from_value(json!({"spec": {"template": {"spec": {"domain": {}}}}})).unwrap();
        apply(&mut bare, &r, "/spec/template/spec/domain").unwrap();
        assert!(!bare
            .str_at("/spec/template/spec/domain/firmware/uuid")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn no_labels_no_change() {
        let vm = Object::from_value(
            json!({"spec": {"domain": {"devices": {"interfaces": [{"macAddress": "m"}]},
                                                              "firmware": {"uuid": "u"}}}}),
        )
        .unwrap();
        let mut out = vm.clone();
        apply(&mut out, &restore(json!({})), "/spec/domain").unwrap();
        assert_eq!(out, vm);
    }
}
