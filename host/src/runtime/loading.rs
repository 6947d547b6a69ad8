//! Which modules are still loading, so that a call waits for the module it needs and no other.
//!
//! A plugin puts the stock modules in service, reads every other source (module directory, module
//! ConfigMaps), and then knows which module names are still to come: from then on a call to an action
//! whose module is in service and not about to be replaced runs at once, while the others compile. A
//! call to an action of a module still loading waits for that module (and asks for it to load next); a
//! call to an action no module in service provides waits until loading is over, since any module still
//! to come may provide it. The names still to come can be known before every source is read whole: a
//! plugin names every module its ConfigMaps label as soon as they are listed, so the stock modules
//! serve while artifacts are pulled.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tokio::sync::watch;

/// Where loading is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    /// Every source has been read: `pending` names all that is still to come.
    known: bool,
    /// Modules still to load (or to fall back), by name.
    pending: BTreeSet<String>,
    /// Loading is over.
    done: bool,
}

/// The loading progress of a runtime.
#[derive(Debug)]
pub(crate) struct Loading {
    state: watch::Sender<State>,
    /// Modules a call is waiting for, in the order asked: the loader takes these first.
    wanted: Mutex<Vec<String>>,
}

impl Default for Loading {
    /// Nothing loading (a runtime whose modules are loaded before anyone calls it).
    fn default() -> Loading {
        Loading {
            state: watch::Sender::new(State {
                known: true,
                pending: BTreeSet::new(),
                done: true,
            }),
            wanted: Mutex::new(Vec::new()),
        }
    }
}

impl Loading {
    /// Loading starts: calls wait until the sources are known.
    pub(crate) fn begin(&self) {
        self.state.send_replace(State {
            known: false,
            pending: BTreeSet::new(),
            done: false,
        });
    }

    /// These modules, and no others, are still to come (or may be: a plugin says so once its sources
    /// are listed, before they are pulled and read, and again with the exact names once they are).
    pub(crate) fn known(&self, pending: BTreeSet<String>) {
        self.state.send_modify(|s| {
            s.known = true;
            s.pending = pending;
        });
    }

    /// A module is in service (or has fallen back, or is refused): its callers may go on.
    pub(crate) fn settled(&self, module: &str) {
        self.state.send_if_modified(|s| s.pending.remove(module));
    }

    /// Loading is over, whatever happened.
    pub(crate) fn finish(&self) {
        self.state.send_modify(|s| {
            s.known = true;
            s.pending.clear();
            s.done = true;
        });
    }

    /// Waits until every source has been read (or loading is over).
    pub(crate) async fn sources_known(&self) {
        let _ = self.state.subscribe().wait_for(|s| s.known || s.done).await;
    }

    /// Waits until loading is over.
    pub(crate) async fn all_done(&self) {
        let _ = self.state.subscribe().wait_for(|s| s.done).await;
    }

    /// Waits until a call to `action` can be served as it will stay: `module_of` says which module in
    /// service provides it now, if any.
    pub(crate) async fn ready_for(&self, action: &str, module_of: impl Fn(&str) -> Option<String>) {
        let mut state = self.state.subscribe();
        loop {
            {
                let now = state.borrow_and_update();
                if now.done {
                    return;
                }
                if now.known {
                    match module_of(action) {
                        Some(module) if !now.pending.contains(&module) => return,
                        Some(module) => self.want(module),
                        None => {}
                    }
                }
            }
            if state.changed().await.is_err() {
                return;
            }
        }
    }

    fn want(&self, module: String) {
        let mut wanted = self.wanted.lock().unwrap_or_else(|e| e.into_inner());
        if !wanted.contains(&module) {
            wanted.push(module);
        }
    }

    /// Of `candidates` (module names, in the loader's order), the index of the one to load next: the
    /// first a call is waiting for, else the first.
    pub(crate) fn next(&self, candidates: &[&str]) -> usize {
        let wanted = self.wanted.lock().unwrap_or_else(|e| e.into_inner());
        wanted
            .iter()
            .find_map(|w| candidates.iter().position(|c| c == w))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    async fn finishes(task: &tokio::task::JoinHandle<()>) -> bool {
        tokio::time::sleep(Duration::from_millis(30)).await;
        task.is_finished()
    }

    #[tokio::test]
    async fn a_call_waits_for_its_own_module_only_and_an_unknown_action_for_all() {
        let loading = Arc::new(Loading::default());
        loading.begin();
        let in_service = |action: &str| match action {
            "stock/a" => Some("stock".to_string()),
            "old/b" => Some("updated".to_string()),
            _ => None,
        };
        let spawn = |action: &'static str| {
            let loading = loading.clone();
            tokio::spawn(async move { loading.ready_for(action, in_service).await })
        };
        let (stock, updated, unknown) = (spawn("stock/a"), spawn("old/b"), spawn("new/c"));
        assert!(
            !finishes(&stock).await,
            "nothing runs before the sources are known"
        );

        loading.known(["updated".to_string(), "brand-new".to_string()].into());
        assert!(
            finishes(&stock).await,
            "a module not being replaced serves at once"
        );
        assert!(!finishes(&updated).await);
        assert_eq!(
            loading.next(&["brand-new", "updated"]),
            1,
            "asked for first"
        );

        loading.settled("updated");
        assert!(finishes(&updated).await);
        assert!(
            !finishes(&unknown).await,
            "any module to come may provide it"
        );
        loading.settled("brand-new");
        assert!(!finishes(&unknown).await, "until loading is over");
        loading.finish();
        assert!(finishes(&unknown).await);
    }
}
