//! The slots: one stable action name per family of kinds, listed to Velero beside the modules' own
//! actions, through which the plugin serves the actions Velero has not listed (docs/modules.md#s10).
//!
//! Velero asks a plugin for its names once, when its pod starts, and from then on calls only those.
//! A module added later would wait for a restart. Each slot is a name Velero always holds: through
//! it the plugin serves every action in service that the listing Velero holds lacks, until a restart
//! lists that action by its own name. The names never change between releases.

use super::{ActionKind, Selector};

/// The one resource a slot with no action to serve applies to: a name no API server serves, which
/// Velero keeps as written and so matches no item (docs/plugin-protocol.md#s8-2).
pub const NOTHING_ADDED: &str = "no-added-action.velero-wasm.io";

/// A family of kinds that share one slot: v1 and v2 of backup and of restore are one family, since
/// Velero adapts v1 actions to v2 and a slot's calls carry what both need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// BackupItemAction v1 and v2.
    Backup,
    /// RestoreItemAction v1 and v2.
    Restore,
    /// ItemBlockAction.
    ItemBlock,
    /// DeleteItemAction.
    Delete,
}

impl Family {
    /// Every family, in Velero's order of kinds.
    pub const ALL: [Family; 4] = [
        Family::Backup,
        Family::Restore,
        Family::Delete,
        Family::ItemBlock,
    ];

    /// The family of `kind`.
    pub fn of(kind: ActionKind) -> Family {
        match kind {
            ActionKind::Backup | ActionKind::BackupV2 => Family::Backup,
            ActionKind::Restore | ActionKind::RestoreV2 => Family::Restore,
            ActionKind::ItemBlock => Family::ItemBlock,
            ActionKind::Delete => Family::Delete,
        }
    }

    /// The slot's name: stable, documented, refused as the name of a module's action.
    pub fn slot_name(self) -> &'static str {
        match self {
            Family::Backup => "velero-wasm.io/added-backup-actions",
            Family::Restore => "velero-wasm.io/added-restore-actions",
            Family::ItemBlock => "velero-wasm.io/added-item-block-actions",
            Family::Delete => "velero-wasm.io/added-delete-actions",
        }
    }

    /// The kinds of the family, the one the slot is listed under first when it is advertised (v2,
    /// which can carry operations; v1 only when v2 is not listed).
    pub fn kinds(self) -> &'static [ActionKind] {
        match self {
            Family::Backup => &[ActionKind::BackupV2, ActionKind::Backup],
            Family::Restore => &[ActionKind::RestoreV2, ActionKind::Restore],
            Family::ItemBlock => &[ActionKind::ItemBlock],
            Family::Delete => &[ActionKind::Delete],
        }
    }
}

/// One action as a listing names it: its kind and name (what Velero was given, what serves).
pub type Listed = (ActionKind, String);

/// The actions `provided` that Velero does not hold under their own name: none of `listed` is one
/// Velero's service for it can run (by name, and a kind whose Velero service can run it). These are
/// served through the slots (docs/modules.md#s10), in `provided`'s order.
pub(crate) fn pending(listed: &[Listed], provided: &[Listed]) -> Vec<Listed> {
    provided
        .iter()
        .filter(|(actual, name)| {
            !listed
                .iter()
                .any(|(kind, n)| n == name && kind.can_serve(*actual))
        })
        .cloned()
        .collect()
}

/// The family whose slot is named `name`, if it is a slot's name.
pub fn slot_family(name: &str) -> Option<Family> {
    Family::ALL.into_iter().find(|f| f.slot_name() == name)
}

/// The selector of a slot serving actions with `selectors`: the narrowest one Velero can express
/// that matches every item at least one of them matches. Velero gives a slot items its selector
/// matches, and the slot gives each item to those of its actions whose own selector matches it, so a
/// selector wider than needed costs a call, and a narrower one would lose items. Hence:
/// * resources and namespaces: the union of what is included (everything, when one includes
///   everything); excluded only what every action excludes, and only when no action lists what it
///   includes (resource names have aliases, and namespace entries globs, that a comparison of the
///   strings cannot see through);
/// * the label selector only when every action has the same one.
///
/// With no action, a selector that matches nothing ([`NOTHING_ADDED`]).
pub fn covering<'a>(selectors: impl IntoIterator<Item = &'a Selector>) -> Selector {
    let selectors: Vec<&Selector> = selectors.into_iter().collect();
    let Some(first) = selectors.first() else {
        return Selector {
            included_resources: vec![NOTHING_ADDED.to_string()],
            ..Selector::default()
        };
    };
    let (included_resources, excluded_resources) = union(
        selectors
            .iter()
            .map(|s| (&s.included_resources, &s.excluded_resources)),
    );
    let (included_namespaces, excluded_namespaces) = union(
        selectors
            .iter()
            .map(|s| (&s.included_namespaces, &s.excluded_namespaces)),
    );
    let label_selector = if selectors
        .iter()
        .all(|s| s.label_selector == first.label_selector)
    {
        first.label_selector.clone()
    } else {
        String::new()
    };
    Selector {
        included_namespaces,
        excluded_namespaces,
        included_resources,
        excluded_resources,
        label_selector,
    }
}

