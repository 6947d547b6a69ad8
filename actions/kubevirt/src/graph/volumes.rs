//! The objects a VM or VMI volume refers to (docs/kubevirt.md#s4-7). Each volume is classified by the first of its
//! source fields that is set; names are not validated and nothing is de-duplicated here.

use serde_json::Value;
use velero_wasm_sdk::ResourceId;

use crate::fields::{set, text};
use crate::resources::{
    id, CONFIG_MAPS, DATA_VOLUMES, PERSISTENT_VOLUME_CLAIMS, SECRETS, SERVICE_ACCOUNTS,
};

/// The additional items of one volume, in upstream's order.
pub fn volume_items(namespace: &str, volume: &Value) -> Vec<ResourceId> {
    if set(volume, "/dataVolume").is_some() {
        let name = text(volume, "/dataVolume/name");
        return vec![
            id(DATA_VOLUMES, namespace, name),
            id(PERSISTENT_VOLUME_CLAIMS, namespace, name),
        ];
    }
    if set(volume, "/persistentVolumeClaim").is_some() {
        return vec![id(
            PERSISTENT_VOLUME_CLAIMS,
            namespace,
            text(volume, "/persistentVolumeClaim/claimName"),
        )];
    }
    if set(volume, "/memoryDump").is_some() {
        return vec![id(
            PERSISTENT_VOLUME_CLAIMS,
            namespace,
            text(volume, "/memoryDump/claimName"),
        )];
    }
    if set(volume, "/configMap").is_some() {
        return vec![id(CONFIG_MAPS, namespace, text(volume, "/configMap/name"))];
    }
    if set(volume, "/secret").is_some() {
        return vec![id(SECRETS, namespace, text(volume, "/secret/secretName"))];
    }
    if set(volume, "/serviceAccount").is_some() {
        return vec![id(
            SERVICE_ACCOUNTS,
            namespace,
            text(volume, "/serviceAccount/serviceAccountName"),
        )];
    }
    for cloud_init in ["/cloudInitNoCloud", "/cloudInitConfigDrive"] {
        if let Some(source) = set(volume, cloud_init) {
            return ["/secretRef", "/networkDataSecretRef"]
                .iter()
                .filter(|r| set(source, r).is_some())
                .map(|r| id(SECRETS, namespace, text(source, &format!("{r}/name"))))
                .collect();
        }
    }
    // containerDisk, emptyDisk, hostDisk, ephemeral, sysprep, downwardAPI, downwardMetrics: nothing.
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(volume: Value) -> Vec<String> {
        volume_items("vm-workloads", &volume)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn checklist_27_data_volume_names_the_dv_then_its_pvc() {
        assert_eq!(
            items(json!({"name": "root", "dataVolume": {"name": "d"}})),
            [
                "datavolumes.cdi.kubevirt.io vm-workloads/d",
                "persistentvolumeclaims vm-workloads/d"
            ]
        );
    }

    #[test]
    fn checklist_28_pvc_hotpluggable_or_not() {
        assert_eq!(
            items(json!({"persistentVolumeClaim": {"claimName": "p", "hotpluggable": true}})),
            ["persistentvolumeclaims vm-workloads/p"]
        );
    }

    #[test]
    fn checklist_29_memory_dump_is_a_pvc() {
        assert_eq!(
            items(json!({"memoryDump": {"claimName": "m"}})),
            ["persistentvolumeclaims vm-workloads/m"]
        );
    }

    #[test]
    fn checklist_30_config_map() {
        assert_eq!(
            items(json!({"configMap": {"name": "c"}})),
            ["configmaps vm-workloads/c"]
        );
    }

    #[test]
    fn checklist_31_secret() {
        assert_eq!(
            items(json!({"secret": {"secretName": "s"}})),
            ["secrets vm-workloads/s"]
        );
    }

    #[test]
    fn checklist_32_service_account() {
        assert_eq!(
            items(json!({"serviceAccount": {"serviceAccountName": "sa"}})),
            ["serviceaccounts vm-workloads/sa"]
        );
    }

    #[test]
    fn checklist_33_cloud_init_no_cloud_user_then_network_secret() {
        assert_eq!(
            items(
                json!({"cloudInitNoCloud": {"secretRef": {"name": "u"}, "networkDataSecretRef": {"name": "n"}}})
            ),
            ["secrets vm-workloads/u", "secrets vm-workloads/n"]
        );
    }

    #[test]
    fn checklist_34_cloud_init_config_drive_network_secret_only() {
        assert_eq!(
            items(json!({"cloudInitConfigDrive": {"networkDataSecretRef": {"name": "n"}}})),
            ["secrets vm-workloads/n"]
        );
    }

    #[test]
    fn checklist_35_inline_user_data_names_nothing() {
        assert!(items(json!({"cloudInitNoCloud": {"userData": "#cloud-config\n"}})).is_empty());
    }

    #[test]
    fn checklist_36_volumes_upstream_does_not_follow() {
        for volume in [
            json!({"containerDisk": {"image": "i", "imagePullSecret": "x"}}),
            json!({"emptyDisk": {"capacity": "1Gi"}}),
            json!({"hostDisk": {"path": "/d", "type": "Disk"}}),
            json!({"sysprep": {"configMap": {"name": "y"}}}),
            json!({"ephemeral": {"persistentVolumeClaim": {"claimName": "z"}}}),
            json!({"downwardMetrics": {}}),
            json!({"downwardAPI": {"fields": []}}),
        ] {
            assert!(items(volume.clone()).is_empty(), "{volume}");
        }
    }

    #[test]
    fn names_are_not_validated_and_null_sources_are_unset() {
        assert_eq!(
            items(json!({"configMap": {}})),
            ["configmaps vm-workloads/"]
        );
        assert_eq!(
            items(json!({"dataVolume": null, "secret": {"secretName": "s"}})),
            ["secrets vm-workloads/s"]
        );
    }
}
