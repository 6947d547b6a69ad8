//! `velero-wasm rbac`: the Kubernetes RBAC that the loaded modules' grants need, and nothing more, for
//! Velero's service account: a ClusterRole for what a grant allows in any namespace (`*`, `@item`,
//! a glob, or cluster scope), a Role per namespace a grant names (`@velero` is Velero's), and their
//! bindings, plus the host's own needs in Velero's namespace (listing module ConfigMaps and reading
//! them by name, and
//! writing on each what became of it: `create` on events, `patch` on configmaps). RBAC is the outer fence; a module's grant limits each call further. A comment above
//! each Role names the modules that need it; `--omit-namespace` leaves out the Role of a namespace
//! the cluster does not have (such as `hypershift` where HyperShift is not installed). The OCI pull
//! Secrets the host reads (`VELERO_WASM_OCI_PULL_SECRETS`, docs/modules.md#s7) get a `get` scoped to
//! their names in Velero's namespace. With trusted keys (`--trusted-keys`), the version floor the
//! plugin keeps in the cluster (the Secret `velero-wasm-version-floor`, docs/modules.md#s5-rollback)
//! gets `get` and `update` on that one name, and the empty Secret is printed too: RBAC cannot limit
//! `create` to a name.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::failure::{Failure, EXIT_OK};
use super::module_args::ModuleArgs;
use crate::action::Verb;
use crate::modules::{
    chosen_stock_modules, cluster_floor, scan_directory, KubeRule, ModuleSource, NamespaceRule,
};

/// The verbs of the `kube` capability: what a grant's `*` stands for (never RBAC's `*`, which also
/// means watch, deletecollection, escalate, …).
const VERBS: [&str; 6] = ["get", "list", "create", "update", "patch", "delete"];

/// Arguments of `rbac`.
#[derive(Debug, clap::Args)]
pub(crate) struct RbacArgs {
    /// The service account Velero runs as.
    #[arg(long, default_value = "velero", value_name = "NAME")]
    service_account: String,

    /// The namespace Velero runs in: its service account's, and the one `@velero` in a grant means.
    #[arg(long, default_value = "velero", value_name = "NS")]
    velero_namespace: String,

    /// The name of the ClusterRole, the Roles and their bindings.
    #[arg(long, default_value = "velero-wasm", value_name = "NAME")]
    name: String,

    /// Leaves out the Role and binding of this namespace (repeatable): one that does not exist in the
    /// cluster (a Role there cannot be applied). The modules' calls there are then refused by the API
    /// server; the output says which modules lose what.
    #[arg(long, value_name = "NS")]
    omit_namespace: Vec<String>,

    /// The Secrets the host reads OCI registry credentials from (comma-separated, in Velero's
    /// namespace; as the plugin's VELERO_WASM_OCI_PULL_SECRETS): `get` on those names only.
    #[arg(
        long,
        env = crate::modules::oci::PULL_SECRETS_ENV,
        value_name = "NAMES",
        value_delimiter = ','
    )]
    oci_pull_secrets: Vec<String>,

    #[command(flatten)]
    modules: ModuleArgs,
}

/// Runs the command; returns the exit status.
pub(crate) fn rbac(args: RbacArgs) -> u8 {
    match documents(&args) {
        Ok(yaml) => {
            print!("{yaml}");
            EXIT_OK
        }
        Err(failure) => {
            eprintln!("velero-wasm rbac: {}", failure.message);
            failure.code
        }
    }
}

/// The modules as they would load: the chosen stock ones, replaced or joined by the directory's. A
/// module that cannot be read is an error: its grant is unknown.
fn modules(args: &ModuleArgs) -> Result<Vec<ModuleSource>, Failure> {
    let mut by_name = BTreeMap::new();
    for stock in chosen_stock_modules(&args.stock) {
        let source = stock.map_err(Failure::failed)?;
        by_name.insert(source.name.clone(), source);
    }
    if let Some(dir) = &args.modules {
        // An unsigned or altered module would be refused at load: its grant needs no RBAC.
        let trusted = args.trusted_keys()?;
        let scan = scan_directory(dir, trusted.as_ref()).map_err(|e| {
            Failure::bad_input(format!("--modules {}: cannot be read: {e}", dir.display()))
        })?;
        if let Some((path, problem)) = scan.problems.first() {
            return Err(Failure::failed(format!("{}: {problem}", path.display())));
        }
        for source in scan.modules {
            by_name.insert(source.name.clone(), source);
        }
    }
    Ok(by_name.into_values().collect())
}

