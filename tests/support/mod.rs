//! Shared pieces of the integration tests: the built test components, module directories with
//! manifests pinned to them, and running the `velero-wasm` binary ([`run`] for the CLI, [`plugin`] for
//! plugin mode).
#![allow(dead_code)]

pub mod apiserver;
pub mod kube_apiserver;
pub mod loopback;
pub mod plugin;
pub mod plugin_socket;
pub mod proxy;
pub mod run;

use std::path::{Path, PathBuf};
use std::process::Output;

use sha2::Digest;

/// The directory where host/build.rs put the test components.
pub fn components_dir() -> PathBuf {
    PathBuf::from(env!("VELERO_WASM_TEST_COMPONENTS"))
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A temporary module directory holding `component` (a test component's crate name) as
/// `<name>.wasm`, with a manifest pinned to its sha256 followed by `manifest_body`.
pub fn module_dir(component: &str, name: &str, manifest_body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    add_module(dir.path(), component, name, manifest_body);
    dir
}

/// Adds a module to an existing directory (see [`module_dir`]).
pub fn add_module(dir: &Path, component: &str, name: &str, manifest_body: &str) {
    let wasm =
        std::fs::read(components_dir().join(format!("{}.wasm", component.replace('-', "_"))))
            .unwrap_or_else(|e| panic!("test component {component} is not built: {e}"));
    let sha: String = sha2::Sha256::digest(&wasm)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(dir.join(format!("{name}.wasm")), &wasm).unwrap();
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!("sha256 = \"{sha}\"\n{manifest_body}"),
    )
    .unwrap();
}

/// Writes a file in `dir` and returns its path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the `velero-wasm` binary with `args`, without the plugin cookie.
pub fn velero_wasm(args: &[&str]) -> Output {
    run::Run::cli(args).output()
}

/// Stdout of a run as JSON, panicking with stderr when it is not.
pub fn stdout_json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); status {:?}\nstdout: {}\nstderr: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Stderr of a run, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A module ConfigMap (as `module pack` writes one) holding the misbehave test component as module
/// `module`, its actions under `domain`: nothing to pull.
pub fn misbehave_configmap_as(module: &str, domain: &str) -> serde_json::Value {
    use base64::Engine as _;
    let wasm = std::fs::read(components_dir().join("misbehave.wasm")).unwrap();
    let manifest = format!(
        "sha256 = \"{}\"\n[settings]\ndomain = \"{domain}\"\n",
        velero_wasm::modules::sha256_hex(&wasm)
    );
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("velero-wasm-module-{module}"), "namespace": "velero",
                     "labels": {velero_wasm::modules::configmaps::LABEL: module}},
        "binaryData": {format!("{module}.wasm"): base64::engine::general_purpose::STANDARD.encode(&wasm)},
        "data": {format!("{module}.toml"): manifest},
    })
}
