//! Builds the wasm components before the host, so that `cargo build` alone yields a binary with the
//! stock components embedded:
//!
//! - every crate under `actions/` becomes a stock module (`OUT_DIR/stock.rs` lists them, with the
//!   sha256 of each, so that no process hashes them at start-up);
//! - every crate under `tests/components/` is built for the host's tests
//!   (`VELERO_WASM_TEST_COMPONENTS` names the directory).
//!
//! It lists the SDK's source (`sdk/`: its crate, its WIT, label-selector, grant) for `velero-wasm new` to write
//! into a new crate (`OUT_DIR/sdk_files.rs`), so that a module builds with only the binary.
//!
//! It reads the WIT package's version from `wit/` (`VELERO_WASM_WIT_PACKAGE`, for `--version`), and
//! compiles the Velero plugin protocol's `.proto` files (`host/proto/`) into tonic servers and
//! clients, with `protox` (no system `protoc` needed); see [`compile_protos`].
//!
//! The components are built by a nested `cargo build --target wasm32-wasip2 --profile component` with
//! its own target directory (`target/wasm` in the workspace), so it never waits on the outer build's
//! lock; or, with `VELERO_WASM_PREBUILT_COMPONENTS` set, taken from that directory as built (`make
//! fuzz`: the stable toolchain builds them, the nightly one the host).

// A build script reports a failure by panicking, with the message cargo shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest;

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "component";

/// A directory of components already built (`<name>.wasm` for every crate of `actions/` and
/// `tests/components/`), used instead of building them: a build on another toolchain (the fuzz
/// build on nightly, which lacks `wasm32-wasip2`'s std) embeds the ones the stable toolchain built.
const PREBUILT_ENV: &str = "VELERO_WASM_PREBUILT_COMPONENTS";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("host/ sits in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    for watched in [
        "actions",
        "sdk",
        "wit",
        "hypershift",
        "tests/components",
        "Cargo.lock",
        "Cargo.toml",
        ".cargo/config.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let stock = crates_in(&root.join("actions"));
    let test_components = crates_in(&root.join("tests/components"));
    let wasm_target_dir = root.join("target").join("wasm");
    let all: Vec<&String> = stock.iter().chain(test_components.iter()).collect();
    println!("cargo:rerun-if-env-changed={PREBUILT_ENV}");
    let built = match env::var_os(PREBUILT_ENV).filter(|dir| !dir.is_empty()) {
        Some(dir) => prebuilt(PathBuf::from(dir), &all),
        None => {
            if !all.is_empty() {
                build_components(&root, &wasm_target_dir, &all);
            }
            wasm_target_dir.join(TARGET).join(PROFILE)
        }
    };

    let mut code = String::from("const STOCK: &[Stock] = &[\n");
    for name in &stock {
        let wasm = built.join(format!("{}.wasm", name.replace('-', "_")));
        let manifest = root.join("actions").join(name).join(format!("{name}.toml"));
        if !manifest.exists() {
            panic!(
                "actions/{name} has no manifest: every stock component needs actions/{name}/{name}.toml"
            );
        }
        // Hashed here, once, rather than by every process at start-up.
        let bytes =
            fs::read(&wasm).unwrap_or_else(|e| panic!("stock component {}: {e}", wasm.display()));
        let sha256: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        writeln!(
            code,
            "    Stock {{ name: {name:?}, wasm: include_bytes!({:?}), sha256: {sha256:?}, manifest: include_str!({:?}) }},",
            wasm.display().to_string(),
            manifest.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    fs::write(out_dir.join("stock.rs"), code).expect("write stock.rs");
    println!(
        "cargo:rustc-env=VELERO_WASM_TEST_COMPONENTS={}",
        built.display()
    );

    println!(
        "cargo:rustc-env=VELERO_WASM_WIT_PACKAGE={}",
        wit_package(&root.join("wit"))
    );

    fs::write(out_dir.join("sdk_files.rs"), sdk_files(&root.join("sdk")))
        .expect("write sdk_files.rs");

    compile_protos(&manifest_dir.join("proto"));
}

/// `const SDK_FILES: &[(&str, &str)]`: each file of the SDK that its package includes (Cargo.toml,
/// README.md, src/, wit/, and the Cargo.toml and src/ of label-selector and grant), by path under
/// `sdk/`, with its text.
fn sdk_files(sdk: &Path) -> String {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs" || x == "wit") {
                out.push(path);
            }
        }
    }
    let mut files = vec![
        sdk.join("Cargo.toml"),
        sdk.join("README.md"),
        sdk.join("label-selector/Cargo.toml"),
        sdk.join("grant/Cargo.toml"),
    ];
    for dir in ["src", "wit", "label-selector/src", "grant/src"] {
        walk(&sdk.join(dir), &mut files);
    }
    let mut code = String::from("const SDK_FILES: &[(&str, &str)] = &[\n");
    for file in files {
        let relative = file
            .strip_prefix(sdk)
            .expect("under sdk/")
            .display()
            .to_string();
        writeln!(
            code,
            "    ({relative:?}, include_str!({:?})),",
            file.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    code
}

/// The `package` every `.wit` file of `dir` declares (`velero-wasm:plugin@0.1.0`); the files must
/// agree, so the version `--version` prints is the one the components are built against.
fn wit_package(dir: &Path) -> String {
    let mut found: Option<(String, PathBuf)> = None;
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wit"))
        .collect();
    files.sort();
    for file in files {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let package = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("package "))
            .map(|rest| rest.trim_end_matches(';').trim().to_string())
            .unwrap_or_else(|| panic!("{} declares no package", file.display()));
        match &found {
            Some((first, at)) if *first != package => panic!(
                "{} declares package {package}, {} declares {first}",
                file.display(),
                at.display()
            ),
            Some(_) => {}
            None => found = Some((package, file)),
        }
    }
    found
        .map(|(package, _)| package)
        .unwrap_or_else(|| panic!("{} holds no .wit file", dir.display()))
}

