//! Writes what became of each module ConfigMap ([`super::configmap_state`]) on the ConfigMap itself,
//! once the modules serve, on a task of its own: a core/v1 Event per state it enters (and per remark),
//! and the status annotation [`STATUS_ANNOTATION`], server-side applied by the field manager
//! [`FIELD_MANAGER`] (docs/modules.md#s11). `kubectl describe configmap NAME` then answers "does my
//! module serve?".
//!
//! - **Once**: a ConfigMap whose annotation already holds the value is left alone (no request). An
//!   Event's name is derived from the ConfigMap's uid, the value it replaces and the Event's reason
//!   and message, so that plugin processes that find the same change at once (Velero runs one per
//!   backup and restore) create it once: the others' creates answer AlreadyExists.
//! - **Never in the way**: it starts after the modules are in service, takes at most [`TIMEOUT`]
//!   (every request, retries of a throttled one too), a few requests per ConfigMap, and nothing is
//!   retried. What the API server refuses (RBAC, a conflict, no answer) is one line at info: a
//!   warning would count in Velero's backup, and nothing the plugin serves depends on it.
//! - [`SWITCH_ENV`](crate::config::VELERO_WASM_CONFIGMAP_STATE)`=off` turns it off.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::configmap_state::{outcomes, InService, Note, Outcome};
use super::problem::LoadProblem;
use crate::action::slot::Listed;
use crate::cluster::live::{LazyCluster, CALL_DEADLINE};
use crate::cluster::{ApiResource, KubeApi, KubeError, Patch};
use crate::config::Config;
use crate::modules::configmaps::{self, ConfigMapModules, STATUS_ANNOTATION};
use crate::runtime::Catalog;

/// The field manager the status annotation is applied by.
pub const FIELD_MANAGER: &str = "velero-wasm-status";
/// The component the Events name as their source.
pub const COMPONENT: &str = "velero-wasm";
/// How long all of it may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);
/// The most Events recorded on one ConfigMap at once (its state and its first remarks).
const MAX_NOTES: usize = 4;

/// What a plugin process knows once its modules are in service, to write on the ConfigMaps.
pub(crate) struct Report {
    /// The cluster the ConfigMaps were listed from.
    pub(crate) cluster: Arc<LazyCluster>,
    /// Velero's namespace as configured (empty: the cluster configuration's).
    pub(crate) velero_namespace: String,
    /// The ConfigMaps as listed (none: not read, or the last list served).
    pub(crate) configmaps: Option<ConfigMapModules>,
    /// What loading found, each problem marked with the ConfigMap it is about.
    pub(crate) problems: Vec<LoadProblem>,
    /// What serves.
    pub(crate) catalog: Arc<Catalog>,
    /// What Velero listed when its pod started, as kept.
    pub(crate) listed: Option<Vec<Listed>>,
}

/// Who writes: the Events' `reportingInstance` (the pod's name, `HOSTNAME`).
struct Writer {
    instance: String,
}

impl Report {
    /// Writes it in the background (unless [`SWITCH_ENV`](crate::config::VELERO_WASM_CONFIGMAP_STATE) is `off`, or the ConfigMaps were not
    /// listed by this process: the last list's may have changed since).
    pub(crate) fn spawn(self, config: &Config) {
        let off = config
            .configmap_state()
            .is_some_and(|v| matches!(v.trim(), "off" | "false" | "0"));
        let fresh = self
            .configmaps
            .as_ref()
            .is_some_and(|c| c.fallback.is_none());
        if off || !fresh {
            return;
        }
        let writer = Writer {
            instance: config.hostname(),
        };
        tokio::spawn(self.run(writer));
    }

    async fn run(self, writer: Writer) {
        let Some(configmaps) = &self.configmaps else {
            return;
        };
        let in_service = InService::of(&self.catalog, self.listed.as_deref());
        let found = outcomes(configmaps, &self.problems, &in_service);
        if found.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        let mut tally = Tally::default();
        let written = CALL_DEADLINE.scope(
            deadline,
            tokio::time::timeout_at(deadline, self.write(&writer, &found, &mut tally)),
        );
        if written.await.is_err() {
            tally.refused(format!("not done within {} s", TIMEOUT.as_secs()));
        }
        tally.log(found.len());
    }

