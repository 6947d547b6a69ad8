//! The `environment` capability: the namespace Velero runs in, and the environment variables and
//! variable-named files a module's grant lists (`[grant] env`, `[grant] env-files`).
//!
//! Components have no environment and no files of their own. A module that must read a projected
//! token (`AWS_WEB_IDENTITY_TOKEN_FILE`, `AZURE_FEDERATED_TOKEN_FILE`) is granted that *variable* in
//! `env-files`: it can then read the file the variable names, and no other path (not the service
//! account's own token, for instance).
//!
//! The grant is checked here; the values come from the `Backend<EnvironmentCall>` of the host's
//! [`Environment`]: the process (or a fixed map, in tests), or a recording or replay of it. Velero's
//! namespace is in a recording's header; only calls the grant allows reach a backend, so only those
//! are recorded, and a replay checks the same grant first:
//!
//! ```text
//! {"capability":"environment","call":{"op":"variable","name":"AZURE_TENANT_ID"},"answer":{"ok":"tid-5678"}}
//! {"capability":"environment","call":{"op":"variable","name":"AZURE_CLIENT_ID"},"answer":{"ok":null}}
//! {"capability":"environment","call":{"op":"read-env-file","variable":"AWS_WEB_IDENTITY_TOKEN_FILE"},"answer":{"ok":{"text":"eyJhbGciOi…"}}}
//! {"capability":"environment","call":{"op":"read-env-file","variable":"AZURE_FEDERATED_TOKEN_FILE"},"answer":{"error":{"reason":"other","message":"environment variable AZURE_FEDERATED_TOKEN_FILE is not set"}}}
//! ```
//!
//! A replayed call that is not in the recording answers unset (a variable) or an error (a file), and
//! the run fails naming it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::budget::WorkBudget;
use super::call_id::CallId;
use super::grants::ModuleCaps;
use super::recording::bytes;
use crate::backend::{Backend, Call, Failure};
use crate::bindings::velero_wasm::plugin::environment::Host;
/// A module's environment grant: the grant crate's.
pub use velero_wasm_grant::EnvGrant;

/// The largest file `read-env-file` returns.
pub(crate) const MAX_FILE: u64 = 1 << 20;

/// Where a pod's service account names its namespace.
pub(crate) const SERVICE_ACCOUNT_NAMESPACE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The variable Velero's Deployment sets to its namespace.
pub(crate) use crate::config::VELERO_NAMESPACE as VELERO_NAMESPACE_VARIABLE;

/// One read of the environment, once the grant allows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub(crate) enum EnvironmentCall {
    /// A variable's value (`None` when unset).
    Variable {
        /// The variable.
        name: String,
    },
    /// The contents of the file whose path is the value of `variable` (at most [`MAX_FILE`] bytes).
    ReadEnvFile {
        /// The variable that names the file.
        variable: String,
    },
}

/// What a read of the environment answers: `null` or a string for a variable, bytes for a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum EnvironmentAnswer {
    /// A variable's value.
    Variable(Option<String>),
    /// A file's contents.
    File(#[serde(with = "bytes")] Vec<u8>),
}

impl Call for EnvironmentCall {
    const CAPABILITY: &'static str = "environment";
    type Answer = EnvironmentAnswer;
    type Error = Failure;

    /// `variable AZURE_TENANT_ID`, `read-env-file AWS_WEB_IDENTITY_TOKEN_FILE`.
    fn describe(&self) -> String {
        match self {
            EnvironmentCall::Variable { name } => format!("variable {name}"),
            EnvironmentCall::ReadEnvFile { variable } => format!("read-env-file {variable}"),
        }
    }

    fn unanswered(message: String) -> Failure {
        Failure(message)
    }
}

type Lookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Variables from a lookup (the process's, or a fixed map), files from the file system.
struct Variables(Lookup);

#[async_trait]
impl Backend<EnvironmentCall> for Variables {
    async fn call(&self, call: EnvironmentCall) -> Result<EnvironmentAnswer, Failure> {
        match call {
            EnvironmentCall::Variable { name } => Ok(EnvironmentAnswer::Variable((self.0)(&name))),
            EnvironmentCall::ReadEnvFile { variable } => {
                let path = (self.0)(&variable)
                    .filter(|p| !p.is_empty())
                    .ok_or_else(|| format!("environment variable {variable} is not set"))?;
                Ok(EnvironmentAnswer::File(
                    read_capped(&path, &variable).await?,
                ))
            }
        }
    }
}

/// What the host knows of the environment it runs in, shared by every call.
#[derive(Clone)]
pub struct Environment {
    velero_namespace: String,
    source: Arc<dyn Backend<EnvironmentCall>>,
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Environment")
            .field("velero_namespace", &self.velero_namespace)
            .finish_non_exhaustive()
    }
}

impl Environment {
    /// Velero's namespace and where variables and files come from.
    pub(crate) fn new(
        velero_namespace: &str,
        source: Arc<dyn Backend<EnvironmentCall>>,
    ) -> Environment {
        Environment {
            velero_namespace: velero_namespace.to_string(),
            source,
        }
    }

    /// The process's environment as `config` holds it (the variables guests may be granted);
    /// Velero's namespace from `VELERO_NAMESPACE`, else the service account's namespace file
    /// (trimmed), else "".
    pub fn from_config(config: &crate::config::Config) -> Environment {
        let from_variable = config
            .var(VELERO_NAMESPACE_VARIABLE)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        let namespace = from_variable
            .or_else(|| {
                std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
                    .ok()
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_default();
        Environment::new(
            &namespace,
            Arc::new(Variables(Arc::new({
                let config = config.clone();
                move |name| config.var(name)
            }))),
        )
    }

    /// Fixed variables instead of the process's (for tests), and no Velero namespace.
    pub fn fixed(variables: BTreeMap<String, String>) -> Environment {
        Environment::new(
            "",
            Arc::new(Variables(Arc::new(move |name| {
                variables.get(name).cloned()
            }))),
        )
    }

    /// The same environment with Velero's namespace set to `namespace`.
    pub fn with_velero_namespace(mut self, namespace: &str) -> Environment {
        self.velero_namespace = namespace.to_string();
        self
    }

    /// The same namespace, with variables and files from `source`.
    pub(crate) fn with_source(mut self, source: Arc<dyn Backend<EnvironmentCall>>) -> Environment {
        self.source = source;
        self
    }

    /// Where variables and files come from.
    pub(crate) fn source(&self) -> Arc<dyn Backend<EnvironmentCall>> {
        self.source.clone()
    }

    /// The namespace Velero runs in ("" when unknown).
    pub fn velero_namespace(&self) -> &str {
        &self.velero_namespace
    }

    /// A variable's value, granted or not (the grant is checked by the capability). A source that
    /// cannot answer (a replay without the call) is logged, and the variable reads as unset.
    pub(crate) async fn variable(&self, name: &str) -> Option<String> {
        let call = EnvironmentCall::Variable { name: name.into() };
        match self.source.call(call).await {
            Ok(EnvironmentAnswer::Variable(value)) => value,
            Ok(EnvironmentAnswer::File(_)) => {
                tracing::error!("replay: the recorded answer of variable {name} is a file's");
                None
            }
            Err(e) => {
                tracing::error!("{e}");
                None
            }
        }
    }

    /// The contents of the file `variable` names, granted or not (the grant is checked by the
    /// capability).
    pub(crate) async fn read_file(&self, variable: &str) -> Result<Vec<u8>, String> {
        let call = EnvironmentCall::ReadEnvFile {
            variable: variable.into(),
        };
        match self.source.call(call).await.map_err(|e| e.0)? {
            EnvironmentAnswer::File(contents) => Ok(contents),
            EnvironmentAnswer::Variable(_) => Err(format!(
                "replay: the recorded answer of read-env-file {variable} is not a file's contents"
            )),
        }
    }
}

/// What the `environment` capability sees of a call: who calls, the module's grant (its environment
/// grant), the host's environment, and the work budget it charges.
pub(crate) struct EnvironmentView<'a> {
    pub(super) call: &'a CallId,
    pub(super) caps: &'a ModuleCaps,
    pub(super) environment: &'a Environment,
    pub(super) budget: &'a mut WorkBudget,
}

/// The `environment` import's host functions take an [`EnvironmentView`] of the call.
pub(super) struct EnvironmentHost;

impl wasmtime::component::HasData for EnvironmentHost {
    type Data<'a> = EnvironmentView<'a>;
}

impl EnvironmentView<'_> {
    /// Logs and returns a refusal.
    fn env_denied(&self, what: &str) -> String {
        let message = format!(
            "permission denied: module {} is not granted {what}",
            self.caps.module
        );
        let item = self.call.item();
        crate::capabilities::call_id::warn_unless_shadow!(
            self.call,
            module = &*self.call.module,
            action = self.call.action.as_str(),
            resource = item.map(|i| i.group_resource()).unwrap_or_default(),
            namespace = item.map(|i| i.namespace.as_str()).unwrap_or_default(),
            name = item.map(|i| i.name.as_str()).unwrap_or_default(),
            "{message}"
        );
        crate::metrics::note_denied();
        message
    }
}

