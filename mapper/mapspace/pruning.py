"""The coupled checks, those that couple dims and so run on batches of the cross product:
spatial fanout, capacity per level, GPU occupancy (`infeasible`: why, when they leave nothing)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .. import depths, tails, tiles
from ..cost import occupancy
from ..cost.vectorised import fits_every_fanout
from ..mapping import MappingTable
from . import order_tables, tables
from .common import TEMPORAL

if TYPE_CHECKING:
    from .space import Mapspace


def tile_words(space: Mapspace, factors: np.ndarray) -> list[np.ndarray]:
    """Tile words per tensor, each (L, N) (`tiles.tile_words`)."""
    return tiles.tile_words(space.workload, factors)


def fanout_mask(space: Mapspace, factors: np.ndarray) -> np.ndarray:
    ok = fits_every_fanout(space.arch, factors)
    if space.constraints.min_utilization > 0:
        used = factors[:, 1:].prod(axis=(0, 1, 2))
        ok &= used >= space.constraints.min_utilization * space.arch.compute.instances
    return ok


def footprints(space: Mapspace, factors: np.ndarray) -> list[np.ndarray]:
    """Per level, bytes of one stage of each keep option: (options, N)."""
    words = tile_words(space, factors)
    return [tiles.option_bytes(level, space.workload, [w[lv] for w in words], choice.keeps, factors.shape[-1])
            for lv, (level, choice) in enumerate(zip(space.arch.levels, space.choices))]


def option_footprints(space: Mapspace, lv: int, spans: np.ndarray, keeps) -> np.ndarray:
    """(keep options, N) bytes of one stage of each of `keeps`, level lv's options, given the
    dims' spans ((D, N)) in its tile."""
    words = [tiles.words(tensor, spans) for tensor in space.workload.tensors]
    return tiles.option_bytes(space.arch.levels[lv], space.workload, words, keeps, spans.shape[1])


def blocks_per_sm(space: Mapspace, smem_bytes: np.ndarray, rf_bytes: np.ndarray) -> np.ndarray:
    """Resident thread blocks per SM given one block's shared-memory and register bytes."""
    return occupancy.blocks_per_sm(space.arch, smem_bytes, rf_bytes)


def nonunit_masks(space: Mapspace, factors: np.ndarray) -> np.ndarray:
    """(L, N) bitmask of the dims with a non-unit temporal loop at each level."""
    return ((factors[:, TEMPORAL] > 1) * (1 << np.arange(space.n_dims))[None, :, None]).sum(axis=1)


def fragment_mask(space: Mapspace, factors: np.ndarray) -> np.ndarray:
    """Where a role of the native op shape is played by several dims (`roles.py`: a
    convolution's m = n.p.q), the product of their innermost tiles is a multiple of the
    role's native size, unless no product of their tiles can be (a convolution's
    k = 3.7.7): then the unit runs whole fragments of it, padding included
    (`tails.fragment_macs`). Single-dim roles are checked per dim
    (`tables.divisibility_mask`)."""
    return fragments_possible(space, factors[-1].prod(axis=0), factors.prod(axis=(0, 1)))


def fragments_possible(space: Mapspace, spans: np.ndarray, extents: np.ndarray) -> np.ndarray:
    """(N,) whether a tile of `spans` ((D, N)) can hold an innermost tile meeting
    `fragment_mask` (exactly that, for the innermost tile itself): every divisor of a dim's
    span is a tile it may take below, so a fused role can be met iff the product of its
    dims' spans is a multiple of its native size. Tiles divide extents, so where the
    product of the extents (`extents`, (D, N)) is none, no tile is and none is asked."""
    ok = np.ones(spans.shape[-1], bool)
    roles = space.roles
    if roles is None or not roles.fused:
        return ok
    for dims, size in roles.fragments():
        if len(dims) > 1:
            tile, extent = spans[list(dims)].prod(axis=0), extents[list(dims)].prod(axis=0)
            ok &= (tile % size == 0) | (extent % size != 0)
    return ok


def _role_paddings(space: Mapspace) -> tuple[tuple[tuple[int, ...], int, float], ...]:
    """Per role, (dims, native size, the least ceil(T / size) x size / T over every product
    T of innermost tiles its dims' tables allow: 1 where some T is a multiple); found once
    per space and its parts."""
    if "role paddings" not in space.shared:
        space.shared["role paddings"] = _least_role_paddings(space)
    return space.shared["role paddings"]


