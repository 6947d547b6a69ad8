//! The install recipes under `deploy/` and the image's `Dockerfile` agree with each other and with the
//! binary: one image reference, tagged with the release; init containers that mount Velero's plugin
//! directory at `/target`, where the image's entrypoint installs the binary; module ConfigMaps mounted
//! where `VELERO_WASM_MODULES` points; and only environment variables the binary reads, with values it
//! accepts. The README's "Installing" section is made of these files.

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::run::Run;
use support::{root, stderr, stdout_json, velero_wasm};
use velero_wasm::modules::{StockChoice, STOCK_ENV};
use velero_wasm::plugin::lister::{Advertised, KINDS_ENV};
use velero_wasm::plugin::MODULES_ENV;

/// Where Velero mounts the plugin volume in a plugin's init container.
const TARGET: &str = "/target";

fn deploy(name: &str) -> String {
    std::fs::read_to_string(root().join("deploy").join(name))
        .unwrap_or_else(|e| panic!("deploy/{name}: {e}"))
}

/// A YAML file of one document, as JSON values.
fn yaml(name: &str) -> Value {
    serde_norway::from_str(&deploy(name)).unwrap_or_else(|e| panic!("deploy/{name}: {e}"))
}

/// The image the recipes install, as the install script names it.
fn image() -> String {
    let script = deploy("velero-install.sh");
    script
        .lines()
        .find_map(|l| l.strip_prefix("IMAGE="))
        .expect("velero-install.sh sets IMAGE")
        .to_string()
}

/// The variables of the binary that recipes may set, each with a check of its value.
fn check_env(name: &str, value: &str, what: &str) {
    match name {
        n if n == MODULES_ENV => assert!(value.starts_with('/'), "{what}: {name}={value}"),
        n if n == STOCK_ENV => {
            StockChoice::parse(value).unwrap_or_else(|e| panic!("{what}: {name}={value}: {e}"));
        }
        n if n == KINDS_ENV => {
            let (_, unknown) = Advertised::parse(Some(value));
            assert!(unknown.is_empty(), "{what}: {name}={value}: {unknown:?}");
        }
        _ => panic!("{what}: {name} is not a variable velero-wasm reads"),
    }
}

/// `env` entries (`name`/`value`) of a container, checked; returns them.
fn env_of(list: &Value, what: &str) -> Vec<(String, String)> {
    let env: Vec<(String, String)> = list
        .as_array()
        .unwrap_or_else(|| panic!("{what}: env is a list"))
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (name, value) in &env {
        check_env(name, value, what);
    }
    env
}

fn value_of<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[test]
fn every_recipe_installs_the_same_image_tagged_with_the_release() {
    let image = image();
    let (repository, tag) = image.rsplit_once(':').unwrap();
    assert_eq!(tag, env!("CARGO_PKG_VERSION"), "{image}");
    assert!(repository.ends_with("/velero-wasm"), "{image}");

    let script = deploy("velero-install.sh");
    assert!(
        script.contains("--plugins \"velero/velero-plugin-for-aws:v1.13.1,$IMAGE\""),
        "velero install --plugins names the image"
    );
    assert!(script.contains("velero plugin add --confirm \"$IMAGE\""));

    let helm = yaml("helm-values.yaml");
    let ours: Vec<&Value> = helm["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "velero-wasm")
        .collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0]["image"], image.as_str());

    let dpa = yaml("oadp-dpa.yaml");
    let custom = &dpa["spec"]["configuration"]["velero"]["customPlugins"];
    assert_eq!(custom[0]["name"], "velero-wasm");
    assert_eq!(custom[0]["image"], image.as_str());
    assert_eq!(custom.as_array().unwrap().len(), 1);

    // The image is built with the same version.
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    assert!(
        dockerfile
            .lines()
            .any(|l| l == format!("ARG VERSION={}", env!("CARGO_PKG_VERSION"))),
        "Dockerfile's VERSION is the release"
    );
}

