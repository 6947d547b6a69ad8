//! Modules from OCI registries, against a real one: Debian's `docker-registry` (the CNCF distribution
//! registry) started on loopback with a temporary configuration, plain or with TLS and htpasswd basic
//! auth. Modules are pushed with `velero-wasm module push` and pulled by plugin processes from the
//! reference a module ConfigMap names (`<name>.oci`), against the loopback API server.
//!
//! - A pushed module is served from its pinned reference; an update whose pull fails (registry down,
//!   wrong digest, tampered blob, unsigned under trusted keys) leaves the last good version serving,
//!   with a message naming the reason.
//! - Over TLS with basic auth: pushed with a docker config, pulled with a docker-config Secret
//!   through the environment's HTTPS proxy; without credentials the pull is refused.
//! - A registry that answers without end is refused within its cap.
//! - A 30 MB component is pulled and served (about 6 s).
//! - While an artifact is pulled, the modules that need no pull serve: stock ones, the module
//!   directory's, and those of ConfigMaps holding their component.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use support::apiserver::ApiServer;
use support::loopback::test_ca;
use support::plugin::{binary, Plugin, Session};
use support::proxy::ConnectProxy;
use support::{components_dir, stderr, stdout_json, velero_wasm};
use velero_wasm::modules::configmaps::LABEL;
use velero_wasm::modules::sha256_hex;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::ExecuteRequest;

/// The registry binary of Debian's `docker-registry` package.
const REGISTRY: &str = "/usr/bin/docker-registry";

/// A distribution registry on a loopback port, its storage in a temporary directory.
struct Registry {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// `127.0.0.1:<port>`, or `localhost:<port>` with TLS (the test certificate's name).
    host: String,
}

impl Registry {
    /// Starts one; with `tls` it presents tests/fixtures/tls's certificate, with `user` it asks for
    /// that user and password (htpasswd, bcrypt).
    fn start(tls: bool, user: Option<(&str, &str)>) -> Registry {
        assert!(
            Path::new(REGISTRY).exists(),
            "{REGISTRY} is missing: install Debian's docker-registry (.ci/deps)"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        if tls {
            let fixtures = support::root().join("tests/fixtures/tls");
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                fixtures.join("server.pem").display(),
                fixtures.join("server.key").display()
            ));
        }
        if let Some((name, password)) = user {
            let hash = bcrypt::hash(password, 4).unwrap();
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{name}:{hash}\n")).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let child = Command::new(REGISTRY)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the registry did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let name = if tls { "localhost" } else { "127.0.0.1" };
        Registry {
            child: Some(child),
            dir,
            host: format!("{name}:{port}"),
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Where the registry keeps a blob.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join(format!(
            "data/docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The misbehave test component as module `misbehave`, its actions under `domain`, in a directory.
fn module_dir(domain: &str, version: &str) -> tempfile::TempDir {
    module_dir_of(
        &std::fs::read(components_dir().join("misbehave.wasm")).unwrap(),
        domain,
        version,
    )
}

fn module_dir_of(wasm: &[u8], domain: &str, version: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("misbehave.wasm"), wasm).unwrap();
    std::fs::write(
        dir.path().join("misbehave.toml"),
        format!(
            "sha256 = \"{}\"\nversion = \"{version}\"\n[settings]\ndomain = \"{domain}\"\n",
            sha256_hex(wasm)
        ),
    )
    .unwrap();
    dir
}

/// `velero-wasm module push DIR oci://TARGET --json ARGS…`: the JSON it prints.
fn push(dir: &Path, target: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let out = support::run::Run::cli(
        [
            "module",
            "push",
            dir.to_str().unwrap(),
            &format!("oci://{target}"),
            "--json",
        ]
        .iter()
        .chain(args),
    )
    .envs(env)
    .output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout_json(&out)
}

/// A module ConfigMap naming an artifact.
fn oci_configmap(module: &str, reference: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("velero-wasm-module-{module}"), "namespace": "velero",
                     "labels": {LABEL: module}},
        "data": {format!("{module}.oci"): reference},
    })
}

/// An API server and a state directory that plugin processes share.
struct Scene {
    server: ApiServer,
    scratch: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let server = ApiServer::start(&[]);
        let scratch = tempfile::tempdir().unwrap();
        server.write_kubeconfig(&scratch.path().join("kubeconfig"));
        std::fs::create_dir(scratch.path().join("state")).unwrap();
        Scene { server, scratch }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    fn start(&self, extra: &[(&str, &str)]) -> Plugin {
        let (kubeconfig, state) = (self.path("kubeconfig"), self.path("state"));
        let mut env = vec![
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_STATE_DIR", state.to_str().unwrap()),
            ("VELERO_WASM_CONFIGMAPS", "on"),
            ("VELERO_NAMESPACE", "velero"),
            ("VELERO_WASM_STOCK", "none"),
        ];
        env.extend_from_slice(extra);
        let env: Vec<(String, String)> = env
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Plugin::start_with(binary(), &["--log-level", "info"], &pairs, |c| {
            c.env_remove("KUBERNETES_SERVICE_HOST");
        })
    }

