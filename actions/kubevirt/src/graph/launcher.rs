//! Finding the virt-launcher pod of a VMI (docs/kubevirt.md#s4-4): the pod whose Velero hooks freeze the guest.

use velero_wasm_sdk::Object;

use crate::context::Context;
use crate::keys;
use crate::messages;
use crate::mode::Mode;
use crate::resources::PODS;

/// The launcher pod of VMI `namespace/name`: the first pod (API order) labelled
/// `kubevirt.io=virt-launcher` whose `kubevirt.io/domain` annotation is `name`. Extended mode passes
/// over pods that have finished (phase `Succeeded` or `Failed`), such as the source pod of a
/// completed migration, whose hooks can no longer run, and first lists only the pods labelled with
/// the VMI's name ([`selector`]); when none of those is the VMI's, it looks at every launcher pod.
pub fn launcher_pod(ctx: &Context, namespace: &str, name: &str) -> Result<Option<Object>, String> {
    let first = selector(ctx.mode, name);
    if let Some(pod) = find_launcher(ctx, namespace, name, &first)? {
        return Ok(Some(pod));
    }
    let every = every_launcher();
    if first == every {
        return Ok(None);
    }
    find_launcher(ctx, namespace, name, &every)
}

/// The label selector of the first list of launcher pods for VMI `name`. Upstream lists every
/// launcher pod of the namespace and looks for the annotation; so a VM's backup received all of them,
/// and the work of a namespace's backup grew with the square of its VMs. Extended mode narrows the
/// list with the label virt-controller gives each launcher pod (`vm.kubevirt.io/name`, the VMI's host
/// name: its name unless `spec.hostname` says otherwise); the annotation still decides.
pub fn selector(mode: Mode, name: &str) -> String {
    // A label value has at most 63 characters; a longer VMI name is not its host name.
    if mode.extended() && name.len() <= 63 {
        format!("{},{}={name}", every_launcher(), keys::VM_NAME)
    } else {
        every_launcher()
    }
}

fn every_launcher() -> String {
    format!("{}=virt-launcher", keys::KUBEVIRT_POD_ROLE)
}

fn find_launcher(
    ctx: &Context,
    namespace: &str,
    name: &str,
    selector: &str,
) -> Result<Option<Object>, String> {
    let pods = ctx
        .cluster
        .list(PODS, namespace, selector)
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
    use serde_json::json;
    use velero_wasm_sdk::{Cluster, FakeCluster};

    fn pod(name: &str, domain: Option<&str>, phase: &str) -> Object {
        labelled(name, domain, phase, None)
    }

    /// A launcher pod with the `vm.kubevirt.io/name` label virt-controller sets when `host` is given.
    fn labelled(name: &str, domain: Option<&str>, phase: &str, host: Option<&str>) -> Object {
        let mut labels = serde_json::Map::new();
        labels.insert("kubevirt.io".into(), json!("virt-launcher"));
        if let Some(h) = host {
            labels.insert(keys::VM_NAME.into(), json!(h));
        }
        let mut annotations = serde_json::Map::new();
        if let Some(d) = domain {
            annotations.insert(keys::DOMAIN.into(), json!(d));
        }
        Object::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": labels,
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
    fn extended_mode_lists_only_the_pods_labelled_with_the_vmi_name() {
        let c = FakeCluster::new()
            .with(
                PODS,
                labelled("other", Some("vmi2"), "Running", Some("vmi2")),
            )
            .with(PODS, labelled("P", Some("vmi1"), "Running", Some("vmi1")));
        assert_eq!(find(&c, Mode::Extended).as_deref(), Some("P"));
        let calls = c.calls();
        assert_eq!(calls.len(), 1, "one list, answered by the narrow selector");
        assert_eq!(
            calls[0].target,
            "kubevirt.io=virt-launcher,vm.kubevirt.io/name=vmi1"
        );
        assert_eq!(
            c.list(PODS, "ns", &calls[0].target).unwrap().len(),
            1,
            "the other VMI's pod is not in the answer"
        );
    }

    #[test]
    fn extended_mode_looks_at_every_launcher_pod_when_the_label_names_a_host_name() {
        // `spec.hostname: web` labels the pod `vm.kubevirt.io/name=web`; the annotation still finds it.
        let c = FakeCluster::new().with(PODS, labelled("P", Some("vmi1"), "Running", Some("web")));
        assert_eq!(find(&c, Mode::Extended).as_deref(), Some("P"));
        let targets: Vec<String> = c.calls().iter().map(|c| c.target.clone()).collect();
        assert_eq!(
            targets,
            [
                "kubevirt.io=virt-launcher,vm.kubevirt.io/name=vmi1",
                "kubevirt.io=virt-launcher"
            ]
        );
        // A finished pod found by the label does not stop the second look either.
        let c = FakeCluster::new()
            .with(
                PODS,
                labelled("old", Some("vmi1"), "Succeeded", Some("vmi1")),
            )
            .with(PODS, labelled("new", Some("vmi1"), "Running", Some("web")));
        assert_eq!(find(&c, Mode::Extended).as_deref(), Some("new"));
    }

    #[test]
    fn a_name_longer_than_a_label_value_lists_every_launcher_pod() {
        let long = "v".repeat(64);
        assert_eq!(selector(Mode::Extended, &long), "kubevirt.io=virt-launcher");
        assert_eq!(
            selector(Mode::Upstream, "vmi1"),
            "kubevirt.io=virt-launcher"
        );
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
