//! Starting the `velero-wasm` binary from a test: [`hermetic`] is the environment every start gets
//! (plugin mode, in [`super::plugin`], and the CLI), and [`Run`] builds one CLI invocation (`run`, or
//! any other subcommand) and reads what it answered.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_velero-wasm")
}

/// Variables the binary reads that whatever runs the tests may have set (a CI pod, a developer's
/// shell): a test that wants one sets it itself.
const INHERITED: &[&str] = &[
    "VELERO_PLUGIN",
    "VELERO_WASM_MODULES",
    "VELERO_WASM_STOCK",
    "VELERO_WASM_TRUSTED_KEYS",
    "VELERO_WASM_KINDS",
    "VELERO_WASM_OCI_PULL_SECRETS",
    "VELERO_NAMESPACE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_ID",
    "AZURE_CLOUD_NAME",
    "AZURE_FEDERATED_TOKEN_FILE",
];

/// Makes `command` hermetic: none of the inherited variables the binary reads, and module ConfigMaps
/// off (a CI pod sets KUBERNETES_SERVICE_HOST; they are read only where a test turns them on), and so
/// is the state a plugin writes on them: the loopback API server's server-side apply replaces a whole
/// object, and a first write changes a ConfigMap's resourceVersion, which tests of the module cache
/// count on (tests/configmap_state.rs turns it on, against the real kube-apiserver).
pub fn hermetic(command: &mut Command) -> &mut Command {
    for var in INHERITED {
        command.env_remove(var);
    }
    command
        .env("VELERO_WASM_CONFIGMAPS", "off")
        .env("VELERO_WASM_CONFIGMAP_STATE", "off")
}

/// One CLI invocation of the binary, built up: `Run::new(action)` for `velero-wasm run --action
/// ACTION`, `Run::cli(args)` for anything else. Paths given to [`Run::path`] and the flags built on
/// it are taken relative to [`Run::fixtures`] when it is set.
pub struct Run {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    fixtures: PathBuf,
    dir: Option<PathBuf>,
    no_additional_items: bool,
}

impl Run {
    /// `velero-wasm run --action ACTION`.
    pub fn new(action: &str) -> Run {
        Run::cli(["run", "--action", action])
    }

    /// `velero-wasm ARGS…`.
    pub fn cli<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Run {
        Run {
            program: PathBuf::from(binary()),
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            env: Vec::new(),
            fixtures: PathBuf::new(),
            dir: None,
            no_additional_items: false,
        }
    }

    /// Runs `binary` instead of the one under test (an installed copy of it).
    pub fn program(mut self, binary: impl AsRef<Path>) -> Run {
        self.program = binary.as_ref().to_path_buf();
        self
    }

    /// The directory relative paths are taken from.
    pub fn fixtures(mut self, dir: impl AsRef<Path>) -> Run {
        self.fixtures = dir.as_ref().to_path_buf();
        self
    }

    /// Makes [`Run::done`] check that an item call returns no additional items.
    pub fn without_additional_items(mut self) -> Run {
        self.no_additional_items = true;
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Run {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<S: AsRef<OsStr>>(self, args: impl IntoIterator<Item = S>) -> Run {
        args.into_iter().fold(self, Run::arg)
    }

    /// `flag PATH`, with `path` taken relative to the fixtures directory.
    pub fn path(self, flag: &str, path: impl AsRef<Path>) -> Run {
        let path = self.fixtures.join(path);
        self.arg(flag).arg(path)
    }

    /// `--item PATH`.
    pub fn item(self, path: impl AsRef<Path>) -> Run {
        self.path("--item", path)
    }

    /// `--cluster PATH` for each path: the fixture cluster holds the objects of them all.
    pub fn cluster<P: AsRef<Path>>(self, paths: &[P]) -> Run {
        paths.iter().fold(self, |run, p| run.path("--cluster", p))
    }

    /// `--modules DIR`.
    pub fn modules(self, dir: impl AsRef<Path>) -> Run {
        self.arg("--modules").arg(dir.as_ref())
    }

    /// `--now TIME`: the clock of the run.
    pub fn now(self, time: &str) -> Run {
        self.arg("--now").arg(time)
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Run {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(self, vars: &[(K, V)]) -> Run {
        vars.iter().fold(self, |run, (k, v)| run.env(k, v))
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Run {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Runs in `dir` (relative paths in arguments are then the binary's own to resolve).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Run {
        self.dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The command, hermetic, for a test that spawns it itself.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        hermetic(&mut command).args(&self.args);
        for (key, value) in &self.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        command
    }

    /// Runs to the end.
    pub fn output(self) -> Output {
        self.command().output().expect("run velero-wasm")
    }

    /// Runs, expecting success; the JSON it printed.
    pub fn done(self) -> Value {
        let item_call = self.no_additional_items && self.args.iter().any(|a| a == "--item");
        let output = self.output();
        assert_eq!(
            output.status.code(),
            Some(0),
            "expected success: {}",
            super::stderr(&output)
        );
        let out = super::stdout_json(&output);
        if item_call {
            assert_eq!(out["additionalItems"], json!([]), "{out:#}");
        }
        out
    }

    /// Runs, expecting the action to fail (exit 1); returns its message.
    pub fn fails(self) -> String {
        failure(&self.output())
    }
}

/// The message of a run that failed (exit 1): its last stderr line, without the `velero-wasm run: `
/// prefix.
pub fn failure(output: &Output) -> String {
    let stderr = super::stderr(output);
    assert_eq!(output.status.code(), Some(1), "expected failure: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    last.strip_prefix("velero-wasm run: ")
        .unwrap_or(last)
        .to_string()
}
