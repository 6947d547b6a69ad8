//! The module's settings: the `[settings]` table of its manifest, as the operator set them
//! (`wit/config.wit`). [`Config`] is the capability as a trait, [`HostConfig`] the host's, and
//! [`FakeConfig`] settings from a map for native unit tests, which records the keys read.
//!
//! ```
//! use velero_wasm_sdk::config::{Config, FakeConfig};
//!
//! /// How many times to retry: the `retries` setting, 3 when unset.
//! fn retries(config: &dyn Config) -> Result<u32, String> {
//!     match config.get("retries") {
//!         None => Ok(3),
//!         Some(text) => text
//!             .parse()
//!             .map_err(|_| format!("setting retries = {text:?} is not a number")),
//!     }
//! }
//!
//! assert_eq!(retries(&FakeConfig::new()), Ok(3));
//! let config = FakeConfig::new().with("retries", "5");
//! assert_eq!(retries(&config), Ok(5));
//! assert_eq!(config.reads(), ["retries"]);
//! assert!(retries(&FakeConfig::new().with("retries", "many")).is_err());
//! ```
//!
//! Typed: declare the settings once in the manifest (`[settings-schema.<key>]`, docs/authoring.md),
//! where the host checks them and fills in defaults, and read them all into a struct with [`read`]:
//!
//! ```
//! use std::collections::BTreeMap;
//! use velero_wasm_sdk::config::{self, FakeConfig};
//!
//! #[derive(serde::Deserialize, Default)]
//! #[serde(default, rename_all = "kebab-case")]
//! struct Settings {
//!     storage_classes: BTreeMap<String, String>,
//!     retries: Option<u32>,
//!     dry_run: bool,
//! }
//!
//! let config = FakeConfig::new()
//!     .with("storage-classes", r#"{"gp2": "gp3"}"#)
//!     .with("retries", "5");
//! let settings: Settings = config::read(&config).unwrap();
//! assert_eq!(settings.storage_classes["gp2"], "gp3");
//! assert_eq!(settings.retries, Some(5));
//! assert!(!settings.dry_run);
//! let e = config::read::<Settings>(&FakeConfig::new().with("retries", "many")).err().unwrap();
//! assert!(e.starts_with("settings.retries: "), "{e}");
//! ```
//!
//! In native unit tests, [`FakeConfig::with_manifest`] starts from what the host would pass: the
//! manifest's `[settings]` over the defaults of its `[settings-schema]`, so a default is written once,
//! in the manifest:
//!
//! ```
//! use velero_wasm_sdk::config::{self, FakeConfig};
//!
//! #[derive(serde::Deserialize)]
//! #[serde(rename_all = "kebab-case")]
//! struct Settings {
//!     retries: u32,
//!     zones: Vec<String>,
//! }
//!
//! let manifest = r#"
//!     [settings-schema.retries]
//!     type = "integer"
//!     minimum = 1
//!     default = 3
//!     [settings-schema.zones]
//!     type = "array"
//!     items = { type = "string" }
//!     default = ["a"]
//! "#;
//! let settings: Settings = config::read(&FakeConfig::with_manifest(manifest)?).unwrap();
//! assert_eq!((settings.retries, settings.zones), (3, vec!["a".to_string()]));
//! let config = FakeConfig::with_manifest(manifest)?.with("retries", "5");
//! assert_eq!(config::read::<Settings>(&config).unwrap().retries, 5);
//! # Ok::<(), String>(())
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::de::{self, value, DeserializeOwned, IntoDeserializer, Visitor};

/// The `config` capability, so that logic reading settings runs against a [`FakeConfig`] in native
/// unit tests.
pub trait Config {
    /// One setting, if set.
    fn get(&self, key: &str) -> Option<String>;
    /// Every setting, by key.
    fn all(&self) -> Vec<(String, String)>;
}

/// The host's `config` capability. Outside a wasm32 build (native unit tests) there is no host and
/// no setting is set.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostConfig;

impl Config for HostConfig {
    fn get(&self, key: &str) -> Option<String> {
        get(key)
    }
    fn all(&self) -> Vec<(String, String)> {
        all()
    }
}

/// Settings from a map, for native unit tests. It records the keys read.
#[derive(Debug, Default, Clone)]
pub struct FakeConfig {
    settings: BTreeMap<String, String>,
    reads: RefCell<Vec<String>>,
}

impl FakeConfig {
    /// No settings.
    pub fn new() -> FakeConfig {
        FakeConfig::default()
    }

