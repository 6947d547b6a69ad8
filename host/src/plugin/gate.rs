//! The modules load after the handshake, not before it: Velero (go-plugin) waits for the handshake
//! line before anything else, and everything Velero asks of the plugin needs the modules. So the
//! socket is announced as soon as it listens, and a [`Gate`] in front of the services holds each of
//! Velero's calls until the modules are in service. go-plugin's own services (health, controller,
//! stdio, broker) answer at once, so a health check or a `Shutdown` never waits for loading.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::watch;
use tower::{Layer, Service};

/// Paths of go-plugin's services, which never wait for the modules.
const UNGATED: &[&str] = &[
    "/grpc.health.v1.Health/",
    "/plugin.GRPCController/",
    "/plugin.GRPCStdio/",
    "/plugin.GRPCBroker/",
];

/// Whether the modules are loaded yet: set once, by the task that loads them.
pub fn signal() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    watch::channel(false)
}

/// Holds calls to Velero's services until the modules are loaded.
#[derive(Clone)]
pub struct GateLayer {
    loaded: watch::Receiver<bool>,
}

impl GateLayer {
    /// A gate that opens when `loaded` says true.
    pub(crate) fn new(loaded: watch::Receiver<bool>) -> GateLayer {
        GateLayer { loaded }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            loaded: self.loaded.clone(),
        }
    }
}

/// The service of [`GateLayer`].
#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    loaded: watch::Receiver<bool>,
}

impl<S, B> Service<http::Request<B>> for Gate<S>
where
    S: Service<http::Request<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The service polled ready is the one to call; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let path = request.uri().path();
        let waits = !*self.loaded.borrow() && !UNGATED.iter().any(|p| path.starts_with(p));
        if !waits {
            return Box::pin(inner.call(request));
        }
        let mut loaded = self.loaded.clone();
        Box::pin(async move {
            // A dropped sender (loading task gone) opens the gate too: the calls then see what loaded.
            let _ = loaded.wait_for(|done| *done).await;
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn echo() -> impl Service<
        http::Request<()>,
        Response = String,
        Error = std::convert::Infallible,
        Future = std::future::Ready<Result<String, std::convert::Infallible>>,
    > + Clone {
        tower::service_fn(|r: http::Request<()>| std::future::ready(Ok(r.uri().path().to_string())))
    }

    fn request(path: &str) -> http::Request<()> {
        http::Request::builder().uri(path).body(()).unwrap()
    }

    #[tokio::test]
    async fn velero_s_calls_wait_for_the_modules_and_go_plugin_s_do_not() {
        let (tx, rx) = signal();
        let mut gate = GateLayer::new(rx).layer(echo());
        // go-plugin's services answer while loading.
        let health = gate.call(request("/grpc.health.v1.Health/Check")).await;
        assert_eq!(health.unwrap(), "/grpc.health.v1.Health/Check");
        // Velero's wait until the modules are loaded.
        let execute = tokio::spawn(gate.call(request("/generated.BackupItemAction/Execute")));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!execute.is_finished(), "answered before the modules loaded");
        tx.send(true).unwrap();
        assert_eq!(
            execute.await.unwrap().unwrap(),
            "/generated.BackupItemAction/Execute"
        );
        // Once loaded, nothing waits.
        let list = gate
            .call(request("/generated.PluginLister/ListPlugins"))
            .await;
        assert_eq!(list.unwrap(), "/generated.PluginLister/ListPlugins");
    }
}
