//! Write Velero item actions as WebAssembly components for velero-wasm.
//!
//! A component implements [`Plugin`] for a type of its own and exports it with [`export_plugin!`]:
//!
//! ```
//! use velero_wasm_sdk::*;
//!
//! struct Labeler;
//!
//! impl Plugin for Labeler {
//!     fn describe() -> Vec<ActionInfo> {
//!         vec![ActionInfo::new("example.io/label-pvcs", Kind::Backup)
//!             .applies_to(Selector::resources(&["persistentvolumeclaims"]))]
//!     }
//!
//!     fn backup(_action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
//!         let mut item = Object::parse(&request.item)?;
//!         item.set_label("example.io/backed-up", "true");
//!         Ok(BackupResponse::with_item(&item))
//!     }
//! }
//!
//! // The component's export in a wasm32 build; nothing in a native build (unit tests).
//! export_plugin!(Labeler);
//!
//! # fn main() {
//! // A native unit test calls the action directly.
//! let request = BackupRequest {
//!     item: r#"{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
//!               "metadata": {"name": "data", "namespace": "apps"}}"#.into(),
//!     backup: r#"{"metadata": {"name": "nightly", "namespace": "velero"}}"#.into(),
//! };
//! let response = Labeler::backup("example.io/label-pvcs", request).unwrap();
//! let item = Object::parse(&response.item.unwrap()).unwrap();
//! assert_eq!(item.label("example.io/backed-up"), Some("true"));
//! # }
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release` in a crate with
//! `crate-type = ["cdylib", "rlib"]`; `cargo test` builds the same crate natively. `README.md` walks
//! through both.
//!
//! The contract itself is the WIT package in `wit/` (this crate's copy of velero-wasm's); this crate
//! adds conveniences around the generated bindings: default implementations for the calls an action
//! does not use, JSON helpers, and each capability as a trait with the host's implementation and a
//! recording fake, so that action logic can be unit-tested natively: [`Cluster`] ([`FakeCluster`]
//! applies the module's grant), [`Clock`], [`Config`], [`Environment`], [`Http`] and [`Signer`].

/// The examples of `README.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

pub mod clock;
pub mod cluster;
pub mod config;
pub mod environment;
pub mod grant;
pub mod http;
pub mod log;
pub mod named_items;
pub mod object;
mod rfc3339;
pub mod signing;

/// The raw bindings generated from the WIT package. The world is `plugin-with-signing` (`plugin` plus
/// the `signing` import); an import a component never calls is left out of the built component.
/// Generated code: its documentation is the WIT's.
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "plugin-with-signing",
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "velero_wasm_sdk::bindings",
        // Actions and their tests compare what they return (`ResourceId`s above all).
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::exports::velero_wasm::plugin::actions::{
    ActionInfo, BackupRequest, BackupResponse, Kind, Need, OperationProgress, RestoreRequest,
    RestoreResponse, Selector,
};
pub use bindings::velero_wasm::plugin::types::{ResourceId, Timestamp, Verb};
pub use clock::{Clock, FakeClock, HostClock};
pub use cluster::{
    Api, Call, Cluster, FakeCluster, HostCluster, KubeAnswer, KubeCall, KubeError, Read, ReadAnswer,
};
pub use config::{Config, FakeConfig, HostConfig};
pub use environment::{Environment, FakeEnvironment, HostEnvironment};
pub use http::{FakeHttp, HostHttp, Http};
pub use object::Object;
pub use signing::{FakeSigner, HostSigner, Signer};

use bindings::exports::velero_wasm::plugin::actions::Guest;

/// A component's actions. Implement [`Plugin::describe`] and the calls your actions' kinds use;
/// the others answer with an error naming the action and the call.
pub trait Plugin {
    /// Every action this component provides.
    fn describe() -> Vec<ActionInfo>;

