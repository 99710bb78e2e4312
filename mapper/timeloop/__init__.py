"""Timeloop interoperability: read Timeloop's architecture, problem, mapping, constraint and ERT
files into this project's specs, and write this project's mappings as Timeloop mapping files.

Modules: `yamlio` (Timeloop's YAML tags and spellings), `arch`, `problem`, `mapping` (import and
export), `ert`, `constraints` (mapspace), `design` (group files by kind, build the specs).
See docs/TIMELOOP.md for the concept map and what is approximated.
"""
from importlib import import_module
from types import MappingProxyType

_LAZY = MappingProxyType({"Imported": "design", "build": "design", "read_parts": "design", "timeloop_keys": "design",
                          "export": "mapping"})


def __getattr__(name):
    """The public names, imported on first use: a search of this project's own specs imports
    `mapper.inputs` but never reads a Timeloop file (their import costs start-up)."""
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ("Imported", "build", "export", "read_parts", "timeloop_keys")
