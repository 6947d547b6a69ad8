//! A module's settings, declared once in its manifest (`[settings-schema.<key>]`): each key's type,
//! default and description. The host checks every `[settings]` table against it: the manifest's own
//! when it is parsed, and the settings a module loads with (its manifest's, a stock override's, a
//! suite case's, `run --setting`), with errors that name the key and suggest the nearest declared one.
//!
//! ```toml
//! [settings]
//! storage-classes = { gp2 = "gp3" }     # scalars, arrays and tables
//!
//! [settings-schema.storage-classes]
//! type = "map"                          # string (the default), integer, number, boolean, list, map
//! items = "string"                      # the type of a list's items or a map's values (default string)
//! default = {}                          # the value when [settings] does not set it (optional)
//! description = "Storage class to restore into, by the class in the backup"
//!
//! [settings-schema.mode]
//! values = ["upstream", "extended"]     # a string setting that takes one of these (optional)
//! default = "extended"
//! ```
//!
//! A module reads settings as text through the `config` capability (`wit/config.wit`): strings as
//! written, integers, numbers and booleans as TOML writes them, lists and maps as JSON. The SDK's
//! `config::read` turns them back into a typed struct.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The declared settings of a module, by key.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SettingsSchema {
    /// Each declared setting.
    pub entries: BTreeMap<String, SettingSpec>,
}

/// One declared setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingSpec {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: SettingType,
    /// The type of a list's items or a map's values.
    pub items: SettingType,
    /// The strings a string setting may take (empty: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Its value when no `[settings]` sets it, as the module reads it (text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// One line for people.
    pub description: String,
}

/// The type of a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SettingType {
    /// Any text.
    String,
    /// A whole number (64-bit signed).
    Integer,
    /// A number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A list of `items`.
    List,
    /// A map from strings to `items`.
    Map,
}

impl fmt::Display for SettingType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SettingType::String => "string",
            SettingType::Integer => "integer",
            SettingType::Number => "number",
            SettingType::Boolean => "boolean",
            SettingType::List => "list",
            SettingType::Map => "map",
        })
    }
}

impl fmt::Display for SettingSpec {
    /// `map of string, default {"gp2":"gp3"}: description`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            SettingType::List | SettingType::Map => write!(f, "{} of {}", self.kind, self.items)?,
            _ if !self.values.is_empty() => write!(f, "one of {}", self.values.join("|"))?,
            kind => write!(f, "{kind}")?,
        }
        if let Some(default) = &self.default {
            write!(f, ", default {default}")?;
        }
        if !self.description.is_empty() {
            write!(f, ": {}", self.description)?;
        }
        Ok(())
    }
}

/// `[settings-schema.<key>]` as TOML gives it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SpecText {
    #[serde(default, rename = "type")]
    kind: Option<SettingType>,
    #[serde(default)]
    items: Option<SettingType>,
    #[serde(default)]
    values: Vec<String>,
    #[serde(default)]
    default: Option<toml::Value>,
    #[serde(default)]
    description: String,
}

/// A setting that the schema does not declare, or of the wrong type. `key` is the setting's key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("settings.{key}: {problem}")]
pub struct SettingError {
    /// The key as written.
    pub key: String,
    /// What is wrong, and what to write.
    pub problem: SettingProblem,
}