/// Verbs per (API group, resource), for one scope.
type Rules = BTreeMap<(String, String), BTreeSet<&'static str>>;

/// Where a grant's namespace puts its rule: `None` the ClusterRole, `Some(ns)` a Role in `ns`.
fn scope(namespace: &NamespaceRule, velero_namespace: &str) -> Option<String> {
    match namespace {
        NamespaceRule::Velero => Some(velero_namespace.to_string()),
        // Any namespace, the item's (which may be any), a glob RBAC cannot express, cluster scope.
        NamespaceRule::Any | NamespaceRule::Item | NamespaceRule::Cluster => None,
        NamespaceRule::Pattern(n) if n.contains(['*', '?', '[']) => None,
        NamespaceRule::Pattern(n) => Some(n.clone()),
    }
}

/// `resource.group` as RBAC's (API group, resource).
fn group_resource(resource: &str) -> (String, String) {
    if resource == "*" {
        return ("*".into(), "*".into());
    }
    let (name, group) = resource.split_once('.').unwrap_or((resource, ""));
    let wild = |s: &str| {
        if s.contains('*') {
            "*".to_string()
        } else {
            s.to_string()
        }
    };
    (wild(group), wild(name))
}

/// Adds one grant rule to the scopes it reaches.
fn add(rule: &KubeRule, velero_namespace: &str, scopes: &mut Scopes) {
    let verbs: BTreeSet<&'static str> = rule.verbs.each().into_iter().map(Verb::as_str).collect();
    for namespace in &rule.namespaces {
        let rules = scopes
            .entry(scope(namespace, velero_namespace))
            .or_default();
        for resource in &rule.resources {
            rules
                .entry(group_resource(resource))
                .or_default()
                .extend(verbs.iter().copied());
        }
    }
}