    /// Writes each outcome whose value the ConfigMap does not hold yet.
    async fn write(&self, writer: &Writer, found: &[Outcome], tally: &mut Tally) {
        let Some(namespace) = configmaps::namespace_of(&self.cluster, &self.velero_namespace).await
        else {
            tally.refused("no cluster to ask".to_string());
            return;
        };
        let mut events = true;
        for outcome in found {
            let value = outcome.annotation();
            if outcome.subject.status.as_deref() == Some(value.as_str()) {
                tally.unchanged += 1;
                continue;
            }
            // One refusal of Events (RBAC) stands for all: the annotation is still written.
            if events {
                for note in outcome.notes().into_iter().take(MAX_NOTES) {
                    let event = event(outcome, &note, &namespace, &writer.instance);
                    match self.cluster.create(&events_api(), &namespace, event).await {
                        // Another process recorded it first.
                        Ok(_) | Err(KubeError::Conflict(_)) => {}
                        Err(e) => {
                            tally.refused(format!(
                                "Event on ConfigMap {}: {e}",
                                outcome.subject.name
                            ));
                            events = false;
                            break;
                        }
                    }
                }
            }
            let patch = Patch::Apply {
                field_manager: FIELD_MANAGER.to_string(),
                object: applied(outcome, &value, &namespace),
            };
            match self
                .cluster
                .patch(&configmaps_api(), &namespace, &outcome.subject.name, &patch)
                .await
            {
                Ok(_) => tally.written.push(outcome.subject.name.clone()),
                Err(e) => {
                    tally.refused(format!(
                        "annotation {STATUS_ANNOTATION} on ConfigMap {}: {e}",
                        outcome.subject.name
                    ));
                    // Forbidden for one, forbidden for all.
                    if matches!(e, KubeError::Forbidden(_)) {
                        return;
                    }
                }
            }
        }
    }
}

/// What writing did, for its one line.
#[derive(Default)]
struct Tally {
    written: Vec<String>,
    unchanged: usize,
    /// The first refusal, and how many there were.
    refusals: Option<(String, usize)>,
}

impl Tally {
    fn refused(&mut self, why: String) {
        match &mut self.refusals {
            Some((_, n)) => *n += 1,
            None => self.refusals = Some((why, 1)),
        }
    }

    /// One line: at info when something was written or refused (never a warning: this is upkeep,
    /// nothing a backup depends on), at debug when every ConfigMap already said its state.
    fn log(&self, configmaps: usize) {
        let written = self.written.join(",");
        match &self.refusals {
            Some((why, n)) => tracing::info!(
                configmaps,
                written = %written,
                unchanged = self.unchanged,
                refusals = n,
                "the state of the module ConfigMaps is not written on them: {why}; the modules serve as they do \
                 (the plugin needs create on events and patch on configmaps in Velero's namespace: velero-wasm rbac prints them)"
            ),
            None if !self.written.is_empty() => tracing::info!(
                configmaps,
                written = %written,
                unchanged = self.unchanged,
                "module ConfigMaps' state written on them (Events, annotation {STATUS_ANNOTATION})"
            ),
            None => tracing::debug!(
                configmaps,
                unchanged = self.unchanged,
                "module ConfigMaps' state unchanged"
            ),
        }
    }
}

fn events_api() -> ApiResource {
    ApiResource::new("", "v1", "events")
}

fn configmaps_api() -> ApiResource {
    ApiResource::new("", "v1", "configmaps")
}

/// The apply body: the annotation alone (with what names the object), and the uid, so that a
/// ConfigMap deleted (or replaced) since the list is not written to.
fn applied(outcome: &Outcome, value: &str, namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": outcome.subject.name,
            "namespace": namespace,
            "uid": outcome.subject.uid,
            "annotations": {STATUS_ANNOTATION: value},
        },
    })
}

