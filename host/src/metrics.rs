//! Metrics of the action calls, exported with OpenTelemetry (OTLP over HTTP, protobuf) when
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Without either,
//! nothing is set up (no exporter, no thread) and a call costs one check of an empty `OnceLock`.
//!
//! Per module, action and Velero call: `velero_wasm.action.calls`, `velero_wasm.action.failures` (by
//! `kind`) and `velero_wasm.action.duration` (seconds). For the read views (docs/read-views.md):
//! `velero_wasm.read_view.reads` (by `result`, `hit` or `miss`) and `velero_wasm.read_view.bytes`
//! (bytes held). Per shadow module (`crate::shadow`), action
//! and Velero call: `velero_wasm.shadow.calls` (calls compared), and by `kind`
//! `velero_wasm.shadow.differences`, `velero_wasm.shadow.faults` and `velero_wasm.shadow.dropped`. Every plugin process exports its own
//! cumulative series under its own `service.instance.id`, and [`shutdown`] sends the last figures
//! before the process exits (Velero starts and stops plugin processes around each backup).

use std::cell::Cell;
use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _, UpDownCounter};
use opentelemetry::KeyValue;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::WithHttpConfig;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::Resource;
use tokio::runtime::Handle;

/// How long the exit waits for the last export: Velero kills a plugin 2 s after `Shutdown`, and the
/// server has already waited up to 0.5 s for open calls.
const FLUSH_LIMIT: Duration = Duration::from_secs(1);

/// How long one export may take before it is given up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a collector's answer that is read (it is only checked for errors).
const MAX_ANSWER: usize = 64 << 10;

/// Bucket bounds of the latency histogram, in seconds: from a millisecond (a warm call) to the
/// default deadline of a minute.
const BOUNDARIES: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The provider (to flush it) and the instruments.
struct Metrics {
    provider: SdkMeterProvider,
    calls: Counter<u64>,
    failures: Counter<u64>,
    duration: Histogram<f64>,
    view_reads: Counter<u64>,
    view_bytes: UpDownCounter<i64>,
    shadow_calls: Counter<u64>,
    shadow_differences: Counter<u64>,
    shadow_faults: Counter<u64>,
    shadow_dropped: Counter<u64>,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

tokio::task_local! {
    /// Set when the host refused one of the current call's capability calls by the module's grant.
    static DENIED: Cell<bool>;
}

/// Whether the environment asks for metrics: an OTLP endpoint for them is set and not empty.
pub(crate) fn wanted(settings: &crate::config::MetricsSettings) -> bool {
    [&settings.metrics_endpoint, &settings.endpoint]
        .iter()
        .any(|v| v.as_ref().is_some_and(|v| !v.trim().is_empty()))
}

/// Starts exporting when the environment asks for it; the exports run on `runtime`. A configuration
/// the exporter refuses is an info line (not a Velero warning): the plugin serves without metrics.
pub(crate) fn init(runtime: &Handle, config: &crate::config::Config) {
    if !wanted(&config.metrics()) {
        return;
    }
    match build(runtime, config) {
        Ok(metrics) => {
            let _ = METRICS.set(metrics);
            tracing::debug!("exporting metrics over OTLP");
        }
        Err(e) => tracing::info!("metrics are not exported: {e}"),
    }
}

fn build(
    runtime: &Handle,
    config: &crate::config::Config,
) -> Result<Metrics, opentelemetry_otlp::ExporterBuildError> {
    // The endpoint, headers, timeout and temporality come from the standard OTEL_* variables.
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(OnRuntime::new(runtime.clone()))
        .build()?;
    let mut resource = Resource::builder()
        .with_attribute(KeyValue::new("service.instance.id", instance_id()))
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !config.metrics().service_name_set {
        resource = resource.with_service_name("velero-wasm");
    }
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter).build())
        .with_resource(resource.build())
        .build();
    let meter = provider.meter("velero-wasm");
    Ok(Metrics {
        calls: meter
            .u64_counter("velero_wasm.action.calls")
            .with_unit("{call}")
            .with_description("Calls of an action, by module, action and Velero call")
            .build(),
        failures: meter
            .u64_counter("velero_wasm.action.failures")
            .with_unit("{call}")
            .with_description("Calls that failed, by kind of failure")
            .build(),
        duration: meter
            .f64_histogram("velero_wasm.action.duration")
            .with_unit("s")
            .with_description("Time from the call's arrival at the runtime to its result")
            .with_boundaries(BOUNDARIES.to_vec())
            .build(),
        view_reads: meter
            .u64_counter("velero_wasm.read_view.reads")
            .with_unit("{read}")
            .with_description("Reads a backup's read view could serve, by `result`: hit (answered from the view) or miss (sent to the API server)")
            .build(),
        view_bytes: meter
            .i64_up_down_counter("velero_wasm.read_view.bytes")
            .with_unit("By")
            .with_description("Bytes the read views of all backups hold")
            .build(),
        shadow_calls: meter
            .u64_counter("velero_wasm.shadow.calls")
            .with_unit("{call}")
            .with_description("Calls of a shadow module compared with its serving module")
            .build(),
        shadow_differences: meter
            .u64_counter("velero_wasm.shadow.differences")
            .with_unit("{call}")
            .with_description("Shadow calls whose result differs, by kind of difference")
            .build(),
        shadow_faults: meter
            .u64_counter("velero_wasm.shadow.faults")
            .with_unit("{call}")
            .with_description("Shadow calls that trapped, ran out of time or memory, by kind")
            .build(),
        shadow_dropped: meter
            .u64_counter("velero_wasm.shadow.dropped")
            .with_unit("{call}")
            .with_description("Shadow calls not made: over the shadows' budget, by reason")
            .build(),
        provider,
    })
}

