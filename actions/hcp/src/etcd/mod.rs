//! The `etcdSnapshot` method (docs/hcp.md#s4-4): an `HCPEtcdBackup` CR makes HyperShift snapshot etcd and
//! upload it to the backup's storage; its URL is recorded on the HostedCluster and HostedControlPlane.
//!
//! Nothing is kept between calls. The CR's name is derived from the Backup ([`name`]), so any call,
//! in any process, finds it: creation happens once per backup because the cluster says whether it
//! exists ([`create`]). Waiting is either inside Execute ([`poll`], `etcd-wait = "blocking"`) or an
//! asynchronous operation whose id says everything Progress and Cancel need ([`operation`]).

pub mod condition;
pub mod create;
pub mod credentials;
pub mod name;
pub mod operation;
pub mod poll;
pub mod storage;

use std::time::Duration;

use velero_wasm_sdk::Object;

use crate::context::Context;

/// Poll interval (both polls).
pub const INTERVAL: Duration = Duration::from_secs(5);
/// How long the CR may take to report that it started.
pub const VERIFY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the snapshot may take, waiting inside Execute.
pub const COMPLETION_TIMEOUT: Duration = Duration::from_secs(600);

/// One backup's etcd snapshot: where its CR and copied Secret are.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    /// What the call can reach.
    pub ctx: Context<'a>,
    /// The Backup being taken.
    pub backup: &'a Object,
    /// Its HostedControlPlane (discovered, docs/hcp.md#s3-2).
    pub hcp: &'a Object,
    /// Velero's namespace (BSL, credential Secrets).
    pub velero_namespace: &'a str,
    /// The HyperShift Operator's namespace (the copied Secret).
    pub ho_namespace: &'a str,
}

impl Job<'_> {
    /// The CR's namespace: the HostedControlPlane's.
    pub fn namespace(&self) -> &str {
        self.hcp.namespace()
    }

    /// The CR's name.
    pub fn cr_name(&self) -> String {
        name::cr_name(self.backup)
    }

    /// The copied Secret's name.
    pub fn secret_name(&self) -> String {
        credentials::copied_name(self.backup.name())
    }
}