    /// A `backup` or `backup-v2` action on one item.
    fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
        let _ = request;
        Err(unsupported(action, "backup"))
    }

    /// A `restore` or `restore-v2` action on one item.
    fn restore(action: &str, request: RestoreRequest) -> Result<RestoreResponse, String> {
        let _ = request;
        Err(unsupported(action, "restore"))
    }

    /// An `item-block` action: the objects to back up in the same item block as `item`.
    fn related_items(action: &str, item: &str, backup: &str) -> Result<Vec<ResourceId>, String> {
        let _ = (item, backup);
        Err(unsupported(action, "related-items"))
    }

    /// A `delete` action on one item of a backup being deleted.
    fn delete(action: &str, item: &str, backup: &str) -> Result<(), String> {
        let _ = (item, backup);
        Err(unsupported(action, "delete"))
    }

    /// The progress of an asynchronous operation (`backup-v2`, `restore-v2`).
    fn progress(
        action: &str,
        operation_id: &str,
        subject: &str,
    ) -> Result<OperationProgress, String> {
        let _ = subject;
        Err(format!(
            "operation ID {operation_id} is invalid: action {action} starts no asynchronous operations"
        ))
    }

    /// Cancels an asynchronous operation. Best effort: the default does nothing.
    fn cancel(action: &str, operation_id: &str, subject: &str) -> Result<(), String> {
        let _ = (action, operation_id, subject);
        Ok(())
    }

    /// `restore-v2`: whether the additional items are ready. The default says they are.
    fn items_ready(action: &str, items: Vec<ResourceId>, restore: &str) -> Result<bool, String> {
        let _ = (action, items, restore);
        Ok(true)
    }
}

/// Why a host call cannot be made in a native build (unit tests): there is no host to answer it.
#[cfg(not(target_arch = "wasm32"))]
fn no_host(what: &str) -> String {
    format!(
        "{what}: there is no velero-wasm host in a native build; give the logic the SDK's fakes in unit tests"
    )
}

fn unsupported(action: &str, call: &str) -> String {
    format!("action {action} does not implement {call}")
}

impl<T: Plugin> Guest for T {
    fn describe() -> Vec<ActionInfo> {
        <T as Plugin>::describe()
    }
    fn backup(action: String, request: BackupRequest) -> Result<BackupResponse, String> {
        <T as Plugin>::backup(&action, request)
    }
    fn restore(action: String, request: RestoreRequest) -> Result<RestoreResponse, String> {
        <T as Plugin>::restore(&action, request)
    }
    fn related_items(
        action: String,
        item: String,
        backup: String,
    ) -> Result<Vec<ResourceId>, String> {
        <T as Plugin>::related_items(&action, &item, &backup)
    }
    fn delete(action: String, item: String, backup: String) -> Result<(), String> {
        <T as Plugin>::delete(&action, &item, &backup)
    }
    fn progress(
        action: String,
        operation_id: String,
        subject: String,
    ) -> Result<OperationProgress, String> {
        <T as Plugin>::progress(&action, &operation_id, &subject)
    }
    fn cancel(action: String, operation_id: String, subject: String) -> Result<(), String> {
        <T as Plugin>::cancel(&action, &operation_id, &subject)
    }
    fn items_ready(
        action: String,
        items: Vec<ResourceId>,
        restore: String,
    ) -> Result<bool, String> {
        <T as Plugin>::items_ready(&action, items, &restore)
    }
}

/// Exports a type implementing [`Plugin`] as this component's `actions` when the crate is built for
/// wasm32. A native build (the crate's unit tests) has no component to export to: there the macro only
/// checks that the type implements [`Plugin`], so the same source builds and tests on both targets.
#[macro_export]
macro_rules! export_plugin {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::export_bindings!($ty with_types_in $crate::bindings);
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn() -> ::std::vec::Vec<$crate::ActionInfo> = <$ty as $crate::Plugin>::describe;
    };
}