/// A random UUID (version 4) naming this process's series: each plugin process counts from zero.
fn instance_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // Without randomness, the process id and the time still tell processes apart.
        let seed = (u128::from(std::process::id()) << 64)
            | u128::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or_default(),
            );
        b = seed.to_be_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Runs one `call` (Velero's name: `Execute`, `Progress`, …) of `action` in `module` and records it
/// when metrics are exported; otherwise just runs it.
pub(crate) async fn measured<T, E: FailureKind>(
    module: &str,
    action: &str,
    call: &'static str,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let Some(metrics) = METRICS.get() else {
        return work.await;
    };
    let started = Instant::now();
    let (result, denied) = DENIED
        .scope(Cell::new(false), async {
            let result = work.await;
            (result, DENIED.with(Cell::get))
        })
        .await;
    let attributes = [
        KeyValue::new("module", module.to_string()),
        KeyValue::new("action", action.to_string()),
        KeyValue::new("call", call),
    ];
    metrics.calls.add(1, &attributes);
    metrics
        .duration
        .record(started.elapsed().as_secs_f64(), &attributes);
    if let Err(error) = &result {
        let [module, action, call] = attributes;
        let kind = KeyValue::new("kind", error.failure_kind(denied));
        metrics.failures.add(1, &[module, action, call, kind]);
    }
    result
}

