"""Timeloop interoperability: read Timeloop's architecture, problem, mapping, constraint and ERT
files into this project's specs, and write this project's mappings as Timeloop mapping files.

Modules: `yamlio` (Timeloop's YAML tags and spellings), `arch`, `problem`, `mapping` (import and
export), `ert`, `constraints` (mapspace), `design` (group files by kind, build the specs).
See docs/TIMELOOP.md for the concept map and what is approximated.
"""
from .design import Imported, build, read_parts, timeloop_keys
from .mapping import export

__all__ = ["Imported", "build", "export", "read_parts", "timeloop_keys"]