impl ActionInfo {
    /// An action that applies to every item until [`ActionInfo::applies_to`] narrows it.
    pub fn new(name: &str, kind: Kind) -> Self {
        ActionInfo {
            name: name.to_string(),
            kind,
            applies_to: Selector::all(),
            description: String::new(),
            needs: Vec::new(),
        }
    }

    /// Sets the items the action applies to.
    pub fn applies_to(mut self, selector: Selector) -> Self {
        self.applies_to = selector;
        self
    }

    /// Sets the one-line description.
    pub fn description(mut self, text: &str) -> Self {
        self.description = text.to_string();
        self
    }

    /// Declares Kubernetes access the action uses: a resource (`pods`, `datavolumes.cdi.kubevirt.io`)
    /// and verbs, wherever the calls go ([`ActionInfo::needs_kube_in`] says where, and gets the grant's
    /// namespaces checked too).
    pub fn needs_kube(mut self, resource: &str, verbs: &[Verb]) -> Self {
        self.needs
            .push(Need::Kube((resource.to_string(), verbs.to_vec())));
        self
    }

    /// Declares Kubernetes access the action uses, and where its calls go, as a grant writes it:
    /// `"@item"` (the item's namespace), `"@velero"`, a namespace name, `""` (cluster scope) or `"*"`
    /// (listing in every namespace). The host then checks the grant namespace by namespace: a grant
    /// for `kube-system` only does not cover `"@item"` of an action that applies to every namespace,
    /// and `velero-wasm build` says so. (On the wire the resource reads `pods in @item`.)
    pub fn needs_kube_in(mut self, resource: &str, verbs: &[Verb], namespaces: &[&str]) -> Self {
        let namespaces: Vec<&str> = namespaces
            .iter()
            .map(|n| if n.is_empty() { "(cluster)" } else { n })
            .collect();
        let resource = match namespaces.is_empty() {
            true => resource.to_string(),
            false => format!("{resource} in {}", namespaces.join(",")),
        };
        self.needs.push(Need::Kube((resource, verbs.to_vec())));
        self
    }

    /// Declares outbound HTTPS to `host` the action uses.
    pub fn needs_http(mut self, host: &str) -> Self {
        self.needs.push(Need::Http(host.to_string()));
        self
    }
}

impl Selector {
    /// Every item.
    pub fn all() -> Self {
        Selector {
            included_namespaces: Vec::new(),
            excluded_namespaces: Vec::new(),
            included_resources: Vec::new(),
            excluded_resources: Vec::new(),
            label_selector: String::new(),
        }
    }

    /// Items of these resources (plural, kind, or `resource.group`, as Velero accepts them).
    pub fn resources(resources: &[&str]) -> Self {
        Selector {
            included_resources: resources.iter().map(|r| r.to_string()).collect(),
            ..Selector::all()
        }
    }

    /// Narrows the selector to items whose labels match `selector` (Kubernetes syntax).
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = selector.to_string();
        self
    }
}

impl ResourceId {
    /// An identifier: group ("" for core), plural resource, namespace ("" if cluster-scoped), name.
    pub fn new(group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        ResourceId {
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for ResourceId {
    /// Velero's notation: `resource.group namespace/name` (`resource` alone for the core group).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}/{}", self.resource, self.namespace, self.name)
        } else {
            write!(
                f,
                "{}.{} {}/{}",
                self.resource, self.group, self.namespace, self.name
            )
        }
    }
}

impl BackupResponse {
    /// Stores the item unchanged, with no additional items.
    pub fn unchanged() -> Self {
        BackupResponse {
            item: None,
            additional_items: Vec::new(),
            operation_id: None,
            post_operation_items: Vec::new(),
        }
    }

    /// Stores `item` in place of the input.
    pub fn with_item(item: &Object) -> Self {
        BackupResponse {
            item: Some(item.to_json()),
            ..BackupResponse::unchanged()
        }
    }

