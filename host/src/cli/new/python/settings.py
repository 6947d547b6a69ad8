"""Typed settings: the module's `[settings]`, read into a dataclass (the Rust SDK's `config::read`).

    from dataclasses import dataclass, field
    import settings

    @dataclass
    class Settings:
        storage_classes: dict[str, str] = field(default_factory=dict)  # "storage-classes", a map
        retries: int = 3

    current = settings.read(Settings)                     # in the component: the host's settings
    current = settings.read(Settings, {"retries": "5"}.get)  # in a unit test
    # in a unit test, from the manifest: its [settings] over its schema's defaults, then yours
    current = settings.read(Settings, settings.manifest(open("module.toml").read(), {"retries": "5"}).get)

Each field reads the setting of its name in kebab-case (`storage_classes` from `storage-classes`); a
setting not given keeps the field's default; the host fills in the manifest's `[settings-schema]`
defaults, and `manifest(text)` does the same natively, so a default need only be written there. The host passes lists and maps as JSON, other values as text; the field's type
says how to read one: str, int, float, bool, list or dict (also `list[str]`, `dict[str, str]`,
`Optional[...]`). A value that does not read as its type raises `SettingError`, naming the key.
"""

import dataclasses
import json
import types
import typing

# The host's settings, imported with this module: componentize-py snapshots the interpreter after
# importing app.py and what it imports, and the component has no files to import from afterwards, so
# an import first made inside `read`, during a call, fails there (ImportError for `config`).
try:
    from wit_world.imports import config as host_config
except ImportError:  # natively, without the bindings: a unit test gives `read` its own `get`
    host_config = None


class SettingError(ValueError):
    """A setting whose value does not read as its field's type."""


def read(cls, get=None):
    """An instance of the dataclass `cls`, each field read from its setting through `get(key)` (text
    or None; by default the host's `config.get`)."""
    if get is None:
        get = host_get()
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        key = field.name.replace("_", "-")
        text = get(key)
        if text is not None:
            values[field.name] = convert(key, text, hints.get(field.name, str))
    return cls(**values)


def manifest(text, given=None):
    """The settings the host would pass a module with the manifest `text` (a dict of text, for
    `read(cls, manifest(text).get)`): its `[settings]`, then the `default` of each
    `[settings-schema.<key>]` not set there, then `given` over them. Natively only (tomllib)."""
    import tomllib

    parsed = tomllib.loads(text)
    values = {key: as_text(value) for key, value in parsed.get("settings", {}).items()}
    for key, schema in parsed.get("settings-schema", {}).items():
        if "default" in schema:
            values.setdefault(key, as_text(schema["default"]))
    values.update(given or {})
    return values


def as_text(value):
    """A manifest's value as the host passes it: strings as written, numbers and booleans as TOML
    writes them, arrays and tables as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def host_get():
    """The host's `config.get`: the one imported with this module (in the component), else the
    bindings a unit test stubbed after importing it."""
    global host_config
    if host_config is None:
        try:
            from wit_world.imports import config as host_config
        except ImportError:
            raise SettingError(
                "settings.read(cls) reads the host's settings, which only the component has: "
                "natively, give it the settings, e.g. settings.read(cls, {\"retries\": \"5\"}.get)"
            ) from None
    return host_config.get


def convert(key, text, kind):
    """The setting `key`'s `text` read as `kind`."""
    origin = typing.get_origin(kind) or kind
    if origin in (typing.Union, types.UnionType):
        # Optional[T]: read as T.
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
        origin = typing.get_origin(kind) or kind
    name = getattr(origin, "__name__", str(origin))
    try:
        if origin is str:
            return text
        if origin is bool:
            if text in ("true", "false"):
                return text == "true"
            raise ValueError("give true or false")
        if origin is int:
            return int(text)
        if origin is float:
            return float(text)
        if origin in (list, dict):
            value = json.loads(text)
            if not isinstance(value, origin):
                raise ValueError(f"JSON {type(value).__name__}, not {name}")
            return value
    except ValueError as e:
        raise SettingError(f"setting {key}: {text!r} is not a {name}: {e}") from None
    raise SettingError(
        f"setting {key}: its field's type {kind} is not one a setting takes "
        "(str, int, float, bool, list, dict)"
    )
