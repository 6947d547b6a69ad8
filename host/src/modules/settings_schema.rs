//! A module's settings, declared once in its manifest: `[settings-schema.<key>]` is a JSON Schema
//! (a subset, written in TOML, in the structural form Kubernetes CRDs use: every level says its
//! `type`). The host checks every `[settings]` table against it with the `jsonschema` crate: the
//! manifest's own when it is parsed, and the settings a module loads with (its manifest's, a stock
//! override's, a suite case's), with errors that name the key and the rule, and suggest the nearest
//! declared key for an unknown one.
//!
//! ```toml
//! [settings]
//! storage-classes = { gp2 = "gp3" }     # scalars, arrays and tables
//!
//! [settings-schema.storage-classes]
//! type = "object"                       # string, integer, number, boolean, array, object
//! additionalProperties = { type = "string", pattern = "^[a-z0-9-]+$" }
//! default = {}                          # the value when [settings] does not set it (optional)
//! description = "Storage class to restore into, by the class in the backup"
//!
//! [settings-schema.mode]
//! type = "string"
//! enum = ["upstream", "extended"]
//! default = "extended"
//!
//! [settings-schema.retries]
//! type = "integer"
//! minimum = 1
//! maximum = 10
//! ```
//!
//! The old vocabulary (`type = "list"` or `"map"`, `items = "<type>"`, `values = [...]`, no `type`)
//! is converted at load, with a deprecation warning that shows the JSON Schema to write instead.
//!
//! A module reads settings as text through the `config` capability (`wit/config.wit`): strings as
//! written, integers, numbers and booleans as TOML writes them, arrays and tables as JSON
//! ([`to_text`]). The SDK's `config::read` turns them back into a typed struct.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{json, Map, Value};

/// The declared settings of a module, by key.
#[derive(Debug, Clone, Default)]
pub struct SettingsSchema {
    /// Each declared setting.
    pub entries: BTreeMap<String, SettingSpec>,
    /// One line per setting written in the old vocabulary, converted at load: what to write instead.
    pub(crate) deprecations: Vec<String>,
}

/// One declared setting: its JSON Schema, compiled.
#[derive(Clone)]
pub struct SettingSpec {
    /// The schema as declared (the old vocabulary converted), without the host's additions.
    pub(crate) schema: Value,
    /// Its value when no `[settings]` sets it.
    pub default: Option<Value>,
    /// One line for people.
    pub(crate) description: String,
    /// The schema the validator runs: `schema` with `additionalProperties = false` wherever an
    /// object lists its `properties` and says nothing of others (unknown keys are refused, as a CRD's
    /// strict field validation does).
    strict: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for SettingSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettingSpec")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl PartialEq for SettingSpec {
    fn eq(&self, other: &SettingSpec) -> bool {
        self.schema == other.schema
    }
}

impl Serialize for SettingSpec {
    /// The JSON Schema as declared (`actions --output json`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.schema.serialize(s)
    }
}

impl fmt::Display for SettingSpec {
    /// `integer, minimum 1, maximum 10, default 3: description`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", summary(&self.schema))?;
        if let Some(default) = &self.default {
            write!(f, ", default {}", to_text(default))?;
        }
        if !self.description.is_empty() {
            write!(f, ": {}", self.description)?;
        }
        Ok(())
    }
}

/// A schema in a few words: its type (`array of string`, `one of a|b`) and its other rules.
fn summary(schema: &Value) -> String {
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("any");
    let mut words = match (kind, schema.get("enum").and_then(Value::as_array)) {
        (_, Some(values)) => format!(
            "one of {}",
            values.iter().map(to_text).collect::<Vec<_>>().join("|")
        ),
        ("array", _) => format!(
            "array of {}",
            schema.get("items").map(summary).unwrap_or_default()
        ),
        ("object", _) => match (schema.get("properties"), schema.get("additionalProperties")) {
            (Some(Value::Object(p)), _) => format!(
                "object {{{}}}",
                p.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            (_, Some(values @ Value::Object(_))) => format!("map of {}", summary(values)),
            _ => "object".to_string(),
        },
        (kind, _) => kind.to_string(),
    };
    for rule in RULES {
        if let Some(value) = schema.get(*rule) {
            words.push_str(&format!(", {rule} {value}"));
        }
    }
    words
}

/// The value rules a summary shows.
const RULES: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "required",
];

