"""The mapping value type, its YAML form, and its table form for vectorised evaluation.

A `Mapping` is one point of the mapspace: per storage level (outermost first) its temporal
loops (outermost first), its spatial loops (fanout to the next level), the tensors it keeps
and its buffering depth. A `MappingTable` holds N mappings as numpy arrays; it is what the
mapspace generates and what `evaluate_many` prices.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .spec import Arch, Workload
from .errors import shown
from .units import Where
from .validate import fields, name_list, positive_int

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
    mappings then strides: the cost model ran at half speed on such tables."""
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


# ----------------------------------------------------------------------------- YAML form

def mapping_from_dict(data, arch: Arch, workload: Workload, where: Where) -> Mapping:
    """Parse and check the structure of a mapping (factors, fanout, keeps, stages).

    Capacity is checked by the caller with the cost model's footprints (see `load.load_mapping`).
    """

    padded = False
    if isinstance(data, dict) and "mapping" in data:
        # `cost` and `search` are what `evaluate --json` and `search --json` print beside the
        # mapping: that output reads back as a mapping file
        fields(data, where, ("mapping",), ("arch", "workload", "padded", "cost", "search"))
        padded = data.get("padded", False)
        if not isinstance(padded, bool):
            raise (where / "padded").error("expected true (dims may be padded) or false")
        data, where = data["mapping"], where / "mapping"
    if not isinstance(data, list):
        raise where.error("expected a list of levels, outermost first: "
                          "[{level: NAME, loops: [{dim: m, bound: 4}], ...}]")
    names = arch.level_names
    by_level: dict[int, tuple[dict, Where]] = {}
    last = -1
    for i, entry in enumerate(data):
        w = where / i
        fields(entry, w, ("level",), ("loops", "spatial", "keep", "bypass", "stages"))
        if entry["level"] not in names:
            raise (w / "level").error(f"no level {shown(entry['level'])} in arch {arch.name} "
                                      f"(levels: {', '.join(names)})")
        lv = names.index(entry["level"])
        if lv <= last:
            raise (w / "level").error("levels must appear once each, outermost first "
                                      f"(arch order: {', '.join(names)})")
        last = lv
        by_level[lv] = (entry, w)

    dims = workload.dims
    tensor_names = [t.name for t in workload.tensors]
    product = [1] * len(dims)

    def loop(item, w: Where, spatial: bool):
        fields(item, w, ("dim", "bound"), ("axis",) if spatial else ())
        if item["dim"] not in dims:
            raise (w / "dim").error(f"no dim {shown(item['dim'])} in workload {workload.name} "
                                    f"(dims: {', '.join(dims)})")
        d = dims.index(item["dim"])
        bound = positive_int(item["bound"], w / "bound", "a positive integer bound")
        product[d] *= bound
        if not spatial:
            return d, bound
        axis = item.get("axis", "x")
        if axis not in AXES:
            raise (w / "axis").error(f"expected 'x' or 'y', got {shown(axis)}")
        return d, bound, AXES.index(axis)

    levels = []
    for lv, level in enumerate(arch.levels):
        entry, w = by_level.get(lv, ({}, where / level.name))
        loops = entry.get("loops") or []
        spatial_raw = entry.get("spatial") or []
        for key, value in (("loops", loops), ("spatial", spatial_raw)):
            if not isinstance(value, list):
                raise (w / key).error("expected a list of {dim: NAME, bound: N} loops")
        temporal = tuple(loop(item, w / "loops" / j, False) for j, item in enumerate(loops))
        seen = [d for d, _ in temporal]
        for j, d in enumerate(seen):
            if seen.index(d) != j:
                raise (w / "loops" / j / "dim").error(
                    f"dim {shown(dims[d])} appears twice among this level's temporal loops; "
                    "a level has at most one temporal loop per dim")
        spatial = tuple(loop(item, w / "spatial" / j, True) for j, item in enumerate(spatial_raw))
        fanout = arch.fanout(lv)
        for a, axis_name in enumerate(AXES):
            used = math.prod(b for _, b, ax in spatial if ax == a)
            if used > fanout[a]:
                raise (w / "spatial").error(
                    f"spatial fanout along {axis_name} is {used}, above the {fanout[a]} instances "
                    f"this level fans out to along {axis_name}")
        allowed = [t for t in tensor_names if level.may_keep(t)]
        if "keep" in entry and "bypass" in entry:
            raise (w / "bypass").error("give either `keep` or `bypass`, not both")
        if "keep" in entry:
            keep_names = name_list(entry["keep"], w / "keep")
        elif "bypass" in entry:
            bypass = name_list(entry["bypass"], w / "bypass")
            for name in bypass:
                if name not in tensor_names:
                    raise (w / "bypass").error(f"no tensor {shown(name)} (tensors: {', '.join(tensor_names)})")
            keep_names = [t for t in allowed if t not in bypass]
        else:
            keep_names = allowed
        for name in keep_names:
            if name not in tensor_names:
                raise (w / "keep").error(f"no tensor {shown(name)} (tensors: {', '.join(tensor_names)})")
            if name not in allowed:
                raise (w / "keep").error(f"level {level.name} may not keep {name} "
                                         f"(it keeps: {', '.join(allowed) or 'nothing'})")
        if lv == 0 and sorted(keep_names) != sorted(tensor_names):
            raise (w / "keep").error("the outermost level must keep every tensor")
        stages = positive_int(entry.get("stages", 1), w / "stages")
        if stages > level.max_stages:
            raise (w / "stages").error(f"{stages} stages exceed the level's max_stages "
                                       f"({level.max_stages})")
        levels.append(LevelMapping(temporal, spatial,
                                   frozenset(tensor_names.index(n) for n in keep_names), stages))
    for d, name in enumerate(dims):
        if padded and product[d] > 2 * workload.sizes[d]:
            raise where.error(f"the bounds of dim {name!r} multiply to {product[d]:,}, more than twice "
                              f"its size {workload.sizes[d]:,} (the most padding this tool handles)")
        if product[d] < workload.sizes[d] or (product[d] > workload.sizes[d] and not padded):
            hint = "" if padded or product[d] < workload.sizes[d] else \
                " (to pad the dim, say `padded: true` beside `mapping:`)"
            raise where.error(f"the bounds of dim {shown(name)} multiply to {product[d]}, "
                              f"but its size is {workload.sizes[d]}{hint}")
    return Mapping(tuple(levels))


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
