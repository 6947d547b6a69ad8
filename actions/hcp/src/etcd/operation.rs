//! The etcd snapshot as an asynchronous operation (BackupItemAction v2, `etcd-wait = "async"`).
//!
//! Velero calls Progress from a new plugin process every 10 s or so, with nothing but the operation
//! id and the Backup. So the id carries everything: the CR (namespace and name), when the operation
//! started, and the copied credential Secret, which is deleted once the snapshot has ended (or the
//! operation is cancelled):
//!
//! ```text
//! hcpetcdbackup:<hcp namespace>/<cr name>:<unix seconds>:<ho namespace>/<secret name>
//! ```
//!
//! Kubernetes names never contain `:` or `/`, so the id splits unambiguously.

use hypershift::apis::HCP_ETCD_BACKUPS;
use velero_wasm_sdk::{log, OperationProgress, Timestamp};

use super::condition::{completed, snapshot_url, Condition, Reading};
use super::credentials;
use crate::context::Context;

/// The first field of every id.
pub const PREFIX: &str = "hcpetcdbackup";

/// What an operation id says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationId {
    /// The CR's namespace (the HostedControlPlane's).
    pub namespace: String,
    /// The CR's name.
    pub name: String,
    /// When the operation started (Unix seconds).
    pub started: i64,
    /// The copied Secret's namespace (the HyperShift Operator's).
    pub secret_namespace: String,
    /// The copied Secret's name.
    pub secret: String,
}

/// The most of an operation ID an error repeats: Velero's ids are a few dozen bytes, and an error
/// need not send back the kilobytes a client may have put in one.
const SHOWN_ID: usize = 128;

/// `id` as errors show it: whole when short, else its first [`SHOWN_ID`] bytes (cut at a character
/// boundary) and its length.
pub fn shown_id(id: &str) -> String {
    if id.len() <= SHOWN_ID {
        return id.to_string();
    }
    let mut end = SHOWN_ID;
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &id[..end], id.len())
}

impl OperationId {
    /// The id as Velero stores it.
    pub fn encode(&self) -> String {
        format!(
            "{PREFIX}:{}/{}:{}:{}/{}",
            self.namespace, self.name, self.started, self.secret_namespace, self.secret
        )
    }

    /// Reads an id; anything else is `operation ID <id> is invalid: …`.
    pub fn parse(id: &str) -> Result<OperationId, String> {
        let invalid = |why: &str| format!("operation ID {} is invalid: {why}", shown_id(id));
        let fields: Vec<&str> = id.split(':').collect();
        let [prefix, cr, started, secret] = fields[..] else {
            return Err(invalid(&format!(
                "expected {PREFIX}:<namespace>/<name>:<start>:<namespace>/<secret>"
            )));
        };
        if prefix != PREFIX {
            return Err(invalid(&format!("it does not start with {PREFIX}:")));
        }
        let pair = |text: &str, what: &str| -> Result<(String, String), String> {
            match text.split_once('/') {
                // Kubernetes' limits: a namespace is a DNS label, a name at most a DNS subdomain.
                Some((ns, name))
                    if (1..=63).contains(&ns.len())
                        && (1..=253).contains(&name.len())
                        && !name.contains('/') =>
                {
                    Ok((ns.to_string(), name.to_string()))
                }
                _ => Err(invalid(&format!(
                    "{what} {:?} is not <namespace>/<name>",
                    shown_id(text)
                ))),
            }
        };
        let (namespace, name) = pair(cr, "the HCPEtcdBackup")?;
        let (secret_namespace, secret) = pair(secret, "the Secret")?;
        let started = started.parse().map_err(|_| {
            invalid(&format!(
                "the start {:?} is not a number",
                shown_id(started)
            ))
        })?;
        Ok(OperationId {
            namespace,
            name,
            started,
            secret_namespace,
            secret,
        })
    }
}

/// What the CR says now, as Velero wants it. A CR that ended (successfully or not) also has its copied
/// Secret deleted. A CR that cannot be read for a moment is still in progress: only Velero's operation
/// timeout ends an operation that never reports.
pub fn progress(ctx: &Context, id: &str) -> Result<OperationProgress, String> {
    let id = OperationId::parse(id)?;
    let now = ctx.clock.now();
    let what = format!("HCPEtcdBackup {}/{}", id.namespace, id.name);
    let mut answer = OperationProgress {
        completed: false,
        error: None,
        n_completed: 0,
        n_total: 1,
        units: "etcd snapshots".into(),
        description: String::new(),
        started: Some(Timestamp {
            seconds: id.started,
            nanoseconds: 0,
        }),
        updated: Some(now),
    };
    let cr = match ctx.cluster.get(HCP_ETCD_BACKUPS, &id.namespace, &id.name) {
        Ok(cr) => cr,
        Err(e) if e.is_not_found() => {
            credentials::delete(ctx.cluster, &id.secret_namespace, &id.secret);
            answer.completed = true;
            answer.error = Some(format!("{what} no longer exists"));
            answer.description = format!("{what} was deleted");
            return Ok(answer);
        }
        Err(e) => {
            answer.description = format!("cannot read {what}: {}", e.message());
            return Ok(answer);
        }
    };
    let condition = Condition::of(&cr);
    if let Some(changed) = condition.as_ref().and_then(|c| c.changed) {
        answer.updated = Some(Timestamp {
            seconds: changed,
            nanoseconds: 0,
        });
    }
    match completed(condition.as_ref()) {
        Reading::Done if snapshot_url(&cr).is_empty() => {
            answer.description = format!("{what} succeeded; waiting for its status.snapshotURL");
        }
        Reading::Done => {
            credentials::delete(ctx.cluster, &id.secret_namespace, &id.secret);
            answer.completed = true;
            answer.n_completed = 1;
            answer.description = format!("etcd snapshot at {}", snapshot_url(&cr));
        }
        Reading::Failed(e) => {
            credentials::delete(ctx.cluster, &id.secret_namespace, &id.secret);
            answer.completed = true;
            answer.description = condition.map(|c| c.summary()).unwrap_or_default();
            answer.error = Some(e);
        }
        Reading::Pending => {
            answer.description = match condition {
                Some(c) => format!("waiting for {what}: {}", c.summary()),
                None => format!("waiting for {what} to report BackupCompleted"),
            };
        }
    }
    Ok(answer)
}

/// Best effort: deletes the copied Secret. The CR is left alone (upstream never deletes one, and a
/// snapshot that completes anyway is harmless; HyperShift owns its lifecycle).
pub fn cancel(ctx: &Context, id: &str) -> Result<(), String> {
    let id = OperationId::parse(id)?;
    log::info(
        "operation cancelled: deleting the copied credential Secret, keeping the HCPEtcdBackup",
        &[("hcpEtcdBackup", &format!("{}/{}", id.namespace, id.name))],
    );
    credentials::delete(ctx.cluster, &id.secret_namespace, &id.secret);
    Ok(())
}

#[cfg(test)]
mod tests;
