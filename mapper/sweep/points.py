"""A sweep's points and their canonical input hashes.

A point is one search: (architecture, workload, mapspace, strategy and its settings,
objective). Its key hashes the *loaded* contents, not file names or paths: moving or renaming a
file, or editing a description, changes nothing; changing a capacity, a size, a constraint or a
time limit makes a new key, so the point is searched again. Names are left out too, so identical
layers of a model (or the same shape reached two ways) are one point, searched once.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

from ..constraints import Constraints
from ..search import parse_objective
from ..spec import Arch, Workload
from .spec import LayerOf, SweepSpec

# no bearing on any cost (file: where it was read; `*_source`: where a figure came from)
DOCUMENTATION = frozenset({"description", "source", "file"})
# the top object's own name (and a workload's einsum text, which its tensors restate) neither:
# names of levels and tensors inside stay, since mappings and constraints refer to them
TOP_LEVEL_ONLY = frozenset({"name", "einsum"})


def canonical(value, top: bool = True):
    """A JSON-able form that is the same in every process (sets sorted, floats by repr)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        skip = DOCUMENTATION | (TOP_LEVEL_ONLY if top else set())
        return {f.name: canonical(getattr(value, f.name), False) for f in dataclasses.fields(value)
                if f.name not in skip and not f.name.endswith("_source")}
    if isinstance(value, (frozenset, set)):
        return sorted((canonical(v, False) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, (tuple, list)):
        return [canonical(v, False) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v, top) for k, v in value.items()}
    if isinstance(value, float):
        return repr(value) if math.isinf(value) or math.isnan(value) else value
    return value


def digest(value) -> str:
    return hashlib.sha256(json.dumps(canonical(value), sort_keys=True).encode()).hexdigest()


def arch_family(arch: Arch) -> str:
    """The hash of an architecture's shape, its level and compute names: the architectures an
    arch grid derives from one base are neighbours, whose mappings (over the same levels) may
    carry over to each other (each checked against the point's own space before it is used)."""
    return digest({"levels": arch.level_names, "compute": arch.compute.name})


def workload_family(workload: Workload) -> str:
    """The hash of a workload with its sizes left out: shapes of one family are neighbours."""
    return digest(dataclasses.replace(workload, sizes=(0,) * len(workload.sizes)))


@dataclass(frozen=True)
class Point:
    key: str                    # hash of every input below (the store's primary key)
    slot: str                   # names: the same slot with a new key replaces the old row
    arch: Arch
    workload: Workload
    constraints: Constraints
    strategy: str
    objective: str
    settings: tuple[tuple[str, float], ...]
    family: str                 # arch and workload families, mapspace, objective: warm-start neighbours
    layer: LayerOf | None = None

    @property
    def sizes(self) -> dict[str, int]:
        return dict(zip(self.workload.dims, self.workload.sizes))


def make_point(arch: Arch, workload: Workload, constraints: Constraints, strategy: str, objective: str,
               settings: dict, layer: LayerOf | None = None) -> Point:
    parse_objective(objective, arch)          # a bad objective fails before anything runs
    parts = {"arch": digest(arch), "workload": digest(workload), "mapspace": digest(constraints),
             "strategy": strategy, "settings": settings, "objective": objective}
    family = digest({**parts, "arch": arch_family(arch), "workload": workload_family(workload), "strategy": None,
                     "settings": None})
    slot = "|".join([arch.name, workload.name, constraints.name, strategy, objective])
    return Point(digest(parts), slot, arch, workload, constraints, strategy, objective,
                 tuple(sorted(settings.items())), family, layer)


def expand_points(spec: SweepSpec) -> list[Point]:
    """Every point of the sweep, in a stable order (architecture, mapspace, objective, workload,
    strategy). Points that share a key (identical inputs) all appear; the runner searches each
    key once."""
    out = []
    for arch in spec.archs:
        for constraints in spec.mapspaces:
            for objective in spec.objectives:
                for subject in spec.subjects:
                    for strategy in spec.strategies:
                        out.append(make_point(arch, subject.workload, constraints, strategy, objective,
                                              spec.settings.used_by(strategy), subject.layer))
    return out
