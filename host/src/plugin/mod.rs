//! Velero's plugin protocol: what a plugin binary does when Velero starts it (docs/plugin-protocol.md#s3–#s14).
//!
//! Start-up follows go-plugin: check the magic cookie ([`handshake`]), listen on a fresh Unix socket,
//! print the handshake line, load the modules ([`loading`]: Velero's calls wait for them), serve gRPC
//! until `Shutdown`. The services are go-plugin's infrastructure ([`controller`], [`stdio`],
//! [`broker`], health) and one per Velero kind ([`lister`], [`backup_v1`], [`backup_v2`],
//! [`restore_v1`], [`restore_v2`], [`item_block`], [`delete`]); each converts protobuf to domain
//! types ([`convert`], [`dispatch`]) and calls the actions in service through [`served`] (the
//! [`Runtime`]'s in the plugin, a fake in protocol tests). Errors become statuses in
//! [`status`]; logs are hclog JSON lines on stderr ([`log_format`]). ObjectStore and
//! VolumeSnapshotter are not served.

pub mod accept;
pub(crate) mod answer;
pub(crate) mod backup_v1;
pub(crate) mod backup_v2;
pub(crate) mod broker;
pub(crate) mod controller;
pub mod convert;
pub(crate) mod delete;
pub mod dispatch;
pub mod gate;
pub(crate) mod grpc_status;
pub mod handshake;
pub(crate) mod item_block;
pub mod kept_listing;
pub mod lister;
pub(crate) mod log_format;
pub mod proto;
pub(crate) mod restore_v1;
pub(crate) mod restore_v2;
pub mod served;
pub(crate) mod slot_calls;
pub(crate) mod stdio;
pub mod upload;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Notify;
use tonic::service::Routes;
use tonic::transport::Server;

use crate::backend::Backend;
use crate::capabilities::kube::view::ReadViews;
use crate::capabilities::{Clock, Environment, Services};
use crate::cluster::live::{ClusterOptions, LazyCluster};
use crate::cluster::KubeCall;
use crate::config::Config;
use crate::modules::{StockChoice, STOCK_ENV};
use crate::plan;
use crate::runtime::{CompileCache, Runtime};
use crate::shadow::Budget as ShadowBudget;
use dispatch::Dispatch;
use handshake::{PluginArgs, Socket};
use kept_listing::{Listed, Listing};
use lister::{Advertised, Lister, KINDS_ENV};

/// The largest request or response message: Velero's own limit, 2^31−1 bytes (an item and its
/// Backup can be far larger than gRPC's default 4 MiB).
pub(crate) const MAX_MESSAGE: usize = i32::MAX as usize;

/// The environment variable naming a directory of extra modules (defined with the directory's
/// reading, which start-up's messages name it from).
pub use crate::modules::MODULES_ENV;

/// How long a connection may go without receiving anything before the server pings the client, and
/// how long it then waits for the answer before it closes the connection: a client that stopped
/// reading (or vanished) does not hold its connection's buffers for ever.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// HTTP/2 flow-control windows, per connection and per call: how much a client may send that the
/// server has not read yet, hence what a client that never reads our answers can make us hold.
/// (hyper's default is 1 MiB each. At 256 KiB, 200 stalled clients made the static binary, whose
/// allocator is mimalloc, hold 100 MiB, the most the fault tests allow; at 128 KiB they hold 73 MiB.
/// The cost is in requests far larger than Velero sends (an item is at most ~1.5 MiB, etcd's limit):
/// the 64 MiB request of the protocol tests took 5.0-5.3 s instead of 3.4-4.2 s in a debug build.)
const CONNECTION_WINDOW: u32 = 128 << 10;
const STREAM_WINDOW: u32 = 128 << 10;

/// Calls open at once on one connection (as many as wasm calls can run at once; Velero makes a few).
const MAX_STREAMS_PER_CONNECTION: u32 = 64;

/// The largest request header block (gRPC's are a few hundred bytes).
const MAX_HEADER_LIST: u32 = 8 << 10;