/// What happened to one shadow call, for [`shadow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShadowEvent {
    /// Compared with the serving module's result.
    Compared,
    /// Its result differed in this way (one per kind of difference).
    Difference(&'static str),
    /// It failed in this way (a [`failure_kind`]).
    Fault(&'static str),
    /// It was not made, for this reason.
    Dropped(&'static str),
}

/// Counts one shadow event of `action` in shadow `module`, when metrics are exported.
pub(crate) fn shadow(module: &str, action: &str, call: &'static str, event: ShadowEvent) {
    let Some(metrics) = METRICS.get() else {
        return;
    };
    let mut attributes = vec![
        KeyValue::new("module", module.to_string()),
        KeyValue::new("action", action.to_string()),
        KeyValue::new("call", call),
    ];
    let counter = match event {
        ShadowEvent::Compared => &metrics.shadow_calls,
        ShadowEvent::Difference(kind) => {
            attributes.push(KeyValue::new("kind", kind));
            &metrics.shadow_differences
        }
        ShadowEvent::Fault(kind) => {
            attributes.push(KeyValue::new("kind", kind));
            &metrics.shadow_faults
        }
        ShadowEvent::Dropped(reason) => {
            attributes.push(KeyValue::new("kind", reason));
            &metrics.shadow_dropped
        }
    };
    counter.add(1, &attributes);
}

/// Notes that the host refused a capability call by the module's grant: if the action then fails
/// with an error, the failure counts as `denied`. Outside a measured call, nothing.
pub(crate) fn note_denied() {
    let _ = DENIED.try_with(|denied| denied.set(true));
}

/// Counts one read a read view could serve: answered from it (`hit`) or sent to the API server.
pub(crate) fn note_view_read(hit: bool) {
    if let Some(metrics) = METRICS.get() {
        let result = if hit { "hit" } else { "miss" };
        metrics
            .view_reads
            .add(1, &[KeyValue::new("result", result)]);
    }
}

/// Notes bytes the read views took (positive) or gave back (negative).
pub(crate) fn note_view_bytes(delta: i64) {
    if let Some(metrics) = METRICS.get() {
        metrics.view_bytes.add(delta, &[]);
    }
}

/// An error a measured call can end with, as the metrics count it.
pub(crate) trait FailureKind {
    /// The `kind` attribute of the failed call: `action` (the action returned an error), `denied` (it
    /// did after a refused capability call: `denied` says whether there was one), `trap`, `deadline`,
    /// `memory`, `limit` (host work for the guest ran past a limit), `output` (an answer Velero cannot
    /// use), `unavailable`.
    fn failure_kind(&self, denied: bool) -> &'static str;
}

/// Sends the last figures and stops the exporter, waiting at most [`FLUSH_LIMIT`]. Called on every
/// way out of the plugin, while the runtime that carries the export still runs.
pub(crate) async fn shutdown() {
    let Some(metrics) = METRICS.get() else {
        return;
    };
    let provider = metrics.provider.clone();
    // The SDK's shutdown blocks until its export thread is done; the export itself runs on this
    // runtime (see `OnRuntime`).
    let flushed = tokio::time::timeout(
        FLUSH_LIMIT,
        tokio::task::spawn_blocking(move || provider.shutdown()),
    )
    .await;
    match flushed {
        Ok(Ok(Ok(()))) => tracing::debug!("metrics flushed"),
        Ok(Ok(Err(e))) => tracing::info!("the last metrics were not sent: {e}"),
        Ok(Err(e)) => tracing::info!("the last metrics were not sent: {e}"),
        Err(_) => tracing::info!("the last metrics were not sent within {FLUSH_LIMIT:?}"),
    }
}

/// The exporter's HTTP client: hyper with rustls, the stack the host already has, its requests run on
/// the plugin's tokio runtime so that the SDK's export thread only waits for their answers.
struct OnRuntime {
    runtime: Handle,
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl OnRuntime {
    fn new(runtime: Handle) -> OnRuntime {
        // The system's roots (SSL_CERT_FILE / SSL_CERT_DIR), or Mozilla's where it has none.
        let tls = match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
            Ok(native) => native,
            Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
        };
        let connector = tls.https_or_http().enable_http1().build();
        OnRuntime {
            runtime,
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }
}

impl std::fmt::Debug for OnRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnRuntime")
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, Full::new(body));
        let exchange = async move {
            let response = client.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER).collect().await?.to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        // The timer too is made on the runtime: the SDK's thread has no reactor.
        let sent = self
            .runtime
            .spawn(async move { tokio::time::timeout(REQUEST_TIMEOUT, exchange).await })
            .await;
        let answer = match sent {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(format!("no answer within {REQUEST_TIMEOUT:?}").into()),
            Err(e) => Err(e.into()),
        };
        match &answer {
            Ok(response) if !response.status().is_success() => tracing::info!(
                status = response.status().as_u16(),
                "the metrics collector refused an export"
            ),
            Err(e) => tracing::info!("metrics export failed: {e}"),
            Ok(_) => {}
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        OTEL_EXPORTER_OTLP_ENDPOINT as ENDPOINT_ENV,
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as METRICS_ENDPOINT_ENV,
    };

    #[test]
    fn metrics_are_wanted_only_when_an_endpoint_is_set() {
        let env = |pairs: &[(&str, &str)]| {
            crate::config::Config::from_vars(pairs.iter().copied()).metrics()
        };
        assert!(!wanted(&env(&[])));
        assert!(!wanted(&env(&[(ENDPOINT_ENV, " ")])));
        assert!(!wanted(&env(&[("OTEL_SERVICE_NAME", "x")])));
        assert!(wanted(&env(&[(ENDPOINT_ENV, "http://collector:4318")])));
        assert!(wanted(&env(&[(
            METRICS_ENDPOINT_ENV,
            "http://collector:4318/v1/metrics"
        )])));
    }

    #[test]
    fn instance_ids_are_version_4_uuids_and_differ() {
        let (a, b) = (instance_id(), instance_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(a.split('-').map(str::len).eq([8, 4, 4, 4, 12]));
    }

    #[tokio::test]
    async fn without_an_exporter_a_call_is_only_run() {
        // No endpoint in the test's environment: nothing was set up, the result passes through.
        assert!(METRICS.get().is_none());
        #[derive(Debug)]
        struct Refused;
        impl FailureKind for Refused {
            fn failure_kind(&self, _: bool) -> &'static str {
                "action"
            }
        }
        let result = measured("m", "a", "Execute", async { Ok::<_, Refused>(7) }).await;
        assert_eq!(result.unwrap(), 7);
        note_denied();
    }
}