/// The core/v1 Event of `note` on the ConfigMap of `outcome`.
fn event(outcome: &Outcome, note: &Note, namespace: &str, instance: &str) -> Value {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let subject = &outcome.subject;
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(outcome, note), "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": subject.name,
            "namespace": namespace,
            "uid": subject.uid,
        },
        "type": note.kind.as_str(),
        "reason": note.reason,
        "message": note.message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    })
}

/// `CONFIGMAP.DIGEST`: the ConfigMap's name (as Kubernetes names its own Events) and 16 hex digits
/// of the sha256 of its uid, the annotation value the Event replaces, its reason and its message.
pub(crate) fn event_name(outcome: &Outcome, note: &Note) -> String {
    let subject = &outcome.subject;
    let digest = crate::modules::sha256_hex(
        [
            subject.uid.as_str(),
            subject.status.as_deref().unwrap_or(""),
            note.reason,
            note.message.as_str(),
        ]
        .join("\0")
        .as_bytes(),
    );
    // A ConfigMap's name is a DNS subdomain (at most 253): cut to leave room for the digest.
    let mut prefix: String = subject.name.chars().take(200).collect();
    while prefix.ends_with(['.', '-']) {
        prefix.pop();
    }
    format!("{prefix}.{}", &digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::configmap_state::{EventType, State, Subject};

    fn outcome(name: &str, status: Option<&str>) -> Outcome {
        Outcome {
            subject: Subject {
                name: name.into(),
                uid: "0f7c5a52-1d2e-4b7a-9c1d-2e3f4a5b6c7d".into(),
                module: "foo".into(),
                shadow: false,
                status: status.map(str::to_string),
            },
            state: State::Refused("sha256 mismatch".into()),
            remarks: vec![],
        }
    }

    fn note(message: &str) -> Note {
        Note {
            kind: EventType::Warning,
            reason: "Refused",
            message: message.into(),
        }
    }

    #[test]
    fn an_event_s_name_is_the_same_for_the_same_change_and_a_valid_name() {
        let first = outcome("velero-wasm-module-foo", None);
        let name = event_name(&first, &note("a"));
        assert_eq!(name, event_name(&first, &note("a")), "deterministic");
        assert!(name.starts_with("velero-wasm-module-foo."), "{name}");
        assert_eq!(name.len(), "velero-wasm-module-foo.".len() + 16);
        // Another message, or the same message replacing another state: another Event.
        assert_ne!(name, event_name(&first, &note("b")));
        let back = outcome("velero-wasm-module-foo", Some("{\"state\":\"refused\"}"));
        assert_ne!(name, event_name(&back, &note("a")));
        // A name at the longest: cut, never ending in '.' or '-' before the digest.
        let long = format!("{}-{}", "a".repeat(199), "b".repeat(53));
        let name = event_name(&outcome(&long, None), &note("a"));
        assert!(name.len() <= 253, "{}", name.len());
        assert!(name.starts_with(&format!("{}.", "a".repeat(199))), "{name}");
    }

    #[test]
    fn the_event_names_the_configmap_and_the_apply_names_only_the_annotation() {
        let found = outcome("cm-foo", None);
        let event = event(&found, &note("why"), "velero", "velero-7c9f");
        assert_eq!(
            event["involvedObject"],
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "cm-foo", "namespace": "velero",
                   "uid": "0f7c5a52-1d2e-4b7a-9c1d-2e3f4a5b6c7d"})
        );
        assert_eq!(
            (&event["type"], &event["reason"], &event["message"]),
            (&json!("Warning"), &json!("Refused"), &json!("why"))
        );
        assert_eq!(event["source"], json!({"component": "velero-wasm"}));
        assert_eq!(event["reportingInstance"], "velero-7c9f");
        let body = applied(&found, "{}", "velero");
        assert_eq!(
            body,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cm-foo", "namespace": "velero",
                                "uid": "0f7c5a52-1d2e-4b7a-9c1d-2e3f4a5b6c7d",
                                "annotations": {"velero-wasm.io/status": "{}"}}})
        );
    }
}
