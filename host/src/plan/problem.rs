//! What loading modules found worth telling the operator, and the modules that could not be used.

use crate::modules::FailurePolicy;

/// Something about the modules worth telling the operator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadProblem {
    /// What happened.
    pub message: String,
    /// A module (or an update of it) could not be used; otherwise this is a warning about a module
    /// that is in service.
    pub(crate) broken: bool,
    /// Whether the module concerned (or an earlier version of it) is in service.
    pub served: bool,
    /// It concerns a shadow module only: the serving module is untouched, so the plugin logs it
    /// at info, never where Velero counts it (docs/operation.md#what-velero-counts).
    pub(crate) shadow: bool,
    /// The module's failure policy refused its actions: each item they are given fails with the
    /// reason, which is what Velero counts, so the plugin logs this at info.
    pub(crate) refused: bool,
    /// The uid of the module ConfigMap it concerns, if it concerns one: the plugin tells that
    /// ConfigMap what became of it (its Events and status annotation).
    pub(crate) configmap: Option<String>,
    /// What sort of remark it is, where that is worth telling apart.
    pub(crate) remark: Remark,
}

/// The remarks the plugin says elsewhere than in a warning line (a warning line of a plugin counts
/// in every backup's warnings, docs/operation.md#what-velero-counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Remark {
    /// Any other.
    #[default]
    Other,
    /// A module that serves declares its settings in the old vocabulary: said once on its
    /// ConfigMap and in `velero-wasm status`, at info in the log.
    DeprecatedSettingsSchema,
    /// A ConfigMap's failure-policy annotation is no policy.
    FailurePolicyAnnotation,
}

impl LoadProblem {
    pub(super) fn warning(message: String) -> LoadProblem {
        LoadProblem {
            message,
            broken: false,
            served: true,
            ..LoadProblem::default()
        }
    }

    /// A shadow that cannot be loaded, or a remark on one: the module it would shadow serves as before.
    pub(super) fn about_shadow(message: String) -> LoadProblem {
        LoadProblem {
            shadow: true,
            ..LoadProblem::warning(message)
        }
    }

    /// A settings schema in the old vocabulary, converted: the module serves as declared.
    pub(super) fn deprecated(message: String) -> LoadProblem {
        LoadProblem {
            remark: Remark::DeprecatedSettingsSchema,
            ..LoadProblem::warning(message)
        }
    }

    /// The same problem, about the module ConfigMap of uid `uid` (an empty uid names none).
    pub(super) fn of_configmap(mut self, uid: &str) -> LoadProblem {
        if !uid.is_empty() {
            self.configmap = Some(uid.to_string());
        }
        self
    }

    pub(super) fn not_served(message: String) -> LoadProblem {
        LoadProblem {
            message,
            broken: true,
            served: false,
            ..LoadProblem::default()
        }
    }
}

impl std::fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A module that could not be used, for [`super::fallback::fall_back`].
pub(super) struct Broken {
    pub(super) module: String,
    /// Why, naming where it came from.
    pub(super) message: String,
    /// The uid of the ConfigMap it came from, if it came from one.
    pub(super) configmap: Option<String>,
    /// The failure policy its own manifest states, when that manifest is the operator's (its
    /// signature verified, or no keys are trusted).
    pub(super) stated: Option<FailurePolicy>,
}
