//! What a person at a terminal sees while a module compiles: nothing for a compile that ends within a
//! second (every Rust module), else a line saying which module and that it happens once, a line every
//! 15 seconds while it goes on, and how long it took (an 18 MB Python module: seconds on a release
//! host, a minute or two on a debug one).

use std::collections::HashMap;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::runtime::CompileWatch;

/// How long a compile goes unmentioned.
const QUIET: Duration = Duration::from_secs(1);
/// How often a long compile is mentioned again (and `build`'s componentize-py or -js run).
pub(super) const EVERY: Duration = Duration::from_secs(15);

/// The watch the CLI's runtimes get: one that writes to stderr when it is a terminal, none otherwise
/// (a pipe or a CI log gets the debug line the runtime logs).
pub(super) fn watch() -> Option<Arc<dyn CompileWatch>> {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal().then(|| {
        Arc::new(TerminalWatch::new(QUIET, EVERY, |line| eprintln!("{line}")))
            as Arc<dyn CompileWatch>
    })
}

/// Where a line goes.
type Sink = Arc<dyn Fn(String) + Send + Sync>;

/// Compiles under way, each with the sender whose drop ends its lines.
struct TerminalWatch {
    quiet: Duration,
    every: Duration,
    sink: Sink,
    running: Mutex<HashMap<String, Sender<()>>>,
}

impl CompileWatch for TerminalWatch {
    fn started(&self, module: &str, bytes: usize) {
        let (done, wait) = mpsc::channel::<()>();
        let name = super::text::printable(module).into_owned();
        let start = Instant::now();
        let (quiet, every, say) = (self.quiet, self.every, self.sink.clone());
        let spawned = std::thread::Builder::new()
            .name("vw-compile-progress".into())
            .spawn(move || {
                let mut timeout = quiet;
                let mut shown = false;
                loop {
                    match wait.recv_timeout(timeout) {
                        Err(RecvTimeoutError::Timeout) if !shown => say(format!(
                            "velero-wasm: compiling module {name} ({:.1} MB), once: later runs read it from the compile cache…",
                            bytes as f64 / 1e6
                        )),
                        Err(RecvTimeoutError::Timeout) => say(format!(
                            "velero-wasm: still compiling module {name} ({} s)",
                            start.elapsed().as_secs()
                        )),
                        _ if shown => {
                            say(format!(
                                "velero-wasm: compiled module {name} in {:.1} s",
                                start.elapsed().as_secs_f64()
                            ));
                            return;
                        }
                        _ => return,
                    }
                    shown = true;
                    timeout = every;
                }
            });
        if spawned.is_ok() {
            self.lock().insert(module.to_string(), done);
        }
    }

    fn finished(&self, module: &str) {
        self.lock().remove(module);
    }
}

impl TerminalWatch {
    fn new(
        quiet: Duration,
        every: Duration,
        sink: impl Fn(String) + Send + Sync + 'static,
    ) -> Self {
        TerminalWatch {
            quiet,
            every,
            sink: Arc::new(sink),
            running: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Sender<()>>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch whose lines are kept, and those lines.
    fn recorded(quiet_ms: u64, every_ms: u64) -> (TerminalWatch, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        let watch = TerminalWatch::new(
            Duration::from_millis(quiet_ms),
            Duration::from_millis(every_ms),
            move |line| kept.lock().unwrap().push(line),
        );
        (watch, lines)
    }

    /// Waits (at most 10 s) until `lines` holds `n` lines, and returns them.
    fn lines_once(lines: &Mutex<Vec<String>>, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while lines.lock().unwrap().len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        lines.lock().unwrap().clone()
    }

    #[test]
    fn a_long_compile_says_which_module_then_goes_on_saying_then_how_long() {
        let (watch, lines) = recorded(10, 20);
        watch.started("python-module", 18_865_140);
        let said = lines_once(&lines, 2);
        watch.finished("python-module");
        let said_all = lines_once(&lines, said.len() + 1);
        assert!(
            said_all[0].starts_with("velero-wasm: compiling module python-module (18.9 MB), once:"),
            "{said_all:?}"
        );
        assert!(said_all[1].starts_with("velero-wasm: still compiling module python-module ("));
        assert!(
            said_all
                .last()
                .unwrap()
                .starts_with("velero-wasm: compiled module python-module in "),
            "{said_all:?}"
        );
        assert!(watch.lock().is_empty());
    }

    #[test]
    fn a_compile_over_within_the_quiet_time_says_nothing() {
        let (watch, lines) = recorded(60_000, 60_000);
        watch.started("rust-module", 180_000);
        watch.finished("rust-module");
        // A compile the runtime never announced is no error.
        watch.finished("never-started");
        std::thread::sleep(Duration::from_millis(50));
        assert!(lines.lock().unwrap().is_empty());
        assert!(watch.lock().is_empty());
    }
}