/// RBAC rules: one per API group and set of verbs, resources sorted; verbs in the capability's order.
fn policy_rules(rules: &Rules) -> Vec<Value> {
    let mut grouped: BTreeMap<(String, Vec<&str>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in rules {
        let verbs: Vec<&str> = VERBS.into_iter().filter(|v| verbs.contains(v)).collect();
        grouped
            .entry((group.clone(), verbs))
            .or_default()
            .push(resource.clone());
    }
    grouped
        .into_iter()
        .map(|((group, verbs), resources)| {
            json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
        })
        .collect()
}

/// Per scope (a namespace, or `None` for the ClusterRole), the rules the grants need there.
type Scopes = BTreeMap<Option<String>, Rules>;

/// The YAML documents: ClusterRole and binding (when a grant reaches beyond named namespaces), then a
/// Role and binding per namespace, in name order.
fn documents(args: &RbacArgs) -> Result<String, Failure> {
    let (scopes, needed_by, names) = gather(args)?;
    let mut docs: Vec<(String, Value)> = Vec::new();
    let mut omitted = Vec::new();
    for (namespace, rules) in &scopes {
        let modules = needed_by
            .get(namespace)
            .map(|m| m.iter().cloned().collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        if let Some(ns) = namespace
            .as_ref()
            .filter(|ns| args.omit_namespace.contains(ns))
        {
            omitted.push(format!(
                "# Left out (--omit-namespace {ns}): the Role in {ns}, needed by: {modules}. Those calls will be refused.\n"
            ));
            continue;
        }
        let [mut role, binding] = role_and_binding(args, namespace.as_deref(), rules);
        let mut why = comment(args, namespace.as_deref(), &modules);
        if namespace.as_deref() == Some(args.velero_namespace.as_str()) {
            if let Some((rule, line)) = pull_secrets_rule(&args.oci_pull_secrets) {
                if let Some(rules) = role["rules"].as_array_mut() {
                    rules.push(rule);
                }
                why.push_str(&line);
            }
            if args.modules.trusted_keys.is_some() {
                if let Some(rules) = role["rules"].as_array_mut() {
                    rules.push(json!({"apiGroups": [""], "resources": ["secrets"],
                                      "resourceNames": [cluster_floor::SECRET],
                                      "verbs": ["get", "update"]}));
                }
                why.push_str(&format!(
                    "# The host's version floor (with trusted keys): get and update of the Secret {}.\n",
                    cluster_floor::SECRET
                ));
            }
        }
        docs.push((why, role));
        docs.push((String::new(), binding));
    }
    let mut out = format!(
        "# What the grants of the modules {} need, for the service account {}/{}\n# (velero-wasm rbac).\n",
        names.join(", "),
        args.velero_namespace,
        args.service_account
    );
    for line in omitted {
        out.push_str(&line);
    }
    if args.modules.trusted_keys.is_some() {
        docs.push((
            "# The Secret the version floor is kept in, empty until the plugin raises it (RBAC cannot\n# limit create to a name, so it is created here; apply it once, never replace it).\n"
                .to_string(),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": cluster_floor::SECRET, "namespace": args.velero_namespace,
                                "labels": {"app.kubernetes.io/name": "velero-wasm"}}}),
        ));
    }
    for (why, doc) in docs {
        out.push_str("---\n");
        out.push_str(&why);
        out.push_str(
            &serde_norway::to_string(&doc)
                .map_err(|e| Failure::failed(format!("cannot write YAML: {e}")))?,
        );
    }
    Ok(out)
}

/// Per scope, the modules whose grants reach it (for the comment above its Role).
type NeededBy = BTreeMap<Option<String>, BTreeSet<String>>;

/// What the modules' grants need in each scope, the modules that need each, and the modules' names.
fn gather(args: &RbacArgs) -> Result<(Scopes, NeededBy, Vec<String>), Failure> {
    let mut scopes: Scopes = BTreeMap::new();
    let mut needed_by: NeededBy = BTreeMap::new();
    let mut names = Vec::new();
    for module in modules(&args.modules)? {
        names.push(module.name.clone());
        for rule in &module.manifest.grant.kube {
            add(rule, &args.velero_namespace, &mut scopes);
            for namespace in &rule.namespaces {
                needed_by
                    .entry(scope(namespace, &args.velero_namespace))
                    .or_default()
                    .insert(module.name.clone());
            }
        }
    }
    for namespace in &args.omit_namespace {
        if *namespace == args.velero_namespace {
            return Err(Failure::bad_input(format!(
                "--omit-namespace {namespace}: Velero's own namespace cannot be left out (the host lists module ConfigMaps there)"
            )));
        }
    }
    // The host's own: in a pod, each plugin process lists the module ConfigMaps of Velero's
    // namespace (docs/modules.md), reads those of its last list by name when a list fails but the
    // API server answers (a `get` each: without it, every module ConfigMap would be refused then),
    // and writes on each what became of it: an Event, and its status annotation (a patch,
    // server-side apply).
    let velero = scopes
        .entry(Some(args.velero_namespace.clone()))
        .or_default();
    velero
        .entry((String::new(), "configmaps".to_string()))
        .or_default()
        .extend(["get", "list", "patch"]);
    velero
        .entry((String::new(), "events".to_string()))
        .or_default()
        .insert("create");
    Ok((scopes, needed_by, names))
}