    /// The settings the host would pass a module with this manifest (its text): the manifest's
    /// `[settings]`, and the `default` of each `[settings-schema.<key>]` that `[settings]` does not
    /// set, as the module reads them (strings as written, other scalars as TOML writes them, arrays
    /// and tables as JSON). The host checks them against the schema; this does not.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_manifest(manifest: &str) -> Result<FakeConfig, String> {
        let manifest: toml::Table =
            toml::from_str(manifest).map_err(|e| format!("the manifest: {e}"))?;
        let table = |name: &str| match manifest.get(name) {
            None => Ok(toml::Table::new()),
            Some(toml::Value::Table(table)) => Ok(table.clone()),
            Some(_) => Err(format!("the manifest: [{name}] is not a table")),
        };
        let mut settings: BTreeMap<String, String> = table("settings")?
            .into_iter()
            .map(|(key, value)| (key, toml_text(value)))
            .collect();
        for (key, schema) in table("settings-schema")? {
            if let Some(default) = schema.get("default") {
                settings
                    .entry(key)
                    .or_insert_with(|| toml_text(default.clone()));
            }
        }
        Ok(FakeConfig {
            settings,
            reads: RefCell::default(),
        })
    }

    /// Sets `key`.
    pub fn with(mut self, key: &str, value: &str) -> FakeConfig {
        self.settings.insert(key.to_string(), value.to_string());
        self
    }

    /// The keys read by [`Config::get`], in order.
    pub fn reads(&self) -> Vec<String> {
        self.reads.borrow().clone()
    }
}

impl Config for FakeConfig {
    fn get(&self, key: &str) -> Option<String> {
        self.reads.borrow_mut().push(key.to_string());
        self.settings.get(key).cloned()
    }
    fn all(&self) -> Vec<(String, String)> {
        self.settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// A manifest's value as the host passes it to a module (the host's `settings_schema::to_text`).
#[cfg(not(target_arch = "wasm32"))]
fn toml_text(value: toml::Value) -> String {
    match value {
        toml::Value::String(s) => s,
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        other => serde_json::to_string(&json(other)).unwrap_or_default(),
    }
}

/// A TOML value as JSON (datetimes as their text), as the host reads a manifest.
#[cfg(not(target_arch = "wasm32"))]
fn json(value: toml::Value) -> serde_json::Value {
    match value {
        toml::Value::String(s) => serde_json::Value::String(s),
        toml::Value::Integer(i) => i.into(),
        toml::Value::Float(f) => f.into(),
        toml::Value::Boolean(b) => b.into(),
        toml::Value::Datetime(d) => d.to_string().into(),
        toml::Value::Array(items) => items.into_iter().map(json).collect(),
        toml::Value::Table(table) => table.into_iter().map(|(k, v)| (k, json(v))).collect(),
    }
}

/// One setting, if set.
pub fn get(key: &str) -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::config::get(key);
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = key;
        None
    }
}

/// Every setting, by key.
pub fn all() -> Vec<(String, String)> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::config::all();
    #[cfg(not(target_arch = "wasm32"))]
    Vec::new()
}

/// Every setting, read into `T` (a struct deriving `serde::Deserialize`; settings keys are usually
/// kebab-case, so `#[serde(rename_all = "kebab-case")]`). Each value is read as the host passes it:
/// text for strings, numbers and booleans, JSON for lists and maps (a manifest's arrays and tables).
/// An error names the setting: `settings.retries: invalid type: string "many", expected u32`.
pub fn read<T: DeserializeOwned>(config: &dyn Config) -> Result<T, String> {
    let all = config.all();
    let entries = all.iter().map(|(key, text)| {
        (
            key.as_str(),
            Text {
                key: key.as_str(),
                text: text.as_str(),
            },
        )
    });
    T::deserialize(value::MapDeserializer::<_, value::Error>::new(entries))
        .map_err(|e| e.to_string())
}

/// One setting's text, read as whatever type the struct's field asks for.
struct Text<'a> {
    key: &'a str,
    text: &'a str,
}

impl<'a> Text<'a> {
    /// An error that names the setting (once: errors from nested values already do).
    fn error(&self, e: impl std::fmt::Display) -> value::Error {
        let e = e.to_string();
        if e.starts_with("settings.") {
            de::Error::custom(e)
        } else {
            de::Error::custom(format!("settings.{}: {e}", self.key))
        }
    }

    /// The text as JSON, for types text cannot be (numbers, booleans, lists, maps).
    fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(self.text.trim()).ok()
    }
}

impl<'a> IntoDeserializer<'a, value::Error> for Text<'a> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

/// `deserialize_*` methods that read the text as JSON, or offer it as a string when it is not JSON
/// (so that the error says what the text was and what was expected).
macro_rules! as_json {
    ($($method:ident),*) => {$(
        fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
            match self.json() {
                Some(json) => json.$method(visitor).map_err(|e| self.error(e)),
                None => visitor.visit_borrowed_str::<value::Error>(self.text).map_err(|e| self.error(e)),
            }
        }
    )*};
}

