//! Logging through the host: lines come out in Velero's log tagged with the module, action and item.

#[cfg(target_arch = "wasm32")]
use crate::bindings::velero_wasm::plugin::log::log;
use crate::bindings::velero_wasm::plugin::log::Level;

/// Writes a debug line.
pub fn debug(message: &str, fields: &[(&str, &str)]) {
    write(Level::Debug, message, fields)
}

/// Writes an info line.
pub fn info(message: &str, fields: &[(&str, &str)]) {
    write(Level::Info, message, fields)
}

/// Writes a warning line (counted as a warning of the backup).
pub fn warn(message: &str, fields: &[(&str, &str)]) {
    write(Level::Warn, message, fields)
}

/// Writes an error line (counted as an error of the backup: it ends PartiallyFailed).
pub fn error(message: &str, fields: &[(&str, &str)]) {
    write(Level::Error, message, fields)
}

fn write(level: Level, message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    #[cfg(target_arch = "wasm32")]
    log(level, message, &fields);
    // Native unit tests: stderr.
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{level:?} {message} {fields:?}");
}
