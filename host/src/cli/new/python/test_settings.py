"""Unit tests of `settings.read`, natively (`python3 -m unittest`)."""

import importlib.util
import sys
import types
import unittest
from dataclasses import dataclass, field
from typing import Optional
from unittest import mock

import settings


@dataclass
class Example:
    storage_classes: dict[str, str] = field(default_factory=dict)
    namespaces: list = field(default_factory=list)
    retries: int = 3
    ratio: float = 0.5
    dry_run: bool = False
    mode: str = "fast"
    owner: Optional[str] = None


class Read(unittest.TestCase):
    def test_each_field_reads_its_kebab_case_setting_as_its_type(self):
        given = {
            "storage-classes": '{"gp2": "gp3"}',
            "namespaces": '["apps", "web"]',
            "retries": "5",
            "ratio": "0.25",
            "dry-run": "true",
            "mode": "thorough",
            "owner": "team-a",
        }
        read = settings.read(Example, given.get)
        self.assertEqual(read.storage_classes, {"gp2": "gp3"})
        self.assertEqual(read.namespaces, ["apps", "web"])
        self.assertEqual((read.retries, read.ratio, read.dry_run), (5, 0.25, True))
        self.assertEqual((read.mode, read.owner), ("thorough", "team-a"))

    def test_a_setting_not_given_keeps_its_default(self):
        self.assertEqual(settings.read(Example, {}.get), Example())

    def test_a_value_of_the_wrong_type_names_its_key(self):
        for key, text in [("retries", "many"), ("dry-run", "yes"), ("storage-classes", '["gp2"]')]:
            with self.assertRaises(settings.SettingError) as raised:
                settings.read(Example, {key: text}.get)
            self.assertIn(f"setting {key}: {text!r}", str(raised.exception))


class FromTheManifest(unittest.TestCase):
    def test_a_default_written_once_in_the_manifest_reaches_the_test(self):
        text = """
[settings]
mode = "thorough"

[settings-schema.retries]
type = "integer"
minimum = 1
default = 7

[settings-schema.namespaces]
type = "array"
items = { type = "string" }
default = ["apps"]

[settings-schema.mode]
type = "string"
enum = ["fast", "thorough"]
default = "fast"
"""
        read = settings.read(Example, settings.manifest(text).get)
        self.assertEqual((read.retries, read.namespaces, read.mode), (7, ["apps"], "thorough"))
        read = settings.read(Example, settings.manifest(text, {"retries": "2"}).get)
        self.assertEqual(read.retries, 2)
        self.assertEqual(settings.as_text(3.0), "3")
        self.assertEqual(settings.as_text({"gp2": "gp3"}), '{"gp2":"gp3"}')


class InTheComponent(unittest.TestCase):
    def test_the_hosts_settings_are_read_without_importing_during_the_call(self):
        # As componentize-py builds it: the bindings exist while settings.py is imported (the
        # snapshot), and no module can be imported afterwards, during a call: the component has no
        # files. An import made only inside `read` failed there with an ImportError for `config`.
        world = types.ModuleType("wit_world")
        imports = types.ModuleType("wit_world.imports")
        config = types.ModuleType("wit_world.imports.config")
        config.get = {"retries": "7", "dry-run": "true"}.get
        imports.config = config
        world.imports = imports
        snapshot = {"wit_world": world, "wit_world.imports": imports, "wit_world.imports.config": config}
        with mock.patch.dict(sys.modules, snapshot):
            spec = importlib.util.spec_from_file_location("settings_in_component", settings.__file__)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        # The call: the bindings' modules are out of reach of `import`.
        del imports.config
        with mock.patch.dict(sys.modules, {"wit_world": None, "wit_world.imports": None}):
            read = module.read(Example)
        self.assertEqual((read.retries, read.dry_run, read.mode), (7, True, "fast"))

    def test_natively_without_bindings_read_asks_for_the_settings(self):
        spec = importlib.util.spec_from_file_location("settings_native", settings.__file__)
        module = importlib.util.module_from_spec(spec)
        with mock.patch.dict(sys.modules, {"wit_world": None, "wit_world.imports": None}):
            spec.loader.exec_module(module)
            with self.assertRaises(module.SettingError) as raised:
                module.read(Example)
        self.assertIn("settings.read(cls, {", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