/// The Velero plugin protocol's `.proto` files, relative to `host/proto/`: Velero's services (packages
/// `generated`, `v1`, `v2`) and go-plugin's infrastructure services (package `plugin`).
const PROTOS: &[&str] = &[
    "Shared.proto",
    "PluginLister.proto",
    "BackupItemAction.proto",
    "RestoreItemAction.proto",
    "DeleteItemAction.proto",
    "backupitemaction/v2/BackupItemAction.proto",
    "restoreitemaction/v2/RestoreItemAction.proto",
    "itemblockaction/v1/ItemBlockAction.proto",
    "plugin/grpc_controller.proto",
    "plugin/grpc_stdio.proto",
    "plugin/grpc_broker.proto",
];

/// Compiles [`PROTOS`] into `OUT_DIR/<package>.rs` (servers for the plugin, clients for the tests).
fn compile_protos(proto_dir: &Path) {
    println!("cargo:rerun-if-changed={}", proto_dir.display());
    let files: Vec<PathBuf> = PROTOS.iter().map(|p| proto_dir.join(p)).collect();
    let descriptors = protox::compile(&files, [proto_dir])
        .unwrap_or_else(|e| panic!("host/proto does not compile: {e:?}"));
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)
        .unwrap_or_else(|e| panic!("generating the gRPC code from host/proto failed: {e}"));
}

/// Names of the crates (directories with a Cargo.toml) directly under `dir`, sorted.
fn crates_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// `dir`, once every component of `crates` is in it: [`PREBUILT_ENV`]'s directory.
fn prebuilt(dir: PathBuf, crates: &[&String]) -> PathBuf {
    if !dir.is_absolute() {
        panic!(
            "{PREBUILT_ENV}={}: give an absolute path (the build script runs in host/)",
            dir.display()
        );
    }
    for name in crates {
        let wasm = dir.join(format!("{}.wasm", name.replace('-', "_")));
        println!("cargo:rerun-if-changed={}", wasm.display());
        if !wasm.is_file() {
            panic!(
                "{PREBUILT_ENV}={}: {} is missing; build the components first with \
                 `cargo build --target {TARGET} --profile {PROFILE} --target-dir target/wasm -p {name} …` \
                 (every crate of actions/ and tests/components/)",
                dir.display(),
                wasm.display()
            );
        }
    }
    dir
}

fn build_components(root: &Path, target_dir: &Path, crates: &[&String]) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .arg("build")
        .arg("--target")
        .arg(TARGET)
        .arg("--profile")
        .arg(PROFILE)
        .arg("--target-dir")
        .arg(target_dir);
    for name in crates {
        cmd.arg("-p").arg(name.as_str());
    }
    // The outer build's flags and wrappers (clippy, coverage) are for the host, not the components.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .expect("run cargo to build the wasm components");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        panic!(
            "building the wasm components failed (is the target installed? `rustup target add {TARGET}`):\n{stderr}"
        );
    }
}
