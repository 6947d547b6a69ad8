//! Signed modules and the operator's `velero-wasm module` commands. With trusted keys configured
//! (`VELERO_WASM_TRUSTED_KEYS`, `--trusted-keys`), a module beyond the stock ones loads only when it
//! is signed by one of them over its name, component and manifest; a changed component, a widened
//! grant, a signature by another key and a missing signature are each refused with a message naming
//! the module and the key, and a plugin keeps serving the module's last good version.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine as _;
use serde_json::Value;
use support::plugin::Plugin;
use support::run::Run;
use support::{stderr, stdout_json, velero_wasm};

const MANIFEST: &str = r#"
[[grant.kube]]
resources = ["configmaps"]
verbs = ["get"]
namespaces = ["@item"]
"#;

const ECHO: &str = "test.velero-wasm.io/echo";

fn run(args: &[&str]) -> Output {
    velero_wasm(args)
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// A key pair made by `module keygen`: its prefix and key id.
struct Key {
    prefix: PathBuf,
    id: String,
}

impl Key {
    fn new(dir: &Path, name: &str) -> Key {
        let prefix = dir.join(name);
        let out = run(&["module", "keygen", "--out", &text(&prefix)]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert_eq!(id.len(), 16, "a key id is 16 hex digits: {id:?}");
        Key { prefix, id }
    }

    fn private(&self) -> String {
        format!("{}.key", self.prefix.display())
    }

    fn public(&self) -> String {
        format!("{}.pub", self.prefix.display())
    }
}

/// `module keygen` writes keys that OpenSSL reads as they are: the private key is PKCS#8 v1, which
/// OpenSSL 3.0 reads (it refuses the v2 that also carries the public key), and the public key OpenSSL
/// derives from it is the `.pub` that keygen wrote. A key in the older v2 form still signs.
#[test]
fn keygen_writes_keys_openssl_reads_and_a_v2_key_still_signs() {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let derived = std::process::Command::new("openssl")
        .args(["pkey", "-in", &key.private(), "-pubout"])
        .output()
        .expect("openssl (apt-get install openssl)");
    assert!(
        derived.status.success(),
        "openssl cannot read the private key: {}",
        String::from_utf8_lossy(&derived.stderr)
    );
    assert_eq!(
        String::from_utf8(derived.stdout).unwrap(),
        std::fs::read_to_string(key.public()).unwrap()
    );

    // The same key as PKCS#8 v2 (seed and public key), as earlier releases wrote it.
    use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
    let signing =
        ed25519_dalek::SigningKey::from_pkcs8_pem(&std::fs::read_to_string(key.private()).unwrap())
            .unwrap();
    let pem = signing
        .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .unwrap();
    let v2 = keys.path().join("ops-v2.key");
    std::fs::write(&v2, pem.as_bytes()).unwrap();
    let source = support::module_dir("misbehave", "misbehave", MANIFEST);
    let yaml = keys.path().join("cm.yaml");
    let out = run(&[
        "module",
        "pack",
        &text(source.path()),
        "--out",
        &text(&yaml),
        "--sign",
        &text(&v2),
        "--unversioned",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("signed by key {}", key.id)),
        "{}",
        stderr(&out)
    );
}

/// Packs `path` (signed with `key`, if any: `--unversioned`, as these manifests have no version, a
/// subject of its own below) into `out`, checking the command succeeds.
fn pack(path: &Path, key: Option<&Key>, out: &Path) -> String {
    let (path, out_text) = (text(path), text(out));
    let mut args = vec!["module", "pack", path.as_str(), "--out", out_text.as_str()];
    let private = key.map(Key::private);
    if let Some(private) = &private {
        args.extend(["--sign", private.as_str(), "--unversioned"]);
    }
    let output = run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stderr(&output)
}

/// A kubevirt override (a manifest alone), signed with a new key `ops` made in `keys` and packed into
/// `keys/override.yaml`: the key, the YAML's path and what pack reported.
fn packed_override(keys: &Path) -> (Key, PathBuf, String) {
    let key = Key::new(keys, "ops");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("kubevirt.toml");
    std::fs::write(&manifest, "[settings]\nmode = \"upstream\"\n").unwrap();
    let yaml = keys.join("override.yaml");
    let report = pack(&manifest, Some(&key), &yaml);
    (key, yaml, report)
}

/// Writes every entry of the packed ConfigMaps in `yaml` into `dir`, as the kubelet mounts one, the
/// component expanded: a module directory takes `<name>.wasm`, and `pack` stores it gzipped.
fn unpack(yaml: &Path, dir: &Path) {
    use serde::Deserialize;
    let text = std::fs::read_to_string(yaml).unwrap();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let object = Value::deserialize(doc).unwrap();
        for (key, value) in object["data"].as_object().into_iter().flatten() {
            std::fs::write(dir.join(key), value.as_str().unwrap()).unwrap();
        }
        for (key, value) in object["binaryData"].as_object().into_iter().flatten() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(value.as_str().unwrap())
                .unwrap();
            let (key, bytes) = velero_wasm::modules::compression::expanded(key, bytes).unwrap();
            std::fs::write(dir.join(key), bytes).unwrap();
        }
    }
}