/// What is wrong with a setting or its declaration, in words that say what to write.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingProblem {
    /// A key that is empty or holds spaces.
    #[error("a setting's key is a non-empty name without spaces")]
    Key,
    /// `items` on a scalar type.
    #[error("`items` goes with type \"list\" or \"map\", not {0:?}")]
    ItemsOnScalar(SettingType),
    /// `items` of a container type.
    #[error("`items` must be a scalar type (string, integer, number, boolean); a nested value is one JSON string setting")]
    NestedItems,
    /// `values` on a type other than string.
    #[error("`values` goes with type \"string\", not {0:?}")]
    ValuesOnNonString(SettingType),
    /// A default that is not of the declared type.
    #[error("default: {0}")]
    Default(Box<SettingProblem>),
    /// A key the schema does not declare.
    #[error(
        "this module has no setting {key:?}{} (its settings: {declared})",
        mean(near)
    )]
    Unknown {
        /// The key as written.
        key: String,
        /// The declared key nearest to it, if one is near.
        near: Option<String>,
        /// The declared keys, joined.
        declared: String,
    },
    /// A string that is not one of the declared values.
    #[error("{text:?} is not one of {values}{}", mean(near))]
    NotOneOf {
        /// The value as written.
        text: String,
        /// The declared values, joined.
        values: String,
        /// The declared value nearest to it, if one is near.
        near: Option<String>,
    },
    /// A scalar of the wrong type.
    #[error("{text:?} is not {}", article(*kind))]
    NotA {
        /// The value as written.
        text: String,
        /// The declared type.
        kind: SettingType,
    },
    /// A list setting whose value is not a JSON array.
    #[error("{text:?} is not a list: write an array, e.g. [\"a\", \"b\"]")]
    NotAList {
        /// The value as written.
        text: String,
    },
    /// A list item of the wrong type.
    #[error("item {index} ({item}) is not {}", article(*kind))]
    Item {
        /// Its position.
        index: usize,
        /// The item.
        item: serde_json::Value,
        /// The declared type of the items.
        kind: SettingType,
    },
    /// A map setting whose value is not a JSON object.
    #[error("{text:?} is not a map: write a table, e.g. {{ gp2 = \"gp3\" }} (YAML: {{gp2: gp3}})")]
    NotAMap {
        /// The value as written.
        text: String,
    },
    /// A map value of the wrong type.
    #[error("the value of {key:?} ({value}) is not {}", article(*kind))]
    MapValue {
        /// The entry's key.
        key: String,
        /// Its value.
        value: serde_json::Value,
        /// The declared type of the values.
        kind: SettingType,
    },
}

/// `; did you mean "near"?`, or nothing.
fn mean(near: &Option<String>) -> String {
    near.as_ref()
        .map(|near| format!("; did you mean {near:?}?"))
        .unwrap_or_default()
}

/// A setting's value as a module reads it: strings as written, other scalars as TOML writes them,
/// arrays and tables as JSON.
pub fn toml_to_text(value: toml::Value) -> String {
    match value {
        toml::Value::String(s) => s,
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        other => serde_json::to_string(&other).unwrap_or_default(),
    }
}

impl SettingsSchema {
    /// Reads `[settings-schema]`: a type where one is given, `items` only on lists and maps, `values`
    /// only on strings, and a default of the declared type.
    pub(super) fn from_text(
        text: BTreeMap<String, SpecText>,
    ) -> Result<SettingsSchema, SettingError> {
        let mut entries = BTreeMap::new();
        for (key, spec) in text {
            let error = |problem: SettingProblem| SettingError {
                key: key.clone(),
                problem,
            };
            if let Some(problem) = key_problem(&key) {
                return Err(error(problem));
            }
            let kind = spec.kind.unwrap_or(SettingType::String);
            let container = matches!(kind, SettingType::List | SettingType::Map);
            if spec.items.is_some() && !container {
                return Err(error(SettingProblem::ItemsOnScalar(kind)));
            }
            let items = spec.items.unwrap_or(SettingType::String);
            if matches!(items, SettingType::List | SettingType::Map) {
                return Err(error(SettingProblem::NestedItems));
            }
            if !spec.values.is_empty() && kind != SettingType::String {
                return Err(error(SettingProblem::ValuesOnNonString(kind)));
            }
            let mut entry = SettingSpec {
                kind,
                items,
                values: spec.values,
                default: None,
                description: spec.description,
            };
            if let Some(default) = spec.default {
                let text = toml_to_text(default);
                entry
                    .check(&text)
                    .map_err(|problem| error(SettingProblem::Default(Box::new(problem))))?;
                entry.default = Some(text);
            }
            entries.insert(key, entry);
        }
        Ok(SettingsSchema { entries })
    }