#[test]
fn the_init_containers_mount_the_plugin_directory_at_target_where_the_entrypoint_installs() {
    let helm = yaml("helm-values.yaml");
    for container in helm["initContainers"].as_array().unwrap() {
        assert_eq!(
            container["volumeMounts"],
            serde_json::json!([{"mountPath": TARGET, "name": "plugins"}]),
            "{container}"
        );
    }

    // The image: FROM scratch, not root, and an entrypoint that installs into /target.
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let instructions: Vec<&str> = dockerfile
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with(' ') && !l.trim().is_empty())
        .collect();
    assert_eq!(instructions[0], "FROM scratch");
    assert!(instructions.contains(&"COPY ${BINARY} /plugins/velero-wasm"));
    assert!(instructions.contains(&"USER 65532:65532"));
    let entrypoint = instructions
        .iter()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .unwrap();
    let entrypoint: Vec<String> = serde_json::from_str(entrypoint).unwrap();
    assert_eq!(
        entrypoint,
        ["/plugins/velero-wasm", "install-plugin", TARGET]
    );
    assert!(dockerfile.contains("org.opencontainers.image.version=\"${VERSION}\""));
    assert!(dockerfile.contains("org.opencontainers.image.source=\"${SOURCE}\""));

    // The entrypoint, run with the image's paths swapped for local ones, installs a working binary.
    let target = tempfile::tempdir().unwrap();
    let out = Run::cli(&entrypoint[1..2]).arg(target.path()).output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let installed = target.path().join("velero-wasm");
    let version = Run::cli(["--version"]).program(&installed).output();
    assert_eq!(version.stdout, velero_wasm(&["--version"]).stdout);
}

/// The ConfigMap volume, the mount and `VELERO_WASM_MODULES` of one recipe agree.
fn check_module_mount(volumes: &Value, mounts: &Value, env: &[(String, String)], what: &str) {
    let configmap = yaml("modules-configmap.yaml");
    let name = configmap["metadata"]["name"].as_str().unwrap();
    let volume = volumes
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["configMap"]["name"] == name)
        .unwrap_or_else(|| panic!("{what}: no volume of ConfigMap {name}"));
    let mount = mounts
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap_or_else(|| panic!("{what}: volume {} is not mounted", volume["name"]));
    assert_eq!(mount["readOnly"], true, "{what}");
    assert_eq!(
        value_of(env, MODULES_ENV),
        mount["mountPath"].as_str(),
        "{what}: {MODULES_ENV} is where the ConfigMap is mounted"
    );
}

#[test]
fn the_module_configmap_is_mounted_where_velero_wasm_modules_points() {
    let helm = yaml("helm-values.yaml");
    let env = env_of(&helm["configuration"]["extraEnvVars"], "helm-values.yaml");
    check_module_mount(
        &helm["extraVolumes"],
        &helm["extraVolumeMounts"],
        &env,
        "helm-values.yaml",
    );

    let patch = yaml("velero-deployment-patch.yaml");
    let spec = &patch["spec"]["template"]["spec"];
    let velero = &spec["containers"][0];
    assert_eq!(
        velero["name"], "velero",
        "the patch merges into Velero's container"
    );
    let env = env_of(&velero["env"], "velero-deployment-patch.yaml");
    check_module_mount(
        &spec["volumes"],
        &velero["volumeMounts"],
        &env,
        "velero-deployment-patch.yaml",
    );
}

