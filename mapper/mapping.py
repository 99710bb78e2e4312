"""The mapping value type, its dict (YAML) form, and its table form for vectorised evaluation.

A `Mapping` is one point of the mapspace: per storage level (outermost first) its temporal
loops (outermost first), its spatial loops (fanout to the next level), the tensors it keeps
and its buffering depth. A `MappingTable` holds N mappings as numpy arrays; it is what the
mapspace generates and what `evaluate_many` prices. Reading the dict form, with its checks
against an arch and a workload, is the loader's job (`load.mapping.mapping_from_dict`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .spec import Arch, Workload

AXES = ("x", "y")


@dataclass(frozen=True)
class LevelMapping:
    temporal: tuple[tuple[int, int], ...] = ()         # (dim, bound), outermost first
    spatial: tuple[tuple[int, int, int], ...] = ()     # (dim, bound, axis 0=x 1=y)
    keep: frozenset[int] = frozenset()                 # tensor indices held at this level
    stages: int = 1


@dataclass(frozen=True)
class Mapping:
    levels: tuple[LevelMapping, ...]                   # one per architecture level


def along_last(array: np.ndarray, rows) -> np.ndarray:
    """array[..., rows] (indices or a mask) with the last axis innermost in memory. numpy's
    fancy index on the last axis lays that axis out outermost, and every operation over the
    mappings then strides: the cost model ran far slower on such tables (docs/RESULTS.md)."""
    rows = np.asarray(rows)
    return np.take(array, np.flatnonzero(rows) if rows.dtype == bool else rows, axis=-1)


@dataclass(frozen=True)
class MappingTable:
    """N mappings as arrays, the mapping axis last so numpy works on long contiguous vectors.

    Invariant: for each mapping, every dim's factors multiply to its size.
    factors[l, s, d, n]: bound of dim d at level l, slot s = 0 temporal, 1 spatial x, 2 spatial y.
    order[l, :, n]: the dims of level l's temporal loops, outermost first (a permutation).
    keep[l, t, n]: level l holds tensor t.   stages[l, n]: buffering depth of level l.
    """

    factors: np.ndarray
    order: np.ndarray
    keep: np.ndarray
    stages: np.ndarray

    def __len__(self) -> int:
        return self.factors.shape[-1]

    def take(self, rows) -> "MappingTable":
        """The mappings `rows` (indices or a mask), in that order."""
        return MappingTable(*(along_last(a, rows) for a in (self.factors, self.order, self.keep, self.stages)))

    @staticmethod
    def concat(tables: list["MappingTable"]) -> "MappingTable":
        return MappingTable(*(np.concatenate([getattr(t, f) for t in tables], axis=-1)
                              for f in ("factors", "order", "keep", "stages")))


def to_table(mappings: list[Mapping], n_dims: int, n_tensors: int) -> MappingTable:
    n, n_levels = len(mappings), len(mappings[0].levels)
    factors = np.ones((n_levels, 3, n_dims, n), dtype=np.int64)
    order = np.zeros((n_levels, n_dims, n), dtype=np.int64)
    keep = np.zeros((n_levels, n_tensors, n), dtype=bool)
    stages = np.ones((n_levels, n), dtype=np.int64)
    for row, mapping in enumerate(mappings):
        for lv, level in enumerate(mapping.levels):
            listed = [d for d, _ in level.temporal]
            order[lv, :, row] = listed + [d for d in range(n_dims) if d not in listed]
            for d, bound in level.temporal:
                factors[lv, 0, d, row] = bound
            for d, bound, axis in level.spatial:
                factors[lv, 1 + axis, d, row] *= bound
            keep[lv, sorted(level.keep), row] = True
            stages[lv, row] = level.stages
    return MappingTable(factors, order, keep, stages)


def from_table(table: MappingTable, row: int) -> Mapping:
    """The mapping of one table row; unit loops are dropped."""
    levels = []
    for lv in range(table.factors.shape[0]):
        f = table.factors[lv, :, :, row]
        temporal = tuple((int(d), int(f[0, d])) for d in table.order[lv, :, row] if f[0, d] > 1)
        spatial = tuple((d, int(f[1 + a, d]), a) for a in (0, 1)
                        for d in range(f.shape[1]) if f[1 + a, d] > 1)
        keep = frozenset(int(t) for t in np.flatnonzero(table.keep[lv, :, row]))
        levels.append(LevelMapping(temporal, spatial, keep, int(table.stages[lv, row])))
    return Mapping(tuple(levels))


# ----------------------------------------------------------------------------- dict form

def is_padded(mapping: Mapping, workload: Workload) -> bool:
    """True when some dim's bounds multiply above its size (imperfect factors, padded)."""
    product = [1] * len(workload.dims)
    for lm in mapping.levels:
        for d, b in lm.temporal:
            product[d] *= b
        for d, b, _ in lm.spatial:
            product[d] *= b
    return product != list(workload.sizes)


def level_tiles(mapping: Mapping, n_dims: int) -> list[list[int]]:
    """Per level, the extent of every dim in the tile it holds (its loops and all below)."""
    spans, out = [1] * n_dims, []
    for lm in reversed(mapping.levels):
        for d, b in lm.temporal:
            spans[d] *= b
        for d, b, _ in lm.spatial:
            spans[d] *= b
        out.append(list(spans))
    return out[::-1]


def mapping_to_dict(mapping: Mapping, arch: Arch, workload: Workload) -> list[dict]:
    """The YAML/JSON form (the `mapping` list), which `mapping_from_dict` reads back."""
    out = []
    for level, lm in zip(arch.levels, mapping.levels):
        entry: dict = {"level": level.name,
                       "loops": [{"dim": workload.dims[d], "bound": b} for d, b in lm.temporal if b > 1]}
        spatial = [{"dim": workload.dims[d], "bound": b, "axis": AXES[a]} for d, b, a in lm.spatial if b > 1]
        if spatial:
            entry["spatial"] = spatial
        entry["keep"] = [workload.tensors[t].name for t in sorted(lm.keep)]
        entry["stages"] = lm.stages
        out.append(entry)
    return out
