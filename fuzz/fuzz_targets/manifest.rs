//! Module manifests: TOML text to a validated manifest, then the grants the host compiles from it
//! (Kubernetes rules, HTTP hosts, environment names) and the byte sizes of its limits.
//!
//! Input: the manifest's text.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use velero_wasm::action::Verb;
use velero_wasm::modules::{parse_byte_size, Manifest, MAX_MEMORY};
use velero_wasm::{Clock, EnvGrant, HttpGrant, KubeGrant};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_byte_size(text);
    let Ok(manifest) = Manifest::parse(text) else {
        return;
    };
    // What validation promises the runtime.
    assert!(manifest.limits.memory <= MAX_MEMORY, "{manifest:?}");
    assert!(!manifest.limits.timeout.is_zero(), "{manifest:?}");
    // Every call's time limit is computed from the timeout, on either clock.
    for clock in [Clock::System, Clock::fixed(UNIX_EPOCH)] {
        let limit = clock.limit(manifest.limits.timeout);
        let _ = clock.remaining(&limit);
    }
    let grant = &manifest.grant;
    let kube = KubeGrant::new(&grant.kube);
    for rule in &grant.kube {
        for resource in &rule.resources {
            for namespace in &rule.namespaces {
                let namespace = namespace.as_str();
                let _ = kube.allows(
                    Verb::Get,
                    resource,
                    namespace,
                    Some(namespace),
                    "velero",
                );
            }
        }
    }
    let http = HttpGrant::new(
        &grant.http,
        manifest.limits.http_response,
        Duration::from_secs(1),
    );
    for entry in &grant.http {
        let _ = http.allows("https", entry, 443);
    }
    let env = EnvGrant::new(&grant.env, &grant.env_files);
    for name in grant.env.iter().chain(&grant.env_files) {
        let _ = (env.allows_variable(name), env.allows_file(name));
    }
});
