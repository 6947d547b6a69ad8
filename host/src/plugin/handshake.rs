//! go-plugin's start-up, as a Velero plugin sees it (docs/plugin-protocol.md#s3–#s4): the magic cookie, the arguments
//! Velero passes (which we mostly ignore), a fresh Unix socket, and the handshake line on stdout.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

use crate::cluster::live::{BadFlag, RateLimit};
use crate::config::HandshakeSettings;

/// The go-plugin magic cookie Velero sets: `VELERO_PLUGIN=hello`.
pub use crate::config::VELERO_PLUGIN as COOKIE_KEY;
/// The cookie's value.
pub const COOKIE_VALUE: &str = "hello";
/// go-plugin's core protocol version (field 1 of the handshake line).
pub(crate) const CORE_PROTOCOL_VERSION: u32 = 1;
/// Velero's application protocol version (field 2).
pub(crate) const APP_PROTOCOL_VERSION: u32 = 2;

/// What the command line says, as far as we care: everything else Velero passes is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginArgs {
    /// `argv[0]`, verbatim: Velero re-executes exactly this (ListPlugins' `command`).
    pub(crate) command: String,
    /// `--log-level` (Velero's spelling: trace, debug, info, warning, error, fatal, panic); `info` by default.
    pub(crate) log_level: String,
    /// `--features`, comma-separated, if given.
    pub(crate) features: Vec<String>,
    /// `--client-qps` of `velero server`, as given (Velero 1.15+ passes it on when the operator set it).
    pub(crate) client_qps: Option<String>,
    /// `--client-burst` of `velero server`, as given.
    pub(crate) client_burst: Option<String>,
}

impl PluginArgs {
    /// Reads the arguments Velero passes, in any of the forms it uses: `--flag value`, `--flag=value`
    /// and bare booleans, mixed. Unknown flags and stray values are ignored, never an error.
    pub(crate) fn parse(args: &[OsString]) -> PluginArgs {
        let command = args
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tokens: Vec<String> = args
            .iter()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut log_level = None;
        let mut features = None;
        let mut client_qps = None;
        let mut client_burst = None;
        let mut i = 0;
        while i < tokens.len() {
            let token = tokens[i].as_str();
            for (flag, slot) in [
                ("--log-level", &mut log_level),
                ("--features", &mut features),
                ("--client-qps", &mut client_qps),
                ("--client-burst", &mut client_burst),
            ] {
                if token == flag {
                    if let Some(value) = tokens.get(i + 1) {
                        *slot = Some(value.clone());
                        i += 1;
                    }
                } else if let Some(value) = token
                    .strip_prefix(flag)
                    .and_then(|rest| rest.strip_prefix('='))
                {
                    *slot = Some(value.to_string());
                }
            }
            i += 1;
        }
        PluginArgs {
            command,
            log_level: log_level
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| "info".to_string()),
            features: features
                .map(|f| {
                    f.split(',')
                        .map(str::trim)
                        .filter(|f| !f.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
            client_qps,
            client_burst,
        }
    }

    /// The client-side rate limit of the Kubernetes client: Velero's own, when Velero passed
    /// `--client-qps` or `--client-burst`; none otherwise. A value that does not parse is an error.
    pub(crate) fn rate_limit(&self) -> Result<Option<RateLimit>, BadFlag> {
        RateLimit::from_flags(self.client_qps.as_deref(), self.client_burst.as_deref())
    }
}

/// Why the process will not serve as a plugin.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// The cookie is absent or wrong: a person ran the binary.
    #[error(
        "this binary is a Velero plugin: Velero starts it from its plugin directory with {COOKIE_KEY}={COOKIE_VALUE}. \
         It is not meant to be executed directly; for the command-line tool, run `velero-wasm --help`"
    )]
    NoCookie,
    /// AutoMTLS was asked for; Velero never does, and velero-wasm does not implement it.
    #[error("PLUGIN_CLIENT_CERT is set: go-plugin's automatic mTLS is not supported by velero-wasm (Velero never enables it)")]
    AutoMtls,
    /// No socket could be created.
    #[error("cannot listen on a Unix socket in {dir}: {source}")]
    Listen {
        /// The directory tried.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// stdout is gone.
    #[error("cannot write the handshake line to stdout: {0}")]
    Stdout(#[source] std::io::Error),
    /// `PLUGIN_UNIX_SOCKET_GROUP` names no group, or the socket cannot be handed to it.
    #[error("PLUGIN_UNIX_SOCKET_GROUP={group:?}: {reason}")]
    SocketGroup {
        /// The variable's value.
        group: String,
        /// Why it cannot be used.
        #[source]
        reason: GroupError,
    },
}

/// Why a group name cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GroupError {
    /// The name has a NUL byte.
    #[error("a group name has no NUL byte")]
    Nul,
    /// The group database has no such group.
    #[error("no group of that name exists")]
    Unknown,
    /// The socket cannot be handed to the group.
    #[error("cannot hand the socket to the group: {0}")]
    Chown(#[source] std::io::Error),
    /// The group database cannot be read.
    #[error("the group database cannot be read: {0}")]
    Database(#[source] std::io::Error),
}

/// Checks the magic cookie and the environment a go-plugin client sets.
pub(crate) fn check_environment(settings: &HandshakeSettings) -> Result<(), StartError> {
    if settings.cookie.as_deref() != Some(COOKIE_VALUE) {
        return Err(StartError::NoCookie);
    }
    if settings.client_cert.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(StartError::AutoMtls);
    }
    Ok(())
}

/// The directory for the socket: `$PLUGIN_UNIX_SOCKET_DIR`, else the temp dir (`$TMPDIR`, else `/tmp`).
pub(crate) fn socket_dir(settings: &HandshakeSettings) -> PathBuf {
    match settings.socket_dir.clone().filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        // What `std::env::temp_dir` reads, from the settings given.
        None => PathBuf::from(
            settings
                .tmpdir
                .clone()
                .unwrap_or_else(|| "/tmp".to_string()),
        ),
    }
}