/// Reads a regular file of at most [`MAX_FILE`] bytes; larger files, FIFOs and devices are refused
/// (opened without blocking, so a FIFO never holds the call or the process).
async fn read_capped(path: &str, variable: &str) -> Result<Vec<u8>, String> {
    use crate::regular_file::{read, FileError};
    let owned = std::path::PathBuf::from(path);
    let read = tokio::task::spawn_blocking(move || read(&owned, MAX_FILE))
        .await
        .map_err(|e| format!("cannot read {path} (named by {variable}): {e}"))?;
    read.map_err(|e| match e {
        FileError::Io(e) => format!("cannot read {path} (named by {variable}): {e}"),
        FileError::TooLarge(_) => {
            format!("{path} (named by {variable}) is larger than the 1 MiB a module may read")
        }
        other => format!("{path} (named by {variable}) {other}"),
    })
}

impl Host for EnvironmentView<'_> {
    fn velero_namespace(&mut self) -> String {
        self.environment.velero_namespace().to_string()
    }

    async fn variable(&mut self, name: String) -> Result<Option<String>, String> {
        self.budget.charge().map_err(|e| e.to_string())?;
        if !self.caps.env.allows_variable(&name) {
            let name = crate::shown::shown(&name);
            return Err(self.env_denied(&format!("the environment variable {name}")));
        }
        Ok(self.environment.variable(&name).await)
    }

    async fn read_env_file(&mut self, variable: String) -> Result<Vec<u8>, String> {
        self.budget.charge().map_err(|e| e.to_string())?;
        if !self.caps.env.allows_file(&variable) {
            let variable = crate::shown::shown(&variable);
            return Err(self.env_denied(&format!(
                "the file named by the environment variable {variable}"
            )));
        }
        self.environment.read_file(&variable).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn grants_name_variables_exactly_or_by_prefix() {
        let g = EnvGrant::new(
            &strings(&["AZURE_*", "AWS_WEB_IDENTITY_TOKEN_FILE"]),
            &strings(&["AWS_WEB_IDENTITY_TOKEN_FILE"]),
        );
        assert!(g.allows_variable("AZURE_TENANT_ID"));
        assert!(g.allows_variable("AWS_WEB_IDENTITY_TOKEN_FILE"));
        assert!(!g.allows_variable("AWS_WEB_IDENTITY_TOKEN_FILE_2"));
        assert!(!g.allows_variable("HOME"));
        assert!(!g.allows_variable(""));
        assert!(g.allows_file("AWS_WEB_IDENTITY_TOKEN_FILE"));
        assert!(!g.allows_file("AZURE_FEDERATED_TOKEN_FILE"));
        assert!(!EnvGrant::default().allows_variable("PATH"));
    }

    #[test]
    fn grant_entries_are_checked() {
        assert!(EnvGrant::check_entry("AZURE_*", true).is_ok());
        assert!(EnvGrant::check_entry("*", true).is_ok());
        assert!(EnvGrant::check_entry("AZURE_*", false)
            .unwrap_err()
            .contains("exactly"));
        assert!(EnvGrant::check_entry("", true).is_err());
        assert!(EnvGrant::check_entry("A-B", true)
            .unwrap_err()
            .contains("not a variable name"));
        assert!(EnvGrant::check_entry("A*B", true).is_err());
    }

    #[tokio::test]
    #[allow(unsafe_code)] // mkfifo: see the SAFETY comment.
    async fn regular_files_are_read_up_to_one_mebibyte() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("token");
        std::fs::write(&small, b"eyJ.token").unwrap();
        let small = small.to_str().unwrap();
        assert_eq!(read_capped(small, "T").await.unwrap(), b"eyJ.token");
        let exact = dir.path().join("exact");
        std::fs::write(&exact, vec![b'a'; MAX_FILE as usize]).unwrap();
        assert_eq!(
            read_capped(exact.to_str().unwrap(), "T")
                .await
                .unwrap()
                .len(),
            MAX_FILE as usize
        );
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; MAX_FILE as usize + 1]).unwrap();
        let e = read_capped(big.to_str().unwrap(), "T").await.unwrap_err();
        assert!(
            e.contains("larger than the 1 MiB") && e.contains("named by T"),
            "{e}"
        );
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_capped(fifo.to_str().unwrap(), "T").await.unwrap_err();
        assert!(
            e.ends_with("(named by T) is not a regular file (it is a FIFO)"),
            "{e}"
        );
        let e = read_capped("/nonexistent/velero-wasm/token", "T")
            .await
            .unwrap_err();
        assert!(
            e.starts_with("cannot read /nonexistent/velero-wasm/token (named by T): "),
            "{e}"
        );
    }

    #[tokio::test]
    async fn fixed_environments_answer_from_their_map() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "eyJ.token").unwrap();
        let env = Environment::fixed(BTreeMap::from([
            ("A".to_string(), "1".to_string()),
            ("T".to_string(), token.display().to_string()),
            ("EMPTY".to_string(), String::new()),
        ]))
        .with_velero_namespace("openshift-adp");
        assert_eq!(env.variable("A").await.as_deref(), Some("1"));
        assert_eq!(env.variable("B").await, None);
        assert_eq!(env.velero_namespace(), "openshift-adp");
        assert_eq!(env.read_file("T").await.unwrap(), b"eyJ.token");
        for unset in ["B", "EMPTY"] {
            assert_eq!(
                env.read_file(unset).await.unwrap_err(),
                format!("environment variable {unset} is not set")
            );
        }
    }

    mod recorded {
        use super::super::*;
        use crate::capabilities::recording::{
            answer_of, Header, Recorded, Recorder, Recording, Replay, Replayed,
        };
        use serde_json::json;
        use std::time::UNIX_EPOCH;

        #[test]
        fn answers_are_recorded_as_values_bytes_or_errors() {
            let read =
                |v: serde_json::Value| answer_of::<EnvironmentCall>(&v).map_err(|e| e.to_string());
            let recorded = |a: &Result<EnvironmentAnswer, Failure>| match a {
                Ok(answer) => json!({ "ok": answer }),
                Err(error) => json!({ "error": error }),
            };
            assert_eq!(
                read(json!({"ok": "tid-5678"})),
                Ok(Ok(EnvironmentAnswer::Variable(Some("tid-5678".into()))))
            );
            assert_eq!(
                read(json!({"ok": null})),
                Ok(Ok(EnvironmentAnswer::Variable(None)))
            );
            let token = recorded(&Ok(EnvironmentAnswer::File(b"eyJ.token\n".to_vec())));
            assert_eq!(token, json!({"ok": {"text": "eyJ.token\n"}}));
            assert_eq!(
                read(token),
                Ok(Ok(EnvironmentAnswer::File(b"eyJ.token\n".to_vec())))
            );
            let binary = recorded(&Ok(EnvironmentAnswer::File(vec![0xff, 0xfe])));
            assert_eq!(binary, json!({"ok": {"base64": "//4="}}));
            assert_eq!(
                read(binary),
                Ok(Ok(EnvironmentAnswer::File(vec![0xff, 0xfe])))
            );
            let unset = Failure("environment variable T is not set".into());
            let error = recorded(&Err(unset.clone()));
            assert_eq!(
                error,
                json!({"error": {"reason": "other", "message": "environment variable T is not set"}})
            );
            assert_eq!(read(error), Ok(Err(unset.clone())));
            // A recording of an earlier version, whose errors are a bare message, still reads.
            assert_eq!(
                read(json!({"error": "environment variable T is not set"})),
                Ok(Err(unset))
            );
            assert!(read(json!({"error": 3}))
                .unwrap_err()
                .contains("the answer is not {\"ok\": …} or {\"error\""));
            assert!(read(json!({"ok": 3})).is_err());
        }

        #[tokio::test]
        async fn a_recorded_environment_replays_without_the_process_or_files() {
            let dir = tempfile::tempdir().unwrap();
            let token = dir.path().join("token");
            std::fs::write(&token, "eyJ.projected").unwrap();
            let path = dir.path().join("rec.jsonl");
            let header = Header {
                clock_start: UNIX_EPOCH,
                velero_namespace: "velero".into(),
            };
            let recorder = Recorder::create(&path, &header).unwrap();
            let live = Environment::fixed(BTreeMap::from([
                ("AZURE_TENANT_ID".to_string(), "tid".to_string()),
                (
                    "AWS_WEB_IDENTITY_TOKEN_FILE".to_string(),
                    token.display().to_string(),
                ),
            ]));
            let recording = live
                .clone()
                .with_source(Arc::new(Recorded::new(live.source(), recorder.clone())));
            assert_eq!(
                recording.variable("AZURE_TENANT_ID").await.as_deref(),
                Some("tid")
            );
            assert_eq!(recording.variable("AZURE_CLIENT_ID").await, None);
            assert_eq!(
                recording.read_file("AWS_WEB_IDENTITY_TOKEN_FILE").await,
                Ok(b"eyJ.projected".to_vec())
            );
            let unset = recording.read_file("AZURE_FEDERATED_TOKEN_FILE").await;
            assert_eq!(
                unset,
                Err("environment variable AZURE_FEDERATED_TOKEN_FILE is not set".into())
            );
            recorder.finish().unwrap();
            std::fs::remove_file(&token).unwrap();

            let replay = Replay::new(Recording::read(&path).unwrap());
            let replayed = Environment::new(
                "velero",
                Arc::new(Replayed::<EnvironmentCall>::new(&replay).unwrap()),
            );
            assert_eq!(
                replayed.variable("AZURE_TENANT_ID").await.as_deref(),
                Some("tid")
            );
            assert_eq!(replayed.variable("AZURE_CLIENT_ID").await, None);
            assert_eq!(
                replayed.read_file("AWS_WEB_IDENTITY_TOKEN_FILE").await,
                Ok(b"eyJ.projected".to_vec()),
                "the file is gone: the answer is the recording's"
            );
            assert_eq!(
                replayed.read_file("AZURE_FEDERATED_TOKEN_FILE").await,
                unset
            );
            assert!(replay.misses().is_empty());

            // Calls not recorded: unset, an error, and both kept as misses.
            assert_eq!(replayed.variable("HOME").await, None);
            let e = replayed
                .read_file("AWS_WEB_IDENTITY_TOKEN_FILE")
                .await
                .unwrap_err();
            assert!(
                e.starts_with("replay: the call read-env-file AWS_WEB_IDENTITY_TOKEN_FILE is not in the recording"),
                "{e}"
            );
            assert_eq!(
                replay.misses(),
                vec![
                    "environment: variable HOME",
                    "environment: read-env-file AWS_WEB_IDENTITY_TOKEN_FILE"
                ]
            );
        }
    }
}
