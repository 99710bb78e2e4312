"""Mappings out of the mapspace: factor arrays for indices into the cross product of the
per-dim tables, every mapping in bounded batches, and uniform draws choice by choice."""
from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from ..mapping import MappingTable, along_last
from . import order_tables, pruning
from .common import TEMPORAL, _chunks

if TYPE_CHECKING:
    from .space import Mapspace


def factors_at(space: Mapspace, index: np.ndarray) -> np.ndarray:
    """Factor arrays (L, 3, D, N) for flat indices into the product of the per-dim tables."""
    rows = np.unravel_index(index, [len(t) for t in space.dim_tables])
    return assemble(space, [t[r] for t, r in zip(space.dim_tables, rows)])


def sample_factors(space: Mapspace, count: int, rng: np.random.Generator) -> np.ndarray:
    if not all(len(t) for t in space.dim_tables):    # some dim has no factorisation: none to draw
        return assemble(space, [t[:0] for t in space.dim_tables])
    return assemble(space, [t[rng.integers(0, len(t), size=count)] for t in space.dim_tables])


def assemble(space: Mapspace, per_dim: list[np.ndarray]) -> np.ndarray:
    n = per_dim[0].shape[0]
    factors = np.ones((space.n_levels, 3, space.n_dims, n), np.int64)
    for d, rows in enumerate(per_dim):
        for k, (lv, kind) in enumerate(space.slots):
            factors[lv, kind, d] = rows[:, k]
    return factors

# ------------------------------------------------------------------ enumeration and sampling


def looping_dims(space: Mapspace, level: int) -> frozenset[int]:
    """Dims that may have a non-unit temporal loop at `level` (the per-dim tables say)."""
    column = space.slots.index((level, TEMPORAL))
    return frozenset(d for d, rows in enumerate(space.dim_tables) if len(rows) and rows[:, column].max() > 1)


def expansion_bound(space: Mapspace) -> int:
    """The most mappings one factor combination expands to (keep sets x stage counts x loop
    orders at every level): batches of factor combinations are sized by it, so that the
    rows priced together stay bounded."""
    return math.prod(len(c.keeps) * len(c.stages)
                     * max(1, len(order_tables.orders_for(space, lv, looping_dims(space, lv))))
                     for lv, c in enumerate(space.choices))


def combinations(space: Mapspace) -> int:
    """Size of the cross product of the per-dim tables (before coupled pruning)."""
    return math.prod(len(t) for t in space.dim_tables)


def all_tables(space: Mapspace, batch: int = 100_000, stop=None):
    """Every mapping of the pruned space, as MappingTables of at most about `batch` rows;
    `stop()`, when given, is asked between batches (most batches may yield nothing)."""
    for index in _chunks(combinations(space), batch):
        if stop is not None and stop():
            return
        factors = factors_at(space, index)
        # rows whose loops some level's order constraints leave no order expand to nothing:
        # dropped before their groups of order classes are built (one each, in Python)
        factors = along_last(factors, pruning.coupled_mask(space, factors) & pruning.orders_allowed(space, factors))
        if factors.shape[-1]:
            table = expand(space, factors)
            if len(table):
                yield table


def sample(space: Mapspace, count: int, rng: np.random.Generator) -> MappingTable:
    """`count` mappings drawn choice by choice: per dim a uniform factorisation row, per level
    a uniform order class, keep set and stage count. Rows that break a coupled constraint
    (fanout, capacity, occupancy) are dropped, not redrawn."""
    factors = sample_factors(space, count, rng)
    factors = along_last(factors, pruning.orders_allowed(space, factors))     # loops with no allowed order: not drawn
    return _with_drawn_choices(space, factors, rng)


def expanded_rows(space: Mapspace, factors: np.ndarray) -> int:
    """How many rows `expand(factors)` builds before pruning (every keep set, stage count and
    order class at every level), counted without building them: a single factor row of a
    convolution on a deep array expands to more than memory holds."""
    masks = pruning.nonunit_masks(space, factors)
    choices = math.prod(len(c.keeps) * len(c.stages) for c in space.choices)
    return choices * sum(math.prod(len(order_tables.order_array(space, lv, int(masks[lv][row])))
                                   for lv in range(space.n_levels))
                         for row in range(factors.shape[-1]))


def draw_choices(space: Mapspace, factors: np.ndarray, per_row: int, rng: np.random.Generator) -> MappingTable:
    """`per_row` draws of keep/stage/order choices for each factor combination (uniform per
    level, as `sample` draws them), pruned by capacity: `expand` where it would build too many."""
    factors = along_last(factors, np.repeat(np.arange(factors.shape[-1]), per_row))
    return _with_drawn_choices(space, factors, rng)