/// The socket's permissions: only our user (Velero's) may connect.
pub(crate) const SOCKET_MODE: u32 = 0o600;
/// The socket's permissions when the client named a group (`PLUGIN_UNIX_SOCKET_GROUP`): that group
/// may connect too, as with a Go plugin.
pub(crate) const GROUP_SOCKET_MODE: u32 = 0o660;

/// Whether the client asked for gRPC broker multiplexing (`PLUGIN_MULTIPLEX_GRPC`, any non-empty value,
/// as a Go server reads it). Velero never does; go-plugin 1.6 and later clients may. We do not
/// multiplex the broker (Velero's plugins never use the broker), so the handshake line says so.
pub(crate) fn multiplex_asked(settings: &HandshakeSettings) -> bool {
    settings
        .multiplex_grpc
        .as_ref()
        .is_some_and(|v| !v.is_empty())
}

/// The group the socket must be handed to (`PLUGIN_UNIX_SOCKET_GROUP`, a group name or a numeric id,
/// as go-plugin accepts), or `None` when the variable is unset or empty. Velero never sets it; a
/// go-plugin client that runs plugins as another user of a shared group does.
pub(crate) fn socket_group(settings: &HandshakeSettings) -> Result<Option<u32>, StartError> {
    let Some(group) = settings.socket_group.clone().filter(|g| !g.is_empty()) else {
        return Ok(None);
    };
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(Some(gid));
    }
    group_id(&group)
        .map(Some)
        .map_err(|reason| StartError::SocketGroup { group, reason })
}