    /// Whether the module declares no settings (then its settings are not checked).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks every setting against the schema (none when the schema is empty): each key is declared
    /// and each value has its type. The first problem, in key order.
    pub fn check(&self, settings: &BTreeMap<String, String>) -> Result<(), SettingError> {
        if self.is_empty() {
            return Ok(());
        }
        for (key, value) in settings {
            let Some(spec) = self.entries.get(key) else {
                return Err(SettingError {
                    key: key.clone(),
                    problem: self.unknown(key),
                });
            };
            spec.check(value).map_err(|problem| SettingError {
                key: key.clone(),
                problem,
            })?;
        }
        Ok(())
    }

    /// `settings` with the defaults of the keys they do not set.
    pub fn with_defaults(&self, settings: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut all = settings.clone();
        for (key, spec) in &self.entries {
            if let Some(default) = &spec.default {
                all.entry(key.clone()).or_insert_with(|| default.clone());
            }
        }
        all
    }

    /// Why `key` is not a setting, with the nearest declared key when one is near.
    fn unknown(&self, key: &str) -> SettingProblem {
        let declared: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        SettingProblem::Unknown {
            key: key.to_string(),
            near: nearest(key, &declared).map(str::to_string),
            declared: declared.join(", "),
        }
    }
}

impl SettingSpec {
    /// Whether `text` (as the module would read it) is a value of this setting.
    fn check(&self, text: &str) -> Result<(), SettingProblem> {
        match self.kind {
            SettingType::String => {
                if !self.values.is_empty() && !self.values.iter().any(|v| v == text) {
                    let values: Vec<&str> = self.values.iter().map(String::as_str).collect();
                    return Err(SettingProblem::NotOneOf {
                        text: text.to_string(),
                        near: nearest(text, &values).map(str::to_string),
                        values: values.join(", "),
                    });
                }
                Ok(())
            }
            SettingType::Integer | SettingType::Number | SettingType::Boolean => {
                let not_a = || SettingProblem::NotA {
                    text: text.to_string(),
                    kind: self.kind,
                };
                let json: serde_json::Value =
                    serde_json::from_str(text.trim()).map_err(|_| not_a())?;
                scalar(self.kind, &json).then_some(()).ok_or_else(not_a)
            }
            SettingType::List => {
                let items = match serde_json::from_str(text) {
                    Ok(serde_json::Value::Array(items)) => items,
                    _ => {
                        let text = text.to_string();
                        return Err(SettingProblem::NotAList { text });
                    }
                };
                for (index, item) in items.into_iter().enumerate() {
                    if !scalar(self.items, &item) {
                        let kind = self.items;
                        return Err(SettingProblem::Item { index, item, kind });
                    }
                }
                Ok(())
            }
            SettingType::Map => {
                let entries = match serde_json::from_str(text) {
                    Ok(serde_json::Value::Object(entries)) => entries,
                    _ => {
                        let text = text.to_string();
                        return Err(SettingProblem::NotAMap { text });
                    }
                };
                for (key, value) in entries {
                    if !scalar(self.items, &value) {
                        let kind = self.items;
                        return Err(SettingProblem::MapValue { key, value, kind });
                    }
                }
                Ok(())
            }
        }
    }
}

/// Whether a JSON value is a value of a scalar type.
fn scalar(kind: SettingType, value: &serde_json::Value) -> bool {
    match kind {
        SettingType::String => value.is_string(),
        SettingType::Integer => value.is_i64(),
        SettingType::Number => value.is_number(),
        SettingType::Boolean => value.is_boolean(),
        SettingType::List | SettingType::Map => false,
    }
}

fn article(kind: SettingType) -> String {
    match kind {
        SettingType::Integer => "an integer".into(),
        kind => format!("a {kind}"),
    }
}

