//! The install recipes under `deploy/` and the image's `Dockerfile` agree with each other and with the
//! binary: one image reference, tagged with the release; init containers that mount Velero's plugin
//! directory at `/target`, where the image's entrypoint installs the binary; module ConfigMaps mounted
//! where `VELERO_WASM_MODULES` points; and only environment variables the binary reads, with values it
//! accepts. The "Installing" section of docs/operation.md is made of these files.
//!
//! - Each recipe suits the versions it names (docs/install.md): `VELERO_WASM_KINDS` exactly on Velero
//!   1.14, the chart's `extraEnvVars` as a list from chart 9.1.3 and a map before, OADP default plugin
//!   names its CRD accepts; the install script, run against stand-ins of `velero` and `kubectl` for
//!   each Velero version, changes the pod template once and the velero container only.
//! - Every packed stock module applies with `kubectl create` and `kubectl apply --server-side`, and all
//!   but signing with a client-side `kubectl apply`, against the loopback API server enforcing
//!   Kubernetes' annotation and ConfigMap limits.
//! - Every object of the recipes and every object `velero-wasm` prints validates against the
//!   Kubernetes 1.30 and 1.37 schemas, strictly.

use crate::support;

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;
use support::apiserver::ApiServer;
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

/// The Helm values files, each with the first and last chart version it is for, and whether it
/// takes `configuration.extraEnvVars` as a list (chart 9.1.3 and later) or a map.
const HELM_VALUES: [(&str, &str, &str, bool); 2] = [
    ("helm-values.yaml", "9.1.3", "12.1.0", true),
    ("helm-values-before-9.1.3.yaml", "7.0.0", "9.1.2", false),
];

/// The DataProtectionApplications, each with its OADP version, the Velero version that OADP runs and
/// the default plugin names its CRD allows (oadp-operator's `DefaultPlugin` enum on that branch).
const DPAS: [(&str, &str, &str, &[&str]); 2] = [
    (
        "oadp-1.4-dpa.yaml",
        "1.4",
        "1.14",
        &[
            "aws",
            "legacy-aws",
            "gcp",
            "azure",
            "csi",
            "vsm",
            "openshift",
            "kubevirt",
        ],
    ),
    (
        "oadp-1.5-dpa.yaml",
        "1.5",
        "1.16",
        &[
            "aws",
            "legacy-aws",
            "gcp",
            "azure",
            "csi",
            "vsm",
            "openshift",
            "kubevirt",
            "hypershift",
        ],
    ),
];