#[test]
fn the_environment_the_recipes_set_is_read_and_accepted_by_the_binary() {
    let dpa = yaml("oadp-dpa.yaml");
    let velero = &dpa["spec"]["configuration"]["velero"];
    let env = env_of(&velero["podConfig"]["env"], "oadp-dpa.yaml");
    // velero-wasm replaces OADP's kubevirt and hypershift plugins here, so they must be gone.
    let defaults: Vec<&str> = velero["defaultPlugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let stock = value_of(&env, STOCK_ENV).unwrap();
    let chosen = StockChoice::parse(stock).unwrap();
    for (default_plugin, module) in [("kubevirt", "kubevirt"), ("hypershift", "hcp")] {
        assert!(
            !(defaults.contains(&default_plugin) && chosen.includes(module)),
            "OADP's {default_plugin} plugin and the {module} module register the same names"
        );
    }
    // The plugin loads what the DPA chooses.
    let out = Run::cli(["actions", "--json"])
        .env(STOCK_ENV, stock)
        .env_remove(MODULES_ENV)
        .output();
    let actions = stdout_json(&out);
    for action in actions["actions"].as_array().unwrap() {
        assert!(
            chosen.includes(action["module"].as_str().unwrap()),
            "{action}"
        );
    }

    // `kubectl set env` lines of the install script.
    let script = deploy("velero-install.sh");
    let mut set = 0;
    for (i, line) in script.lines().enumerate() {
        if !line.starts_with("kubectl -n velero set env deployment/velero") {
            continue;
        }
        let mut words: Vec<&str> = line.split_whitespace().skip(6).collect();
        if words == ["\\"] {
            words = script
                .lines()
                .nth(i + 1)
                .unwrap()
                .split_whitespace()
                .collect();
        }
        for word in words {
            let (name, value) = word.split_once('=').unwrap();
            check_env(name, value, "velero-install.sh");
            set += 1;
        }
    }
    assert_eq!(
        set, 2,
        "the script sets VELERO_WASM_STOCK and VELERO_WASM_KINDS"
    );
    let syntax = Command::new("sh")
        .arg("-n")
        .arg(root().join("deploy/velero-install.sh"))
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{}", stderr(&syntax));
}

/// The commands `deploy/velero-install.sh ARG` runs, with `velero` and `kubectl` replaced by
/// stand-ins that log their arguments, one command a line; and the script's exit status.
fn install_script_commands(arg: Option<&str>) -> (Option<i32>, Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("commands.log");
    for tool in ["velero", "kubectl"] {
        let path = dir.path().join(tool);
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho \"{tool} $*\" >> '{}'\n", log.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    command
        .arg(root().join("deploy/velero-install.sh"))
        .args(arg)
        .env("PATH", path)
        .current_dir(dir.path());
    let out = command.output().unwrap();
    let commands = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    (out.status.code(), commands)
}

#[test]
fn the_install_script_adds_the_image_once_for_a_new_or_an_existing_installation() {
    let image = image();
    let set_env = |commands: &[String]| {
        commands
            .iter()
            .filter(|c| c.starts_with("kubectl -n velero set env deployment/velero "))
            .count()
    };

    let (code, commands) = install_script_commands(Some("new"));
    assert_eq!(code, Some(0), "{commands:?}");
    let adding: Vec<&String> = commands.iter().filter(|c| c.contains(&image)).collect();
    assert_eq!(
        adding.len(),
        1,
        "one init container of the image: {commands:?}"
    );
    assert!(adding[0].starts_with("velero install "), "{commands:?}");
    assert!(
        !commands.iter().any(|c| c.starts_with("velero plugin")),
        "{commands:?}"
    );
    assert_eq!(set_env(&commands), 2, "{commands:?}");

    let (code, commands) = install_script_commands(Some("existing"));
    assert_eq!(code, Some(0), "{commands:?}");
    let adding: Vec<&String> = commands.iter().filter(|c| c.contains(&image)).collect();
    assert_eq!(
        adding,
        [&format!("velero plugin add --confirm {image}")],
        "never waits on a prompt: {commands:?}"
    );
    assert!(
        !commands.iter().any(|c| c.starts_with("velero install")),
        "{commands:?}"
    );
    assert_eq!(set_env(&commands), 2, "{commands:?}");

    for arg in [None, Some("both")] {
        let (code, commands) = install_script_commands(arg);
        assert_eq!(code, Some(2), "{arg:?}: a usage error");
        assert!(commands.is_empty(), "{arg:?} runs nothing: {commands:?}");
    }
}

#[test]
fn the_module_configmap_mounted_as_a_directory_is_a_module_directory() {
    // The kubelet writes each key of data and binaryData as a file. The recipe's component is a
    // placeholder: put a real one in its place, with its sha256, as `kubectl create configmap
    // --from-file` would from a build.
    let configmap = yaml("modules-configmap.yaml");
    let dir = tempfile::tempdir().unwrap();
    let component = std::fs::read(support::components_dir().join("kinds.wasm")).unwrap();
    let sha = velero_wasm::modules::sha256_hex(&component);
    let mut modules = Vec::new();
    for (key, _) in configmap["binaryData"].as_object().unwrap() {
        let name = key
            .strip_suffix(".wasm")
            .expect("binaryData holds components");
        std::fs::write(dir.path().join(key), &component).unwrap();
        modules.push(name.to_string());
    }
    for (key, text) in configmap["data"].as_object().unwrap() {
        let text = text.as_str().unwrap();
        let pinned = text.replace(&"0".repeat(64), &sha);
        assert_ne!(pinned, text, "{key} pins a sha256");
        std::fs::write(dir.path().join(key), pinned).unwrap();
    }
    assert_eq!(modules, ["label-pvcs"]);
    assert!(Path::new(&dir.path().join("label-pvcs.toml")).exists());

    let out = velero_wasm(&[
        "actions",
        "--json",
        "--stock",
        "none",
        "--modules",
        dir.path().to_str().unwrap(),
    ]);
    let listing = stdout_json(&out);
    assert_eq!(listing["problems"], serde_json::json!([]));
    let actions = listing["actions"].as_array().unwrap();
    assert!(!actions.is_empty());
    for action in actions {
        assert_eq!(action["module"], "label-pvcs");
        assert_eq!(
            action["grant"]["kube"],
            serde_json::json!([{
                "resources": ["persistentvolumeclaims"],
                "verbs": ["get", "patch"],
                "namespaces": ["@item"],
            }])
        );
    }
}

/// `velero-wasm rbac` with `args`, as YAML documents.
fn rbac(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["rbac"];
    all.extend_from_slice(args);
    let out = velero_wasm(&all);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---\n")
        .skip(1)
        .map(|doc| serde_norway::from_str(doc).unwrap_or_else(|e| panic!("{e}: {doc}")))
        .collect()
}

/// Every permission the documents grant: (namespace or "" for the ClusterRole, group, resource, verb).
fn permissions(docs: &[Value]) -> std::collections::BTreeSet<(String, String, String, String)> {
    let mut set = std::collections::BTreeSet::new();
    for doc in docs {
        let scope = match doc["kind"].as_str().unwrap() {
            "ClusterRole" => String::new(),
            "Role" => doc["metadata"]["namespace"].as_str().unwrap().to_string(),
            _ => continue,
        };
        for rule in doc["rules"].as_array().unwrap() {
            for group in rule["apiGroups"].as_array().unwrap() {
                for resource in rule["resources"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        set.insert((
                            scope.clone(),
                            group.as_str().unwrap().to_string(),
                            resource.as_str().unwrap().to_string(),
                            verb.as_str().unwrap().to_string(),
                        ));
                    }
                }
            }
        }
    }
    set
}

fn expected(
    list: &[(&str, &str, &str, &str)],
) -> std::collections::BTreeSet<(String, String, String, String)> {
    list.iter()
        .map(|(s, g, r, v)| (s.to_string(), g.to_string(), r.to_string(), v.to_string()))
        .collect()
}

#[test]
fn rbac_grants_exactly_what_the_stock_grants_need() {
    let docs = rbac(&[]);
    let kubevirt = [
        ("", "kubevirt.io", "virtualmachineinstances", "get"),
        ("", "kubevirt.io", "virtualmachines", "get"),
        ("", "cdi.kubevirt.io", "datavolumes", "get"),
        ("", "", "persistentvolumeclaims", "get"),
        ("", "", "persistentvolumeclaims", "list"),
        ("", "", "pods", "list"),
    ];
    let hypershift = [
        (
            "",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "get",
        ),
        ("", "hypershift.openshift.io", "hostedcontrolplanes", "list"),
        ("", "hypershift.openshift.io", "hostedclusters", "list"),
        ("", "hypershift.openshift.io", "hcpetcdbackups", "get"),
        ("", "hypershift.openshift.io", "hcpetcdbackups", "create"),
        ("", "hive.openshift.io", "clusterdeployments", "update"),
        // @velero: hcp's ConfigMap, the BSL and its Secret, the Backup a Restore restores.
        ("velero", "", "configmaps", "get"),
        // The host itself: the module ConfigMaps it lists at each start.
        ("velero", "", "configmaps", "list"),
        ("velero", "", "secrets", "get"),
        ("velero", "velero.io", "backupstoragelocations", "get"),
        ("velero", "velero.io", "backups", "get"),
        // The copied etcd credentials, in the HyperShift Operator's namespace.
        ("hypershift", "", "secrets", "get"),
        ("hypershift", "", "secrets", "create"),
        ("hypershift", "", "secrets", "delete"),
    ];
    let all: Vec<_> = kubevirt.iter().chain(hypershift.iter()).copied().collect();
    assert_eq!(permissions(&docs), expected(&all));

    // Each role is bound to Velero's service account.
    let kinds: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap(),
                d["metadata"]["namespace"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("ClusterRole", ""),
            ("ClusterRoleBinding", ""),
            ("Role", "hypershift"),
            ("RoleBinding", "hypershift"),
            ("Role", "velero"),
            ("RoleBinding", "velero"),
        ]
    );
    for binding in docs
        .iter()
        .filter(|d| d["kind"].as_str().unwrap().ends_with("Binding"))
    {
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "velero", "namespace": "velero"}])
        );
        assert_eq!(binding["roleRef"]["name"], "velero-wasm");
    }

    // Only the chosen modules' grants: kubevirt alone needs the ClusterRole, and in Velero's
    // namespace only the host's own list of module ConfigMaps.
    let mut alone = kubevirt.to_vec();
    alone.push(("velero", "", "configmaps", "list"));
    assert_eq!(
        permissions(&rbac(&["--stock", "kubevirt"])),
        expected(&alone)
    );
    assert_eq!(rbac(&["--stock", "kubevirt"]).len(), 4);
}

