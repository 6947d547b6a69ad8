//! `kubevirt-velero-plugin/restore-volumesnapshot-action` (docs/kubevirt.md#s6-5): undoes the UID label of a
//! VolumeSnapshot; never skips.

use velero_wasm_sdk::{Object, RestoreResponse};

use crate::go_zero_values::{self, GoType};
use crate::keys;
use crate::mode::Mode;
use crate::uid_label;

/// Runs the action on a VolumeSnapshot. Upstream returns every one as its Go type encodes it, which
/// upstream mode reproduces.
pub fn restore(mode: Mode, item: &Object) -> RestoreResponse {
    let mut snapshot = item.clone();
    let relabelled = uid_label::undo(&mut snapshot, keys::ORIGINAL_VOLUMESNAPSHOT_UID);
    if mode == Mode::Upstream {
        go_zero_values::write(&mut snapshot, GoType::VolumeSnapshot);
        return RestoreResponse::with_item(&snapshot);
    }
    if relabelled {
        RestoreResponse::with_item(&snapshot)
    } else {
        RestoreResponse::unchanged()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checklist_108_label_removed_or_restored_never_skipped() {
        for mode in [Mode::Upstream, Mode::Extended] {
            let vs = Object::from_value(json!({"kind": "VolumeSnapshot", "metadata": {"name": "s",
                "labels": {"velero.kubevirt.io/pvc-uid": "pvc-uid-456", "other-label": "v"}}}))
            .unwrap();
            let out = restore(mode, &vs);
            assert!(!out.skip_restore);
            let item = Object::parse(out.item.as_deref().unwrap()).unwrap();
            assert_eq!(
                item.pointer("/metadata/labels"),
                Some(&json!({"other-label": "v"})),
                "{mode:?}"
            );

            let mut saved = vs.clone();
            saved.set_annotation(keys::ORIGINAL_VOLUMESNAPSHOT_UID, "original-user-uid-value");
            let out = restore(mode, &saved);
            assert!(!out.skip_restore);
            let item = Object::parse(out.item.as_deref().unwrap()).unwrap();
            assert_eq!(item.label(keys::PVC_UID), Some("original-user-uid-value"));
            assert_eq!(item.annotation(keys::ORIGINAL_VOLUMESNAPSHOT_UID), None);
        }
    }

    /// A VolumeSnapshot's status is a pointer in its Go type: upstream writes no `status: {}`.
    #[test]
    fn upstream_mode_writes_the_zero_values_of_upstreams_go_type_and_extended_mode_does_not() {
        let backed_up = Object::from_value(json!({"kind": "VolumeSnapshot",
            "metadata": {"name": "s", "labels": {"velero.kubevirt.io/pvc-uid": "u"}},
            "spec": {"source": {"persistentVolumeClaimName": "p"}}}))
        .unwrap();
        let upstream = Object::parse(&restore(Mode::Upstream, &backed_up).item.unwrap()).unwrap();
        assert_eq!(
            upstream.into_value(),
            json!({"kind": "VolumeSnapshot", "metadata": {"name": "s", "creationTimestamp": null},
                   "spec": {"source": {"persistentVolumeClaimName": "p"}}})
        );
        let extended = Object::parse(&restore(Mode::Extended, &backed_up).item.unwrap()).unwrap();
        assert_eq!(
            extended.into_value(),
            json!({"kind": "VolumeSnapshot", "metadata": {"name": "s", "labels": {}},
                   "spec": {"source": {"persistentVolumeClaimName": "p"}}})
        );
        // Without the label upstream still encodes its Go type; extended mode returns the item as it came.
        let plain =
            Object::from_value(json!({"kind": "VolumeSnapshot", "metadata": {"name": "s"}}))
                .unwrap();
        let upstream = Object::parse(&restore(Mode::Upstream, &plain).item.unwrap()).unwrap();
        assert_eq!(
            upstream.pointer("/metadata/creationTimestamp"),
            Some(&json!(null))
        );
        assert_eq!(restore(Mode::Extended, &plain).item, None);
    }
}