/// The id of the group named `name`, from the system's group database.
fn group_id(name: &str) -> Result<u32, GroupError> {
    let c_name = std::ffi::CString::new(name).map_err(|_| GroupError::Nul)?;
    let mut buffer = vec![0u8; 1024];
    loop {
        // SAFETY: every pointer is valid for the call: `c_name` is NUL-terminated, `group` and
        // `found` are local, and `buffer` is writable for the length passed. The strings getgrnam_r
        // stores in `group` point into `buffer` and are not read after it.
        #[allow(unsafe_code)]
        let (code, found) = unsafe {
            let mut group: libc::group = std::mem::zeroed();
            let mut found: *mut libc::group = std::ptr::null_mut();
            let code = libc::getgrnam_r(
                c_name.as_ptr(),
                &mut group,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut found,
            );
            (code, (!found.is_null()).then_some(group.gr_gid))
        };
        match (code, found) {
            (libc::ERANGE, _) if buffer.len() < 1 << 20 => buffer.resize(buffer.len() * 4, 0),
            (0, Some(gid)) => return Ok(gid),
            (0, None) => return Err(GroupError::Unknown),
            (code, _) => {
                return Err(GroupError::Database(std::io::Error::from_raw_os_error(
                    code,
                )))
            }
        }
    }
}

/// The path of our Unix socket; the socket file is removed when this is dropped.
pub(crate) struct Socket {
    /// The path.
    pub(crate) path: PathBuf,
}

impl Socket {
    /// Binds a new socket at a fresh path `<dir>/plugin<random digits>`, trying other names if one is
    /// taken, with [`SOCKET_MODE`] whatever the umask — or, given a `group`, handed to that group with
    /// [`GROUP_SOCKET_MODE`]. The listener accepts connections from now on.
    ///
    /// The socket is never reachable with wider permissions than these, not even for a moment: it is
    /// bound in a private directory made for it in `dir` ([`Staging`], mode 0700, which nobody else
    /// may enter, so nobody else may connect), given its group and mode there, and only then moved to
    /// its name in `dir`, without replacing anything there (`RENAME_NOREPLACE`). Setting the umask
    /// around `bind` would do it too, but the umask belongs to the whole process, which has threads by
    /// now (tokio's workers, wasmtime's, the module loading): a file or directory one of them created
    /// meanwhile would get the socket's umask (a directory without its owner's search bit, say).
    pub(crate) fn bind(
        dir: &Path,
        group: Option<u32>,
    ) -> Result<(UnixListener, Socket), StartError> {
        use std::os::unix::fs::PermissionsExt;
        let listen = |source| StartError::Listen {
            dir: dir.to_path_buf(),
            source,
        };
        let staging = Staging::create(dir).map_err(listen)?;
        let staged = staging.0.join("s");
        let listener = UnixListener::bind(&staged).map_err(listen)?;
        if let Some(gid) = group {
            std::os::unix::fs::chown(&staged, None, Some(gid)).map_err(|e| {
                StartError::SocketGroup {
                    group: gid.to_string(),
                    reason: GroupError::Chown(e),
                }
            })?;
        }
        let mode = if group.is_some() {
            GROUP_SOCKET_MODE
        } else {
            SOCKET_MODE
        };
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode)).map_err(listen)?;
        let mut last = None;
        for _ in 0..16 {
            let path = dir.join(format!("plugin{}", random_digits()));
            match move_without_replacing(&staged, &path) {
                Ok(()) => return Ok((listener, Socket { path })),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(source) => return Err(listen(source)),
            }
        }
        Err(listen(last.unwrap_or_else(|| {
            std::io::Error::other("every name tried was taken")
        })))
    }
}

/// A private directory (mode 0700) in the socket directory, where the socket is bound and given its
/// permissions before it gets its name; removed, with the socket if it is still there, when dropped.
struct Staging(PathBuf);

