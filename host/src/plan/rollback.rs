//! Rollback protection as the plan applies it: a module signed by a trusted key is refused below the
//! version the floor has seen served, and one that serves raises the floor ([`VersionFloor`]).

use crate::modules::{ModuleSource, VersionFloor};
use crate::runtime::{LoadError, Loaded, Runtime};

/// The floor `source` is held to: only a verified signature says which version a module is; without
/// one there is nothing to hold it to (and no trusted keys to protect).
fn held<'a>(floor: Option<&'a VersionFloor>, source: &ModuleSource) -> Option<&'a VersionFloor> {
    floor.filter(|_| source.signature.as_ref().is_some_and(|s| s.verified))
}

/// Why `source` may not load: it is below the floor it is held to.
fn below(floor: Option<&VersionFloor>, source: &ModuleSource) -> Result<(), LoadError> {
    match held(floor, source) {
        Some(floor) => floor.check(source).map_err(|why| LoadError {
            module: source.name.clone(),
            origin: source.origin.to_string(),
            problem: why.to_string(),
        }),
        None => Ok(()),
    }
}

/// Puts `source` in service ([`Runtime::load`]) unless it is below the floor, and raises the floor
/// to its version once it serves.
pub(super) async fn serve(
    runtime: &Runtime,
    floor: Option<&VersionFloor>,
    source: ModuleSource,
) -> Result<Loaded, LoadError> {
    below(floor, &source)?;
    let kept = held(floor, &source).map(|floor| (floor, source.clone()));
    let loaded = runtime.load(source).await?;
    if let Some((floor, source)) = kept {
        if let Err(e) = floor.raise(&source) {
            tracing::warn!(module = %source.name, "cannot record the version served: {e}");
        }
    }
    Ok(loaded)
}

/// Loads `source` as a shadow ([`Runtime::load_shadow`]) unless it is below the floor; a shadow
/// never raises it.
pub(super) async fn shadow(
    runtime: &Runtime,
    floor: Option<&VersionFloor>,
    source: ModuleSource,
) -> Result<Loaded, LoadError> {
    below(floor, &source)?;
    runtime.load_shadow(source).await
}