/// `[settings-schema.<key>]` as TOML gives it: a table, read by [`SettingsSchema::from_text`].
#[derive(Deserialize)]
#[serde(transparent)]
pub(super) struct SpecText(toml::Table);

/// A setting that the schema does not declare or that breaks one of its rules. `key` is the
/// setting's key, with the path inside it for nested values (`limits.cpu`, `zones[1]`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("settings.{key}: {problem}")]
pub struct SettingError {
    /// The key as written, and the path inside its value.
    pub key: String,
    /// What is wrong, and what to write.
    pub(crate) problem: SettingProblem,
}

/// What is wrong with a setting or its declaration, in words that say what to write.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum SettingProblem {
    /// A key that is empty or holds spaces.
    #[error("a setting's key is a non-empty name without spaces")]
    Key,
    /// A declaration outside the JSON Schema subset the host reads.
    #[error("{0} (the settings schema: docs/authoring.md \"Settings, typed\")")]
    Schema(String),
    /// A default that breaks its own schema.
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
    /// A key inside an object value that its `properties` do not declare.
    #[error("no property {key:?}{} (its properties: {declared})", mean(near))]
    UnknownProperty {
        /// The key as written.
        key: String,
        /// The declared property nearest to it, if one is near.
        near: Option<String>,
        /// The declared properties, joined.
        declared: String,
    },
    /// A value that breaks a rule of the schema: the validator's words, and the rule as written.
    #[error("{message}{} (rule: {rule})", mean(near))]
    Rule {
        /// What the validator says.
        message: String,
        /// The keyword and its value, as the manifest writes it (`minimum = 1`).
        rule: String,
        /// For `enum`, the allowed value nearest to the one written.
        near: Option<String>,
    },
}

/// `; did you mean "near"?`, or nothing.
fn mean(near: &Option<String>) -> String {
    near.as_ref()
        .map(|near| format!("; did you mean {near:?}?"))
        .unwrap_or_default()
}

/// A TOML value as JSON: datetimes become their text.
pub(crate) fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.to_string())),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(k, v)| (k, toml_to_json(v)))
                .collect(),
        ),
    }
}

/// A setting's value as a module reads it: strings as written, other scalars as TOML writes them
/// (`3`, `2.5`, `true`), arrays and tables as JSON.
pub(crate) fn to_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => f.to_string(),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The keywords of the subset, and the types each goes with (empty: any type).
const KEYWORDS: &[(&str, &[&str])] = &[
    ("type", &[]),
    ("description", &[]),
    ("title", &[]),
    ("default", &[]),
    ("enum", &[]),
    ("minimum", &["integer", "number"]),
    ("maximum", &["integer", "number"]),
    ("exclusiveMinimum", &["integer", "number"]),
    ("exclusiveMaximum", &["integer", "number"]),
    ("minLength", &["string"]),
    ("maxLength", &["string"]),
    ("pattern", &["string"]),
    ("items", &["array"]),
    ("minItems", &["array"]),
    ("maxItems", &["array"]),
    ("uniqueItems", &["array"]),
    ("properties", &["object"]),
    ("required", &["object"]),
    ("additionalProperties", &["object"]),
];

const TYPES: &[&str] = &["string", "integer", "number", "boolean", "array", "object"];