impl Staging {
    fn create(dir: &Path) -> std::io::Result<Staging> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        for _ in 0..16 {
            let path = dir.join(format!(".plugin{}", random_digits()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let staging = Staging(path);
                    // The umask may have taken bits from 0700 (never added any): made exactly 0700,
                    // through a handle of the directory just made, never through a link.
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
                        .open(&staging.0)?
                        .set_permissions(std::fs::Permissions::from_mode(0o700))?;
                    return Ok(staging);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other(
            "every name tried for a private directory was taken",
        ))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Renames `from` to `to`, failing with `AlreadyExists` if `to` exists. Where the file system cannot
/// rename without replacing, a hard link (which never replaces) then the removal of `from`.
fn move_without_replacing(from: &Path, to: &Path) -> std::io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn random_digits() -> u64 {
    let mut bytes = [0u8; 4];
    if getrandom::fill(&mut bytes).is_err() {
        // Without the OS's randomness, the process id and the time are unique enough for a name.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        return u64::from(std::process::id()) * 1_000_000_000 + u64::from(nanos);
    }
    u64::from(u32::from_le_bytes(bytes))
}

/// The handshake line: `1|2|unix|<path>|grpc|` (the empty 6th field is the unused server certificate).
/// When the client asked for broker multiplexing ([`multiplex_asked`]) a 7th field answers it, as only
/// such a client reads one: `false`, so a go-plugin client that requires it stops with its own
/// "plugin does not support the feature" error instead of misreading the connection.
pub(crate) fn line(socket_path: &Path, multiplex_asked: bool) -> String {
    let mut line = format!(
        "{CORE_PROTOCOL_VERSION}|{APP_PROTOCOL_VERSION}|unix|{}|grpc|",
        socket_path.display()
    );
    if multiplex_asked {
        line.push_str("|false");
    }
    line
}

/// Writes the handshake line to stdout and flushes it. Nothing else is ever written to stdout.
pub(crate) fn announce(socket_path: &Path, multiplex_asked: bool) -> Result<(), StartError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", line(socket_path, multiplex_asked))
        .and_then(|()| out.flush())
        .map_err(StartError::Stdout)
}

/// Whether the client accepts our application protocol version (`PLUGIN_PROTOCOL_VERSIONS`). Like a Go
/// server, we announce ours regardless and let the client decide; this is only for a debug line.
pub(crate) fn client_accepts_v2(versions: Option<&str>) -> bool {
    versions.is_none_or(|v| {
        v.split(',')
            .any(|v| v.trim() == APP_PROTOCOL_VERSION.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn args(list: &[&str]) -> PluginArgs {
        let v: Vec<OsString> = list.iter().map(OsString::from).collect();
        PluginArgs::parse(&v)
    }

    #[test]
    fn velero_1_14_arguments() {
        let a = args(&[
            "/plugins/velero-wasm",
            "--log-level",
            "debug",
            "--features",
            "EnableCSI,EnableAPIGroupVersions",
        ]);
        assert_eq!(a.command, "/plugins/velero-wasm");
        assert_eq!(a.log_level, "debug");
        assert_eq!(a.features, ["EnableCSI", "EnableAPIGroupVersions"]);
    }

    #[test]
    fn velero_1_15_arguments_mix_every_form() {
        let a = args(&[
            "/plugins/velero-wasm",
            "--uploader-type=kopia",
            "--features=EnableCSI",
            "--restore-only",
            "--log-level=warning",
            "--foo",
            "bar",
            "-x",
        ]);
        assert_eq!(a.log_level, "warning");
        assert_eq!(a.features, ["EnableCSI"]);
    }

    #[test]
    fn velero_s_client_rate_limit_is_honoured_in_both_forms() {
        let a = args(&[
            "p",
            "--client-qps=5",
            "--restore-only",
            "--client-burst",
            "1",
        ]);
        assert_eq!(a.rate_limit(), Ok(Some(RateLimit { qps: 5.0, burst: 1 })));
        // Velero's server defaults fill in the flag not given: the plugin runs at the server's rate.
        assert_eq!(
            args(&["p", "--client-qps", "2.5"]).rate_limit(),
            Ok(Some(RateLimit {
                qps: 2.5,
                burst: 30
            }))
        );
        assert_eq!(
            args(&["p", "--client-burst=100"]).rate_limit(),
            Ok(Some(RateLimit {
                qps: 20.0,
                burst: 100
            }))
        );
        // Without either, no limit of our own; a rate that is not positive is no limit, as in client-go.
        assert_eq!(args(&["p", "--log-level=debug"]).rate_limit(), Ok(None));
        assert_eq!(args(&["p", "--client-qps=0"]).rate_limit(), Ok(None));
        assert!(args(&["p", "--client-qps=fast"])
            .rate_limit()
            .unwrap_err()
            .to_string()
            .contains("--client-qps"));
        assert!(args(&["p", "--client-burst=1.5"])
            .rate_limit()
            .unwrap_err()
            .to_string()
            .contains("--client-burst"));
    }

    #[test]
    fn defaults_without_arguments() {
        let a = args(&["velero-wasm"]);
        assert_eq!(a.log_level, "info");
        assert!(a.features.is_empty());
        let a = args(&["velero-wasm", "--log-level"]);
        assert_eq!(a.log_level, "info", "a flag without its value is ignored");
        assert_eq!(args(&[]).command, "");
    }

    #[test]
    fn the_cookie_must_be_hello() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            Config::from_vars(pairs.iter().copied()).handshake()
        };
        assert!(check_environment(&env(&[("VELERO_PLUGIN", "hello")])).is_ok());
        assert!(matches!(
            check_environment(&env(&[])),
            Err(StartError::NoCookie)
        ));
        assert!(matches!(
            check_environment(&env(&[("VELERO_PLUGIN", "bye")])),
            Err(StartError::NoCookie)
        ));
        assert!(matches!(
            check_environment(&env(&[
                ("VELERO_PLUGIN", "hello"),
                ("PLUGIN_CLIENT_CERT", "pem")
            ])),
            Err(StartError::AutoMtls)
        ));
    }

    #[test]
    fn the_line_has_the_fields_go_plugin_expects() {
        assert_eq!(
            line(Path::new("/tmp/plugin42"), false),
            "1|2|unix|/tmp/plugin42|grpc|"
        );
        assert_eq!(
            line(Path::new("/tmp/plugin42"), true),
            "1|2|unix|/tmp/plugin42|grpc||false"
        );
        let env = |v: &'static str| Config::from_vars([("PLUGIN_MULTIPLEX_GRPC", v)]).handshake();
        assert!(multiplex_asked(&env("true")));
        assert!(
            multiplex_asked(&env("false")),
            "a Go server answers whatever the value"
        );
        assert!(!multiplex_asked(&env("")));
        assert!(client_accepts_v2(Some("2")));
        assert!(client_accepts_v2(Some("1, 2")));
        assert!(!client_accepts_v2(Some("1")));
        assert!(client_accepts_v2(None));
    }

    #[tokio::test]
    async fn sockets_get_fresh_names_and_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (_listener_a, a) = Socket::bind(dir.path(), None).unwrap();
        let (_listener_b, b) = Socket::bind(dir.path(), None).unwrap();
        assert_ne!(a.path, b.path);
        assert!(a
            .path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("plugin"));
        assert_eq!(
            socket_dir(&HandshakeSettings {
                socket_dir: Some(dir.path().display().to_string()),
                ..HandshakeSettings::default()
            }),
            dir.path()
        );
        let path = a.path.clone();
        assert!(path.exists());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            SOCKET_MODE
        );
        drop(a);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_socket_group_gets_the_socket_and_group_access() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        #[allow(unsafe_code)]
        // SAFETY: getgid has no preconditions.
        let gid = unsafe { libc::getgid() };
        let (_listener, socket) = Socket::bind(dir.path(), Some(gid)).unwrap();
        let meta = std::fs::metadata(&socket.path).unwrap();
        assert_eq!(meta.gid(), gid);
        assert_eq!(meta.permissions().mode() & 0o777, GROUP_SOCKET_MODE);
    }

    #[test]
    fn socket_groups_are_numbers_or_names() {
        let env =
            |v: &'static str| Config::from_vars([("PLUGIN_UNIX_SOCKET_GROUP", v)]).handshake();
        assert_eq!(socket_group(&env("")).unwrap(), None);
        assert_eq!(socket_group(&HandshakeSettings::default()).unwrap(), None);
        assert_eq!(socket_group(&env("1234")).unwrap(), Some(1234));
        assert_eq!(socket_group(&env("root")).unwrap(), Some(0));
        let e = socket_group(&env("no-such-group-velero-wasm"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("PLUGIN_UNIX_SOCKET_GROUP=\"no-such-group-velero-wasm\": no group"),
            "{e}"
        );
    }
}
