"""Imports a process reuses: a sweep reads a model entry once for its layers and once for its
chains, and an ONNX file is read once (keyed by its path, size and modification time)."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


def importable(name) -> bool:
    """Whether `name` is a file the importer reads (rather than a model file or preset)."""
    path = Path(str(name))
    return path.suffix.lower() in (".onnx", ".pt2") or path.name == "config.json" or \
        (path.is_dir() and (path / "config.json").is_file())


def imported_model(path: str, seq: int | None, batch: int | None):
    """The `Model` of an importable file (`import_model` with the graph's own element types)."""
    try:
        stat = os.stat(path)
        stamp = (stat.st_size, stat.st_mtime_ns)
    except OSError:
        stamp = None                     # import_model says what is wrong with it
    return _cached(str(path), stamp, seq, batch).model


@lru_cache(maxsize=8)
def _cached(path: str, stamp, seq, batch):
    from .api import import_model
    return import_model(path, seq=seq, batch=batch)