/// The host's own read of the OCI pull Secrets: `get` on exactly those names (RBAC cannot scope a
/// `list` by name, and the host only gets them), with the comment line saying so; `None` when there
/// are none.
fn pull_secrets_rule(names: &[String]) -> Option<(Value, String)> {
    let names: BTreeSet<&str> = names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return None;
    }
    let list = names.iter().copied().collect::<Vec<_>>();
    let line = format!(
        "# The host's get of the OCI pull Secrets ({}): {}.\n",
        crate::modules::oci::PULL_SECRETS_ENV,
        list.join(", ")
    );
    let rule = json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": list, "verbs": ["get"]});
    Some((rule, line))
}

/// What the comment above the Role in Velero's namespace says of the host's writes there.
const STATE_WRITES: &str =
    ", and the state it writes on each (create events, patch configmaps; without them, one info line)";

/// The comment above the Role of `namespace` (`None`: the ClusterRole), which `modules` need.
fn comment(args: &RbacArgs, namespace: Option<&str>, modules: &str) -> String {
    match namespace {
        Some(ns) if ns == args.velero_namespace && modules.is_empty() => {
            format!("# The host's own list of module ConfigMaps in Velero's namespace{STATE_WRITES}.\n")
        }
        Some(ns) if ns == args.velero_namespace => format!(
            "# Velero's namespace: the host's list of module ConfigMaps{STATE_WRITES}; needed by: {modules}.\n"
        ),
        Some(ns) => format!(
            "# Needed by: {modules}. The namespace {ns} must exist (or leave it out: --omit-namespace {ns}).\n"
        ),
        None => format!("# Needed by: {modules} (in any namespace).\n"),
    }
}

/// The Role in `namespace` (`None`: the ClusterRole) with `rules`, and its binding to the service
/// account.
fn role_and_binding(args: &RbacArgs, namespace: Option<&str>, rules: &Rules) -> [Value; 2] {
    let subject = json!([{
        "kind": "ServiceAccount",
        "name": args.service_account,
        "namespace": args.velero_namespace,
    }]);
    let labels = json!({"app.kubernetes.io/name": "velero-wasm"});
    let rules = policy_rules(rules);
    match namespace {
        None => [
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": args.name, "labels": labels},
                "rules": rules,
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": args.name, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": args.name},
                "subjects": subject,
            }),
        ],
        Some(namespace) => [
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": args.name, "namespace": namespace, "labels": labels},
                "rules": rules,
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": args.name, "namespace": namespace, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": args.name},
                "subjects": subject,
            }),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules::Verbs;

    fn rule(resources: &[&str], verbs: &[&str], namespaces: &[&str]) -> KubeRule {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        KubeRule {
            resources: s(resources),
            verbs: Verbs::parse(&s(verbs)).unwrap(),
            namespaces: namespaces.iter().map(|n| NamespaceRule::read(n)).collect(),
        }
    }

    #[test]
    fn namespaces_a_grant_names_become_roles_and_the_rest_the_cluster_role() {
        let mut scopes = BTreeMap::new();
        add(
            &rule(
                &["secrets", "backups.velero.io"],
                &["get"],
                &["@velero", "hypershift"],
            ),
            "oadp",
            &mut scopes,
        );
        add(
            &rule(&["pods"], &["list"], &["@item", "openshift-*"]),
            "oadp",
            &mut scopes,
        );
        add(&rule(&["*"], &["*"], &["shop"]), "oadp", &mut scopes);
        let keys: Vec<_> = scopes.keys().cloned().collect();
        assert_eq!(
            keys,
            [
                None,
                Some("hypershift".to_string()),
                Some("oadp".to_string()),
                Some("shop".to_string())
            ]
        );
        assert_eq!(
            policy_rules(&scopes[&None]),
            [json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]})]
        );
        assert_eq!(
            policy_rules(&scopes[&Some("oadp".into())]),
            [
                json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}),
                json!({"apiGroups": ["velero.io"], "resources": ["backups"], "verbs": ["get"]}),
            ]
        );
        // A grant's `*` is the capability's six verbs, never RBAC's `*`.
        assert_eq!(
            policy_rules(&scopes[&Some("shop".into())]),
            [json!({"apiGroups": ["*"], "resources": ["*"], "verbs": VERBS})]
        );
    }
}