/// Why a key cannot be a setting's (the `config` capability reads keys as written).
fn key_problem(key: &str) -> Option<SettingProblem> {
    if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(SettingProblem::Key);
    }
    None
}

/// The candidate nearest to `word`, when it is near enough to be a likely typo.
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::normalized_damerau_levenshtein(word, c), *c))
        .filter(|(score, _)| *score >= 0.6)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(text: &str) -> Result<SettingsSchema, SettingError> {
        let table: BTreeMap<String, SpecText> = toml::from_str(text).unwrap();
        SettingsSchema::from_text(table)
    }

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const CLASSES: &str = r#"
        [storage-classes]
        type = "map"
        default = { gp2 = "gp3" }
        description = "by class"
        [retries]
        type = "integer"
        default = 3
        [mode]
        values = ["upstream", "extended"]
        [zones]
        type = "list"
    "#;

    #[test]
    fn a_misspelt_key_is_named_with_the_nearest_one() {
        let s = schema(CLASSES).unwrap();
        let e = s.check(&settings(&[("storage-class", "{}")])).unwrap_err();
        assert_eq!(e.key, "storage-class");
        assert!(
            e.to_string()
                .starts_with("settings.storage-class: this module has no setting")
                && e.problem
                    .to_string()
                    .contains("did you mean \"storage-classes\""),
            "{e}"
        );
        let e = s.check(&settings(&[("colour", "x")])).unwrap_err();
        assert!(!e.problem.to_string().contains("did you mean"), "{e}");
    }

    #[test]
    fn values_are_checked_against_their_type() {
        let s = schema(CLASSES).unwrap();
        s.check(&settings(&[
            ("storage-classes", r#"{"gp2":"gp3"}"#),
            ("retries", "5"),
            ("mode", "upstream"),
            ("zones", r#"["a","b"]"#),
        ]))
        .unwrap();
        for (key, value, says) in [
            ("retries", "many", "is not an integer"),
            ("retries", "2.5", "is not an integer"),
            ("storage-classes", "gp2=gp3", "is not a map"),
            ("storage-classes", r#"{"gp2":3}"#, "the value of \"gp2\""),
            ("zones", "a,b", "is not a list"),
            ("mode", "extende", "did you mean \"extended\""),
        ] {
            let e = s.check(&settings(&[(key, value)])).unwrap_err();
            assert!(
                e.key == key && e.problem.to_string().contains(says),
                "{key}={value}: {e}"
            );
        }
    }

    #[test]
    fn defaults_fill_what_is_not_set() {
        let s = schema(CLASSES).unwrap();
        let all = s.with_defaults(&settings(&[("retries", "7")]));
        assert_eq!(all["retries"], "7");
        assert_eq!(all["storage-classes"], r#"{"gp2":"gp3"}"#);
        assert!(!all.contains_key("mode"));
    }

    #[test]
    fn a_schema_that_contradicts_itself_is_refused() {
        for (text, says) in [
            (
                "[x]\ntype = \"integer\"\ndefault = \"three\"",
                "not an integer",
            ),
            (
                "[x]\ntype = \"string\"\nitems = \"integer\"",
                "`items` goes with",
            ),
            ("[x]\ntype = \"map\"\nitems = \"map\"", "scalar type"),
            (
                "[x]\ntype = \"integer\"\nvalues = [\"a\"]",
                "`values` goes with",
            ),
        ] {
            let e = schema(text).unwrap_err();
            assert!(
                e.key == "x" && e.problem.to_string().contains(says),
                "{text}: {e}"
            );
        }
        assert!(toml::from_str::<BTreeMap<String, SpecText>>("[x]\ntype = \"float\"").is_err());
    }

    #[test]
    fn no_schema_checks_nothing() {
        SettingsSchema::default()
            .check(&settings(&[("anything", "at all")]))
            .unwrap();
    }
}