    /// The actions a fresh plugin lists, the answer of `<domain>/echo` for the first domain listed,
    /// and its session.
    async fn serves(&self, extra: &[(&str, &str)]) -> (Vec<String>, Session) {
        let plugin = self.start(extra);
        let listed: Vec<String> = plugin.list().await.into_iter().map(|p| p.name).collect();
        if let Some(echo) = listed.iter().find(|n| n.ends_with("/echo")) {
            assert_eq!(execute(&plugin, echo).await, ["secrets shop/cm"]);
        }
        (listed, plugin.shutdown().await)
    }
}

async fn execute(plugin: &Plugin, action: &str) -> Vec<String> {
    let item = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "cm", "namespace": "shop"}, "data": {"k": "v"}});
    let backup = json!({"metadata": {"name": "nightly", "namespace": "velero"}, "spec": {}});
    let response = BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: action.into(),
            item: item.to_string().into_bytes(),
            backup: backup.to_string().into_bytes(),
        })
        .await
        .unwrap()
        .into_inner();
    response
        .additional_items
        .iter()
        .map(|id| format!("{} {}/{}", id.resource, id.namespace, id.name))
        .collect()
}

/// Asserts the plugin serves `domain`'s actions only, and that its log says `why` (if given).
fn assert_serves(listed: &[String], session: &Session, domain: &str, why: Option<&str>) {
    assert!(
        listed.contains(&format!("{domain}/echo")) && listed.iter().all(|n| n.starts_with(domain)),
        "expected {domain}'s actions, got {listed:?}\n{}",
        session.stderr
    );
    if let Some(why) = why {
        assert!(
            session.stderr.contains(why),
            "no {why:?} in the log:\n{}",
            session.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_module_is_served_from_its_reference_and_a_failed_update_leaves_the_last_good_one()
{
    let mut registry = Registry::start(false, None);
    let scene = Scene::new();
    let host = registry.host.clone();
    let plain = [("VELERO_WASM_OCI_PLAIN_HTTP", host.as_str())];

    // Pushed, named by its pinned reference: served.
    let v1 = module_dir("v1.example.io", "1.0.0");
    let pushed = push(
        v1.path(),
        &format!("{}/mods/misbehave:1.0.0", registry.host),
        &["--plain-http"],
        &[],
    );
    let reference = pushed["reference"].as_str().unwrap().to_string();
    let digest = pushed["digest"].as_str().unwrap().to_string();
    assert_eq!(
        reference,
        format!("{}/mods/misbehave:1.0.0@{digest}", registry.host)
    );
    assert_eq!(pushed["uploaded"].as_array().unwrap().len(), 2, "{pushed}");
    scene.server.apply(oci_configmap("misbehave", &reference));
    let (listed, session) = scene.serves(&plain).await;
    assert_serves(&listed, &session, "v1.example.io", Some("module pulled"));
    // Kept by digest in the state directory: the manifest and the component.
    let kept = scene.path("state/oci/sha256");
    assert!(kept.join(&digest["sha256:".len()..]).is_file());
    assert_eq!(std::fs::read_dir(&kept).unwrap().count(), 2);

    // Pushing the same module again uploads nothing and gives the same digest.
    let again = push(
        v1.path(),
        &format!("{}/mods/misbehave:1.0.0", registry.host),
        &["--plain-http"],
        &[],
    );
    assert_eq!(again["digest"], pushed["digest"]);
    assert_eq!(again["uploaded"], json!([]));

    // A tag alone is refused unless resolving tags is turned on.
    scene.server.apply(oci_configmap(
        "misbehave",
        &format!("{}/mods/misbehave:1.0.0", registry.host),
    ));
    let (listed, session) = scene.serves(&plain).await;
    assert_serves(
        &listed,
        &session,
        "v1.example.io",
        Some("names a tag without a digest"),
    );

    // A digest the registry's manifest does not have: refused, the last good version serves.
    let v2 = module_dir("v2.example.io", "2.0.0");
    let pushed2 = push(
        v2.path(),
        &format!("{}/mods/misbehave:2.0.0", registry.host),
        &["--plain-http"],
        &[],
    );
    let wrong = format!(
        "{}/mods/misbehave:2.0.0@sha256:{}",
        registry.host,
        sha256_hex(b"not it")
    );
    scene.server.apply(oci_configmap("misbehave", &wrong));
    let (listed, session) = scene.serves(&plain).await;
    assert_serves(&listed, &session, "v1.example.io", Some("HTTP 404"));

    // The same digest under another tag: the digest decides, and it is kept, so v1 serves from the
    // state directory without asking the registry for it.
    scene.server.apply(oci_configmap(
        "misbehave",
        &format!("{}/mods/misbehave:2.0.0@{digest}", registry.host),
    ));
    let (listed, session) = scene.serves(&plain).await;
    assert_serves(&listed, &session, "v1.example.io", Some("module pulled"));

    // The registry down: an update cannot be pulled, the last good version serves.
    registry.stop();
    scene.server.apply(oci_configmap(
        "misbehave",
        pushed2["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene.serves(&plain).await;
    assert_serves(&listed, &session, "v1.example.io", Some("cannot pull"));
    assert!(session.stderr.contains("last good"), "{}", session.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_blob_a_wrong_digest_and_an_unsigned_module_under_trusted_keys_are_refused() {
    let registry = Registry::start(false, None);
    let scene = Scene::new();
    let keys = tempfile::tempdir().unwrap();
    let prefix = keys.path().join("trusted");
    let out = velero_wasm(&["module", "keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let key_id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let private = format!("{}.key", prefix.display());
    let public = format!("{}.pub", prefix.display());
    let env = [
        ("VELERO_WASM_OCI_PLAIN_HTTP", registry.host.as_str()),
        ("VELERO_WASM_TRUSTED_KEYS", public.as_str()),
    ];
    let target = |tag: &str| format!("{}/mods/misbehave:{tag}", registry.host);

    // Signed on push: served under trusted keys.
    let signed = push(
        module_dir("v1.example.io", "1.0.0").path(),
        &target("1"),
        &["--plain-http", "--sign", &private],
        &[],
    );
    assert_eq!(signed["signed"], true);
    scene.server.apply(oci_configmap(
        "misbehave",
        signed["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(&listed, &session, "v1.example.io", None);

    // Unsigned: refused by key, the last good version serves.
    let unsigned = push(
        module_dir("v2.example.io", "2.0.0").path(),
        &target("2"),
        &["--plain-http"],
        &[],
    );
    assert_eq!(unsigned["signed"], false);
    scene.server.apply(oci_configmap(
        "misbehave",
        unsigned["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(&listed, &session, "v1.example.io", Some("last good"));
    assert!(
        session.stderr.contains("not signed") || session.stderr.contains(&key_id),
        "{}",
        session.stderr
    );

    // Signed, but its component blob changed in the registry's storage: refused as tampered. (A
    // component of its own: the misbehave component's blob is kept from v1 and not fetched again.)
    let tampered = push(
        module_dir_of(&with_section("v3", b"v3"), "v3.example.io", "3.0.0").path(),
        &target("3"),
        &["--plain-http", "--sign", &private],
        &[],
    );
    let blob = registry.blob_file(tampered["component"]["digest"].as_str().unwrap());
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    scene.server.apply(oci_configmap(
        "misbehave",
        tampered["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(
        &listed,
        &session,
        "v1.example.io",
        Some("tampered or corrupt"),
    );

    // A digest that is not the tag's manifest's: a registry answering another manifest for a pinned
    // reference is refused (the tag's manifest is fetched by digest, which the registry does not
    // have under that digest, or has as another artifact).
    let other = push(
        module_dir("v4.example.io", "4.0.0").path(),
        &target("4"),
        &["--plain-http", "--sign", &private],
        &[],
    );
    let other_digest = other["digest"].as_str().unwrap();
    // The registry's storage of v4's manifest rewritten: the same digest now serves other bytes.
    let manifest_blob = registry.blob_file(other_digest);
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_blob).unwrap()).unwrap();
    manifest["annotations"]["io.velero-wasm.module.manifest"] = json!(manifest["annotations"]
        ["io.velero-wasm.module.manifest"]
        .as_str()
        .unwrap()
        .replace("v4.example.io", "evil.example.io"));
    std::fs::write(&manifest_blob, serde_json::to_vec(&manifest).unwrap()).unwrap();
    scene.server.apply(oci_configmap(
        "misbehave",
        other["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(&listed, &session, "v1.example.io", Some("digest mismatch"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_basic_auth_credentials_come_from_a_docker_config_secret() {
    let registry = Registry::start(true, Some(("robot", "s3cret")));
    let scene = Scene::new();
    let ca = test_ca();
    let ca = ca.to_str().unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret");
    let docker_config = json!({"auths": {registry.host.clone(): {"auth": auth}}}).to_string();
    let config_file = scene.path("config.json");
    std::fs::write(&config_file, &docker_config).unwrap();

    // Without credentials the push is refused, saying so.
    let dir = module_dir("tls.example.io", "1.0.0");
    let target = format!("oci://{}/mods/misbehave:1", registry.host);
    let out = support::run::Run::cli(["module", "push", dir.path().to_str().unwrap(), &target])
        .env("SSL_CERT_FILE", ca)
        .env("HOME", scene.path("nowhere"))
        .output();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("asks for credentials"),
        "{}",
        stderr(&out)
    );

    // With a docker config: pushed over TLS (the test CA trusted through SSL_CERT_FILE).
    let pushed = push(
        dir.path(),
        &format!("{}/mods/misbehave:1", registry.host),
        &["--credentials", config_file.to_str().unwrap()],
        &[("SSL_CERT_FILE", ca)],
    );
    scene.server.apply(oci_configmap(
        "misbehave",
        pushed["reference"].as_str().unwrap(),
    ));

    // Pulled without credentials: refused (and nothing serves: there is no last good version).
    let (listed, session) = scene.serves(&[("SSL_CERT_FILE", ca)]).await;
    assert!(listed.is_empty(), "{listed:?}");
    assert!(
        session.stderr.contains("asks for credentials"),
        "{}",
        session.stderr
    );

    // With the docker-config Secret named: served, pulled through the environment's HTTPS proxy.
    let port: u16 = registry.host.rsplit_once(':').unwrap().1.parse().unwrap();
    let proxy = ConnectProxy::start(([127, 0, 0, 1], port).into(), None).await;
    let proxy_url = proxy.url();
    scene.server.apply(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "registry-pull", "namespace": "velero"},
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(&docker_config)},
    }));
    let (listed, session) = scene
        .serves(&[
            ("SSL_CERT_FILE", ca),
            ("VELERO_WASM_OCI_PULL_SECRETS", "registry-pull"),
            ("HTTPS_PROXY", proxy_url.as_str()),
        ])
        .await;
    assert_serves(&listed, &session, "tls.example.io", Some("module pulled"));
    let connects: Vec<String> = proxy.connects().into_iter().map(|c| c.authority).collect();
    assert!(connects.contains(&registry.host), "{connects:?}");
}

/// A registry whose manifests never end: a chunked answer of zeros, forever.
async fn endless_registry() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use http_body_util::StreamBody;
    use hyper::body::{Bytes, Frame};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_request| async {
                    let chunk = Bytes::from(vec![b'0'; 64 << 10]);
                    let endless = futures::stream::repeat_with(move || {
                        Ok::<_, std::convert::Infallible>(Frame::data(chunk.clone()))
                    });
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(StreamBody::new(
                        endless,
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_answers_without_end_is_refused_and_the_serving_module_stays() {
    let registry = Registry::start(false, None);
    let scene = Scene::new();
    let good = push(
        module_dir("v1.example.io", "1.0.0").path(),
        &format!("{}/mods/misbehave:1", registry.host),
        &["--plain-http"],
        &[],
    );
    let (endless, task) = endless_registry().await;
    let endless = endless.to_string();
    let plain = format!("{},{endless}", registry.host);
    let env = [("VELERO_WASM_OCI_PLAIN_HTTP", plain.as_str())];
    scene.server.apply(oci_configmap(
        "misbehave",
        good["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(&listed, &session, "v1.example.io", None);

    let started = Instant::now();
    let digest = format!("sha256:{}", sha256_hex(b"whatever"));
    scene.server.apply(oci_configmap(
        "misbehave",
        &format!("{endless}/mods/misbehave:2@{digest}"),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(
        &listed,
        &session,
        "v1.example.io",
        Some("larger than the 4194304 bytes allowed"),
    );
    // Refused at its cap, not read until a timeout.
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
    task.abort();
}

/// The misbehave component with a custom section added (valid anywhere in a component): other bytes,
/// the same behaviour.
fn with_section(name: &str, data: &[u8]) -> Vec<u8> {
    use wasm_encoder::{ComponentSection, CustomSection};
    let mut wasm = std::fs::read(components_dir().join("misbehave.wasm")).unwrap();
    let section = CustomSection {
        name: name.into(),
        data: data.into(),
    };
    section.append_to_component(&mut wasm);
    wasm
}

/// A component of about `size` bytes (see [`with_section`]).
fn padded_component(size: usize) -> Vec<u8> {
    let base = std::fs::metadata(components_dir().join("misbehave.wasm"))
        .unwrap()
        .len() as usize;
    with_section("padding", &vec![0x5a; size.saturating_sub(base)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_mb_component_is_pulled_and_served() {
    let registry = Registry::start(false, None);
    let scene = Scene::new();
    let wasm = padded_component(30 << 20);
    assert!(wasm.len() >= 30 << 20);
    let dir = module_dir_of(&wasm, "big.example.io", "1.0.0");
    let pushed = push(
        dir.path(),
        &format!("{}/mods/big:1", registry.host),
        &["--plain-http"],
        &[],
    );
    assert_eq!(pushed["component"]["size"], wasm.len());
    scene.server.apply(oci_configmap(
        "misbehave",
        pushed["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene
        .serves(&[("VELERO_WASM_OCI_PLAIN_HTTP", registry.host.as_str())])
        .await;
    assert_serves(&listed, &session, "big.example.io", Some("module pulled"));
}

/// A registry answering every request `401` with a Bearer challenge whose token realm is `realm`.
async fn bearer_registry(realm: String) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let realm = realm.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_request| {
                    let challenge = format!("Bearer realm=\"{realm}\",service=\"registry\"");
                    async move {
                        hyper::Response::builder()
                            .status(401)
                            .header("www-authenticate", challenge)
                            .body(Full::new(Bytes::new()))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, task)
}

/// Whether anything connected to `listener` (which is non-blocking).
fn connected(listener: &std::net::TcpListener) -> bool {
    listener.accept().is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_listed_registries_are_reached_and_a_plain_token_realm_elsewhere_gets_nothing() {
    let registry = Registry::start(false, None);
    let scene = Scene::new();
    let good = push(
        module_dir("v1.example.io", "1.0.0").path(),
        &format!("{}/mods/misbehave:1", registry.host),
        &["--plain-http"],
        &[],
    );
    let digest = format!("sha256:{}", sha256_hex(b"whatever"));

    // A registry VELERO_WASM_OCI_REGISTRIES does not list: refused, never connected to.
    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let elsewhere_host = elsewhere.local_addr().unwrap().to_string();
    let plain = format!("{},{elsewhere_host}", registry.host);
    let env = [
        ("VELERO_WASM_OCI_PLAIN_HTTP", plain.as_str()),
        ("VELERO_WASM_OCI_REGISTRIES", registry.host.as_str()),
    ];
    scene.server.apply(oci_configmap(
        "misbehave",
        good["reference"].as_str().unwrap(),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(&listed, &session, "v1.example.io", Some("module pulled"));
    scene.server.apply(oci_configmap(
        "misbehave",
        &format!("{elsewhere_host}/mods/misbehave:2@{digest}"),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(
        &listed,
        &session,
        "v1.example.io",
        Some(&format!(
            "registry {elsewhere_host} is not one VELERO_WASM_OCI_REGISTRIES lists ({}): refused",
            registry.host
        )),
    );
    assert!(!connected(&elsewhere), "the unlisted registry was reached");

    // A plain registry whose token realm is plain HTTP on a host not listed: no token is asked for.
    let realm = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    realm.set_nonblocking(true).unwrap();
    let realm_url = format!("http://{}/token", realm.local_addr().unwrap());
    let (bearer, task) = bearer_registry(realm_url.clone()).await;
    let plain = format!("{},{bearer}", registry.host);
    let env = [("VELERO_WASM_OCI_PLAIN_HTTP", plain.as_str())];
    scene.server.apply(oci_configmap(
        "misbehave",
        &format!("{bearer}/mods/misbehave:3@{digest}"),
    ));
    let (listed, session) = scene.serves(&env).await;
    assert_serves(
        &listed,
        &session,
        "v1.example.io",
        Some(&format!(
            "the Bearer token realm {realm_url} is plain HTTP and {} is not listed",
            realm.local_addr().unwrap()
        )),
    );
    assert!(!connected(&realm), "the plain realm was asked for a token");
    task.abort();
}

/// A registry that accepts connections and never answers: how many it accepted, and how many of
/// those the plugin has closed since (giving up on its pull).
async fn silent_registry() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (count, gone) = (accepted.clone(), closed.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let gone = gone.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                gone.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (addr, accepted, closed, task)
}

/// A module ConfigMap `late` naming an artifact on a [`silent_registry`]: its pull never ends on
/// its own.
struct StuckPull {
    /// The registry's `host:port`.
    registry: String,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    closed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl StuckPull {
    async fn named_by(scene: &Scene) -> StuckPull {
        let (registry, accepted, closed, task) = silent_registry().await;
        let registry = registry.to_string();
        let digest = format!("sha256:{}", sha256_hex(b"never answered"));
        scene.server.apply(oci_configmap(
            "late",
            &format!("{registry}/mods/late:1@{digest}"),
        ));
        StuckPull {
            registry,
            accepted,
            closed,
            task,
        }
    }

    /// Waits until the plugin has connected to the registry (the pull has begun).
    async fn reached(&self) {
        use std::sync::atomic::Ordering;
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.accepted.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            self.accepted.load(Ordering::SeqCst) > 0,
            "the plugin never reached the registry"
        );
    }

    /// Stops the registry and `plugin`, whose pull must not have ended.
    async fn end(self, plugin: Plugin) {
        self.task.abort();
        let session = plugin.shutdown().await;
        assert!(
            !session.stderr.contains("module pulled"),
            "{}",
            session.stderr
        );
    }

    /// Whether the plugin gave up on the pull (closed a connection to the registry).
    fn given_up(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst) > 0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_modules_serve_while_an_artifact_is_still_being_pulled() {
    let scene = Scene::new();
    let pull = StuckPull::named_by(&scene).await;
    let plugin = scene.start(&[
        ("VELERO_WASM_OCI_PLAIN_HTTP", pull.registry.as_str()),
        ("VELERO_WASM_STOCK", "kubevirt"),
    ]);
    pull.reached().await;

    // A stock action answers while the pull still waits on the registry (it gives up only after
    // 30 s without an answer), not after it.
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": "data", "namespace": "shop"}, "spec": {}});
    let backup = json!({"metadata": {"name": "nightly", "namespace": "velero"}, "spec": {}});
    let answer = BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: "kubevirt-velero-plugin/backup-pvc-action".into(),
            item: pvc.to_string().into_bytes(),
            backup: backup.to_string().into_bytes(),
        })
        .await;
    assert!(
        !pull.given_up(),
        "the call waited until the pull gave up: {answer:?}"
    );
    let answer = answer.expect("the stock action answers").into_inner();
    let item: Value = serde_json::from_slice(&answer.item).unwrap();
    assert_eq!(item["metadata"]["name"], "data", "{item}");
    pull.end(plugin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_module_directory_and_configmaps_that_need_no_pull_serve_while_an_artifact_is_pulled() {
    let scene = Scene::new();
    let pull = StuckPull::named_by(&scene).await;
    scene.server.apply(support::misbehave_configmap_as(
        "inline",
        "configmap.example",
    ));
    let directory = module_dir("directory.example", "1.0.0");
    let plugin = scene.start(&[
        ("VELERO_WASM_OCI_PLAIN_HTTP", pull.registry.as_str()),
        ("VELERO_WASM_MODULES", directory.path().to_str().unwrap()),
    ]);
    pull.reached().await;

    // Both answer while the pull still waits on the registry (it gives up after 30 s), each from
    // its own source.
    for domain in ["directory.example", "configmap.example"] {
        let answer = execute(&plugin, &format!("{domain}/echo")).await;
        assert!(
            !pull.given_up(),
            "the call to {domain}/echo waited until the pull gave up"
        );
        assert_eq!(answer, ["secrets shop/cm"], "{domain}");
    }
    pull.end(plugin).await;
}
