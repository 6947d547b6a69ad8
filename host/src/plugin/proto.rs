//! The protobuf messages, servers and clients generated from `host/proto/` by the build script, one
//! module per protobuf package, so the gRPC paths are Velero's (`/v2.BackupItemAction/Execute`).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Velero's package `generated`: shared messages, PluginLister and the v1 item actions.
pub mod generated {
    tonic::include_proto!("generated");
}

/// Velero's package `v1`: ItemBlockAction.
pub mod v1 {
    tonic::include_proto!("v1");
}

/// Velero's package `v2`: BackupItemAction v2 and RestoreItemAction v2.
pub mod v2 {
    tonic::include_proto!("v2");
}

/// go-plugin's package `plugin`: the controller, stdio and broker services.
pub mod plugin {
    tonic::include_proto!("plugin");
}