/// Checks that `schema` (at `at`, a path for errors) stays within the subset: every level a table
/// with one `type`, only known keywords and each with its type, `default` only at the top.
fn check_subset(schema: &Value, at: &str, top: bool) -> Result<(), String> {
    let Value::Object(table) = schema else {
        return Err(format!(
            "{at}is not a table: write e.g. {{ type = \"string\" }}"
        ));
    };
    let Some(kind) = table.get("type") else {
        return Err(format!(
            "{at}has no `type`: every level says one of {}",
            TYPES.join(", ")
        ));
    };
    let kind = match kind.as_str() {
        Some(kind) if TYPES.contains(&kind) => kind,
        _ => {
            return Err(format!(
                "{at}type = {kind} is not one of {}",
                TYPES.join(", ")
            ))
        }
    };
    let known: Vec<&str> = KEYWORDS.iter().map(|(k, _)| *k).collect();
    for (keyword, value) in table {
        let Some((_, types)) = KEYWORDS.iter().find(|(k, _)| k == keyword) else {
            return Err(format!(
                "{at}`{keyword}` is not a keyword the host reads{} (it reads: {})",
                mean(&nearest(keyword, &known).map(str::to_string)),
                known.join(", ")
            ));
        };
        if !types.is_empty() && !types.contains(&kind) {
            return Err(format!(
                "{at}`{keyword}` goes with type {}, not {kind:?}",
                types.join(" or ")
            ));
        }
        if keyword == "default" && !top {
            return Err(format!(
                "{at}`default` goes on the setting itself, not inside it (nested defaults are not applied)"
            ));
        }
        match keyword.as_str() {
            "items" => check_subset(value, &format!("{at}items: "), false)?,
            "properties" => {
                let Value::Object(properties) = value else {
                    return Err(format!("{at}`properties` is a table of schemas"));
                };
                for (name, property) in properties {
                    check_subset(property, &format!("{at}properties.{name}: "), false)?;
                }
            }
            "additionalProperties" if !value.is_boolean() => {
                check_subset(value, &format!("{at}additionalProperties: "), false)?
            }
            "enum" if value.as_array().is_none_or(Vec::is_empty) => {
                return Err(format!(
                    "{at}`enum` is a non-empty array of the values allowed"
                ));
            }
            _ => {}
        }
    }
    if kind == "array" && !table.contains_key("items") {
        return Err(format!("{at}an array says the schema of its `items`"));
    }
    if kind == "object"
        && !table.contains_key("properties")
        && !table.contains_key("additionalProperties")
    {
        return Err(format!(
            "{at}an object says its `properties`, or `additionalProperties` (the schema of a map's values)"
        ));
    }
    Ok(())
}