/// How often the plugin checks that the process that started it (Velero) is still there.
const PARENT_CHECK: Duration = Duration::from_secs(1);

/// How long a stopping server waits for open calls and streams before it exits anyway (Velero kills
/// the process 2 s after `Shutdown`).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Runs as a Velero plugin with the process's `config` (read once by `main.rs`); returns the
/// process's exit status.
pub fn main(config: Config) -> ExitCode {
    // Before anything else: the parent to watch is the one that started us.
    let parent = std::os::unix::process::parent_id();
    if let Err(e) = handshake::check_environment(&config.handshake()) {
        eprintln!("velero-wasm: {e}");
        return ExitCode::from(1);
    }
    let args = PluginArgs::parse(&std::env::args_os().collect::<Vec<OsString>>());
    log_format::init(&args.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    crate::metrics::init(runtime.handle(), &config);
    crate::capabilities::memory::MemoryBudget::configure_process(&config);
    let code = match runtime.block_on(serve(args, parent, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::from(1)
        }
    };
    // Every way out of `serve` (Shutdown, SIGTERM, SIGHUP, the parent's death, a failed server)
    // comes here: the last figures go out before the process does.
    runtime.block_on(crate::metrics::shutdown());
    // Calls still running (a guest past its deadline, a blocked read) do not hold up the exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// The Kubernetes backend the capabilities use in plugin mode: the cluster Velero runs in (its pod's
/// service account), or kubectl's configuration outside a pod, at Velero's client rate limit if it
/// passed one. Nothing is read or sent until a module calls.
fn kube_backend(args: &PluginArgs, config: &Config) -> Arc<LazyCluster> {
    let rate_limit = args.rate_limit().unwrap_or_else(|e| {
        tracing::warn!("{e}: the Kubernetes client runs without a rate limit of its own");
        None
    });
    Arc::new(LazyCluster::new(
        ClusterOptions::new(config.clone()),
        rate_limit,
    ))
}

/// Listens, announces the socket, loads the modules (Velero's calls wait for them, see [`loading`]),
/// and serves until `Shutdown`, SIGTERM, SIGHUP or the death of `parent` (the process that started
/// us).
async fn serve(args: PluginArgs, parent: u32, config: Config) -> anyhow::Result<()> {
    let started = Instant::now();
    let state = crate::state::default_dir(&config);
    let cluster = kube_backend(&args, &config);
    let runtime = plugin_runtime(cluster.clone(), state.as_deref(), &config)?;
    let directory = config.modules_dir();
    let listing = state
        .as_deref()
        .map(|d| Listing::new(d, &args.command, directory.as_deref()));
    let (kinds, stock) = chosen_kinds_and_stock(&config);

    let settings = config.handshake();
    let (listener, socket) = Socket::bind(
        &handshake::socket_dir(&settings),
        handshake::socket_group(&settings)?,
    )?;
    let shutdown = Arc::new(Notify::new());
    let dispatch = Dispatch::new(runtime.clone(), ShadowBudget::from_config(&config));
    let retired_from = listing.as_ref().and_then(Listing::held);
    let listed_kinds = kinds.to_string();
    let lister = Lister {
        dispatch: dispatch.clone(),
        command: args.command.clone(),
        kinds,
        listing,
    };
    let (loaded, gate) = gate::signal();
    let router = router(dispatch.clone(), lister, shutdown.clone(), gate).await;
    let incoming = accept::incoming(listener);
    let stop = Arc::new(Notify::new());
    let stop_signal = stop.clone();
    let mut server = tokio::spawn(
        router.serve_with_incoming_shutdown(incoming, async move { stop_signal.notified().await }),
    );

    // Before the announcement, so that a SIGTERM right after it still removes the socket.
    let mut stops = Stops::new(shutdown, parent)?;
    announce(&args, &socket, &listed_kinds, &stock, started, &config)?;
    // The client is built while the modules load, not in the first call that reads.
    let early = cluster.clone();
    tokio::spawn(async move { early.connect_early().await });

    // The modules, now that Velero has its socket. Its calls wait until the sources are listed (the
    // ConfigMaps, not yet the artifacts they name), then each for the module it needs
    // (runtime::Loading): a module that compiles or is pulled holds up only the calls to it.
    runtime.loading().begin();
    let known = runtime.clone();
    tokio::spawn(async move {
        known.loading().sources_known().await;
        let _ = loaded.send(true);
    });
    let startup = plan::startup::Startup {
        runtime: runtime.clone(),
        cluster,
        state: state.clone(),
        directory,
        stock,
        listed: retired_from.clone(),
        started,
        config,
    };
    let serving = {
        let dispatch = dispatch.clone();
        move || in_service(&runtime, &dispatch, state.as_deref(), retired_from)
    };
    tokio::spawn(startup.run(serving));

    if let Some(result) = stops.wait(&mut server).await {
        let path = socket.path.clone();
        drop(socket);
        return match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(anyhow::anyhow!("serving on {} failed: {e}", path.display())),
            Err(e) => Err(anyhow::anyhow!("the server task failed: {e}")),
        };
    }
    stop_serving(&dispatch, &stop, socket, server).await;
    Ok(())
}

/// Prints the handshake line Velero reads the socket from, and logs what serves.
fn announce(
    args: &PluginArgs,
    socket: &Socket,
    listed_kinds: &str,
    stock: &StockChoice,
    started: Instant,
    config: &Config,
) -> anyhow::Result<()> {
    let settings = config.handshake();
    let multiplex_asked = handshake::multiplex_asked(&settings);
    if multiplex_asked {
        tracing::warn!(
            "PLUGIN_MULTIPLEX_GRPC is set: velero-wasm does not multiplex go-plugin's broker (Velero never asks for it); \
             the handshake line answers false"
        );
    }
    handshake::announce(&socket.path, multiplex_asked)?;
    tracing::info!(
        kinds = %listed_kinds,
        stock = %stock,
        socket = %socket.path.display(),
        startup_ms = started.elapsed().as_millis() as u64,
        log_level = args.log_level.as_str(),
        features = args.features.join(","),
        client_accepts_v2 = handshake::client_accepts_v2(settings.protocol_versions.as_deref()),
        "serving Velero's plugin protocol"
    );
    Ok(())
}

/// Stops serving after `Shutdown` or a signal: the shadows' figures go out, the server stops
/// accepting, the socket goes, and open calls get a moment.
async fn stop_serving(
    dispatch: &Dispatch,
    stop: &Notify,
    socket: Socket,
    mut server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
) {
    // What the shadows did goes out before the process does (Velero stops it right after a backup).
    dispatch.shadows().finish();
    // Stop accepting, let the Shutdown answer go out, and give open calls a moment; then go.
    stop.notify_one();
    drop(socket);
    if tokio::time::timeout(SHUTDOWN_GRACE, &mut server)
        .await
        .is_err()
    {
        tracing::debug!("calls still open after {SHUTDOWN_GRACE:?}; exiting anyway");
        server.abort();
    }
}

/// The runtime of the plugin: the capabilities' services over `cluster` (reads of one backup may be
/// answered from what the host read for it, docs/read-views.md), with the compile cache of the
/// state directory.
fn plugin_runtime(
    cluster: Arc<LazyCluster>,
    state: Option<&Path>,
    config: &Config,
) -> anyhow::Result<Arc<Runtime>> {
    let mut services = Services::new(
        cluster as Arc<dyn Backend<KubeCall>>,
        Clock::System,
        Environment::from_config(config),
    );
    services.views = ReadViews::from_config(config);
    services.named = Some(Arc::default());
    services.reads_at_once = crate::capabilities::kube::reads_at_once(config);
    Ok(Arc::new(
        Runtime::new(services)?
            .with_compile_cache(state.and_then(|d| CompileCache::open(d.join("compiled"))))
            .with_compile_budget(crate::runtime::CompileBudget::from_config(config)),
    ))
}

/// The kinds to advertise (`$VELERO_WASM_KINDS`) and the stock modules to load
/// (`$VELERO_WASM_STOCK`). Like an unknown kind, an unknown stock module is an error line, not a
/// crash: the names known still load (never more than asked for, which could clash with another
/// plugin's names).
fn chosen_kinds_and_stock(config: &Config) -> (Advertised, StockChoice) {
    let (kinds, unknown) = Advertised::parse(config.kinds().as_deref());
    for name in unknown {
        tracing::error!("{KINDS_ENV}: {name:?} is not a kind velero-wasm provides; it is ignored");
    }
    let (stock, unknown) = StockChoice::parse_lenient(&config.stock());
    if let Some(unknown) = unknown {
        tracing::error!("{STOCK_ENV}: {unknown}; loading only {stock}");
    }
    (kinds, stock)
}

/// What ends serving: `Shutdown`, SIGTERM, SIGHUP, or the death of the process that started us.
struct Stops {
    shutdown: Arc<Notify>,
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    parent_check: tokio::time::Interval,
    parent: u32,
}

/// How the server task ended, when it ended on its own.
type ServerEnd = Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>;

impl Stops {
    fn new(shutdown: Arc<Notify>, parent: u32) -> std::io::Result<Stops> {
        Ok(Stops {
            shutdown,
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
            parent_check: tokio::time::interval(PARENT_CHECK),
            parent,
        })
    }

    /// Waits for a reason to stop; `Some` when the server task ended first, with how it ended.
    async fn wait(
        &mut self,
        server: &mut tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    ) -> Option<ServerEnd> {
        let parent = self.parent;
        loop {
            tokio::select! {
                _ = self.shutdown.notified() => return None,
                _ = self.terminate.recv() => {
                    tracing::debug!("SIGTERM: stopping");
                    return None;
                }
                // A terminal or session that went away: stop as cleanly as for SIGTERM (a Go plugin
                // would die and leave its socket behind).
                _ = self.hangup.recv() => {
                    tracing::debug!("SIGHUP: stopping");
                    return None;
                }
                // Like a Go plugin: Velero never sends SIGINT; a terminal's Ctrl-C is meant for the
                // client. (`Some`: a signal stream that has ended must not make this loop spin.)
                Some(()) = self.interrupt.recv() => tracing::debug!("SIGINT ignored"),
                // Velero died without asking us to stop: nobody will ever call again.
                _ = self.parent_check.tick() => {
                    if std::os::unix::process::parent_id() != parent {
                        tracing::warn!("the process that started the plugin (pid {parent}) has exited: stopping");
                        return None;
                    }
                }
                result = &mut *server => return Some(result),
            }
        }
    }
}

/// What is Velero's once every module serves ([`plan::startup::Startup::run`] calls it before calls
/// stop waiting): the listing Velero holds goes to the dispatch, the listed actions no module
/// provides any more are retired, and the status is written.
fn in_service(
    runtime: &Runtime,
    dispatch: &Dispatch,
    state: Option<&Path>,
    retired_from: Option<Vec<Listed>>,
) {
    let provided: Vec<Listed> = runtime
        .catalog()
        .actions()
        .map(|e| (e.info().kind, e.info().name.clone()))
        .collect();
    if let Some(listed) = &retired_from {
        dispatch.set_listed(listed.clone());
    }
    let retired = retired_from
        .map(|listed| kept_listing::retired(listed, &provided))
        .unwrap_or_default();
    if !retired.is_empty() {
        tracing::debug!(retired = ?retired, "actions Velero listed that no module provides any more");
    }
    if let Some(state) = state {
        write_status(state, runtime, dispatch);
    }
    dispatch.set_retired(retired);
}

/// Writes the modules in service and what each slot serves to the status directory for
/// `velero-wasm status`, and points the shadows' figures there (see [`crate::shadow::status_files`]); a
/// directory that cannot be used is a warning.
fn write_status(state: &Path, runtime: &Runtime, dispatch: &Dispatch) {
    use crate::shadow::status_files;
    let slots = crate::action::slot::Family::ALL
        .into_iter()
        .map(|family| {
            let covered = dispatch.covered(family);
            let names: Vec<String> = covered
                .actions()
                .iter()
                .map(|a| a.info().name.clone())
                .collect();
            (family.slot_name().to_string(), names)
        })
        .filter(|(_, names)| !names.is_empty())
        .collect();
    let written = match status_files::dir(state) {
        Ok(dir) => status_files::write_modules(&dir, &runtime.catalog(), slots)
            .map_err(|e| format!("{}: {e}", dir.display())),
        Err(e) => Err(e.to_string()),
    };
    match written {
        Ok(file) => dispatch.shadows().write_status_to(file),
        Err(e) => tracing::info!("the status for `velero-wasm status` is not written: {e}"),
    }
}

/// Every service, on one router with the plugin's connection settings; Velero's calls wait at the
/// gate until the modules are loaded, every message reaches a service whole ([`upload`]), and large
/// answers go out as their clients take them ([`answer`]). Public so that protocol tests serve this
/// same stack over fake actions (tests/plugin_fake.rs).
pub async fn router(
    dispatch: Dispatch,
    lister: Lister,
    shutdown: Arc<Notify>,
    loaded: tokio::sync::watch::Receiver<bool>,
) -> tonic::transport::server::Router<
    tower::layer::util::Stack<
        gate::GateLayer,
        tower::layer::util::Stack<
            answer::AnswersLayer,
            tower::layer::util::Stack<upload::WholeMessagesLayer, tower::layer::util::Identity>,
        >,
    >,
> {
    Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .initial_connection_window_size(CONNECTION_WINDOW)
        .initial_stream_window_size(STREAM_WINDOW)
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .http2_max_header_list_size(MAX_HEADER_LIST)
        // hyper's own default, which tonic turns off unless it is given.
        .http2_max_local_error_reset_streams(Some(1024))
        .layer(upload::WholeMessagesLayer)
        .layer(answer::AnswersLayer)
        .layer(gate::GateLayer::new(loaded))
        .add_routes(services(dispatch, lister, shutdown).await)
}

/// Every service the plugin serves, routed by gRPC path: go-plugin's, health, and one per Velero kind
/// (the fuzz targets call them in-process through this too).
pub async fn services(dispatch: Dispatch, lister: Lister, shutdown: Arc<Notify>) -> Routes {
    use proto::generated::backup_item_action_server::BackupItemActionServer as BiaV1;
    use proto::generated::delete_item_action_server::DeleteItemActionServer;
    use proto::generated::plugin_lister_server::PluginListerServer;
    use proto::generated::restore_item_action_server::RestoreItemActionServer as RiaV1;
    use proto::plugin::grpc_broker_server::GrpcBrokerServer;
    use proto::plugin::grpc_controller_server::GrpcControllerServer;
    use proto::plugin::grpc_stdio_server::GrpcStdioServer;
    use proto::v1::item_block_action_server::ItemBlockActionServer;
    use proto::v2::backup_item_action_server::BackupItemActionServer as BiaV2;
    use proto::v2::restore_item_action_server::RestoreItemActionServer as RiaV2;

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("plugin", tonic_health::ServingStatus::Serving)
        .await;

    // Every Velero service takes messages of any size Velero sends.
    macro_rules! sized {
        ($server:expr) => {
            $server
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE)
        };
    }
    Routes::new(health_service)
        .add_service(GrpcControllerServer::new(controller::Controller {
            shutdown,
        }))
        .add_service(GrpcStdioServer::new(stdio::Stdio))
        .add_service(GrpcBrokerServer::new(broker::Broker))
        .add_service(sized!(PluginListerServer::new(lister)))
        .add_service(sized!(BiaV1::new(backup_v1::BackupV1(dispatch.clone()))))
        .add_service(sized!(BiaV2::new(backup_v2::BackupV2(dispatch.clone()))))
        .add_service(sized!(RiaV1::new(restore_v1::RestoreV1(dispatch.clone()))))
        .add_service(sized!(RiaV2::new(restore_v2::RestoreV2(dispatch.clone()))))
        .add_service(sized!(ItemBlockActionServer::new(item_block::ItemBlock(
            dispatch.clone()
        ))))
        .add_service(sized!(DeleteItemActionServer::new(delete::Delete(
            dispatch
        ))))
}