    /// Adds related objects for Velero to back up right after this item.
    pub fn additional(mut self, items: Vec<ResourceId>) -> Self {
        self.additional_items.extend(items);
        self
    }
}

impl RestoreResponse {
    /// Restores the item unchanged, with no additional items.
    pub fn unchanged() -> Self {
        RestoreResponse {
            item: None,
            additional_items: Vec::new(),
            skip_restore: false,
            operation_id: None,
            wait_for_additional_items: false,
            additional_items_timeout: None,
        }
    }

    /// Does not restore the item.
    pub fn skip() -> Self {
        RestoreResponse {
            skip_restore: true,
            ..RestoreResponse::unchanged()
        }
    }

    /// Restores `item` in place of the input.
    pub fn with_item(item: &Object) -> Self {
        RestoreResponse {
            item: Some(item.to_json()),
            ..RestoreResponse::unchanged()
        }
    }

    /// Adds objects from the backup for Velero to restore before this item.
    pub fn additional(mut self, items: Vec<ResourceId>) -> Self {
        self.additional_items.extend(items);
        self
    }

    /// Restores `item` and asks Velero to restore this response's additional items even where the
    /// restore's resource and namespace filters exclude them: the item carries
    /// [`MUST_INCLUDE_ADDITIONAL_ITEMS`]` = "true"`, which Velero removes before creating it. Velero
    /// reads the annotation from v1.18.3 on (velero-io/velero #10101, backporting #10082); up to
    /// v1.18.2 it creates the item with the annotation on it and keeps filtering.
    pub fn with_item_including_additional(item: &Object) -> Self {
        let mut item = item.clone();
        item.set_annotation(MUST_INCLUDE_ADDITIONAL_ITEMS, "true");
        RestoreResponse::with_item(&item)
    }
}

/// The annotation a restore action puts on its returned item so that Velero restores the action's
/// additional items whatever the restore's filters say (see
/// [`RestoreResponse::with_item_including_additional`]).
pub const MUST_INCLUDE_ADDITIONAL_ITEMS: &str = "restore.velero.io/must-include-additional-items";

/// Random bytes from the host.
pub mod random {
    /// `len` cryptographically secure random bytes.
    pub fn bytes(len: u32) -> Vec<u8> {
        #[cfg(target_arch = "wasm32")]
        return crate::bindings::velero_wasm::plugin::random::bytes(len);
        // Native unit tests: not secure, but different on every call.
        #[cfg(not(target_arch = "wasm32"))]
        {
            use std::hash::{BuildHasher, Hasher};
            (0..len)
                .map(|i| {
                    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                    h.write_u32(i);
                    h.finish() as u8
                })
                .collect()
        }
    }

    /// A random UUID, version 4, in canonical lower-case form.
    pub fn uuid_v4() -> String {
        let mut b = bytes(16);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}

#[cfg(test)]
mod response_tests {
    use super::*;

    #[test]
    fn a_restore_response_can_exempt_its_additional_items_from_the_filters() {
        let item = Object::parse(
            r#"{"kind":"VirtualMachine","metadata":{"name":"vm","annotations":{"a":"b"}}}"#,
        )
        .unwrap();
        let out = RestoreResponse::with_item_including_additional(&item)
            .additional(vec![ResourceId::new("", "secrets", "ns", "s")]);
        let returned = Object::parse(out.item.as_deref().unwrap()).unwrap();
        assert_eq!(
            returned.annotation(MUST_INCLUDE_ADDITIONAL_ITEMS),
            Some("true")
        );
        assert_eq!(returned.annotation("a"), Some("b"));
        assert_eq!(
            out.additional_items,
            [ResourceId::new("", "secrets", "ns", "s")],
            "what an action returns compares whole"
        );
        assert!(!out.skip_restore);
        assert_eq!(item.annotation(MUST_INCLUDE_ADDITIONAL_ITEMS), None);
    }
}
