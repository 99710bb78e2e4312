"""The scripts a test shares code with, imported from scripts/ by their name: the fuzzer's
document mutations (`fuzz_cases`), the networks the importer is given (`exported_models`)."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

SCRIPTS = pathlib.Path(__file__).resolve().parents[1] / "scripts"


def script_module(name: str):
    """scripts/`name`.py as a module, imported once (registered under its name, as the
    scripts import each other)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