def _with_drawn_choices(space: Mapspace, factors: np.ndarray, rng: np.random.Generator) -> MappingTable:
    """Each factor row with a uniform keep set, stage count and order class per level, the
    invalid rows dropped."""
    count = factors.shape[-1]
    keep_idx = [rng.integers(0, len(c.keeps), size=count) for c in space.choices]
    stage_idx = [rng.integers(0, len(c.stages), size=count) for c in space.choices]
    table = _build(space, factors, keep_idx, stage_idx, rng)
    return table.take(pruning.valid_mask(space, table))


EXPAND_BATCH = 100_000        # rows crossed with keep/stage choices and checked together


def expand(space: Mapspace, factors: np.ndarray) -> MappingTable:
    """All keep/stage/order choices for each factor combination, pruned by capacity: per
    keep-and-stage combination (the last level's fastest), the factor rows with every
    combination of order classes, in that order."""
    combos = list(itertools.product(*[itertools.product(range(len(c.keeps)), range(len(c.stages)))
                                      for c in space.choices]))
    keep = np.zeros((space.n_levels, len(space.workload.tensors), len(combos)), bool)
    stages = np.ones((space.n_levels, len(combos)), np.int64)
    for lv, choice in enumerate(space.choices):
        keep[lv] = choice.keep_table(len(space.workload.tensors))[[k for k, _ in (c[lv] for c in combos)]].T
        stages[lv] = np.array(choice.stages)[[s for _, s in (c[lv] for c in combos)]]
    # the orders depend on the factors alone: built once, then crossed with each choice
    picked, order = _every_order(space, factors)
    per_batch = max(1, EXPAND_BATCH // max(1, len(picked)))
    tables = []
    for start in range(0, len(combos), per_batch):
        batch = np.arange(start, min(len(combos), start + per_batch))
        combo, rows = np.repeat(batch, len(picked)), np.tile(picked, len(batch))
        table = MappingTable(along_last(factors, rows), np.tile(order, len(batch)),
                             along_last(keep, combo), along_last(stages, combo))
        tables.append(table.take(pruning.valid_mask(space, table)))
    return MappingTable.concat(tables)


def _build(space: Mapspace, factors, keep_idx, stage_idx, rng) -> MappingTable:
    """Tables for factor arrays with the given keep/stage choices and one random order class
    per level."""
    n = factors.shape[-1]
    keep = np.zeros((space.n_levels, len(space.workload.tensors), n), bool)
    stages = np.ones((space.n_levels, n), np.int64)
    for lv, choice in enumerate(space.choices):
        keep[lv] = choice.keep_table(len(space.workload.tensors))[keep_idx[lv]].T
        stages[lv] = np.array(choice.stages)[stage_idx[lv]]
    masks = pruning.nonunit_masks(space, factors)
    order = np.empty((space.n_levels, space.n_dims, n), np.int64)
    for lv in range(space.n_levels):
        for m in np.unique(masks[lv]):
            rows = np.flatnonzero(masks[lv] == m)
            options = order_tables.order_array(space, lv, int(m))
            order[lv, :, rows] = options[rng.integers(0, len(options), size=len(rows))]
    return MappingTable(factors, order, keep, stages)


def _every_order(space: Mapspace, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, order): every combination of order classes of each factor row, the rows grouped
    by their non-unit masks (`rows` indexes `factors`, `order` is (L, D, len(rows)))."""
    n = factors.shape[-1]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros((space.n_levels, space.n_dims, 0), np.int64)
    masks = pruning.nonunit_masks(space, factors)
    key = np.zeros(n, np.int64)
    for lv in range(space.n_levels):
        key = key * (1 << space.n_dims) + masks[lv]
    picked, orders = [], []
    for value in np.unique(key):
        rows = np.flatnonzero(key == value)
        per_level = [order_tables.order_array(space, lv, int(masks[lv][rows[0]])) for lv in range(space.n_levels)]
        # every combination of the levels' order classes (the last level's fastest), each
        # over all the group's rows
        grid = np.indices([len(p) for p in per_level]).reshape(space.n_levels, -1)
        order = np.stack([options[grid[lv]].T for lv, options in enumerate(per_level)])
        orders.append(np.repeat(order, len(rows), axis=2))
        picked.append(np.tile(rows, grid.shape[1]))
    return np.concatenate(picked), np.concatenate(orders, axis=2)
