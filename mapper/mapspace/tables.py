"""Per-dim factorisation tables: every ordered factorisation of a dim's extents over the
slots, pruned by the preset's per-dim bounds and by divisibility down to the native shape.

`space` below is a `Mapspace`, not imported: it builds its tables from here (`step_tables`),
and an import back, even for annotations, would close a circle."""
from __future__ import annotations

import numpy as np

from ..factors import enumerate_factorizations
from ..tails import masked_levels
from .common import SPATIAL_X, SPATIAL_Y, TEMPORAL


def _dim_rows(space, d: int) -> np.ndarray:
    """Every ordered factorisation of dim d's allowed extents over the slots, (M, K)."""
    return np.concatenate([enumerate_factorizations(e, len(space.slots)) for e in space.extents[d]])


def level_view(space, rows: np.ndarray):
    """Temporal factor, spatial factor and tile per level for per-dim rows: three (M, L)."""
    m = rows.shape[0]
    # column-major with explicit products: a level's column is contiguous, and numpy's
    # cumprod over a reversed view took three times as long (a dim of 10^5 rows is read
    # this way a few dozen times while a search is set up)
    temporal = np.ones((m, space.n_levels), np.int64, order="F")
    spatial = np.ones((m, space.n_levels), np.int64, order="F")
    for k, (lv, kind) in enumerate(space.slots):
        (temporal if kind == TEMPORAL else spatial)[:, lv] *= rows[:, k]
    tile = temporal * spatial
    for lv in range(space.n_levels - 2, -1, -1):
        tile[:, lv] *= tile[:, lv + 1]
    return temporal, spatial, tile


def constraint_mask(space, d: int, rows: np.ndarray) -> np.ndarray:
    temporal, spatial, tile = level_view(space, rows)
    name = space.workload.dims[d]
    ok = np.ones(rows.shape[0], bool)
    for lv, lc in enumerate(space.level_constraints):
        for key, values, ranges in (("temporal", temporal, lc.temporal), ("spatial", spatial, lc.spatial),
                                    ("tile", tile, lc.tile)):
            for dim_name, rng in ranges:
                space.dim_index(dim_name, lv, key)
                if dim_name == name:
                    ok &= rng.admits(values[:, lv])
        for key, kind, ranges in (("spatial_x", SPATIAL_X, lc.spatial_x), ("spatial_y", SPATIAL_Y, lc.spatial_y)):
            for dim_name, rng in ranges:
                space.dim_index(dim_name, lv, key)
                if dim_name == name:
                    # the factor on this one axis (1 where the level does not fan out along it)
                    along = np.ones(rows.shape[0], np.int64)
                    for k, slot in enumerate(space.slots):
                        if slot == (lv, kind):
                            along = rows[:, k]
                    ok &= rng.admits(along)
    return ok


def cluster_mask(space, d: int, rows: np.ndarray) -> np.ndarray:
    """Dims a thread-block cluster (`block_clusters`: a level's spatial y) may split. Not a
    dim that indexes every input on axes of its own (a GEMM's k): such a split shares no
    tile and prices as the same split over the clusters side by side (x), which the part
    schedules at least as often, so only that one is in the space (as one loop order
    stands for its class). Not a dim of a sliding window (a convolution's p, r): TMA
    multicast sends one box to the CTAs that need it, and CTAs whose windows overlap
    share none whole."""
    def on_own_axes(tensor) -> bool:         # indexed by d, and only on axes of d alone
        axes = [axis for axis in tensor.axes if any(dd == d and c for dd, c in axis)]
        return bool(axes) and all(sum(1 for _, c in axis if c) == 1 for axis in axes)

    def in_a_window(tensor) -> bool:
        return any(sum(1 for _, c in axis if c) > 1 and any(dd == d and c for dd, c in axis)
                   for axis in tensor.axes)

    inputs = [t for t in space.workload.tensors if not t.is_output]
    shares_nothing = bool(inputs) and all(on_own_axes(t) for t in inputs)
    if not shares_nothing and not any(in_a_window(t) for t in space.workload.tensors):
        return np.ones(rows.shape[0], bool)
    ok = np.ones(rows.shape[0], bool)
    for k, (lv, kind) in enumerate(space.slots):
        if kind == SPATIAL_Y and space.arch.levels[lv].clusters is not None:
            ok &= rows[:, k] == 1
    return ok


def divisibility_mask(space, d: int, rows: np.ndarray) -> np.ndarray:
    """Where dim d alone plays a role of the native op shape (`roles.py`), its innermost
    tile is a multiple of the role's native size, or the whole dim when it is smaller (decode's
    m = 1: the unit pads it internally). A role several dims share couples them: checked on
    the product of their tiles (`pruning.fragment_mask`), not here."""
    if d in space.workload.block_dims:
        return block_mask(space, d, rows)
    size = 1 if space.roles is None else space.roles.grain(d)
    if size == 1:
        return np.ones(rows.shape[0], bool)
    tile = level_view(space, rows)[2][:, -1]
    extent = rows.prod(axis=1)
    return (tile % size == 0) | ((tile == extent) & (extent < size))


def block_mask(space, d: int, rows: np.ndarray) -> np.ndarray:
    """A block-scaled format's block dim (`k_in`, `load/block_scaled.py`) whole, unpadded, in
    the innermost level's temporal loop: the MMA consumes whole blocks with their scale."""
    temporal = level_view(space, rows)[0][:, -1]
    return temporal == space.workload.sizes[d]


def tail_mask(space, d: int, rows: np.ndarray) -> np.ndarray:
    """Where dim d's extent has a masked tail (`tails.py`), the grid is the real one: the
    tile at the per-SM level (a block's) is longer than the padding, so that no block, and
    no step of a block's main loop, is all padding (a kernel's grid is ceil(size / tile))."""
    block = masked_levels(space.arch)
    if not block:
        return np.ones(rows.shape[0], bool)
    padding = rows.prod(axis=1) - space.workload.sizes[d]
    return (padding == 0) | (level_view(space, rows)[2][:, block] > padding)


def pruned_tables(space) -> dict[str, list[np.ndarray]]:
    """Per pruning step ("raw", "constraints", "divisibility"), the per-dim tables that survive
    it; built once per space and its parts (`Mapspace.step_tables`)."""
    raw = [_dim_rows(space, d) for d in range(space.n_dims)]
    constrained = [r[constraint_mask(space, d, r) & cluster_mask(space, d, r)] for d, r in enumerate(raw)]
    divisible = [r[divisibility_mask(space, d, r) & tail_mask(space, d, r)] for d, r in enumerate(constrained)]
    return {"raw": raw, "constraints": constrained, "divisibility": divisible}