/// `schema` with `additionalProperties = false` wherever `properties` are listed and nothing is said
/// of others.
fn strict(schema: &Value) -> Value {
    let Value::Object(table) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (keyword, value) in table {
        let value = match keyword.as_str() {
            "items" | "additionalProperties" => strict(value),
            "properties" => match value {
                Value::Object(p) => Value::Object(
                    p.iter()
                        .map(|(name, schema)| (name.clone(), strict(schema)))
                        .collect(),
                ),
                other => other.clone(),
            },
            _ => value.clone(),
        };
        out.insert(keyword.clone(), value);
    }
    if out.contains_key("properties") && !out.contains_key("additionalProperties") {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Value::Object(out)
}

/// The old vocabulary of one declaration converted to JSON Schema, when it uses it: `values` becomes
/// `enum`, `list` `array` and `map` `object` (with `items` as the schema of the items or values), and
/// no `type` means `"string"`.
fn convert_old(table: &Map<String, Value>) -> Option<Map<String, Value>> {
    let kind = table.get("type").and_then(Value::as_str);
    let old = table.contains_key("values")
        || table.get("items").is_some_and(Value::is_string)
        || matches!(kind, Some("list" | "map"))
        || kind.is_none();
    if !old {
        return None;
    }
    let items = json!({"type": table.get("items").and_then(Value::as_str).unwrap_or("string")});
    let mut out = Map::new();
    for (keyword, value) in table {
        match keyword.as_str() {
            "type" => {}
            "items" if value.is_string() => {}
            "values" => {
                out.insert("enum".into(), value.clone());
            }
            _ => {
                out.insert(keyword.clone(), value.clone());
            }
        }
    }
    let kind = match kind {
        Some("list") => {
            out.insert("items".into(), items);
            "array"
        }
        Some("map") => {
            out.insert("additionalProperties".into(), items);
            "object"
        }
        Some(other) => other,
        None => "string",
    };
    out.insert("type".into(), Value::String(kind.into()));
    Some(out)
}

/// A JSON value as TOML writes it inline, for the deprecation message.
fn inline_toml(value: &Value) -> String {
    match value {
        Value::Object(table) => format!(
            "{{ {} }}",
            table
                .iter()
                .map(|(k, v)| format!("{k} = {}", inline_toml(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(inline_toml).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

/// Compiles a schema with the `regex` engine (linear time: a manifest's pattern cannot hang the host).
fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
        .map_err(|e| e.to_string())
}

impl SettingsSchema {
    /// Reads `[settings-schema]`: each key's JSON Schema within the subset (the old vocabulary
    /// converted, with a deprecation), compiled, and its default checked against it.
    pub(super) fn from_text(
        text: BTreeMap<String, SpecText>,
    ) -> Result<SettingsSchema, SettingError> {
        let mut schema = SettingsSchema::default();
        for (key, SpecText(table)) in text {
            let error = |problem: SettingProblem| SettingError {
                key: key.clone(),
                problem,
            };
            if let Some(problem) = key_problem(&key) {
                return Err(error(problem));
            }
            let Value::Object(mut table) = toml_to_json(toml::Value::Table(table)) else {
                unreachable!("a TOML table is a JSON object")
            };
            if let Some(converted) = convert_old(&table) {
                schema.deprecations.push(format!(
                    "settings-schema.{key}: the old settings vocabulary (values, list, map, items = \"<type>\", no type) is deprecated and was converted; write it as JSON Schema: {}",
                    inline_toml(&Value::Object(converted.clone()))
                ));
                table = converted;
            }
            let declared = Value::Object(table);
            check_subset(&declared, "", true).map_err(|e| error(SettingProblem::Schema(e)))?;
            let strict = strict(&declared);
            let validator = compile(&strict).map_err(|e| error(SettingProblem::Schema(e)))?;
            let entry = SettingSpec {
                default: declared.get("default").cloned(),
                description: declared
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                schema: declared,
                strict: Arc::new(strict),
                validator: Arc::new(validator),
            };
            if let Some(default) = &entry.default {
                entry
                    .check(&key, default)
                    .map_err(|e| error(SettingProblem::Default(Box::new(e.problem))))?;
            }
            schema.entries.insert(key, entry);
        }
        Ok(schema)
    }

    /// Whether the module declares no settings (then its settings are not checked).
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks every setting against the schema (none when the schema is empty): each key is declared
    /// and each value keeps its rules. The first problem, in key order.
    pub fn check(&self, settings: &BTreeMap<String, Value>) -> Result<(), SettingError> {
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
            spec.check(key, value)?;
        }
        Ok(())
    }

    /// `settings` with the defaults of the keys they do not set, as the module reads them (text).
    pub(crate) fn with_defaults(
        &self,
        settings: &BTreeMap<String, Value>,
    ) -> BTreeMap<String, String> {
        let mut all: BTreeMap<String, String> = settings
            .iter()
            .map(|(k, v)| (k.clone(), to_text(v)))
            .collect();
        for (key, spec) in &self.entries {
            if let Some(default) = &spec.default {
                all.entry(key.clone()).or_insert_with(|| to_text(default));
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
    /// Whether `value` keeps this setting's rules; the first broken one, at its path inside `key`.
    fn check(&self, key: &str, value: &Value) -> Result<(), SettingError> {
        let Some(error) = self.validator.iter_errors(value).next() else {
            return Ok(());
        };
        let mut path = key.to_string();
        let mut inside = value;
        for segment in error.instance_path().as_str().split('/').skip(1) {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            match inside {
                Value::Array(items) => {
                    path.push_str(&format!("[{segment}]"));
                    inside = segment
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| items.get(i))
                        .unwrap_or(&Value::Null);
                }
                _ => {
                    path.push('.');
                    path.push_str(&segment);
                    inside = inside.get(&segment).unwrap_or(&Value::Null);
                }
            }
        }
        let schema_path = error.schema_path().as_str().to_string();
        let (parent, keyword) = schema_path.rsplit_once('/').unwrap_or(("", &schema_path));
        let at = |pointer: &str| self.strict.pointer(pointer).cloned().unwrap_or(Value::Null);
        let problem = match error.kind() {
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                let properties = at(&format!("{parent}/properties"));
                let declared: Vec<&str> = properties
                    .as_object()
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                let unexpected = unexpected.first().cloned().unwrap_or_default();
                path.push('.');
                path.push_str(&unexpected);
                SettingProblem::UnknownProperty {
                    near: nearest(&unexpected, &declared).map(str::to_string),
                    key: unexpected,
                    declared: declared.join(", "),
                }
            }
            kind => {
                // A string outside an enum: the allowed values as the module reads them, and the
                // nearest one.
                let (message, near) = match (kind, inside.as_str()) {
                    (jsonschema::error::ValidationErrorKind::Enum { options }, Some(text)) => {
                        let options = options.as_array().map(Vec::as_slice).unwrap_or_default();
                        let strings: Vec<&str> = options.iter().filter_map(Value::as_str).collect();
                        let all: Vec<String> = options.iter().map(to_text).collect();
                        (
                            format!("{text:?} is not one of {}", all.join(", ")),
                            nearest(text, &strings).map(str::to_string),
                        )
                    }
                    _ => (error.to_string(), None),
                };
                SettingProblem::Rule {
                    message,
                    rule: format!("{keyword} = {}", inline_toml(&at(&schema_path))),
                    near,
                }
            }
        };
        Err(SettingError { key: path, problem })
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

    /// Settings as a manifest writes them (TOML), typed.
    fn settings(text: &str) -> BTreeMap<String, Value> {
        let table: toml::Table = toml::from_str(text).unwrap();
        table
            .into_iter()
            .map(|(k, v)| (k, toml_to_json(v)))
            .collect()
    }

    const SCHEMA: &str = r#"
        [storage-classes]
        type = "object"
        additionalProperties = { type = "string" }
        default = { gp2 = "gp3" }
        description = "by class"
        [retries]
        type = "integer"
        minimum = 1
        maximum = 10
        default = 3
        [mode]
        type = "string"
        enum = ["upstream", "extended"]
        [label-key]
        type = "string"
        pattern = "^[a-z0-9./-]+$"
        maxLength = 63
        [zones]
        type = "array"
        items = { type = "string", minLength = 1 }
        [limits]
        type = "object"
        required = ["cpu"]
        properties.cpu = { type = "integer", minimum = 1 }
        properties.memory = { type = "string", pattern = "^[0-9]+(Mi|Gi)$" }
    "#;

    #[test]
    fn values_keep_their_rules_and_errors_name_the_key_and_the_rule() {
        let s = schema(SCHEMA).unwrap();
        s.check(&settings(
            r#"
            storage-classes = { gp2 = "gp3" }
            retries = 5
            mode = "upstream"
            label-key = "example.io/pvcs"
            zones = ["a", "b"]
            limits = { cpu = 2, memory = "512Mi" }
            "#,
        ))
        .unwrap();
        for (text, key, says) in [
            (
                "retries = 0",
                "retries",
                "less than the minimum of 1 (rule: minimum = 1)",
            ),
            ("retries = 11", "retries", "(rule: maximum = 10)"),
            ("retries = \"5\"", "retries", "(rule: type = \"integer\")"),
            ("retries = 2.5", "retries", "(rule: type = \"integer\")"),
            (
                "label-key = \"Not Valid\"",
                "label-key",
                "(rule: pattern = \"^[a-z0-9./-]+$\")",
            ),
            (
                "mode = \"extende\"",
                "mode",
                "did you mean \"extended\"? (rule: enum",
            ),
            ("zones = [\"a\", \"\"]", "zones[1]", "(rule: minLength = 1)"),
            (
                "storage-classes = { gp2 = 3 }",
                "storage-classes.gp2",
                "(rule: type = \"string\")",
            ),
            ("limits = { cpu = 0 }", "limits.cpu", "(rule: minimum = 1)"),
            (
                "limits = { memory = \"1Mi\" }",
                "limits",
                "\"cpu\" is a required property (rule: required",
            ),
            (
                "limits = { cpu = 1, memory = \"1M\" }",
                "limits.memory",
                "(rule: pattern",
            ),
            (
                "limits = { cpu = 1, memroy = \"1Mi\" }",
                "limits.memroy",
                "no property \"memroy\"; did you mean \"memory\"?",
            ),
        ] {
            let e = s.check(&settings(text)).unwrap_err();
            assert!(
                e.key == key && e.to_string().contains(says),
                "{text}: {e} (key {})",
                e.key
            );
            assert!(
                e.to_string().starts_with(&format!("settings.{key}: ")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_list_or_a_map_for_a_string_is_refused() {
        let s = schema(SCHEMA).unwrap();
        for text in [
            "label-key = [\"a\", \"b\"]",
            "label-key = { a = \"b\" }",
            "label-key = 3",
        ] {
            let e = s.check(&settings(text)).unwrap_err();
            assert!(
                e.key == "label-key" && e.to_string().contains("(rule: type = \"string\")"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn a_misspelt_key_is_named_with_the_nearest_one() {
        let s = schema(SCHEMA).unwrap();
        let e = s.check(&settings("storage-class = {}")).unwrap_err();
        assert_eq!(e.key, "storage-class");
        assert!(
            e.to_string()
                .starts_with("settings.storage-class: this module has no setting")
                && e.to_string().contains("did you mean \"storage-classes\""),
            "{e}"
        );
        let e = s.check(&settings("colour = \"x\"")).unwrap_err();
        assert!(!e.to_string().contains("did you mean"), "{e}");
    }

    #[test]
    fn defaults_fill_what_is_not_set_as_the_module_reads_them() {
        let s = schema(SCHEMA).unwrap();
        let all = s.with_defaults(&settings("retries = 7\nzones = [\"a\"]"));
        assert_eq!(all["retries"], "7");
        assert_eq!(all["zones"], r#"["a"]"#);
        assert_eq!(all["storage-classes"], r#"{"gp2":"gp3"}"#);
        assert!(!all.contains_key("mode"));
    }

    #[test]
    fn a_schema_outside_the_subset_or_against_itself_is_refused() {
        for (text, says) in [
            (
                "[x]\ntype = \"integer\"\ndefault = \"three\"",
                "default: \"three\" is not of type",
            ),
            (
                "[x]\ntype = \"integer\"\nminimum = 5\ndefault = 1",
                "default: 1 is less than the minimum",
            ),
            (
                "[x]\ntype = \"string\"\nminimun = 1",
                "`minimun` is not a keyword the host reads; did you mean \"minimum\"?",
            ),
            (
                "[x]\ntype = \"string\"\nminimum = 1",
                "`minimum` goes with type integer or number",
            ),
            ("[x]\ntype = \"float\"", "is not one of string"),
            ("[x]\ntype = \"array\"", "says the schema of its `items`"),
            ("[x]\ntype = \"object\"", "`additionalProperties`"),
            (
                "[x]\ntype = \"object\"\nproperties.a = { minimum = 1 }",
                "properties.a: has no `type`",
            ),
            (
                "[x]\ntype = \"object\"\nproperties.a = { type = \"string\", default = \"b\" }",
                "nested defaults",
            ),
            ("[x]\ntype = \"string\"\npattern = \"(\"", "x"),
            (
                "[x]\ntype = \"string\"\n\"$ref\" = \"https://example.com/s.json\"",
                "`$ref` is not a keyword",
            ),
        ] {
            let e = schema(text).unwrap_err();
            assert!(e.key == "x" && e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn the_old_vocabulary_is_converted_with_a_deprecation() {
        let s = schema(
            r#"
            [mode]
            values = ["upstream", "extended"]
            default = "extended"
            [zones]
            type = "list"
            items = "integer"
            [classes]
            type = "map"
            [flag]
            type = "boolean"
            "#,
        )
        .unwrap();
        assert_eq!(s.deprecations.len(), 3, "{:?}", s.deprecations);
        assert!(
            s.deprecations[2].starts_with("settings-schema.zones: ")
                && s.deprecations[2].contains("items = { type = \"integer\" }, type = \"array\""),
            "{:?}",
            s.deprecations
        );
        s.check(&settings(
            "mode = \"upstream\"\nzones = [1]\nclasses = { a = \"b\" }\nflag = true",
        ))
        .unwrap();
        let e = s.check(&settings("zones = [\"a\"]")).unwrap_err();
        assert_eq!(e.key, "zones[0]", "{e}");
        let e = s.check(&settings("mode = [\"upstream\"]")).unwrap_err();
        assert!(e.to_string().contains("rule: type = \"string\""), "{e}");
    }

    #[test]
    fn no_schema_checks_nothing() {
        SettingsSchema::default()
            .check(&settings("anything = \"at all\""))
            .unwrap();
    }
}
