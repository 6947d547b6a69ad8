//! Where a failure policy is stated (a manifest, a ConfigMap's annotation, a last good copy) and
//! what each source of modules falls back on.

use std::collections::BTreeMap;

use super::problem::{LoadProblem, Remark};
use crate::modules::configmaps::ConfigMapModules;
use crate::modules::{FailurePolicy, ModuleSource, Origin, TrustedKeys, VersionFloor};

/// Where a failure policy was stated, as `status` and `actions` show it.
pub(super) const MANIFEST_SOURCE: &str = "manifest";
pub(super) const ANNOTATION_SOURCE: &str = "ConfigMap annotation";
pub(super) const LAST_GOOD_SOURCE: &str = "last good copy's manifest";
/// The outcome of a failure policy that refused a module's actions.
pub(crate) const REFUSING: &str = "refusing";
/// The outcome of a failure policy that put the module's last good copy in service.
pub(crate) const SERVING_LAST_GOOD: &str = "serving last good copy";
/// The outcome of a failure policy that left what serves under the module's name (stock).
pub(crate) const SERVING_STOCK: &str = "serving stock";

/// The outcome of a failure policy that did not refuse, for `status`.
pub(super) fn outcome_of(served: bool, last_good_copy: bool) -> &'static str {
    match (served, last_good_copy) {
        (true, true) => SERVING_LAST_GOOD,
        (true, false) => SERVING_STOCK,
        (false, _) => "not served",
    }
}

/// The uid of the ConfigMap a module (or the override of a stock one) came from.
pub(super) fn configmap_uid(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::ConfigMap { uid, .. } => Some(uid),
        Origin::Override(from) => configmap_uid(from),
        _ => None,
    }
}

/// The failure policies module ConfigMaps state in their annotation, by uid; a value that is no
/// policy is reported and taken as `refuse`, the strictest: the operator asked for one. A shadow
/// ConfigMap's annotation states nothing (a shadow never serves): one that is no policy is remarked
/// on as about the shadow, which never reaches what Velero counts.
pub(super) fn annotated_policies(
    configmaps: &ConfigMapModules,
    problems: &mut Vec<LoadProblem>,
) -> BTreeMap<String, FailurePolicy> {
    // Each listed ConfigMap's name and whether it is a shadow, by uid.
    let mut named: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
    for problem in &configmaps.problems {
        if let Some(uid) = &problem.uid {
            named.insert(uid, (&problem.configmap, problem.shadow));
        }
    }
    for cached in &configmaps.configmaps {
        named.insert(&cached.uid, (&cached.configmap, cached.shadow));
    }
    let mut written: BTreeMap<String, String> = configmaps.on_failure.clone();
    for cached in &configmaps.configmaps {
        if let Some(text) = &cached.on_failure {
            written.insert(cached.uid.clone(), text.clone());
        }
    }
    let annotation = crate::modules::failure_policy::ANNOTATION;
    let mut policies = BTreeMap::new();
    for (uid, text) in written {
        let (configmap, shadow) = named.get(uid.as_str()).copied().unwrap_or((&uid, false));
        match FailurePolicy::parse(&text) {
            Ok(_) if shadow => {}
            Ok(policy) => {
                policies.insert(uid, policy);
            }
            Err(why) if shadow => problems.push(LoadProblem {
                remark: Remark::FailurePolicyAnnotation,
                ..LoadProblem::about_shadow(format!(
                    "shadow ConfigMap {configmap}: annotation {annotation}: {why}; a shadow never serves, so it has no failure policy, but once its shadow label is removed this is taken as refuse, the strictest"
                ))
                .of_configmap(&uid)
            }),
            Err(why) => {
                problems.push(LoadProblem {
                    remark: Remark::FailurePolicyAnnotation,
                    ..LoadProblem::warning(format!(
                        "ConfigMap {configmap}: annotation {annotation}: {why}; taken as refuse, the strictest, until it is corrected"
                    ))
                    .of_configmap(&uid)
                });
                policies.insert(uid, FailurePolicy::Refuse);
            }
        }
    }
    policies
}

/// What a module source falls back on: the stock modules (a manifest without a component overrides
/// one), and the keys that verify signatures.
#[derive(Clone, Copy)]
pub(super) struct Sources<'a> {
    pub(super) stock: &'a BTreeMap<String, ModuleSource>,
    pub(super) trusted: Option<&'a TrustedKeys>,
    /// The failure policies module ConfigMaps state in their annotation, by uid.
    pub(super) annotations: &'a BTreeMap<String, FailurePolicy>,
    /// The version floor a module signed by a trusted key is held to ([`super::rollback`]).
    pub(super) floor: Option<&'a VersionFloor>,
}

impl Sources<'_> {
    /// Whether what a manifest with this signature states is the operator's: no keys are trusted,
    /// or a trusted key signed it.
    pub(super) fn stated_by_operator(
        &self,
        signature: Option<&crate::modules::ModuleSignature>,
    ) -> bool {
        self.trusted.is_none() || signature.is_some_and(|s| s.verified)
    }

    /// The failure policy the annotation of the ConfigMap `origin` came from states, if any.
    pub(super) fn annotation(&self, origin: &Origin) -> Option<FailurePolicy> {
        self.annotations.get(configmap_uid(origin)?).copied()
    }
}
