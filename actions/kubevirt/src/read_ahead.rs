//! Reading ahead: the reads an action will make that do not depend on each other, sent together as one
//! batch (`Cluster::read_all`, which the host sends at once), and a cluster that answers the action's
//! reads from that batch. The action's logic is unchanged: it reads, in upstream's order, and gets the
//! answer the batch brought back; a read the batch did not hold goes to the cluster as before.

use std::cell::RefCell;

use velero_wasm_sdk::{Api, Cluster, KubeAnswer, KubeCall, KubeError, Object, Read, ReadAnswer};

use crate::fields::{set, text};
use crate::keys;
use crate::mode::Mode;
use crate::resources::{
    CONFIG_MAPS, DATA_VOLUMES, PERSISTENT_VOLUME_CLAIMS, PODS, VIRTUAL_MACHINE_INSTANCES,
};
use crate::scope::{self, Scope};
use crate::workload::{vm_instance_spec, vm_running, volumes};

/// A cluster whose reads are first looked up among the answers of a batch read ahead; each answer
/// serves one read, as the read it stands for would have.
pub struct ReadAhead<'a> {
    cluster: &'a dyn Cluster,
    answers: RefCell<Vec<(Read, Result<ReadAnswer, KubeError>)>>,
}

impl<'a> ReadAhead<'a> {
    /// Sends `reads` to `cluster` as one batch and keeps the answers.
    pub fn new(cluster: &'a dyn Cluster, reads: Vec<Read>) -> ReadAhead<'a> {
        let answers = if reads.is_empty() {
            Vec::new()
        } else {
            let answers = cluster.read_all(&reads);
            reads.into_iter().zip(answers).collect()
        };
        ReadAhead {
            cluster,
            answers: RefCell::new(answers),
        }
    }

    fn take(&self, read: &Read) -> Option<Result<ReadAnswer, KubeError>> {
        let mut answers = self.answers.borrow_mut();
        let at = answers.iter().position(|(r, _)| r == read)?;
        Some(answers.remove(at).1)
    }

    /// The reads read ahead that no read asked for (for tests).
    pub fn unused(&self) -> Vec<Read> {
        self.answers
            .borrow()
            .iter()
            .map(|(r, _)| r.clone())
            .collect()
    }
}

fn unexpected() -> KubeError {
    KubeError::Other("the host answered a read of the batch with the wrong kind of answer".into())
}

impl Cluster for ReadAhead<'_> {
    fn call(&self, call: KubeCall<'_>) -> Result<KubeAnswer, KubeError> {
        let read = match call {
            KubeCall::Get {
                api,
                namespace,
                name,
            } => Read::Get {
                api,
                namespace: namespace.into(),
                name: name.into(),
            },
            KubeCall::List {
                api,
                namespace,
                label_selector,
            } => Read::List {
                api,
                namespace: namespace.into(),
                label_selector: label_selector.into(),
            },
            // Writes are never read ahead.
            _ => return self.cluster.call(call),
        };
        match (self.take(&read), &read) {
            (Some(answer), Read::Get { .. }) => match answer? {
                ReadAnswer::Object(object) => Ok(KubeAnswer::Object(object)),
                ReadAnswer::Objects(_) => Err(unexpected()),
            },
            (Some(answer), Read::List { .. }) => match answer? {
                ReadAnswer::Objects(objects) => Ok(KubeAnswer::Objects(objects)),
                ReadAnswer::Object(_) => Err(unexpected()),
            },
            (None, _) => self.cluster.call(call),
        }
    }
}