/// The include and exclude lists covering every `(included, excluded)` pair (see [`covering`]).
fn union<'a>(
    lists: impl Iterator<Item = (&'a Vec<String>, &'a Vec<String>)>,
) -> (Vec<String>, Vec<String>) {
    let lists: Vec<_> = lists.collect();
    let everything =
        |included: &Vec<String>| included.is_empty() || included.iter().any(|p| p == "*");
    if lists.iter().all(|(included, _)| everything(included)) {
        // Excluded by all of them: what the first excludes that every other excludes too.
        let (_, first) = lists[0];
        let excluded = first
            .iter()
            .filter(|p| *p != "*")
            .filter(|p| lists.iter().all(|(_, excluded)| excluded.contains(p)))
            .fold(Vec::new(), push_new);
        return (Vec::new(), excluded);
    }
    if lists.iter().any(|(included, _)| everything(included)) {
        return (Vec::new(), Vec::new());
    }
    let included = lists
        .iter()
        .flat_map(|(included, _)| included.iter())
        .fold(Vec::new(), push_new);
    (included, Vec::new())
}

/// `list` with `item` at its end, unless it holds it already.
fn push_new(mut list: Vec<String>, item: &String) -> Vec<String> {
    if !list.contains(item) {
        list.push(item.clone());
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_slot_and_each_name_is_a_valid_plugin_name() {
        for kind in ActionKind::ALL {
            let family = Family::of(kind);
            assert!(family.kinds().contains(&kind), "{kind}");
            assert_eq!(slot_family(family.slot_name()), Some(family));
        }
        assert_eq!(slot_family("velero-wasm.io/other"), None);
    }

    fn selector(
        resources: &[&str],
        excluded: &[&str],
        namespaces: &[&str],
        labels: &str,
    ) -> Selector {
        let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Selector {
            included_resources: strings(resources),
            excluded_resources: strings(excluded),
            included_namespaces: strings(namespaces),
            excluded_namespaces: Vec::new(),
            label_selector: labels.to_string(),
        }
    }

    #[test]
    fn with_no_action_the_slot_matches_nothing() {
        let nothing = covering([]);
        assert_eq!(nothing.included_resources, [NOTHING_ADDED]);
        assert!(nothing.included_namespaces.is_empty() && nothing.excluded_resources.is_empty());
    }

    #[test]
    fn one_action_is_covered_by_its_own_selector() {
        let own = Selector {
            excluded_namespaces: vec!["kube-system".into()],
            ..selector(&[], &["secrets"], &[], "app=web")
        };
        assert_eq!(covering([&own]), own);
    }

    #[test]
    fn named_resources_and_namespaces_are_joined_and_labels_kept_only_when_all_agree() {
        let pvcs = selector(&["persistentvolumeclaims"], &[], &["shop"], "app=web");
        let pods = selector(
            &["pods", "persistentvolumeclaims"],
            &["secrets"],
            &["shop", "db"],
            "app=web",
        );
        let joined = covering([&pvcs, &pods]);
        assert_eq!(
            joined.included_resources,
            ["persistentvolumeclaims", "pods"]
        );
        assert_eq!(joined.included_namespaces, ["shop", "db"]);
        assert!(
            joined.excluded_resources.is_empty(),
            "only a wildcard's exclusions carry over"
        );
        assert_eq!(joined.label_selector, "app=web");
        let other_labels = selector(&["pods"], &[], &[], "app=db");
        assert_eq!(covering([&pvcs, &other_labels]).label_selector, "");
    }

    #[test]
    fn everything_wins_and_only_exclusions_common_to_all_wildcards_remain() {
        let all_but_secrets = selector(&[], &["secrets", "events"], &[], "");
        let star_but_secrets = selector(&["*"], &["secrets"], &[], "");
        let joined = covering([&all_but_secrets, &star_but_secrets]);
        assert!(joined.included_resources.is_empty());
        assert_eq!(joined.excluded_resources, ["secrets"]);
        // With an action naming what it includes, an alias ("pvc") may hide behind an exclusion's
        // spelling: nothing is excluded.
        let pvc = selector(&["pvc"], &[], &[], "");
        let mixed = covering([&all_but_secrets, &pvc]);
        assert!(mixed.included_resources.is_empty() && mixed.excluded_resources.is_empty());
    }

    fn listed(items: &[(ActionKind, &str)]) -> Vec<Listed> {
        items.iter().map(|(k, n)| (*k, n.to_string())).collect()
    }

    #[test]
    fn pending_actions_are_those_velero_holds_under_no_name_that_can_run_them() {
        use ActionKind::*;
        let was = listed(&[
            (BackupV2, "hcp/backup"),
            (Restore, "k/restore"),
            (Delete, "k/delete"),
            (BackupV2, "velero-wasm.io/added-backup-actions"),
        ]);
        let now = listed(&[
            (Backup, "hcp/backup"),        // moved to v1: Velero's v2 service runs it
            (Restore, "k/restore"),        // unchanged
            (Backup, "k/delete"),          // same name, another family: pending
            (RestoreV2, "new/restore"),    // added
            (ItemBlock, "new/item-block"), // added
        ]);
        assert_eq!(
            pending(&was, &now),
            listed(&[
                (Backup, "k/delete"),
                (RestoreV2, "new/restore"),
                (ItemBlock, "new/item-block")
            ])
        );
        assert_eq!(pending(&now, &now), vec![]);
    }
}