/// `configuration.extraEnvVars` of a Helm values file, list or map, checked; returns it.
fn helm_env(values: &Value, list: bool, what: &str) -> Vec<(String, String)> {
    let env = &values["configuration"]["extraEnvVars"];
    if list {
        return env_of(env, what);
    }
    let map = env
        .as_object()
        .unwrap_or_else(|| panic!("{what}: extraEnvVars is a map before chart 9.1.3"));
    let env: Vec<(String, String)> = map
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
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

    for (file, ..) in HELM_VALUES {
        let helm = yaml(file);
        let ours: Vec<&Value> = helm["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == "velero-wasm")
            .collect();
        assert_eq!(ours.len(), 1, "{file}");
        assert_eq!(ours[0]["image"], image.as_str(), "{file}");
    }

    for (file, ..) in DPAS {
        let dpa = yaml(file);
        let custom = &dpa["spec"]["configuration"]["velero"]["customPlugins"];
        assert_eq!(custom[0]["name"], "velero-wasm", "{file}");
        assert_eq!(custom[0]["image"], image.as_str(), "{file}");
        assert_eq!(custom.as_array().unwrap().len(), 1, "{file}");
    }

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
    for (file, ..) in HELM_VALUES {
        let helm = yaml(file);
        for container in helm["initContainers"].as_array().unwrap() {
            assert_eq!(
                container["volumeMounts"],
                serde_json::json!([{"mountPath": TARGET, "name": "plugins"}]),
                "{file}: {container}"
            );
        }
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
    for (file, _, _, list) in HELM_VALUES {
        let helm = yaml(file);
        let env = helm_env(&helm, list, file);
        check_module_mount(
            &helm["extraVolumes"],
            &helm["extraVolumeMounts"],
            &env,
            file,
        );
    }

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

/// The Velero version a recipe is for, as (minor), from "1.14" or "v1.14.1".
fn minor(version: &str) -> u32 {
    version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{version} is not a Velero version"))
}

/// `VELERO_WASM_KINDS` is set exactly where Velero is 1.14, to every kind but ItemBlockAction:
/// Velero 1.14 refuses a plugin that offers item-block actions, and on 1.15 and later the variable
/// would hide them.
fn check_kinds(env: &[(String, String)], velero: &str, what: &str) {
    let kinds = value_of(env, KINDS_ENV);
    if minor(velero) == 14 {
        let kinds = kinds.unwrap_or_else(|| panic!("{what}: Velero {velero} needs {KINDS_ENV}"));
        let (listed, unknown) = Advertised::parse(Some(kinds));
        assert!(unknown.is_empty(), "{what}: {unknown:?}");
        let every_other = Advertised::default()
            .to_string()
            .replace(",ItemBlockAction", "");
        assert_eq!(listed.to_string(), every_other, "{what}");
    } else {
        assert_eq!(
            kinds, None,
            "{what}: Velero {velero} takes item-block actions"
        );
    }
}

#[test]
fn each_oadp_recipe_suits_its_oadp_version_and_the_velero_it_runs() {
    for (file, oadp, velero, allowed) in DPAS {
        let dpa = yaml(file);
        let head = deploy(file);
        assert!(
            head.starts_with(&format!(
                "# An OADP {oadp} DataProtectionApplication (OADP {oadp} runs Velero {velero}"
            )),
            "{file} names the versions it is for"
        );
        let velero_config = &dpa["spec"]["configuration"]["velero"];
        let env = env_of(&velero_config["podConfig"]["env"], file);
        check_kinds(&env, velero, file);
        // Only names the operator's CRD accepts, and none that register what a stock module does.
        let defaults: Vec<&str> = velero_config["defaultPlugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        for plugin in &defaults {
            assert!(
                allowed.contains(plugin),
                "{file}: OADP {oadp} has no default plugin {plugin}"
            );
        }
        let stock = value_of(&env, STOCK_ENV).unwrap();
        let chosen = StockChoice::parse(stock).unwrap();
        for (default_plugin, module) in [("kubevirt", "kubevirt"), ("hypershift", "hcp")] {
            assert!(
                !(defaults.contains(&default_plugin) && chosen.includes(module)),
                "{file}: OADP's {default_plugin} plugin and the {module} module register the same names"
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
                "{file}: {action}"
            );
        }
        // Modules beyond the stock ones come through the API under OADP: the recipe says so.
        assert!(
            head.contains("read them") || head.contains("reads them"),
            "{file}"
        );
    }
}

#[test]
fn each_helm_recipe_suits_the_charts_it_names_and_velero_1_14_adds_the_kinds() {
    // The chart versions each file names are the ones of the table in docs/install.md.
    let table = std::fs::read_to_string(root().join("docs/install.md")).unwrap();
    for (file, first, last, list) in HELM_VALUES {
        let head = deploy(file);
        assert!(
            head.contains(&format!("chart `velero`) {first} to {last}")),
            "{file} names its charts"
        );
        assert!(table.contains(file), "docs/install.md names {file}");
        assert!(
            head.contains("--service-account velero-server"),
            "{file}: the chart's service account"
        );
        let env = helm_env(&yaml(file), list, file);
        check_kinds(&env, "1.16", file);
    }
    // Chart 7.x is Velero 1.14: the overlay's entry merges into the map (Helm merges maps of
    // values files, and replaces lists).
    let overlay = yaml("helm-values-velero-1.14.yaml");
    let mut merged = yaml("helm-values-before-9.1.3.yaml");
    for (name, value) in overlay["configuration"]["extraEnvVars"]
        .as_object()
        .unwrap()
    {
        merged["configuration"]["extraEnvVars"][name] = value.clone();
    }
    assert_eq!(
        overlay.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["configuration"]
    );
    let env = helm_env(&merged, false, "helm-values-velero-1.14.yaml");
    check_kinds(&env, "1.14", "helm-values-velero-1.14.yaml");
    assert_eq!(value_of(&env, MODULES_ENV), Some("/velero-wasm/modules"));
}

/// The commands `deploy/velero-install.sh ARG` runs, with `velero` and `kubectl` replaced by
/// stand-ins that log their arguments, one command a line; `velero version --client-only` answers
/// `client` and the Velero Deployment's image is tagged `server`; and the script's exit status and
/// stderr.
fn install_script_commands(
    arg: Option<&str>,
    client: &str,
    server: &str,
) -> (Option<i32>, Vec<String>, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("commands.log");
    let answers = [
        (
            "velero",
            format!("[ \"$*\" = 'version --client-only' ] && printf 'Client:\\n\\tVersion: {client}\\n\\tGit commit: 0123abc\\n'"),
        ),
        (
            "kubectl",
            format!("case \"$*\" in *' get deployment velero '*) printf 'velero/velero:{server}';; esac"),
        ),
    ];
    for (tool, answer) in answers {
        let path = dir.path().join(tool);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"{tool} $*\" >> '{}'\n{answer}\nexit 0\n",
                log.display()
            ),
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
        .env_remove("VELERO_VERSION")
        .current_dir(dir.path());
    let out = command.output().unwrap();
    let commands = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    (out.status.code(), commands, stderr(&out))
}

/// The variables of the script's `kubectl set env` commands, each checked; and how many there were.
fn set_env(commands: &[String]) -> (Vec<(String, String)>, usize) {
    let prefix = "kubectl -n velero set env deployment/velero -c velero ";
    let mut env = Vec::new();
    let mut count = 0;
    for command in commands {
        assert!(
            !command.contains(" set env ") || command.starts_with(prefix),
            "only the velero container, not the init containers: {command}"
        );
        let Some(words) = command.strip_prefix(prefix) else {
            continue;
        };
        count += 1;
        for word in words.split_whitespace() {
            let (name, value) = word.split_once('=').unwrap();
            check_env(name, value, "velero-install.sh");
            env.push((name.to_string(), value.to_string()));
        }
    }
    (env, count)
}

#[test]
fn the_install_script_adds_the_image_once_for_a_new_or_an_existing_installation() {
    let image = image();
    let syntax = Command::new("sh")
        .arg("-n")
        .arg(root().join("deploy/velero-install.sh"))
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{}", stderr(&syntax));

    for velero in ["v1.14.1", "v1.15.2", "v1.16.2", "v1.17.1", "v1.18.1"] {
        // A new installation: the server is the client's version.
        let (code, commands, _) = install_script_commands(Some("new"), velero, "unused");
        assert_eq!(code, Some(0), "{velero}: {commands:?}");
        let adding: Vec<&String> = commands.iter().filter(|c| c.contains(&image)).collect();
        assert_eq!(
            adding.len(),
            1,
            "{velero}: one init container of the image: {commands:?}"
        );
        assert!(adding[0].starts_with("velero install "), "{commands:?}");
        assert!(
            !commands.iter().any(|c| c.starts_with("velero plugin")),
            "{commands:?}"
        );
        let (env, count) = set_env(&commands);
        assert_eq!(
            count, 1,
            "{velero}: one change of the pod template after install: {commands:?}"
        );
        assert_eq!(value_of(&env, STOCK_ENV), Some("hcp,agent"));
        check_kinds(&env, velero, &format!("velero-install.sh new on {velero}"));

        // An existing installation, of the version its image's tag says.
        let (code, commands, _) = install_script_commands(Some("existing"), velero, velero);
        assert_eq!(code, Some(0), "{velero}: {commands:?}");
        let adding: Vec<&String> = commands.iter().filter(|c| c.contains(&image)).collect();
        assert_eq!(
            adding,
            [&format!("velero plugin add --confirm {image}")],
            "{velero}: never waits on a prompt: {commands:?}"
        );
        assert!(
            !commands.iter().any(|c| c.starts_with("velero install")),
            "{commands:?}"
        );
        let (env, count) = set_env(&commands);
        assert_eq!(count, 1, "{commands:?}");
        check_kinds(
            &env,
            velero,
            &format!("velero-install.sh existing on {velero}"),
        );
        // Both changes roll out together: paused before the first, resumed after the last.
        let position = |prefix: &str| {
            commands
                .iter()
                .position(|c| c.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix}: {commands:?}"))
        };
        let pause = position("kubectl -n velero rollout pause deployment/velero");
        let add = position("velero plugin add");
        let env_change = position("kubectl -n velero set env");
        let resume = position("kubectl -n velero rollout resume deployment/velero");
        assert!(
            pause < add && add < env_change && env_change < resume,
            "{commands:?}"
        );
        assert_eq!(resume, commands.len() - 1, "{commands:?}");
    }

    // A velero client older than 1.14 has no --confirm (and no prompt): the script says so and
    // leaves the flag out. The server's version decides the kinds.
    let (code, commands, err) = install_script_commands(Some("existing"), "v1.13.2", "v1.14.0");
    assert_eq!(code, Some(0), "{commands:?}");
    assert!(
        commands.contains(&format!("velero plugin add {image}")),
        "{commands:?}"
    );
    assert!(
        err.contains("velero client v1.13.2 is older than 1.14"),
        "{err}"
    );
    check_kinds(&set_env(&commands).0, "1.14", "an old client, Velero 1.14");

    // A server older than 1.14, or one whose version cannot be told, changes nothing.
    for (client, server, says) in [
        ("v1.16.2", "v1.13.0", "is older than 1.14"),
        ("v1.13.2", "v1.13.2", "is older than 1.14"),
        (
            "v1.16.2",
            "latest",
            "cannot tell the Velero version (found \"latest\"): set VELERO_VERSION",
        ),
    ] {
        for arg in ["existing", "new"] {
            let (code, commands, err) = install_script_commands(Some(arg), client, server);
            if arg == "new" && client != "v1.13.2" {
                continue;
            }
            assert_eq!(code, Some(2), "{arg} {client} {server}: {commands:?}");
            assert!(err.contains(says), "{arg} {client} {server}: {err}");
            assert!(
                commands
                    .iter()
                    .all(|c| c.starts_with("velero version") || c.contains(" get deployment ")),
                "{arg} {client} {server}: only asked: {commands:?}"
            );
        }
    }

    for arg in [None, Some("both")] {
        let (code, commands, _) = install_script_commands(arg, "v1.16.2", "v1.16.2");
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
        // @velero: the resource policy a Backup names (extended mode, docs/kubevirt.md 4.1).
        ("velero", "", "configmaps", "get"),
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
        // The host itself: the module ConfigMaps it lists at each start, and what became of each,
        // written on it (its status annotation, server-side applied, and Events).
        ("velero", "", "configmaps", "list"),
        ("velero", "", "configmaps", "patch"),
        ("velero", "", "events", "create"),
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
    // namespace only the host's own list of module ConfigMaps and the state it writes on them.
    let mut alone = kubevirt.to_vec();
    alone.push(("velero", "", "configmaps", "list"));
    alone.push(("velero", "", "configmaps", "patch"));
    alone.push(("velero", "", "events", "create"));
    assert_eq!(
        permissions(&rbac(&["--stock", "kubevirt"])),
        expected(&alone)
    );
    assert_eq!(rbac(&["--stock", "kubevirt"]).len(), 4);

    // Whatever the modules' grants, the host's own rules let it read the ConfigMaps of its last
    // list by name, as it does when a list fails while the API server answers.
    let own = permissions(&rbac(&["--stock", "signing"]));
    let get = |resource: &str| {
        (
            "velero".to_string(),
            String::new(),
            resource.to_string(),
            "get".to_string(),
        )
    };
    assert!(own.contains(&get("configmaps")), "{own:?}");
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
    six.push(("velero", "", "configmaps", "get"));
    six.push(("velero", "", "configmaps", "list"));
    six.push(("velero", "", "configmaps", "patch"));
    six.push(("velero", "", "events", "create"));
    assert_eq!(perms, expected(&six));
}

/// The OCI pull Secrets the host reads (VELERO_WASM_OCI_PULL_SECRETS, or `--oci-pull-secrets`): a
/// `get` in Velero's Role scoped to exactly those names, said in its comment; none without them.
#[test]
fn rbac_gets_the_oci_pull_secrets_by_name_in_velero_s_namespace() {
    let pull_rules = |docs: &[Value]| -> Vec<(String, Value)> {
        docs.iter()
            .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
            .flat_map(|d| {
                let scope = d["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                d["rules"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|r| r.get("resourceNames").is_some())
                    .map(move |r| (scope.clone(), r.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(pull_rules(&rbac(&["--stock", "kubevirt"])), []);

    let expected = vec![(
        "openshift-adp".to_string(),
        serde_json::json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["quay-pull", "registry-pull"], "verbs": ["get"]}),
    )];
    let flag = rbac(&[
        "--stock",
        "kubevirt",
        "--velero-namespace",
        "openshift-adp",
        "--oci-pull-secrets",
        "registry-pull, quay-pull",
    ]);
    assert_eq!(pull_rules(&flag), expected);
    // The rest is what the grants need, unchanged.
    let without = rbac(&["--stock", "kubevirt", "--velero-namespace", "openshift-adp"]);
    let mut and_secrets = permissions(&without);
    and_secrets.insert((
        "openshift-adp".into(),
        "".into(),
        "secrets".into(),
        "get".into(),
    ));
    assert_eq!(permissions(&flag), and_secrets);

    // The plugin's own variable, as the Deployment sets it, is read too.
    let out = Run::cli([
        "rbac",
        "--stock",
        "kubevirt",
        "--velero-namespace",
        "openshift-adp",
    ])
    .env("VELERO_WASM_OCI_PULL_SECRETS", "quay-pull,registry-pull,")
    .output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("# The host's get of the OCI pull Secrets (VELERO_WASM_OCI_PULL_SECRETS): quay-pull, registry-pull."),
        "{text}"
    );
    let docs: Vec<Value> = text
        .split("\n---\n")
        .skip(1)
        .map(|doc| serde_norway::from_str(doc).unwrap())
        .collect();
    assert_eq!(pull_rules(&docs), expected);
}

/// Each stock module as an operator packs it: `module export NAME`, then `module pack`. The YAML
/// parsed, and what pack reported on stderr.
fn packed_stock_modules(dir: &Path) -> (Vec<(String, Value)>, String) {
    let mut modules = Vec::new();
    let mut reports = String::new();
    for name in ["agent", "hcp", "kubevirt", "signing"] {
        let files = dir.join(name);
        let out = velero_wasm(&["module", "export", name, files.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let wasm = files.join(format!("{name}.wasm"));
        let yaml = dir.join(format!("{name}.yaml"));
        let out = velero_wasm(&[
            "module",
            "pack",
            wasm.to_str().unwrap(),
            "--out",
            yaml.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        reports.push_str(&stderr(&out));
        let object: Value =
            serde_norway::from_str(&std::fs::read_to_string(&yaml).unwrap()).unwrap();
        modules.push((name.to_string(), object));
    }
    (modules, reports)
}

/// The annotation in which a client-side `kubectl apply` keeps the object it applied, as JSON.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A kube client of the loopback API server, in the namespace `velero`.
fn configmaps_of(server: &ApiServer) -> kube::Api<ConfigMap> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::new(server.url().parse().unwrap());
    kube::Api::namespaced(kube::Client::try_from(config).unwrap(), "velero")
}

/// The API server's refusal, or `None` when the write was accepted.
fn refusal<T>(result: Result<T, kube::Error>) -> Option<(u16, String)> {
    match result {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some((status.code, status.message)),
        Err(other) => panic!("not an answer of the API server: {other}"),
    }
}

/// A packed stock module applied the three ways operators apply YAML, against the loopback API server
/// holding writes to Kubernetes' limits (all annotations of an object: 262,144 bytes; a ConfigMap's
/// data: 1 MiB): `kubectl create` and `kubectl apply --server-side` store every stock module; a
/// client-side `kubectl apply`, which copies the object as JSON into its last-applied-configuration
/// annotation, stores agent, hcp and kubevirt (their components are stored gzipped; kubevirt's reads
/// resource policies with a YAML reader of its own to stay under the limit) and is refused with 422
/// for signing, which is exactly the ConfigMap `pack` advised to apply server-side. What is
/// stored verifies as the module that was packed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_stock_modules_apply_server_side_and_all_but_signing_apply_client_side() {
    let dir = tempfile::tempdir().unwrap();
    let (modules, report) = packed_stock_modules(dir.path());
    let server = ApiServer::start(&[]);
    let api = configmaps_of(&server);
    let mut client_side = Vec::new();
    for (name, object) in &modules {
        let configmap = object["metadata"]["name"].as_str().unwrap().to_string();
        let typed: ConfigMap = serde_json::from_value(object.clone()).unwrap();
        let gone = |api: &kube::Api<ConfigMap>| {
            let api = api.clone();
            let configmap = configmap.clone();
            async move {
                api.delete(&configmap, &Default::default()).await.unwrap();
            }
        };

        // `kubectl create -f`: the object as written.
        let created = api.create(&Default::default(), &typed).await;
        assert_eq!(refusal(created), None, "{name}: kubectl create");
        gone(&api).await;

        // `kubectl apply --server-side -f`: an apply patch, no annotation.
        let params = kube::api::PatchParams::apply("kubectl");
        let applied = api
            .patch(&configmap, &params, &kube::api::Patch::Apply(&typed))
            .await;
        assert_eq!(
            refusal(applied),
            None,
            "{name}: kubectl apply --server-side"
        );
        let stored = server
            .object("configmaps", "velero", &configmap)
            .expect("stored");
        assert!(stored["metadata"].get("annotations").is_none(), "{stored}");

        // What is stored is what was packed: `module verify` reads it as the host will.
        let file = dir.path().join(format!("{name}-stored.json"));
        std::fs::write(&file, stored.to_string()).unwrap();
        let out = velero_wasm(&["module", "verify", "--json", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let verified = stdout_json(&out);
        let component = std::fs::read(dir.path().join(name).join(format!("{name}.wasm"))).unwrap();
        assert_eq!(
            verified["modules"][0]["sha256"],
            velero_wasm::modules::sha256_hex(&component).as_str(),
            "{name}"
        );
        gone(&api).await;

        // `kubectl apply -f` (client-side) of a new object: a create, with the object in an annotation.
        let mut annotated = typed.clone();
        // As Go's encoder writes it: `<`, `>` and `&` escaped, and a final newline.
        let json = serde_json::to_string(&typed)
            .unwrap()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026");
        let last_applied = format!("{json}\n");
        annotated.metadata.annotations = Some(
            [(LAST_APPLIED.to_string(), last_applied.clone())]
                .into_iter()
                .collect(),
        );
        match refusal(api.create(&Default::default(), &annotated).await) {
            None => {
                client_side.push(name.clone());
                gone(&api).await;
            }
            Some((code, message)) => {
                assert_eq!(code, 422, "{name}: {message}");
                assert_eq!(
                    message,
                    format!("ConfigMap \"{configmap}\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"),
                    "{name}"
                );
                assert!(
                    report.contains(&configmap) && report.contains("would be refused"),
                    "{name}: pack advises server-side: {report}"
                );
            }
        }
    }
    assert_eq!(client_side, ["agent", "hcp", "kubevirt"]);
    // pack advised server-side for signing only.
    let advised: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("apply with `kubectl apply --server-side -f`"))
        .filter_map(|l| l.rsplit_once('(')?.1.strip_suffix(" would be refused)"))
        .collect();
    assert_eq!(advised, ["velero-wasm-module-signing"], "{report}");
    // Each packed module fits the 1 MiB object limit with room to grow: at most 40 % of it.
    for line in report
        .lines()
        .filter(|l| l.starts_with("ConfigMap velero/"))
    {
        let share: usize = line
            .split_once(" bytes (")
            .and_then(|(_, rest)| rest.split_once('%'))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(share <= 40, "{line}");
        assert!(line.contains("component gzipped to"), "{line}");
    }

    // The server holds the data limit too: more than 1 MiB of binaryData is refused with 422.
    let mut big = modules[0].1.clone();
    big["binaryData"] = serde_json::json!({
        "agent.wasm": base64::engine::general_purpose::STANDARD.encode(vec![0u8; (1 << 20) + 1])
    });
    let big: ConfigMap = serde_json::from_value(big).unwrap();
    let (code, message) = refusal(api.create(&Default::default(), &big).await).unwrap();
    assert_eq!(code, 422);
    assert!(
        message.ends_with("is invalid: []: Too long: may not be more than 1048576 bytes"),
        "{message}"
    );
}

/// A strategic merge patch as kubectl applies one to a Deployment: objects merge, lists of named
/// objects (containers, env, volumes, volume mounts) merge by name, other values are replaced.
fn strategic_merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                match base.get_mut(key) {
                    Some(existing) => strategic_merge(existing, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(base), Value::Array(patch))
            if patch.iter().all(|item| item.get("name").is_some()) =>
        {
            for item in patch {
                match base.iter_mut().find(|b| b.get("name") == item.get("name")) {
                    Some(existing) => strategic_merge(existing, item),
                    None => base.push(item.clone()),
                }
            }
        }
        (base, patch) => *base = patch.clone(),
    }
}

/// The Velero Deployment as `velero install` makes it, in the parts a recipe touches.
fn velero_deployment() -> Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "velero", "namespace": "velero"},
        "spec": {
            "selector": {"matchLabels": {"deploy": "velero"}},
            "template": {
                "metadata": {"labels": {"deploy": "velero"}},
                "spec": {
                    "containers": [{
                        "name": "velero", "image": "velero/velero:v1.16.2",
                        "env": [{"name": "VELERO_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                        "volumeMounts": [{"name": "plugins", "mountPath": "/plugins"}],
                    }],
                    "volumes": [{"name": "plugins", "emptyDir": {}}],
                },
            },
        },
    })
}

/// The Velero pod a chart's or an operator's recipe makes, in the parts the recipe gives: its init
/// containers, the Velero container's variables and mounts, and the volumes.
fn velero_pod(init: &Value, env: &[(String, String)], mounts: &Value, volumes: &Value) -> Value {
    let env: Vec<Value> = env
        .iter()
        .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
        .collect();
    let mut pod = velero_deployment()["spec"]["template"].clone();
    pod["apiVersion"] = "v1".into();
    pod["kind"] = "Pod".into();
    pod["metadata"]["name"] = "velero".into();
    strategic_merge(
        &mut pod["spec"],
        &serde_json::json!({
            "initContainers": init,
            "containers": [{"name": "velero", "env": env, "volumeMounts": mounts}],
            "volumes": volumes,
        }),
    );
    pod
}

/// Every Kubernetes object the recipes hold or make, and every object `velero-wasm` prints (`rbac`
/// in its variants, `module pack` of each stock module and of a signed override), validates against
/// the Kubernetes 1.30 and 1.37 schemas, strictly (an unknown field is an error), with
/// kubernetes-validate from PyPI (.ci/deps installs it). Recipes that are not whole objects are
/// validated as what they make: the Deployment patch applied to Velero's Deployment, the Helm values
/// and the DataProtectionApplications' plugin and variables as the Velero pod.
#[test]
fn every_object_of_the_recipes_and_of_velero_wasm_validates_against_the_kubernetes_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let mut objects: Vec<(String, Value)> = vec![(
        "modules-configmap.yaml".into(),
        yaml("modules-configmap.yaml"),
    )];

    let mut deployment = velero_deployment();
    strategic_merge(&mut deployment, &yaml("velero-deployment-patch.yaml"));
    objects.push((
        "velero-deployment-patch.yaml on Velero's Deployment".into(),
        deployment,
    ));

    for (file, _, _, list) in HELM_VALUES {
        let mut values = yaml(file);
        if !list {
            let overlay = yaml("helm-values-velero-1.14.yaml");
            strategic_merge(&mut values, &overlay);
        }
        let env = helm_env(&values, list, file);
        let pod = velero_pod(
            &values["initContainers"],
            &env,
            &values["extraVolumeMounts"],
            &values["extraVolumes"],
        );
        objects.push((format!("{file} as the Velero pod"), pod));
    }
    for (file, ..) in DPAS {
        let velero = &yaml(file)["spec"]["configuration"]["velero"];
        // OADP makes each custom plugin an init container mounting the plugin directory.
        let init: Vec<Value> = velero["customPlugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                serde_json::json!({"name": p["name"], "image": p["image"],
                    "volumeMounts": [{"name": "plugins", "mountPath": TARGET}]})
            })
            .collect();
        let env = env_of(&velero["podConfig"]["env"], file);
        let pod = velero_pod(
            &Value::from(init),
            &env,
            &Value::Array(vec![]),
            &Value::Array(vec![]),
        );
        objects.push((format!("{file} as the Velero pod"), pod));
    }

    let module = support::module_dir(
        "kinds",
        "kinds",
        "[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"*\"]\nnamespaces = [\"shop\"]\n",
    );
    let modules = module.path().to_str().unwrap();
    for args in [
        &[][..],
        &["--omit-namespace", "hypershift"][..],
        &[
            "--stock",
            "none",
            "--modules",
            modules,
            "--service-account",
            "velero-server",
        ][..],
    ] {
        for doc in rbac(args) {
            objects.push((format!("velero-wasm rbac {}", args.join(" ")), doc));
        }
    }
    let (packed, _) = packed_stock_modules(dir.path());
    for (name, object) in packed {
        objects.push((format!("velero-wasm module pack {name}.wasm"), object));
    }
    let key = dir.path().join("ops");
    let out = velero_wasm(&["module", "keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let manifest = dir.path().join("kubevirt.toml");
    std::fs::write(&manifest, "[settings]\nmode = \"upstream\"\n").unwrap();
    let out = velero_wasm(&[
        "module",
        "pack",
        manifest.to_str().unwrap(),
        "--sign",
        &format!("{}.key", key.display()),
        "--unversioned",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let signed: Value = serde_norway::from_slice(&out.stdout).unwrap();
    objects.push((
        "velero-wasm module pack --sign kubevirt.toml".into(),
        signed,
    ));

    // One file per object, named so that a failure says which.
    let mut files = Vec::new();
    for (i, (what, object)) in objects.iter().enumerate() {
        let path = dir.path().join(format!("{i:02}.json"));
        std::fs::write(&path, object.to_string()).unwrap();
        files.push((path, what.clone()));
    }
    for version in ["1.30", "1.37"] {
        let out = Command::new("kubernetes-validate")
            .args(["--kubernetes-version", version, "--strict", "--quiet"])
            .args(files.iter().map(|(path, _)| path))
            .output()
            .unwrap_or_else(|e| {
                panic!("kubernetes-validate (from PyPI; .ci/deps installs it): {e}")
            });
        let mut report = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        for (path, what) in &files {
            report = report.replace(path.to_str().unwrap(), what);
        }
        assert!(
            out.status.success() && !report.contains("WARN") && !report.contains("ERROR"),
            "Kubernetes {version}:\n{report}"
        );
    }
}