def _least_role_paddings(space: Mapspace) -> tuple[tuple[tuple[int, ...], int, float], ...]:
    out = []
    for dims, size in tails.fragment_roles(space.arch, space.workload):
        products = np.ones(1, np.int64)
        for d in dims:
            inner = np.unique(tables.level_view(space, space.dim_tables[d])[0][:, -1])
            products = np.unique((products[:, None] * inner[None, :]).ravel())
        if len(products):
            out.append((dims, size, float(((-(-products // size) * size) / products).min())))
    return tuple(out)


def fragment_padding(space: Mapspace) -> float:
    """The least factor by which running whole fragments (`tails.fragment_macs`) raises any
    mapping's MACs: the product of the roles' least paddings (`_role_paddings`)."""
    return math.prod(least for _, _, least in _role_paddings(space))


def fragment_padding_within(space: Mapspace, spans: np.ndarray) -> np.ndarray:
    """(N,) the least padding (as `fragment_padding`) of a mapping whose innermost tile lies
    within `spans` ((D, N): a node's tile at its level): per role, where its dims' spans
    multiply to less than its native size, every innermost tile of it is one fragment,
    padded at least size / that product. A node that has given the role's dims to the
    levels above (a convolution's p and q split to one row per thread block) pays that."""
    out = np.ones(spans.shape[-1])
    for dims, size, least in _role_paddings(space):
        most = spans[list(dims)].prod(axis=0)
        out *= np.maximum(least, np.where(most < size, size / np.maximum(most, 1), 1.0))
    return out


def coupled_mask(space: Mapspace, factors: np.ndarray) -> np.ndarray:
    """The constraints that couple dims without a level's keeps or stages: the fragments of
    fused roles (`fragment_mask`) and the spatial fanout (`fanout_mask`)."""
    return fragment_mask(space, factors) & fanout_mask(space, factors)


def valid_mask(space: Mapspace, table: MappingTable) -> np.ndarray:
    """Fragments, fanout, capacity and occupancy hold, and every level's loops have an order
    the constraints allow (per-dim constraints hold by construction; a mapspace may forbid
    every order of some loop sets, which the search tree, choosing the innermost order
    after the factors, and sampling meet only here)."""
    ok = coupled_mask(space, table.factors) & orders_allowed(space, table.factors)
    words = tile_words(space, table.factors)
    footprint = [tiles.level_bytes(level, space.workload, [w[lv] for w in words], table.keep[lv], table.stages[lv])
                 for lv, level in enumerate(space.arch.levels)]
    ok &= tiles.fits(space.arch, np.stack(footprint))       # a level's sub-levels in its one capacity too
    if space.group_rules:
        ok &= depths.keeps_in_groups(table.keep, space.group_rules) & depths.loops_in_groups(
            space.arch, table.factors, table.keep)
    if space.gpu_levels is not None and space.constraints.min_occupancy > 1:
        smem_lv, rf_lv = space.gpu_levels
        ok &= blocks_per_sm(space, footprint[smem_lv], footprint[rf_lv]) >= space.constraints.min_occupancy
    return ok


def orders_allowed(space: Mapspace, factors: np.ndarray) -> np.ndarray:
    """Per row, whether each level's set of non-unit temporal loops has an order class its
    constraints allow (every row, where no level's constraints leave a set without one)."""
    ok = np.ones(factors.shape[-1], bool)
    for lv, counts in enumerate(order_tables.constrained_order_counts(space)):
        if not counts.all():
            masks = ((factors[lv, TEMPORAL] > 1) * (1 << np.arange(space.n_dims))[:, None]).sum(axis=0)
            ok &= counts[masks] > 0
    return ok


def smallest_footprint(space: Mapspace, lv: int) -> float:
    """Bytes per instance of the smallest tiles level lv can hold (one stage x its fewest
    stages), over every keep choice: each dim at its smallest tile there."""
    smallest_span = []
    for rows in space.dim_tables:
        tile = tables.level_view(space, rows)[2][:, lv] if len(rows) else np.array([1])
        smallest_span.append(int(tile.min()))
    best = math.inf
    for keep in space.choices[lv].keeps:
        words = sum(tiles.words(space.workload.tensors[t], smallest_span)
                    * space.arch.levels[lv].word_bytes(space.workload.tensors[t])
                    for t in keep)
        best = min(best, words)
    return best * min(space.choices[lv].stages)
