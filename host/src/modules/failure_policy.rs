//! What a module's failure policy says happens when its new version cannot be loaded (a pull that
//! failed with nothing kept, a refused signature, a broken update): serve its last good copy, serve
//! what serves under its name without it (the stock module), or refuse its actions, so that the items
//! they would have handled fail instead of being handled by a module the operator did not choose
//! (docs/modules.md#s2-3).
//!
//! A manifest says it (`on-failure = "refuse"`, signed with the manifest); a module ConfigMap may say
//! it too, as the annotation [`ANNOTATION`], for when the host has no manifest of the module it can
//! trust (an OCI artifact that could not be pulled). When several say it, the strictest wins
//! ([`FailurePolicy::strictest`]): whoever can write a ConfigMap can make a failure louder, never
//! quieter than a signed manifest asked.

use std::fmt;

/// The annotation of a module ConfigMap that states the module's failure policy.
pub const ANNOTATION: &str = "velero-wasm.io/on-failure";

/// What happens when a module's new version cannot be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FailurePolicy {
    /// Serve the last good copy kept in the state directory; without one, what serves under the
    /// module's name (the stock module): the behaviour before policies existed, and the default.
    LastGood,
    /// Serve what serves under the module's name without it (the stock module, or the module
    /// directory's), never a kept copy.
    Stock,
    /// Refuse the module's actions: each call fails with the reason, and so does each item they
    /// would have handled; other modules keep serving.
    Refuse,
}

impl FailurePolicy {
    /// The policy of a module that states none.
    pub(crate) const DEFAULT: FailurePolicy = FailurePolicy::LastGood;

    /// Parses `last-good`, `stock` or `refuse`.
    pub(crate) fn parse(text: &str) -> Result<FailurePolicy, String> {
        match text.trim() {
            "last-good" => Ok(FailurePolicy::LastGood),
            "stock" => Ok(FailurePolicy::Stock),
            "refuse" => Ok(FailurePolicy::Refuse),
            other => Err(format!(
                "{other:?} is not a failure policy: last-good, stock or refuse"
            )),
        }
    }

    /// How it is written.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::LastGood => "last-good",
            FailurePolicy::Stock => "stock",
            FailurePolicy::Refuse => "refuse",
        }
    }

    /// How far it keeps a module the operator did not choose from serving: `refuse` serves none,
    /// `last-good` one the operator once put in service, `stock` the binary's.
    fn strictness(self) -> u8 {
        match self {
            FailurePolicy::Stock => 0,
            FailurePolicy::LastGood => 1,
            FailurePolicy::Refuse => 2,
        }
    }

    /// The strictest of the policies stated, with where it was stated; the default when none is.
    pub(crate) fn strictest<'a>(
        stated: impl IntoIterator<Item = (FailurePolicy, &'a str)>,
    ) -> (FailurePolicy, &'a str) {
        stated
            .into_iter()
            .fold(
                None,
                |best: Option<(FailurePolicy, &'a str)>, next| match best {
                    Some(b) if b.0.strictness() >= next.0.strictness() => Some(b),
                    _ => Some(next),
                },
            )
            .unwrap_or((FailurePolicy::DEFAULT, "default"))
    }
}

impl fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A module's failure policy as the plugin applied it: which is in force, where it was stated, and
/// whether it triggered (for `velero-wasm status` and `velero-wasm actions`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyState {
    /// `last-good`, `stock` or `refuse`.
    pub(crate) policy: String,
    /// Where it was stated: `manifest`, `ConfigMap annotation`, `last good copy's manifest`, or
    /// `default`.
    pub(crate) from: String,
    /// Set when the module's new version could not be loaded and the policy decided what serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) triggered: Option<Triggered>,
}

/// What a failure policy did when it triggered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Triggered {
    /// `serving last good copy`, `serving stock`, `refusing` or `not served`.
    pub(crate) outcome: String,
    /// Why the new version could not be loaded, and what was done.
    pub(crate) cause: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use FailurePolicy::*;

    #[test]
    fn policies_parse_and_print_as_written() {
        for p in [LastGood, Stock, Refuse] {
            assert_eq!(FailurePolicy::parse(p.as_str()), Ok(p));
        }
        let e = FailurePolicy::parse("refused").unwrap_err();
        assert!(e.contains("\"refused\" is not a failure policy"), "{e}");
    }

    #[test]
    fn the_strictest_stated_policy_wins_and_none_stated_is_the_default() {
        assert_eq!(FailurePolicy::strictest([]), (LastGood, "default"));
        assert_eq!(
            FailurePolicy::strictest([(Stock, "manifest"), (Refuse, "annotation")]),
            (Refuse, "annotation")
        );
        assert_eq!(
            FailurePolicy::strictest([(Refuse, "manifest"), (Stock, "annotation")]),
            (Refuse, "manifest"),
            "an annotation cannot loosen what a manifest asks"
        );
        assert_eq!(
            FailurePolicy::strictest([(LastGood, "manifest"), (Stock, "annotation")]),
            (LastGood, "manifest")
        );
    }
}