impl<'a> de::Deserializer<'a> for Text<'a> {
    type Error = value::Error;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        match self.json() {
            Some(json) if !json.is_string() => {
                json.deserialize_any(visitor).map_err(|e| self.error(e))
            }
            _ => visitor
                .visit_borrowed_str::<value::Error>(self.text)
                .map_err(|e| self.error(e)),
        }
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        visitor
            .visit_borrowed_str::<value::Error>(self.text)
            .map_err(|e| self.error(e))
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, value::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, value::Error> {
        match self.json() {
            Some(json @ serde_json::Value::Object(_)) => json
                .deserialize_enum(name, variants, visitor)
                .map_err(|e| self.error(e)),
            _ => {
                let text: value::StrDeserializer<'_, value::Error> = self.text.into_deserializer();
                visitor.visit_enum(text).map_err(|e| self.error(e))
            }
        }
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, value::Error> {
        match self.json() {
            Some(json) => json
                .deserialize_struct(name, fields, visitor)
                .map_err(|e| self.error(e)),
            None => visitor
                .visit_borrowed_str::<value::Error>(self.text)
                .map_err(|e| self.error(e)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, value::Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_tuple<V: Visitor<'a>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, value::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, value::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        visitor.visit_unit()
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        visitor
            .visit_borrowed_bytes::<value::Error>(self.text.as_bytes())
            .map_err(|e| self.error(e))
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, value::Error> {
        self.deserialize_bytes(visitor)
    }

    as_json!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_unit,
        deserialize_seq,
        deserialize_map
    );
}

#[cfg(test)]
mod typed_tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Upstream,
        Extended,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "kebab-case", deny_unknown_fields)]
    struct Settings {
        mode: Mode,
        #[serde(default)]
        zones: Vec<String>,
        name: String,
        limit: f64,
        #[serde(default)]
        dry_run: Option<bool>,
    }

    #[test]
    fn each_field_reads_its_type_from_text() {
        let config = FakeConfig::new()
            .with("mode", "upstream")
            .with("zones", r#"["a", "b"]"#)
            .with("name", "123")
            .with("limit", "2.5")
            .with("dry-run", "true");
        let s: Settings = read(&config).unwrap();
        assert_eq!(s.mode, Mode::Upstream);
        assert_eq!(s.zones, ["a", "b"]);
        assert_eq!(
            s.name, "123",
            "a string field takes text that looks like a number"
        );
        assert_eq!(s.limit, 2.5);
        assert_eq!(s.dry_run, Some(true));
    }

    #[test]
    fn errors_name_the_setting() {
        let base = || FakeConfig::new().with("name", "n").with("limit", "1");
        for (key, value, says) in [
            (
                "mode",
                "sideways",
                "settings.mode: unknown variant `sideways`",
            ),
            (
                "zones",
                "a,b",
                "settings.zones: invalid type: string \"a,b\"",
            ),
            (
                "limit",
                "lots",
                "settings.limit: invalid type: string \"lots\"",
            ),
        ] {
            let config = base().with("mode", "extended").with(key, value);
            let e = read::<Settings>(&config).unwrap_err();
            assert!(e.starts_with(says), "{key}={value}: {e}");
        }
        let e = read::<Settings>(&base()).unwrap_err();
        assert!(e.contains("missing field `mode`"), "{e}");
        let e = read::<Settings>(&base().with("mode", "upstream").with("colour", "x")).unwrap_err();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn a_default_written_once_in_the_manifest_reaches_the_test() {
        let manifest = r#"
            [settings]
            name = "from-settings"
            [settings-schema.mode]
            type = "string"
            enum = ["upstream", "extended"]
            default = "extended"
            [settings-schema.zones]
            type = "array"
            items = { type = "string", minLength = 1 }
            default = ["a", "b"]
            [settings-schema.name]
            type = "string"
            default = "from-default"
            [settings-schema.limit]
            type = "number"
            default = 2.5
            [settings-schema.dry-run]
            type = "boolean"
        "#;
        let config = FakeConfig::with_manifest(manifest).unwrap();
        let s: Settings = read(&config).unwrap();
        assert_eq!(s.mode, Mode::Extended);
        assert_eq!(s.zones, ["a", "b"]);
        assert_eq!(s.name, "from-settings", "[settings] wins over a default");
        assert_eq!(s.limit, 2.5);
        assert_eq!(s.dry_run, None, "no default: unset");
        let s: Settings = read(&config.with("mode", "upstream")).unwrap();
        assert_eq!(s.mode, Mode::Upstream, "with() wins over the manifest");
        assert!(FakeConfig::with_manifest("settings = 3").is_err());
    }
}
