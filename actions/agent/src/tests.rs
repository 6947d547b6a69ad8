//! The action against a fake cluster.

use hypershift::apis::{CUSTOM_RESOURCE_DEFINITIONS, HOSTED_CONTROL_PLANES};
use serde_json::{json, Value};
use velero_wasm_sdk::FakeCluster;

use super::*;

fn object(value: Value) -> Object {
    Object::from_value(value).unwrap()
}

fn cluster_deployment() -> Value {
    json!({"apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment",
        "metadata": {"name": "agent-hc", "namespace": "clusters", "resourceVersion": "4711"},
        "spec": {"clusterName": "agent-hc", "preserveOnDelete": true,
                 "platform": {"agentBareMetal": {"agentSelector": {}}}, "futureField": {"kept": 1}}})
}

fn hcp(platform: &str) -> Object {
    object(
        json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedControlPlane",
        "metadata": {"name": "agent-hc", "namespace": "clusters-agent-hc"},
        "spec": {"platform": {"type": platform}}}),
    )
}

fn crd() -> Object {
    object(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "hostedcontrolplanes.hypershift.openshift.io"}}),
    )
}

fn cluster(platform: &str) -> FakeCluster {
    FakeCluster::new()
        .with(CUSTOM_RESOURCE_DEFINITIONS, crd())
        .with(HOSTED_CONTROL_PLANES, hcp(platform))
        .with(CLUSTER_DEPLOYMENTS, object(cluster_deployment()))
}

const BACKUP_JSON: &str = r#"{"metadata":{"name":"agent-nightly"},"spec":{"includedNamespaces":["clusters","clusters-agent-hc"]}}"#;

#[test]
fn on_the_agent_platform_the_live_object_loses_preserve_on_delete_and_nothing_else() {
    let c = cluster("Agent");
    let item = cluster_deployment().to_string();
    assert_eq!(backup(&c, &item, BACKUP_JSON), Ok(Outcome::Updated));
    let update = c.calls().into_iter().find(|c| c.verb == "update").unwrap();
    assert_eq!(
        (
            update.resource.as_str(),
            update.namespace.as_str(),
            update.target.as_str()
        ),
        (
            "clusterdeployments.hive.openshift.io",
            "clusters",
            "agent-hc"
        )
    );
    let live = c.get(CLUSTER_DEPLOYMENTS, "clusters", "agent-hc").unwrap();
    let mut expected = cluster_deployment();
    expected["spec"]
        .as_object_mut()
        .unwrap()
        .remove("preserveOnDelete");
    assert_eq!(
        live.into_value(),
        expected,
        "unknown fields and resourceVersion kept"
    );
}

#[test]
fn other_platforms_and_other_backups_leave_cluster_deployments_alone() {
    for platform in ["None", "AWS", "KubeVirt"] {
        let c = cluster(platform);
        let outcome = backup(&c, &cluster_deployment().to_string(), BACKUP_JSON).unwrap();
        assert!(matches!(outcome, Outcome::PassThrough(_)), "{platform}");
        assert!(c.calls().iter().all(|c| c.verb != "update"), "{platform}");
    }
    let c = cluster("Agent");
    let not_hypershift = r#"{"metadata":{"name":"b"},"spec":{}}"#;
    let outcome = backup(&c, &cluster_deployment().to_string(), not_hypershift).unwrap();
    assert_eq!(
        outcome,
        Outcome::PassThrough("no namespaces provided".into())
    );
    assert!(c.calls().is_empty());
}

#[test]
fn without_a_hosted_control_plane_the_item_passes_through() {
    let c = FakeCluster::new().with(CUSTOM_RESOURCE_DEFINITIONS, crd());
    let outcome = backup(&c, &cluster_deployment().to_string(), BACKUP_JSON).unwrap();
    assert!(matches!(outcome, Outcome::PassThrough(why) if why.contains("no HostedControlPlane")));
}

#[test]
fn update_failures_say_what_was_attempted() {
    // The live object is gone: the update fails.
    let c = FakeCluster::new()
        .with(CUSTOM_RESOURCE_DEFINITIONS, crd())
        .with(HOSTED_CONTROL_PLANES, hcp("Agent"));
    let e = backup(&c, &cluster_deployment().to_string(), BACKUP_JSON).unwrap_err();
    assert!(
        e.starts_with("error performing migration tasks for agent platform: error updating ClusterDeployment resource with PreserveOnDelete option: "),
        "{e}"
    );
    let mut bad = cluster_deployment();
    bad["spec"] = json!("not an object");
    let e = backup(&cluster("Agent"), &bad.to_string(), BACKUP_JSON).unwrap_err();
    assert!(
        e.contains("error converting item to ClusterDeployment"),
        "{e}"
    );
}
