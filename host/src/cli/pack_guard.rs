//! What `module pack --out FILE` would do to the module ConfigMaps already in FILE. Re-running `pack`
//! without `--shadow` over a signed shadow's file would turn a candidate into a serving, unsigned
//! module with one forgotten flag; so an overwrite that changes a module's role (shadow ↔ serving),
//! drops its signature, or replaces a file that is not module ConfigMaps is refused unless `--force`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::modules::configmaps;

/// What a module's ConfigMap is, as far as an overwrite is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Role {
    /// Labelled a shadow.
    pub(super) shadow: bool,
    /// Carries `<name>.sig`.
    pub(super) signed: bool,
}

impl Role {
    /// The role of one module ConfigMap: its module (the label's value) and what it is; `None` for
    /// an object that is not a module ConfigMap.
    pub(super) fn of(object: &Value) -> Option<(String, Role)> {
        if object["kind"] != "ConfigMap" {
            return None;
        }
        let module = object["metadata"]["labels"][configmaps::LABEL]
            .as_str()?
            .to_string();
        let sig = format!("{module}.sig");
        let signed = ["data", "binaryData"]
            .iter()
            .any(|section| object[section].get(&sig).is_some());
        Some((
            module,
            Role {
                shadow: configmaps::is_shadow(object),
                signed,
            },
        ))
    }

    fn name(self) -> &'static str {
        if self.shadow {
            "shadow"
        } else {
            "serving"
        }
    }
}

/// Why writing `new` (module → role) over the file at `path` would surprise: one line per problem,
/// empty when it would not (or when nothing is there). A path that is a link or not a regular file is
/// not read: the writer refuses it.
pub(super) fn problems(path: &Path, new: &[(String, Role)]) -> Vec<String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {}
        _ => return Vec::new(),
    }
    let objects = match crate::documents::read_objects(&[path.to_path_buf()]) {
        Ok(objects) => objects,
        Err(e) => {
            return vec![format!(
                "it does not read as module ConfigMaps ({e}), and would be replaced"
            )]
        }
    };
    let mut old: BTreeMap<String, Role> = BTreeMap::new();
    let mut problems = Vec::new();
    for (i, (_, object)) in objects.iter().enumerate() {
        match Role::of(object) {
            Some((module, role)) => {
                old.insert(module, role);
            }
            None => problems.push(format!(
                "document {} ({} {}) is not a module ConfigMap, and would be replaced",
                i + 1,
                object["kind"].as_str().unwrap_or("?"),
                object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .escape_debug()
            )),
        }
    }
    for (module, role) in new {
        let Some(was) = old.get(module) else { continue };
        if was.shadow != role.shadow {
            let flag = if was.shadow {
                "pack it with --shadow to keep it a shadow"
            } else {
                "leave out --shadow to keep it serving"
            };
            problems.push(format!(
                "module {module} is a {} there and would become a {} one ({flag})",
                was.name(),
                role.name()
            ));
        }
        if was.signed && !role.signed {
            problems.push(format!(
                "module {module} is signed there and would lose its signature (pack it with --sign KEY)"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configmap(shadow: bool, signed: bool) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "m", "labels": {configmaps::LABEL: "m"}},
            "data": {"m.toml": ""}});
        if shadow {
            object["metadata"]["labels"][configmaps::SHADOW_LABEL] = json!("true");
        }
        if signed {
            object["data"]["m.sig"] = json!("key = \"0011\"\n");
        }
        object
    }

    #[test]
    fn a_role_change_or_a_lost_signature_is_a_problem_and_the_same_role_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.yaml");
        std::fs::write(
            &file,
            serde_norway::to_string(&configmap(true, true)).unwrap(),
        )
        .unwrap();
        let role = |shadow, signed| vec![("m".to_string(), Role { shadow, signed })];
        assert!(problems(&file, &role(true, true)).is_empty());
        let serving = problems(&file, &role(false, true));
        assert_eq!(serving.len(), 1, "{serving:?}");
        assert!(serving[0].contains("is a shadow there and would become a serving one"));
        let unsigned = problems(&file, &role(true, false));
        assert!(
            unsigned[0].contains("would lose its signature"),
            "{unsigned:?}"
        );
        assert_eq!(problems(&file, &role(false, false)).len(), 2);
        // Another module, or no file at all: nothing to lose.
        assert!(problems(
            &file,
            &[(
                "n".to_string(),
                Role {
                    shadow: false,
                    signed: false
                }
            )]
        )
        .is_empty());
        assert!(problems(&dir.path().join("none.yaml"), &role(false, false)).is_empty());
        // Something else than module ConfigMaps is not replaced silently.
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
        )
        .unwrap();
        let other = problems(&file, &role(false, false));
        assert!(
            other[0].contains("document 1 (Secret s) is not a module ConfigMap"),
            "{other:?}"
        );
    }
}
