//! Finding the virt-launcher pod of a VMI (docs/kubevirt.md#s4-4): the pod whose Velero hooks freeze the guest.

use velero_wasm_sdk::Object;

use crate::context::Context;
use crate::keys;
use crate::messages;
use crate::resources::PODS;

/// The launcher pod of VMI `namespace/name`: the first pod (API order) labelled
/// `kubevirt.io=virt-launcher` whose `kubevirt.io/domain` annotation is `name`. Extended mode passes
/// over pods that have finished (phase `Succeeded` or `Failed`), such as the source pod of a
/// completed migration, whose hooks can no longer run.
pub fn launcher_pod(ctx: &Context, namespace: &str, name: &str) -> Result<Option<Object>, String> {
    let selector = format!("{}=virt-launcher", keys::KUBEVIRT_POD_ROLE);
    let pods = ctx
        .cluster
        .list(PODS, namespace, &selector)
        .map_err(|e| messages::launcher_list_failed(namespace, name, &e))?;
    Ok(pods.into_iter().find(|pod| {
        pod.annotation(keys::DOMAIN) == Some(name)
            && !(ctx.extended()
                && matches!(pod.str_at("/status/phase"), Some("Succeeded" | "Failed")))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use serde_json::json;
    use velero_wasm_sdk::{Cluster, FakeCluster};

    fn pod(name: &str, domain: Option<&str>, phase: &str) -> Object {
        let mut annotations = serde_json::Map::new();
        if let Some(d) = domain {
            annotations.insert(keys::DOMAIN.into(), json!(d));
        }
        Object::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": {"kubevirt.io": "virt-launcher"},
                         "annotations": annotations},
            "status": {"phase": phase}}))
        .unwrap()
    }

    fn find(cluster: &dyn Cluster, mode: Mode) -> Option<String> {
        launcher_pod(&Context::new(cluster, mode), "ns", "vmi1")
            .unwrap()
            .map(|p| p.name().to_string())
    }

    #[test]
    fn checklist_11_the_annotated_pod_is_found_with_one_list() {
        let c = FakeCluster::new().with(PODS, pod("P", Some("vmi1"), "Running"));
        assert_eq!(find(&c, Mode::Upstream).as_deref(), Some("P"));
        let calls = c.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (
                calls[0].verb,
                calls[0].resource.as_str(),
                calls[0].target.as_str()
            ),
            ("list", "pods", "kubevirt.io=virt-launcher")
        );
    }

    #[test]
    fn checklist_12_other_domains_and_unannotated_pods_do_not_count() {
        let c = FakeCluster::new()
            .with(PODS, pod("P", Some("other"), "Running"))
            .with(PODS, pod("Q", None, "Running"));
        assert_eq!(find(&c, Mode::Upstream), None);
    }

    #[test]
    fn checklist_13_the_first_of_two_matching_pods_wins() {
        let c = FakeCluster::new()
            .with(PODS, pod("A", Some("vmi1"), "Running"))
            .with(PODS, pod("B", Some("vmi1"), "Running"));
        assert_eq!(find(&c, Mode::Upstream).as_deref(), Some("A"));
    }

    #[test]
    fn extended_mode_passes_over_finished_pods() {
        let c = FakeCluster::new()
            .with(PODS, pod("old", Some("vmi1"), "Succeeded"))
            .with(PODS, pod("new", Some("vmi1"), "Running"));
        assert_eq!(find(&c, Mode::Upstream).as_deref(), Some("old"));
        assert_eq!(find(&c, Mode::Extended).as_deref(), Some("new"));
    }

    #[test]
    fn a_list_error_names_the_vmi() {
        let c = FakeCluster::new().failing_list(PODS);
        let e = launcher_pod(&Context::new(&c, Mode::Upstream), "ns", "vmi1").unwrap_err();
        assert!(
            e.starts_with("failed to get launcher pod from VMI ns/vmi1: "),
            "{e}"
        );
    }
}
