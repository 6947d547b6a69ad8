"""Unit tests of the action, natively (`python3 -m unittest`): the WIT bindings are stubbed, since
only componentize-py's build provides them."""

import json
import sys
import types
import unittest
from dataclasses import dataclass


def stub_bindings():
    """Just enough of the generated modules for `app` to import outside a component."""

    @dataclass
    class Record:
        def __init__(self, **fields):
            self.__dict__.update(fields)

    world = types.ModuleType("wit_world")
    exports = types.ModuleType("wit_world.exports")
    exports.Actions = object
    actions = types.ModuleType("wit_world.exports.actions")
    for name in ["ActionInfo", "Selector", "BackupResponse", "RestoreResponse", "Need_Kube", "Kind"]:
        setattr(actions, name, Record)
    imports = types.ModuleType("wit_world.imports")
    kube = types.ModuleType("wit_world.imports.kube")
    kube.ApiResource = Record
    kube.ListOptions = Record
    kube.Error_NotFound = Record
    config = types.ModuleType("wit_world.imports.config")
    config.get = lambda key: None
    wit_types = types.ModuleType("wit_world.imports.types")
    support = types.ModuleType("componentize_py_types")

    class Err(Exception):
        def __init__(self, value):
            super().__init__(value)
            self.value = value

    support.Err = Err
    exports.actions = actions
    imports.kube = kube
    imports.types = wit_types
    imports.config = config
    world.exports = exports
    world.imports = imports
    sys.modules.update({
        "wit_world": world,
        "wit_world.exports": exports,
        "wit_world.exports.actions": actions,
        "wit_world.imports": imports,
        "wit_world.imports.kube": kube,
        "wit_world.imports.types": wit_types,
        "wit_world.imports.config": config,
        "componentize_py_types": support,
    })


stub_bindings()
import app  # noqa: E402


__TESTS__

if __name__ == "__main__":
    unittest.main()
