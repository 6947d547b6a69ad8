//! How the host reaches the outside world over HTTP: the shared hyper clients ([`send`]: TLS roots,
//! connection pools) and the environment's proxy for HTTPS (`proxy.rs`). Nothing here knows of
//! guests or grants: the `http` capability decides what a module may send and sends it here, and the
//! OCI registry client sends its own requests the same way.

mod clients;
mod proxy;

pub use clients::send;