/// The reads the VM backup action makes on its way to a successful answer, in its order: in extended
/// mode the resource policy ConfigMap the Backup names, then the VMI of a running VM (when VMIs are in
/// the backup), each volume's DataVolume (not from the VM's own templates) and the PVC of the same
/// name (read when the DataVolume is gone) and each PVC (when PVCs are in the backup) unless the
/// backup only keeps metadata, the launcher pods of a created VM, and the backend-storage PVCs of a VM
/// that needs them. Every read is named by the VM or the Backup, so all go out in one round: none
/// waits for another's answer. The checks that decide without reading are made here too, so that a VM
/// they refuse reads nothing ahead past them; the only reads ahead that go unused are those a failing
/// check makes unnecessary (the policy's checks included), and the PVC behind a DataVolume that exists.
pub fn vm_backup_reads(mode: Mode, vm: &Object, backup: &Object) -> Vec<Read> {
    let Ok(spec) = vm_instance_spec(vm) else {
        return Vec::new();
    };
    let mut reads = Vec::new();
    if let Some(policy) = scope::policy_config_map(mode, backup) {
        reads.push(Read::Get {
            api: CONFIG_MAPS,
            namespace: backup.namespace().into(),
            name: policy.into(),
        });
    }
    let scope = Scope::of(backup, mode);
    let (ns, name) = (vm.namespace(), vm.name());
    let get = |api: Api, name: &str| Read::Get {
        api,
        namespace: ns.into(),
        name: name.into(),
    };
    let list = |api: Api, label_selector: String| Read::List {
        api,
        namespace: ns.into(),
        label_selector,
    };
    if vm_running(vm, mode.extended()) {
        if !scope.in_backup(&scope::VIRTUAL_MACHINE_INSTANCES) {
            return reads;
        }
        reads.push(get(VIRTUAL_MACHINE_INSTANCES, name));
        if !scope.in_backup(&scope::PODS) && scope.in_backup(&scope::PERSISTENT_VOLUME_CLAIMS) {
            return reads;
        }
    }
    if !scope.metadata_backup() {
        let templates: Vec<&str> = vm
            .array_at("/spec/dataVolumeTemplates")
            .iter()
            .map(|t| text(t, "/metadata/name"))
            .collect();
        for volume in volumes(spec) {
            if set(volume, "/dataVolume").is_some()
                && !templates.contains(&text(volume, "/dataVolume/name"))
            {
                let dv = text(volume, "/dataVolume/name");
                reads.push(get(DATA_VOLUMES, dv));
                // Read only when the DataVolume is gone; read now rather than after its answer.
                if scope.in_backup(&scope::PERSISTENT_VOLUME_CLAIMS) {
                    reads.push(get(PERSISTENT_VOLUME_CLAIMS, dv));
                }
            }
            if set(volume, "/persistentVolumeClaim").is_some() {
                if !scope.in_backup(&scope::PERSISTENT_VOLUME_CLAIMS) {
                    return reads;
                }
                reads.push(get(
                    PERSISTENT_VOLUME_CLAIMS,
                    text(volume, "/persistentVolumeClaim/claimName"),
                ));
            }
        }
    }
    if vm.bool_at("/status/created") {
        reads.push(list(PODS, crate::graph::launcher::selector(mode, name)));
    }
    if crate::graph::backend::needs_backend(spec) {
        reads.push(list(
            PERSISTENT_VOLUME_CLAIMS,
            format!("{}={name}", keys::PERSISTENT_STATE_FOR),
        ));
    }
    reads
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::virtualmachine;
    use crate::context::Context;
    use crate::test_objects;
    use serde_json::json;
    use velero_wasm_sdk::FakeCluster;

    fn obj(v: serde_json::Value) -> Object {
        Object::from_value(v).unwrap()
    }

    fn running_vm() -> Object {
        obj(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "vm1", "namespace": "ns"},
            "spec": {"template": {"spec": {
                "domain": {"devices": {"tpm": {"persistent": true}}},
                "volumes": [
                    {"name": "root", "persistentVolumeClaim": {"claimName": "root-pvc"}},
                    {"name": "data", "dataVolume": {"name": "data-dv"}}
                ]}}},
            "status": {"printableStatus": "Running", "created": true}
        }))
    }

    /// vm1's launcher pod, labelled as virt-controller labels it.
    fn launcher_pod() -> Object {
        obj(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "virt-launcher-vm1-x", "namespace": "ns",
                "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": "vm1"},
                "annotations": {"kubevirt.io/domain": "vm1"}}}))
    }

    fn cluster() -> FakeCluster {
        FakeCluster::new()
            .with(
                VIRTUAL_MACHINE_INSTANCES,
                obj(
                    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "metadata": {"name": "vm1", "namespace": "ns"}}),
                ),
            )
            .with(
                PERSISTENT_VOLUME_CLAIMS,
                obj(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "root-pvc", "namespace": "ns"}})),
            )
            .with(
                DATA_VOLUMES,
                obj(
                    json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                    "metadata": {"name": "data-dv", "namespace": "ns"}}),
                ),
            )
            .with(PODS, launcher_pod())
    }

    #[test]
    fn the_vm_backup_reads_everything_ahead_and_answers_as_without() {
        let backup = test_objects::backup_spec(json!({}));
        for mode in [Mode::Upstream, Mode::Extended] {
            let vm = running_vm();
            let direct = cluster();
            let expected = virtualmachine::backup(&Context::new(&direct, mode), &vm, &backup);

            let batched = cluster();
            let reads = vm_backup_reads(mode, &vm, &backup);
            assert_eq!(reads.len(), 6, "{reads:?}");
            let ahead = ReadAhead::new(&batched, reads);
            let sent = batched.calls().len();
            let answered = virtualmachine::backup(&Context::new(&ahead, mode), &vm, &backup);
            assert_eq!(answered, expected);
            // Nothing was read after the batch: no read waited for another's answer.
            assert_eq!(batched.calls().len(), sent);
            // Every read ahead was used but the PVC behind the DataVolume, which exists: the same
            // calls, in the same order, as without, and that one.
            let pvc_behind_dv = Read::Get {
                api: PERSISTENT_VOLUME_CLAIMS,
                namespace: "ns".into(),
                name: "data-dv".into(),
            };
            assert_eq!(ahead.unused(), vec![pvc_behind_dv]);
            let mut calls = batched.calls();
            calls.retain(|c| !(c.resource == "persistentvolumeclaims" && c.target == "data-dv"));
            assert_eq!(calls, direct.calls());
        }
    }

    #[test]
    fn the_pvc_of_a_datavolume_that_is_gone_comes_with_the_batch() {
        // The DataVolume was garbage-collected after its import: the check reads its PVC instead.
        let backup = test_objects::backup_spec(json!({}));
        let with_pvc_only = || {
            [
                (
                    VIRTUAL_MACHINE_INSTANCES,
                    "kubevirt.io/v1",
                    "VirtualMachineInstance",
                    "vm1",
                ),
                (
                    PERSISTENT_VOLUME_CLAIMS,
                    "v1",
                    "PersistentVolumeClaim",
                    "root-pvc",
                ),
                (
                    PERSISTENT_VOLUME_CLAIMS,
                    "v1",
                    "PersistentVolumeClaim",
                    "data-dv",
                ),
            ]
            .into_iter()
            .fold(FakeCluster::new(), |c, (api, api_version, kind, name)| {
                c.with(
                    api,
                    obj(json!({"apiVersion": api_version, "kind": kind,
                        "metadata": {"name": name, "namespace": "ns"}})),
                )
            })
            .with(PODS, launcher_pod())
        };
        for mode in [Mode::Upstream, Mode::Extended] {
            let vm = running_vm();
            let direct = with_pvc_only();
            let expected = virtualmachine::backup(&Context::new(&direct, mode), &vm, &backup);
            assert!(expected.is_ok(), "{expected:?}");

            let batched = with_pvc_only();
            let ahead = ReadAhead::new(&batched, vm_backup_reads(mode, &vm, &backup));
            let sent = batched.calls().len();
            let answered = virtualmachine::backup(&Context::new(&ahead, mode), &vm, &backup);
            assert_eq!(answered, expected);
            assert_eq!(batched.calls().len(), sent, "a read after the batch");
            assert!(ahead.unused().is_empty(), "{:?}", ahead.unused());
            assert_eq!(batched.calls(), direct.calls());
        }
    }

    #[test]
    fn extended_mode_reads_the_resource_policy_with_the_vm_objects() {
        let backup = test_objects::backup_with_policy(json!({}));
        let with_policy = || {
            cluster().with(
                CONFIG_MAPS,
                test_objects::policy_configmap("version: v1\nvolumePolicies: []\n"),
            )
        };
        let vm = running_vm();
        let direct = with_policy();
        let expected = virtualmachine::backup(&Context::new(&direct, Mode::Extended), &vm, &backup);
        assert!(expected.is_ok(), "{expected:?}");
        assert!(direct.calls().iter().any(|c| c.resource == "configmaps"));

        let batched = with_policy();
        let reads = vm_backup_reads(Mode::Extended, &vm, &backup);
        assert_eq!(
            reads.first(),
            Some(&Read::Get {
                api: CONFIG_MAPS,
                namespace: "velero".into(),
                name: "policy".into()
            })
        );
        let ahead = ReadAhead::new(&batched, reads);
        let sent = batched.calls().len();
        let answered = virtualmachine::backup(&Context::new(&ahead, Mode::Extended), &vm, &backup);
        assert_eq!(answered, expected);
        assert_eq!(batched.calls().len(), sent, "a read after the batch");
        // Upstream mode reads no policy, and reads none ahead.
        assert!(!vm_backup_reads(Mode::Upstream, &vm, &backup)
            .iter()
            .any(|r| matches!(r, Read::Get { api, .. } if *api == CONFIG_MAPS)));
    }

    #[test]
    fn a_read_not_read_ahead_goes_to_the_cluster_and_failures_come_back_as_they_were() {
        let c = FakeCluster::new().failing_list(PODS);
        let ahead = ReadAhead::new(
            &c,
            vec![Read::List {
                api: PODS,
                namespace: "ns".into(),
                label_selector: "a=b".into(),
            }],
        );
        assert!(ahead.list(PODS, "ns", "a=b").is_err());
        // Answered once: the same read again is sent.
        assert!(ahead.get(PODS, "ns", "p").unwrap_err().is_not_found());
        assert_eq!(c.calls().len(), 2);
    }

    #[test]
    fn a_vm_refused_before_any_read_reads_nothing_ahead() {
        // VMIs left out of the backup: the running VM is refused before its VMI is read.
        let backup =
            test_objects::backup_spec(json!({"excludedResources": ["virtualmachineinstances"]}));
        assert!(vm_backup_reads(Mode::Extended, &running_vm(), &backup).is_empty());
    }
}
