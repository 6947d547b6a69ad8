//! What a component can reach, one module per import: [`kube`], [`clock`], [`log`], [`config`],
//! [`random`], [`http`], [`environment`], [`named_items`], [`signing`]; plus [`recording`], the record and replay of
//! the calls each hands its backend ([`crate::backend`], the one shape of them all). (Where the
//! guest's stdout and stderr go is not a capability: [`crate::guest_output`].)
//!
//! Every call of a component runs with a fresh [`CallState`] as its store data. It carries the call's
//! identity (module, action, item) for logs and errors, the module's [`ModuleCaps`] (its grant and
//! settings), the host-wide [`Services`] behind the capabilities, and the [`WorkBudget`] they charge;
//! each capability's host functions see only their own view of it (`state.rs`).

mod budget;
mod call_id;
mod call_state;
pub(crate) mod clock;
pub(crate) mod environment;
mod exceeded;
mod grants;
pub(crate) mod http;
pub(crate) mod kube;
mod log;
pub(crate) mod memory;
mod module_settings;
pub(crate) mod named_items;
pub(crate) mod random;
pub(crate) mod recording;
mod services;
pub(crate) mod signing;

use wasmtime::component::{HasSelf, Linker};

use crate::bindings::velero_wasm::plugin as wit;
pub(crate) use call_id::CallId;
pub(crate) use call_state::CallState;
pub use clock::Clock;
pub use environment::{EnvGrant, Environment};
pub use exceeded::Exceeded;
pub use grants::HttpGrant;
pub(crate) use grants::ModuleCaps;
pub use kube::KubeGrant;
pub(crate) use memory::MemoryBudget;
pub use named_items::NamedItems;
pub use services::Services;
pub(crate) use signing::SigningService;

/// A linker with every import a component may use: the WASI interfaces `std` needs, and ours.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    // Each capability's host functions take its own view of the call (`state`).
    let l = &mut linker;
    wit::types::add_to_linker::<CallState, HasSelf<CallState>>(l, |state| state)?;
    wit::kube::add_to_linker::<CallState, kube::KubeHost>(l, CallState::kube)?;
    wit::clock::add_to_linker::<CallState, clock::ClockHost>(l, CallState::clock)?;
    wit::log::add_to_linker::<CallState, log::LogHost>(l, CallState::log)?;
    wit::config::add_to_linker::<CallState, module_settings::ConfigHost>(l, CallState::config)?;
    wit::random::add_to_linker::<CallState, random::RandomHost>(l, CallState::random)?;
    wit::http::add_to_linker::<CallState, http::HttpHost>(l, CallState::http)?;
    wit::environment::add_to_linker::<CallState, environment::EnvironmentHost>(
        l,
        CallState::environment,
    )?;
    wit::named_items::add_to_linker::<CallState, named_items::NamedItemsHost>(
        l,
        CallState::named_items,
    )?;
    signing::add_to_linker(&mut linker, CallState::signing)?;
    Ok(linker)
}