/// A module directory with the `misbehave` test component as `misbehave`, signed with `key`.
fn signed_module(key: &Key) -> tempfile::TempDir {
    let source = support::module_dir("misbehave", "misbehave", MANIFEST);
    let packed = tempfile::tempdir().unwrap();
    let yaml = packed.path().join("cm.yaml");
    pack(source.path(), Some(key), &yaml);
    let mounted = tempfile::tempdir().unwrap();
    unpack(&yaml, mounted.path());
    mounted
}

/// `velero-wasm actions --json` with the module directory and the trusted keys.
fn actions(modules: &Path, trusted: Option<&str>) -> Output {
    let modules = text(modules);
    let mut args = vec!["actions", "--json", "--modules", modules.as_str()];
    if let Some(trusted) = trusted {
        args.extend(["--trusted-keys", trusted]);
    }
    run(&args)
}

fn lists_echo(json: &Value) -> bool {
    json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == ECHO)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_module_packed_with_a_new_key_verifies_and_loads_as_signed() {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let private = std::fs::metadata(key.private()).unwrap();
    assert_eq!(
        private.permissions().mode() & 0o777,
        0o600,
        "the private key is private"
    );
    assert!(std::fs::read_to_string(key.private())
        .unwrap()
        .starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(std::fs::read_to_string(key.public())
        .unwrap()
        .starts_with("-----BEGIN PUBLIC KEY-----"));

    let source = support::module_dir("misbehave", "misbehave", MANIFEST);
    let yaml = keys.path().join("cm.yaml");
    let report = pack(source.path(), Some(&key), &yaml);
    assert!(
        report.contains("ConfigMap velero/velero-wasm-module-misbehave: ")
            && report.contains("of the 1048576-byte limit")
            && report.contains(&format!("signed by key {}", key.id)),
        "{report}"
    );
    // The component (about 214 KiB), gzipped, fits the annotation of a client-side apply; the report
    // gives its size in bytes.
    let component = std::fs::metadata(source.path().join("misbehave.wasm"))
        .unwrap()
        .len();
    assert!(
        report.contains(&format!("its {component}-byte component gzipped to ")),
        "{report}"
    );
    assert!(
        !report.contains("apply with `kubectl apply --server-side -f`"),
        "{report}"
    );
    let packed: Value = serde_norway::from_str(&std::fs::read_to_string(&yaml).unwrap()).unwrap();
    assert_eq!(packed["kind"], "ConfigMap");
    assert_eq!(
        packed["metadata"]["labels"]["velero-wasm.io/module"],
        "misbehave"
    );
    assert!(packed["binaryData"]["misbehave.wasm.gz"].is_string());
    assert!(packed["data"]["misbehave.toml"].is_string());
    let sig = packed["data"]["misbehave.sig"].as_str().unwrap();
    assert!(sig.contains(&format!("key = \"{}\"", key.id)), "{sig}");

    // The packed ConfigMap verifies against the key, and says by which key.
    let out = run(&[
        "module",
        "verify",
        "--json",
        "--trusted-keys",
        &key.public(),
        &text(&yaml),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout_json(&out);
    let module = &report["modules"][0];
    assert_eq!(module["name"], "misbehave");
    assert_eq!(module["ok"], true);
    assert_eq!(module["signature"]["key"], key.id.as_str());
    assert_eq!(module["signature"]["verified"], true);
    let wasm = std::fs::read(source.path().join("misbehave.wasm")).unwrap();
    assert_eq!(module["sha256"], sha256_hex(&wasm).as_str());

    // For people: one line per module, short enough for a terminal.
    let out = run(&[
        "module",
        "verify",
        "--trusted-keys",
        &key.public(),
        &text(&yaml),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with("misbehave ")
            && line.contains(&sha256_hex(&wasm)[..12])
            && line.contains(&format!("signed by key {}", key.id))
            && line.trim_end().len() <= 100,
        "{line}"
    );

    // Mounted as a directory, the host loads it and shows it as signed.
    let mounted = tempfile::tempdir().unwrap();
    unpack(&yaml, mounted.path());
    let out = actions(mounted.path(), Some(&key.public()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed = stdout_json(&out);
    let echo = listed["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == ECHO)
        .unwrap();
    assert_eq!(echo["signature"]["key"], key.id.as_str());
    assert_eq!(echo["signature"]["verified"], true);
}

#[test]
fn a_changed_component_a_widened_grant_another_key_or_no_signature_is_refused_by_name_and_key() {
    let keys = tempfile::tempdir().unwrap();
    let (key, stranger) = (
        Key::new(keys.path(), "ops"),
        Key::new(keys.path(), "stranger"),
    );

    // The component replaced by another, with the manifest's pin updated to match.
    let changed_component = signed_module(&key);
    {
        let dir = changed_component.path();
        let other = std::fs::read(support::components_dir().join("misbehave.wasm")).unwrap();
        let mut other = other;
        other.extend_from_slice(&[0, 0, 0, 0]);
        std::fs::write(dir.join("misbehave.wasm"), &other).unwrap();
        let manifest = std::fs::read_to_string(dir.join("misbehave.toml")).unwrap();
        let pinned = manifest
            .lines()
            .map(|l| {
                if l.starts_with("sha256") {
                    format!("sha256 = \"{}\"", sha256_hex(&other))
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(dir.join("misbehave.toml"), pinned).unwrap();
    }
    // The manifest's grant widened.
    let widened_grant = signed_module(&key);
    {
        let path = widened_grant.path().join("misbehave.toml");
        let manifest = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            manifest.replace(r#"verbs = ["get"]"#, r#"verbs = ["get", "delete"]"#),
        )
        .unwrap();
    }
    // Signed by a key that is not trusted.
    let other_key = signed_module(&stranger);
    // Not signed at all.
    let unsigned = support::module_dir("misbehave", "misbehave", MANIFEST);

    let mismatch = format!(
        "module misbehave: its signature by key {} does not match",
        key.id
    );
    let cases: [(&str, &Path, String); 4] = [
        ("changed component", changed_component.path(), mismatch.clone()),
        ("widened grant", widened_grant.path(), mismatch),
        (
            "untrusted key",
            other_key.path(),
            format!(
                "module misbehave is signed by key {}, which is not a trusted key (trusted: {}",
                stranger.id, key.id
            ),
        ),
        (
            "unsigned",
            unsigned.path(),
            format!("module misbehave is not signed, and only modules signed by a trusted key are loaded (trusted: {}", key.id),
        ),
    ];
    for (case, dir, expected) in cases {
        // The host's loader refuses it: not listed, exit 1, the reason on stderr with its file.
        let out = actions(dir, Some(&key.public()));
        assert_eq!(out.status.code(), Some(1), "{case}: {}", stderr(&out));
        assert!(
            !lists_echo(&stdout_json(&out)),
            "{case}: refused, so not served"
        );
        let problems = stdout_json(&out)["problems"].to_string();
        assert!(
            problems.contains(&expected) && problems.contains("misbehave"),
            "{case}: {problems}"
        );
        // `module verify` refuses it with the same reason.
        let out = run(&[
            "module",
            "verify",
            "--trusted-keys",
            &key.public(),
            &text(dir),
        ]);
        assert_eq!(out.status.code(), Some(1), "{case}: {}", stderr(&out));
        assert!(stderr(&out).contains(&expected), "{case}: {}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("misbehave ")
                && String::from_utf8_lossy(&out.stdout).contains("BAD"),
            "{case}"
        );
    }

    // The environment variable configures the keys as the flag does.
    let out = Run::cli(["actions", "--json", "--modules", &text(unsigned.path())])
        .env("VELERO_WASM_TRUSTED_KEYS", key.public())
        .output();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!lists_echo(&stdout_json(&out)));
}

#[test]
fn without_trusted_keys_a_signature_is_optional_but_must_be_well_formed() {
    let unsigned = support::module_dir("misbehave", "misbehave", MANIFEST);
    let out = actions(unsigned.path(), None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed = stdout_json(&out);
    assert!(lists_echo(&listed));
    let echo = listed["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == ECHO)
        .unwrap();
    assert!(echo["signature"].is_null(), "unsigned: {echo}");

    std::fs::write(
        unsigned.path().join("misbehave.sig"),
        "key = \"not-a-key-id\"\nsignature = \"AAAA\"\n",
    )
    .unwrap();
    let out = actions(unsigned.path(), None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let problems = stdout_json(&out)["problems"].to_string();
    assert!(
        problems.contains("misbehave.sig") && problems.contains("its signature is malformed"),
        "{problems}"
    );

    // A bad trusted key file is named.
    let keys = tempfile::tempdir().unwrap();
    let bad = keys.path().join("broken.pub");
    std::fs::write(
        &bad,
        "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n",
    )
    .unwrap();
    let out = actions(unsigned.path(), Some(&text(keys.path())));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("broken.pub") && stderr(&out).contains("not an ed25519 public key"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_signed_manifest_alone_verifies_with_no_component() {
    let keys = tempfile::tempdir().unwrap();
    let (key, yaml, report) = packed_override(keys.path());
    assert!(
        !report.contains("--server-side"),
        "a small ConfigMap applies either way: {report}"
    );
    let packed: Value = serde_norway::from_str(&std::fs::read_to_string(&yaml).unwrap()).unwrap();
    assert!(packed.get("binaryData").is_none(), "no component: {packed}");

    let verify = |yaml: &Path| {
        run(&[
            "module",
            "verify",
            "--json",
            "--trusted-keys",
            &key.public(),
            &text(yaml),
        ])
    };
    let out = verify(&yaml);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let module = &stdout_json(&out)["modules"][0];
    assert!(module["sha256"].is_null());
    assert_eq!(module["signature"]["key"], key.id.as_str());

    let tampered = std::fs::read_to_string(&yaml)
        .unwrap()
        .replace("upstream", "extended");
    std::fs::write(&yaml, tampered).unwrap();
    let out = verify(&yaml);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let module = &stdout_json(&out)["modules"][0];
    assert_eq!(module["ok"], false);
    let problem = module["problem"].as_str().unwrap();
    assert!(
        problem.contains("ConfigMap velero/velero-wasm-module-kubevirt")
            && problem.contains(&format!(
                "module kubevirt: its signature by key {} does not match",
                key.id
            )),
        "{problem}"
    );
}

/// `module verify` refuses what the host refuses to load from a module ConfigMap — a key in both
/// `data` and `binaryData`, a key that is not the module's, more than 1 MiB decoded, a compressed
/// component that expands beyond 8 MiB — with the
/// host's reason, and a control character in a name reaches the terminal escaped.
#[test]
fn verify_refuses_exactly_what_the_host_refuses() {
    let keys = tempfile::tempdir().unwrap();
    let (key, yaml, _) = packed_override(keys.path());
    let packed: Value = serde_norway::from_str(&std::fs::read_to_string(&yaml).unwrap()).unwrap();
    let toml = packed["data"]["kubevirt.toml"]
        .as_str()
        .unwrap()
        .to_string();
    let encoded = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    type Change<'a> = Box<dyn Fn(&mut Value) + 'a>;
    let cases: Vec<(&str, Change, &str)> = vec![
        (
            "in both",
            Box::new(|cm: &mut Value| {
                cm["binaryData"] = serde_json::json!({"kubevirt.toml": encoded(toml.as_bytes())})
            }),
            "key \"kubevirt.toml\" is in both data and binaryData",
        ),
        (
            "extra key",
            Box::new(|cm: &mut Value| cm["data"]["notes.txt"] = "hello".into()),
            "data key \"notes.txt\" is not one of kubevirt.wasm, kubevirt.wasm.gz, kubevirt.toml, kubevirt.sig",
        ),
        (
            "too large",
            Box::new(|cm: &mut Value| {
                cm["binaryData"] =
                    serde_json::json!({"kubevirt.wasm": encoded(&vec![0u8; 1_300_000])})
            }),
            "the most a module ConfigMap may hold",
        ),
        (
            "a decompression bomb",
            Box::new(|cm: &mut Value| {
                let zeros = vec![0u8; (8 << 20) + 1];
                let bomb = velero_wasm::modules::compression::compress(&zeros).unwrap();
                cm["binaryData"] = serde_json::json!({"kubevirt.wasm.gz": encoded(&bomb)})
            }),
            "kubevirt.wasm.gz: expands to more than 8388608 bytes",
        ),
        (
            "escape in a name",
            Box::new(|cm: &mut Value| {
                cm["metadata"]["name"] = "evil\u{1b}[2J".into();
                cm["data"]["junk"] = "x".into();
            }),
            "ConfigMap velero/evil\\u{1b}[2J in",
        ),
    ];
    for (what, change, says) in cases {
        let mut cm = packed.clone();
        change(&mut cm);
        let file = keys.path().join("changed.json");
        std::fs::write(&file, cm.to_string()).unwrap();
        let out = run(&[
            "module",
            "verify",
            "--trusted-keys",
            &key.public(),
            &text(&file),
        ]);
        assert_ne!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        let everything = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(everything.contains(says), "{what}: {everything}");
        assert!(
            !everything.contains('\u{1b}'),
            "{what}: a raw ESC reached the terminal"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_with_trusted_keys_keeps_serving_the_last_good_version_of_a_module_whose_signature_fails(
) {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let modules = signed_module(&key);
    let state = tempfile::tempdir().unwrap();
    let (modules_dir, state_dir, trusted) =
        (text(modules.path()), text(state.path()), key.public());
    let env = [
        ("VELERO_WASM_MODULES", modules_dir.as_str()),
        ("VELERO_WASM_STATE_DIR", state_dir.as_str()),
        ("VELERO_WASM_TRUSTED_KEYS", trusted.as_str()),
    ];
    let serves_echo = |listed: std::collections::BTreeSet<(String, String)>| {
        listed.iter().any(|(_, name)| name == ECHO)
    };
    let plugin = Plugin::start_as(support::plugin::binary(), &[], &env);
    assert!(
        serves_echo(plugin.listed().await),
        "the signed module is served"
    );
    plugin.shutdown().await;
    let good_sha = sha256_hex(&std::fs::read(modules.path().join("misbehave.wasm")).unwrap());

    // An update widens the grant without a new signature.
    let path = modules.path().join("misbehave.toml");
    let manifest = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        manifest.replace(r#"verbs = ["get"]"#, r#"verbs = ["get", "delete"]"#),
    )
    .unwrap();
    let plugin = Plugin::start_as(support::plugin::binary(), &[], &env);
    assert!(
        serves_echo(plugin.listed().await),
        "the last good version serves"
    );
    let session = plugin.shutdown().await;
    let refusal = format!(
        "module misbehave: its signature by key {} does not match",
        key.id
    );
    let line = session
        .stderr
        .lines()
        .find(|l| l.contains(&refusal))
        .unwrap_or_else(|| panic!("no refusal in {}", session.stderr));
    assert!(
        line.contains("misbehave.sig")
            && line.contains(&format!(
                "serving its last good version (sha256 {good_sha})"
            )),
        "{line}"
    );

    // With keys that cannot be read, nothing beyond the stock modules is served, not even the last
    // good version: it cannot be verified.
    std::fs::write(key.public(), "not a key").unwrap();
    let plugin = Plugin::start_as(support::plugin::binary(), &[], &env);
    assert!(!serves_echo(plugin.listed().await));
    let session = plugin.shutdown().await;
    assert!(
        session.stderr.contains("VELERO_WASM_TRUSTED_KEYS")
            && session.stderr.contains("not an ed25519 public key"),
        "{}",
        session.stderr
    );
}

#[test]
fn an_exported_stock_module_loads_back_as_a_directory_module_with_the_same_sha256() {
    let out = run(&["actions", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stock = stdout_json(&out);
    let kubevirt_sha = stock["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["module"] == "kubevirt")
        .unwrap()["sha256"]
        .clone();

    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("exported");
    let out = run(&["module", "export", "kubevirt", &text(&target)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        sha256_hex(&std::fs::read(target.join("kubevirt.wasm")).unwrap()),
        kubevirt_sha.as_str().unwrap()
    );

    let out = actions(&target, None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let loaded = stdout_json(&out);
    let kubevirt: Vec<&Value> = loaded["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["module"] == "kubevirt")
        .collect();
    assert!(!kubevirt.is_empty());
    for action in kubevirt {
        assert_eq!(action["sha256"], kubevirt_sha);
        assert_eq!(
            action["origin"],
            text(&target.join("kubevirt.wasm")).as_str()
        );
    }

    // Exporting again does not overwrite what an operator may have edited.
    let out = run(&["module", "export", "kubevirt", &text(&target)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("exists: not overwriting it"),
        "{}",
        stderr(&out)
    );
    let out = run(&["module", "export", "nonesuch", &text(&target)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("kubevirt"),
        "names the stock modules: {}",
        stderr(&out)
    );
}

#[test]
fn pack_refuses_a_module_over_the_one_mebibyte_object_limit_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Bytes that do not compress: gzipped, then in base64, 800 KiB of them are about 1.09 MB of
    // ConfigMap.
    let incompressible = |n: usize| -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    };
    let big = incompressible(800 << 10);
    std::fs::write(dir.path().join("big.wasm"), &big).unwrap();
    std::fs::write(
        dir.path().join("big.toml"),
        format!("sha256 = \"{}\"\n", sha256_hex(&big)),
    )
    .unwrap();
    let out_file = dir.path().join("big.yaml");
    let out = run(&[
        "module",
        "pack",
        &text(&dir.path().join("big.wasm")),
        "--out",
        &text(&out_file),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains("ConfigMap velero-wasm-module-big (module big) would be ")
            && message.contains("over Kubernetes' limit of 1048576 bytes"),
        "{message}"
    );
    assert!(!out_file.exists(), "nothing written");

    // 700 KiB fits, and the size reported is the size written.
    let fits = incompressible(700 << 10);
    std::fs::write(dir.path().join("big.wasm"), &fits).unwrap();
    std::fs::write(
        dir.path().join("big.toml"),
        format!("sha256 = \"{}\"\n", sha256_hex(&fits)),
    )
    .unwrap();
    let report = pack(&dir.path().join("big.wasm"), None, &out_file);
    let written = std::fs::metadata(&out_file).unwrap().len();
    assert!(
        report.contains(&format!(
            "ConfigMap velero/velero-wasm-module-big: {written} bytes"
        )),
        "{report}"
    );
}

#[test]
fn keygen_never_overwrites_a_key() {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let before = std::fs::read(key.private()).unwrap();
    let out = run(&["module", "keygen", "--out", &text(&key.prefix)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("exists"), "{}", stderr(&out));
    assert_eq!(std::fs::read(key.private()).unwrap(), before);
}

#[test]
fn pack_signs_an_expiry_verify_enforces_it_and_a_past_one_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let source = support::module_dir("misbehave", "misbehave", MANIFEST);
    let yaml = keys.path().join("cm.yaml");
    let source_text = text(source.path());
    let (yaml_text, private) = (text(&yaml), key.private());
    let pack = |expires: &str| {
        run(&[
            "module",
            "pack",
            &source_text,
            "--out",
            &yaml_text,
            "--sign",
            &private,
            "--unversioned",
            "--expires",
            expires,
        ])
    };
    let out = pack("30d");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its manifest has no version"),
        "pack warns that rollback protection cannot cover it: {}",
        stderr(&out)
    );
    let packed: Value = serde_norway::from_str(&std::fs::read_to_string(&yaml).unwrap()).unwrap();
    let signature = packed["data"]["misbehave.sig"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(signature.contains("expires = \"20"), "{signature}");
    let verified = run(&[
        "module",
        "verify",
        "--trusted-keys",
        &key.public(),
        &yaml_text,
    ]);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));

    // Moved by hand, the expiry no longer matches the signature.
    let moved = std::fs::read_to_string(&yaml)
        .unwrap()
        .replace("expires = \"20", "expires = \"21");
    std::fs::write(&yaml, moved).unwrap();
    let refused = run(&[
        "module",
        "verify",
        "--trusted-keys",
        &key.public(),
        &yaml_text,
    ]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("does not match"),
        "{}",
        stderr(&refused)
    );

    for bad in ["2001-01-01T00:00:00Z", "tomorrow"] {
        let out = pack(bad);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--expires"),
            "{bad}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_packed_configmap_file_loads_as_modules_with_no_cluster_as_the_host_would_load_it() {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let source = support::module_dir("misbehave", "misbehave", MANIFEST);
    let yaml = keys.path().join("cm.yaml");
    pack(source.path(), Some(&key), &yaml);

    // What will be applied, listed (and its signature checked) before it is applied.
    let out = actions(&yaml, Some(&key.public()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout_json(&out);
    assert!(lists_echo(&json), "{json}");
    let echo = json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == ECHO)
        .unwrap();
    assert_eq!(echo["signature"]["key"], key.id.as_str(), "{echo}");

    // A changed grant in the file is refused, naming the ConfigMap, as the host refuses it.
    let text = std::fs::read_to_string(&yaml).unwrap();
    std::fs::write(&yaml, text.replacen("configmaps", "secrets", 1)).unwrap();
    let out = actions(&yaml, Some(&key.public()));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json = stdout_json(&out);
    assert!(!lists_echo(&json), "{json}");
    let problems = json["problems"].to_string();
    assert!(
        problems.contains("document 1 (ConfigMap velero-wasm-module-misbehave)")
            && problems.contains("does not match"),
        "{problems}"
    );
    // A file that holds no ConfigMap is a clear problem too.
    let junk = keys.path().join("junk.yaml");
    std::fs::write(&junk, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n").unwrap();
    let out = actions(&junk, None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout_json(&out)["problems"]
            .to_string()
            .contains("document 1 (Secret s): is not a ConfigMap"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The expiry a packed ConfigMap's signature carries (`None`: the signature has none), read back
/// through the host's own parser of signature files.
fn packed_expiry(yaml: &Path, module: &str) -> Option<std::time::SystemTime> {
    let packed: Value = serde_norway::from_str(&std::fs::read_to_string(yaml).unwrap()).unwrap();
    let text = packed["data"][format!("{module}.sig")]
        .as_str()
        .unwrap_or_else(|| panic!("no {module}.sig in {packed}"));
    let (file, _) = velero_wasm::modules::signature::SignatureFile::parse(text).unwrap();
    file.expires
        .map(|at| humantime::parse_rfc3339(&at).unwrap_or_else(|e| panic!("{at:?}: {e}")))
}

/// Signing for hosts that trust keys: a manifest without `version` is refused unless `--unversioned`
/// says so (the rollback floor has nothing to compare), by `pack` (nothing written) and `push`
/// (nothing pushed: it is refused before any registry is reached).
#[test]
fn pack_and_push_sign_refuse_a_manifest_without_version_unless_told_unversioned() {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let source = support::module_dir("misbehave", "misbehave", MANIFEST);
    let (source_text, private) = (text(source.path()), key.private());
    let yaml = keys.path().join("cm.yaml");
    let yaml_text = text(&yaml);
    let out = run(&[
        "module",
        "pack",
        &source_text,
        "--out",
        &yaml_text,
        "--sign",
        &private,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains("module misbehave: its manifest has no version")
            && message.contains("--unversioned")
            && message.contains("version = \"1.0.0\"")
            && message.contains("nothing written"),
        "{message}"
    );
    assert!(!yaml.exists(), "pack wrote {} anyway", yaml.display());
    // To stdout: nothing either.
    let out = run(&["module", "pack", &source_text, "--sign", &private]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // `push` refuses it the same way, before it reaches the registry (none listens there).
    let wasm = text(&source.path().join("misbehave.wasm"));
    let target = "oci://127.0.0.1:9/velero/misbehave:1.0.0";
    let out = run(&[
        "module",
        "push",
        &wasm,
        target,
        "--plain-http",
        "--sign",
        &private,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--unversioned") && stderr(&out).contains("nothing pushed"),
        "{}",
        stderr(&out)
    );

    // Told so, it is signed, with the warning, and the host accepts the signature.
    let out = run(&[
        "module",
        "pack",
        &source_text,
        "--out",
        &yaml_text,
        "--sign",
        &private,
        "--unversioned",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its manifest has no version")
            && stderr(&out).contains("signed anyway: --unversioned"),
        "{}",
        stderr(&out)
    );
    let verified = run(&[
        "module",
        "verify",
        "--trusted-keys",
        &key.public(),
        &yaml_text,
    ]);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));

    // `--unversioned` means nothing unsigned: refused as a usage error.
    let out = run(&["module", "pack", &source_text, "--unversioned"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--sign"), "{}", stderr(&out));
}

/// A signature made without `--expires` expires after the default 90 days (read back from the
/// signature file, and reported); `--no-expiry` is the explicit way to sign one that never expires,
/// and it cannot be combined with `--expires`.
#[test]
fn pack_sign_expires_after_90_days_by_default_and_never_only_with_no_expiry() {
    let keys = tempfile::tempdir().unwrap();
    let key = Key::new(keys.path(), "ops");
    let source = support::module_dir(
        "misbehave",
        "misbehave",
        &format!("version = \"1.0.0\"\n{MANIFEST}"),
    );
    let (source_text, private) = (text(source.path()), key.private());
    let yaml = keys.path().join("cm.yaml");
    let yaml_text = text(&yaml);
    let pack = |extra: &[&str]| {
        let mut args = vec![
            "module",
            "pack",
            source_text.as_str(),
            "--out",
            yaml_text.as_str(),
            "--sign",
            private.as_str(),
        ];
        args.extend(extra);
        run(&args)
    };

    let ninety_days = std::time::Duration::from_secs(90 * 24 * 60 * 60);
    let before = std::time::SystemTime::now();
    let out = pack(&[]);
    let after = std::time::SystemTime::now();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expires = packed_expiry(&yaml, "misbehave").expect("a default signature has an expiry");
    // Written to the second: within a second of 90 days after the command ran.
    let earliest = before + ninety_days - std::time::Duration::from_secs(1);
    assert!(
        expires >= earliest && expires <= after + ninety_days,
        "expires {} is not 90 days after {}",
        humantime::format_rfc3339_seconds(expires),
        humantime::format_rfc3339_seconds(before)
    );
    let at = humantime::format_rfc3339_seconds(expires).to_string();
    assert!(
        stderr(&out).contains(&format!("signed by key {} until {at}", key.id)),
        "the report names the expiry: {}",
        stderr(&out)
    );
    let verified = run(&[
        "module",
        "verify",
        "--trusted-keys",
        &key.public(),
        &yaml_text,
    ]);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));

    // --expires still sets it.
    let before = std::time::SystemTime::now();
    let out = pack(&["--expires", "12h"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expires = packed_expiry(&yaml, "misbehave").unwrap();
    let twelve_hours = std::time::Duration::from_secs(12 * 60 * 60);
    assert!(
        expires >= before + twelve_hours - std::time::Duration::from_secs(1)
            && expires < before + twelve_hours + std::time::Duration::from_secs(60),
        "{}",
        humantime::format_rfc3339_seconds(expires)
    );

    // No expiry only when asked: the signature carries none, and still verifies.
    let out = pack(&["--no-expiry"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(packed_expiry(&yaml, "misbehave"), None);
    assert!(
        stderr(&out).contains(&format!("signed by key {} with no expiry", key.id)),
        "{}",
        stderr(&out)
    );
    let verified = run(&[
        "module",
        "verify",
        "--trusted-keys",
        &key.public(),
        &yaml_text,
    ]);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));

    // Both at once is a usage error, and the file stays as it was.
    let before = std::fs::read(&yaml).unwrap();
    let out = pack(&["--no-expiry", "--expires", "30d"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--no-expiry") && stderr(&out).contains("--expires"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&yaml).unwrap(), before);
}
