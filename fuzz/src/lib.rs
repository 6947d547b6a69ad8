//! What the fuzz targets share: one host per fuzzing process, built as the plugin builds it (the stock
//! modules and the test components `kinds` and `probe`, the KubeVirt fixture cluster as its Kubernetes
//! API), and the gRPC services of the plugin, called in-process through their tower `Service`.
//!
//! Nothing here reaches the network: HTTP exchanges a module is granted go to [`EchoTransport`], and
//! the cluster is in memory.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::Notify;
use tonic::service::Routes;
use tower::ServiceExt;
use velero_wasm::backend::Backend;
use velero_wasm::modules::{ModuleSource, Origin};
use velero_wasm::plan::{self, ModuleConfig};
use velero_wasm::plugin::dispatch::Dispatch;
use velero_wasm::plugin::lister::{Advertised, Lister};
use velero_wasm::plugin::upload::WholeMessagesLayer;
use velero_wasm::runtime::Runtime;
use velero_wasm::FixtureCluster;
use velero_wasm::{Answer, Exchange, ExchangeError};
use velero_wasm::{Clock, Environment, Services};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/ sits in the repository")
        .to_path_buf()
}

/// The manifest of the `probe` test component: a little of every grant, so that both sides of each
/// check are reachable.
pub const PROBE_MANIFEST: &str = r#"
[limits]
timeout = "5s"
http-response = "4KiB"

[grant]
http = ["sts.amazonaws.com", "*.blob.core.windows.net", "http://127.0.0.1:9000"]
env = ["FUZZ_VARIABLE", "FUZZ_*"]
env-files = ["FUZZ_FILE"]

[[grant.kube]]
resources = ["configmaps", "secrets", "persistentvolumeclaims"]
verbs = ["get"]
namespaces = ["@item", "kube-*"]
"#;

/// Answers every exchange with 200 and the request's URL as its body, without any network.
pub struct EchoTransport;

#[async_trait]
impl Backend<Exchange> for EchoTransport {
    async fn call(&self, exchange: Exchange) -> Result<Answer, ExchangeError> {
        Ok(Answer {
            status: 200,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: exchange.url.into_bytes(),
        })
    }
}

/// One host, as the plugin runs it, with its gRPC services.
pub struct PluginHost {
    /// The async runtime every call runs on (one thread: runs are reproducible).
    pub tokio: tokio::runtime::Runtime,
    /// The wasm runtime with its modules.
    pub runtime: Arc<Runtime>,
    /// Every service the plugin serves, routed by gRPC path.
    pub routes: Routes,
    /// The names of the loaded actions, sorted.
    pub actions: Vec<String>,
}

/// The host of this process, built on first use.
pub fn plugin_host() -> &'static PluginHost {
    static HOST: OnceLock<PluginHost> = OnceLock::new();
    HOST.get_or_init(|| build_host().unwrap_or_else(|e| panic!("the fuzzing host: {e:#}")))
}