/// The Role in `hypershift` (hcp copies etcd credentials there) fails to apply where that
/// namespace does not exist: each Role says which modules need it, and `--omit-namespace` leaves it
/// and its binding out, saying what those modules lose. Velero's own namespace cannot be left out.
#[test]
fn rbac_says_which_modules_need_each_role_and_can_leave_a_namespace_out() {
    let text = |args: &[&str]| {
        let mut all = vec!["rbac"];
        all.extend_from_slice(args);
        let out = velero_wasm(&all);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let full = text(&[]);
    assert!(
        full.contains("# Needed by: hcp. The namespace hypershift must exist (or leave it out: --omit-namespace hypershift)."),
        "{full}"
    );
    let scopes = |docs: &[Value]| -> Vec<String> {
        docs.iter()
            .filter(|d| d["kind"] == "Role" || d["kind"] == "RoleBinding")
            .map(|d| d["metadata"]["namespace"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        scopes(&rbac(&[])),
        ["hypershift", "hypershift", "velero", "velero"]
    );

    let without = text(&["--omit-namespace", "hypershift"]);
    assert!(
        without.contains("# Left out (--omit-namespace hypershift): the Role in hypershift, needed by: hcp. Those calls will be refused."),
        "{without}"
    );
    let docs = rbac(&["--omit-namespace", "hypershift"]);
    assert_eq!(scopes(&docs), ["velero", "velero"]);
    // Everything else stays.
    let rest: std::collections::BTreeSet<_> = permissions(&rbac(&[]))
        .into_iter()
        .filter(|(scope, ..)| scope != "hypershift")
        .collect();
    assert_eq!(permissions(&docs), rest);

    let out = velero_wasm(&["rbac", "--omit-namespace", "velero"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("Velero's own namespace cannot be left out"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn rbac_follows_velero_s_namespace_service_account_and_module_directory() {
    let docs = rbac(&[
        "--stock",
        "hcp",
        "--velero-namespace",
        "openshift-adp",
        "--service-account",
        "velero-sa",
        "--name",
        "wasm-modules",
    ]);
    let perms = permissions(&docs);
    assert!(perms.contains(&(
        "openshift-adp".into(),
        "velero.io".into(),
        "backups".into(),
        "get".into()
    )));
    assert!(!perms.iter().any(|(scope, ..)| scope == "velero"));
    assert!(perms.contains(&(
        "openshift-adp".into(),
        "".into(),
        "configmaps".into(),
        "list".into()
    )));
    for doc in &docs {
        assert_eq!(doc["metadata"]["name"], "wasm-modules");
        if let Some(subjects) = doc.get("subjects") {
            assert_eq!(
                subjects,
                &serde_json::json!([{"kind": "ServiceAccount", "name": "velero-sa", "namespace": "openshift-adp"}])
            );
        }
    }

    // A module of the directory adds its grant.
    let dir = support::module_dir(
        "kinds",
        "kinds",
        "[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"*\"]\nnamespaces = [\"shop\"]\n",
    );
    let perms = permissions(&rbac(&[
        "--stock",
        "none",
        "--modules",
        dir.path().to_str().unwrap(),
    ]));
    let mut six: Vec<_> = ["get", "list", "create", "update", "patch", "delete"]
        .iter()
        .map(|v| ("shop", "", "configmaps", *v))
        .collect();
    six.push(("velero", "", "configmaps", "list"));
    assert_eq!(perms, expected(&six));
}
