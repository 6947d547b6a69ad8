"""Unit tests of `settings.read`, natively (`python3 -m unittest`)."""

import unittest
from dataclasses import dataclass, field
from typing import Optional

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


if __name__ == "__main__":
    unittest.main()