fn build_host() -> anyhow::Result<PluginHost> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Time stands still unless a guest sleeps, and sleeping returns at once.
    let clock = Clock::fixed(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let cluster = FixtureCluster::load(
        &[root().join("tests/fixtures/kubevirt/cluster")],
        clock.clone(),
    )?;
    let variables = BTreeMap::from([
        ("FUZZ_VARIABLE".to_string(), "value".to_string()),
        ("FUZZ_FILE".to_string(), "/nonexistent/fuzz".to_string()),
    ]);
    let mut services = Services::new(
        Arc::new(cluster),
        clock,
        Environment::fixed(variables).with_velero_namespace("velero"),
    );
    services.http = Arc::new(EchoTransport);
    let runtime = Runtime::new(services)?;
    tokio.block_on(async {
        let problems = plan::load_modules(&runtime, &ModuleConfig::default()).await?;
        if let Some(problem) = problems.iter().find(|p| !p.served) {
            anyhow::bail!("a stock module does not load: {problem}");
        }
        let components = Path::new(velero_wasm::TEST_COMPONENTS);
        for (component, manifest) in [("kinds", ""), ("probe", PROBE_MANIFEST)] {
            let path = components.join(format!("{component}.wasm"));
            let wasm =
                std::fs::read(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let source = ModuleSource::new(component, wasm, manifest, Origin::File(path))?;
            runtime.load(source).await?;
        }
        anyhow::Ok(())
    })?;
    let runtime = Arc::new(runtime);
    let mut actions: Vec<String> = runtime
        .catalog()
        .actions()
        .map(|a| a.info().name.clone())
        .collect();
    actions.sort();
    let routes = tokio.block_on(routes(Dispatch::new(
        runtime.clone(),
        velero_wasm::shadow::Budget::from_config(&velero_wasm::config::Config::from_env()),
    )));
    Ok(PluginHost {
        tokio,
        runtime,
        routes,
        actions,
    })
}

/// Every service, as the plugin serves them.
async fn routes(dispatch: Dispatch) -> Routes {
    let lister = Lister {
        dispatch: dispatch.clone(),
        command: "velero-wasm".to_string(),
        kinds: Advertised::default(),
        listing: None,
    };
    velero_wasm::plugin::services(dispatch, lister, Arc::new(Notify::new())).await
}

/// Every gRPC method the plugin serves, and whether its answer is a stream that stays open for as
/// long as the client wants (its body is not read to the end).
pub const METHODS: &[(&str, bool)] = &[
    ("/generated.PluginLister/ListPlugins", false),
    ("/generated.BackupItemAction/AppliesTo", false),
    ("/generated.BackupItemAction/Execute", false),
    ("/v2.BackupItemAction/AppliesTo", false),
    ("/v2.BackupItemAction/Execute", false),
    ("/v2.BackupItemAction/Progress", false),
    ("/v2.BackupItemAction/Cancel", false),
    ("/generated.RestoreItemAction/AppliesTo", false),
    ("/generated.RestoreItemAction/Execute", false),
    ("/v2.RestoreItemAction/AppliesTo", false),
    ("/v2.RestoreItemAction/Execute", false),
    ("/v2.RestoreItemAction/Progress", false),
    ("/v2.RestoreItemAction/Cancel", false),
    ("/v2.RestoreItemAction/AreAdditionalItemsReady", false),
    ("/v1.ItemBlockAction/AppliesTo", false),
    ("/v1.ItemBlockAction/GetRelatedItems", false),
    ("/generated.DeleteItemAction/AppliesTo", false),
    ("/generated.DeleteItemAction/Execute", false),
    ("/plugin.GRPCController/Shutdown", false),
    ("/plugin.GRPCStdio/StreamStdio", true),
    ("/plugin.GRPCBroker/StartStream", false),
    ("/grpc.health.v1.Health/Check", false),
    ("/grpc.health.v1.Health/Watch", true),
];

/// A gRPC message frame: uncompressed, with its length.
pub fn frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

/// A protobuf message whose field `n` (from 1) is `fields[n - 1]`, each length-delimited: the shape of
/// every Velero request (a `plugin` string, then strings, bytes and messages).
pub fn message(fields: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, value) in fields.iter().enumerate() {
        prost::encoding::encode_key(
            i as u32 + 1,
            prost::encoding::WireType::LengthDelimited,
            &mut out,
        );
        prost::encoding::encode_varint(value.len() as u64, &mut out);
        out.extend_from_slice(value);
    }
    out
}

/// What a call returned: the status the client would read.
#[derive(Debug)]
pub struct Called {
    /// HTTP status of the answer (gRPC answers are 200 with the status in `grpc-status`).
    pub http_status: u16,
    /// `grpc-status`, from the headers or trailers, when the answer was read to the end.
    pub grpc_status: Option<String>,
}

/// Calls `method` with `body` (the request's HTTP/2 data, delivered in chunks of `chunk` bytes, 0 for
/// one chunk), as Velero's client would over the socket, and reads the answer to its end (or only its
/// headers, for a stream that stays open).
pub fn call(host: &PluginHost, method: &str, streaming: bool, body: Bytes, chunk: usize) -> Called {
    let chunks: Vec<Result<http_body::Frame<Bytes>, Infallible>> = if chunk == 0 || body.is_empty()
    {
        vec![Ok(http_body::Frame::data(body))]
    } else {
        let mut chunks = Vec::new();
        let mut rest = body;
        while !rest.is_empty() {
            let part = rest.split_to(chunk.min(rest.len()));
            chunks.push(Ok(http_body::Frame::data(part)));
        }
        chunks
    };
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(format!("http://plugin{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(StreamBody::new(tokio_stream::iter(
            chunks,
        ))))
        .expect("a well-formed request");
    // Through the layer the plugin's server puts in front of every service.
    let service = tower::Layer::layer(&WholeMessagesLayer, host.routes.clone());
    host.tokio.block_on(async {
        let Ok(response) = service.oneshot(request).await;
        let http_status = response.status().as_u16();
        let header_status = response
            .headers()
            .get("grpc-status")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if streaming {
            return Called {
                http_status,
                grpc_status: header_status,
            };
        }
        let collected = response.into_body().collect().await;
        let trailer_status = collected.ok().and_then(|c| {
            c.trailers()
                .and_then(|t| t.get("grpc-status"))
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        });
        Called {
            http_status,
            grpc_status: header_status.or(trailer_status),
        }
    })
}
