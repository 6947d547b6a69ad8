//! `[limits]`: what one call of a module may use, with the sizes and durations a manifest writes.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::{invalid, Invalid};

/// The largest memory cap a manifest may ask for; the engine reserves slots of this size.
pub const MAX_MEMORY: u64 = 1 << 30;

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock deadline of one call.
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
    /// Linear-memory cap in bytes.
    #[serde(default = "default_memory", deserialize_with = "byte_size")]
    pub memory: u64,
    /// Largest item (in bytes) a call may return.
    #[serde(default = "default_output", deserialize_with = "byte_size")]
    pub output: u64,
    /// Time allowed for one outbound HTTP exchange.
    #[serde(
        rename = "http-timeout",
        default = "default_http_timeout",
        deserialize_with = "duration"
    )]
    pub http_timeout: Duration,
    /// Largest body of an HTTP answer, in bytes.
    #[serde(
        rename = "http-response",
        default = "default_http_response",
        deserialize_with = "byte_size"
    )]
    pub http_response: u64,
    /// Capability calls that do work for the guest (kube, http, environment, random, signing) one
    /// call may make: one module cannot keep the cluster or the network busy for the others.
    #[serde(rename = "capability-calls", default = "default_capability_calls")]
    pub capability_calls: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: default_timeout(),
            memory: default_memory(),
            output: default_output(),
            http_timeout: default_http_timeout(),
            http_response: default_http_response(),
            capability_calls: default_capability_calls(),
        }
    }
}

/// The default of `[limits] capability-calls`.
pub const DEFAULT_CAPABILITY_CALLS: u32 = 1000;

fn default_capability_calls() -> u32 {
    DEFAULT_CAPABILITY_CALLS
}

fn default_http_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_http_response() -> u64 {
    1 << 20
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_memory() -> u64 {
    256 << 20
}

fn default_output() -> u64 {
    64 << 20
}

impl Limits {
    /// `[limits]`: within what the engine can give.
    pub fn check(&self) -> Result<(), Invalid> {
        let limits = self;
        if limits.timeout.is_zero() {
            return Err(invalid("limits.timeout", "must be more than zero"));
        }
        if limits.memory < 1 << 20 || limits.memory > MAX_MEMORY {
            return Err(invalid("limits.memory", "must be between 1MiB and 1GiB"));
        }
        if limits.output == 0 {
            return Err(invalid("limits.output", "must be more than zero"));
        }
        if limits.http_timeout.is_zero() {
            return Err(invalid("limits.http-timeout", "must be more than zero"));
        }
        if limits.capability_calls == 0 {
            return Err(invalid("limits.capability-calls", "must be more than zero"));
        }
        if limits.http_response == 0 {
            return Err(invalid("limits.http-response", "must be more than zero"));
        }
        Ok(())
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "{text:?} is not a duration like \"30s\" or \"2m\": {e}"
        ))
    })
}

fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(n) => Ok(n),
        Size::Text(text) => parse_byte_size(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a size like \"64MiB\""))
        }),
    }
}

/// Parses `512KiB`, `64MiB`, `1GiB`, `100KB`, `1000` (bytes).
pub fn parse_byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "Ki" => 1 << 10,
        "MiB" | "Mi" => 1 << 20,
        "GiB" | "Gi" => 1 << 30,
        "KB" | "K" => 1_000,
        "MB" | "M" => 1_000_000,
        "GB" | "G" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(factor)
}
