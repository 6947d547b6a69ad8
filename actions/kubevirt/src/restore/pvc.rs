//! `kubevirt-velero-plugin/restore-pvc-action` (docs/kubevirt.md#s6-4): skips PVCs whose DataVolume was still
//! importing at backup (CDI imports again from the restored DataVolume) and undoes the UID label.

use velero_wasm_sdk::{Object, RestoreResponse};

use crate::go_zero_values::{self, GoType};
use crate::keys;
use crate::mode::Mode;
use crate::uid_label;

/// Runs the action on a PVC. `populatedFor` stays: CDI needs it to adopt the restored PVC. Upstream
/// returns every PVC it restores as its Go type encodes it, which upstream mode reproduces.
pub fn restore(mode: Mode, item: &Object) -> RestoreResponse {
    if item.annotation(keys::IN_PROGRESS).is_some() {
        return RestoreResponse::skip();
    }
    let mut pvc = item.clone();
    let relabelled = uid_label::undo(&mut pvc, keys::ORIGINAL_PVC_UID);
    if mode == Mode::Upstream {
        go_zero_values::write(&mut pvc, GoType::PersistentVolumeClaim);
        return RestoreResponse::with_item(&pvc);
    }
    if relabelled {
        RestoreResponse::with_item(&pvc)
    } else {
        RestoreResponse::unchanged()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const BOTH: [Mode; 2] = [Mode::Upstream, Mode::Extended];

    fn run(mode: Mode, metadata: Value) -> (bool, Option<Object>) {
        let pvc = Object::from_value(
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata}),
        )
        .unwrap();
        let out = restore(mode, &pvc);
        assert!(out.additional_items.is_empty());
        (
            out.skip_restore,
            out.item.map(|i| Object::parse(&i).unwrap()),
        )
    }

    #[test]
    fn checklist_103_an_in_progress_pvc_is_skipped() {
        for mode in BOTH {
            let (skip, item) = run(
                mode,
                json!({"name": "pvc", "annotations": {"kvp.kubevirt.io/storage.inprogress": "pvc"}}),
            );
            assert!(skip && item.is_none(), "{mode:?}");
        }
    }

    #[test]
    fn checklist_104_the_uid_label_is_removed() {
        for mode in BOTH {
            let (skip, pvc) = run(
                mode,
                json!({"name": "p", "labels": {"velero.kubevirt.io/pvc-uid": "u", "other-label": "other-value"}}),
            );
            assert!(!skip);
            assert_eq!(
                pvc.unwrap().pointer("/metadata/labels"),
                Some(&json!({"other-label": "other-value"})),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn checklist_105_a_users_value_comes_back() {
        for mode in BOTH {
            let (_, pvc) = run(
                mode,
                json!({"name": "p", "labels": {"velero.kubevirt.io/pvc-uid": "u", "other-label": "v"},
                       "annotations": {"velero.kubevirt.io/original-pvc-uid": "original-user-uid-value"}}),
            );
            let pvc = pvc.unwrap();
            assert_eq!(
                pvc.pointer("/metadata/labels"),
                Some(
                    &json!({"velero.kubevirt.io/pvc-uid": "original-user-uid-value", "other-label": "v"})
                )
            );
            assert_eq!(pvc.annotation(keys::ORIGINAL_PVC_UID), None, "{mode:?}");
        }
    }

    #[test]
    fn checklist_106_without_the_label_nothing_changes() {
        // Extended mode returns the PVC as it came; upstream mode as upstream's Go type encodes it.
        for (mode, written) in [
            (Mode::Extended, None),
            (
                Mode::Upstream,
                Some(json!({"creationTimestamp": null, "status": {}})),
            ),
        ] {
            let expect = |metadata: Value| {
                written.as_ref().map(|w| {
                    let mut metadata = metadata;
                    metadata["creationTimestamp"] = w["creationTimestamp"].clone();
                    Object::from_value(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                              "metadata": metadata, "status": w["status"]}))
                    .unwrap()
                })
            };
            let labelled = json!({"name": "p", "labels": {"existing-label": "x"}});
            assert_eq!(run(mode, labelled.clone()), (false, expect(labelled)));
            assert_eq!(
                run(mode, json!({"name": "p"})),
                (false, expect(json!({"name": "p"})))
            );
            let stray =
                json!({"name": "p", "annotations": {"velero.kubevirt.io/original-pvc-uid": "x"}});
            assert_eq!(run(mode, stray.clone()), (false, expect(stray)), "{mode:?}");
        }
    }

    #[test]
    fn checklist_107_populated_for_is_kept() {
        for mode in BOTH {
            let (skip, pvc) = run(
                mode,
                json!({"name": "p", "labels": {"velero.kubevirt.io/pvc-uid": "u"},
                       "annotations": {"cdi.kubevirt.io/storage.populatedFor": "d"}}),
            );
            let pvc = pvc.unwrap();
            assert!(!skip);
            assert_eq!(pvc.annotation(keys::POPULATED_FOR), Some("d"), "{mode:?}");
            assert!(!pvc.has_label(keys::PVC_UID));
        }
    }

    /// Velero hands the restore a PVC without `creationTimestamp` and `status` (docs/kubevirt.md#s8-3).
    #[test]
    fn upstream_mode_writes_the_zero_values_of_upstreams_go_type_and_extended_mode_does_not() {
        let backed_up = json!({"name": "p", "namespace": "ns",
                               "labels": {"velero.kubevirt.io/pvc-uid": "u"},
                               "annotations": {"velero.kubevirt.io/original-pvc-uid": "mine"}});
        let (_, upstream) = run(Mode::Upstream, backed_up.clone());
        assert_eq!(
            upstream.unwrap().into_value(),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "p", "namespace": "ns",
                                "labels": {"velero.kubevirt.io/pvc-uid": "mine"},
                                "creationTimestamp": null},
                   "status": {}})
        );
        let (_, extended) = run(Mode::Extended, backed_up);
        assert_eq!(
            extended.unwrap().into_value(),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "p", "namespace": "ns",
                                "labels": {"velero.kubevirt.io/pvc-uid": "mine"},
                                "annotations": {}}})
        );
        // A label map the action empties is left out upstream, kept empty in extended mode.
        let only_ours = json!({"name": "p", "labels": {"velero.kubevirt.io/pvc-uid": "u"}});
        let (_, upstream) = run(Mode::Upstream, only_ours.clone());
        assert_eq!(upstream.unwrap().pointer("/metadata/labels"), None);
        let (_, extended) = run(Mode::Extended, only_ours);
        assert_eq!(
            extended.unwrap().pointer("/metadata/labels"),
            Some(&json!({}))
        );
    }
}
