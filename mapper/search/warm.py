"""Mappings from outside the search (a neighbouring shape's optimum, a file, an earlier run)
made members of a space, so that a search can start from them.

A mapping is admitted when every dim's factors are a row of the space's per-dim table, each
level's keep set and stage count are among its options, and each loop order has a class in
the space that behaves the same (the class representative replaces it: the cost is unchanged,
and the ranking among equal mappings stays the one exhaustive search uses).
"""
from __future__ import annotations

import numpy as np

from ..mapping import Mapping, MappingTable, to_table
from ..mapspace import Mapspace, order_tables, pruning
from ..orders import signature


def admit(space: Mapspace, mapping: Mapping) -> MappingTable | None:
    """`mapping` as a one-row table of the space, or None when the space does not hold it."""
    if len(mapping.levels) != space.n_levels:
        return None
    table = to_table([mapping], space.n_dims, len(space.workload.tensors))
    if factor_rows(space, table) is None:
        return None
    for lv, choice in enumerate(space.choices):
        keep = tuple(int(t) for t in np.flatnonzero(table.keep[lv, :, 0]))
        if keep not in choice.keeps or int(table.stages[lv, 0]) not in choice.stages:
            return None
    order, ok = carried_orders(space, table.order[..., 0], table.factors)
    if not ok[0]:
        return None
    table = MappingTable(table.factors, order, table.keep, table.stages)
    return table if pruning.valid_mask(space, table)[0] else None


def factor_rows(space: Mapspace, table: MappingTable) -> list[int] | None:
    """The factorisation row of every dim of a one-row table, or None if one is not in the space."""
    out = []
    for d, rows in enumerate(space.dim_tables):
        wanted = [table.factors[lv, kind, d, 0] for lv, kind in space.slots]
        match = np.flatnonzero((rows == wanted).all(axis=1))
        if not len(match):
            return None
        out.append(int(match[0]))
    return out


def carried_orders(space: Mapspace, order: np.ndarray, factors: np.ndarray):
    """Per row of `factors` and level, the order class representative that behaves like
    `order` (L, D) on the row's non-unit loops; rows where the space has no such class are
    flagged False."""
    n = factors.shape[-1]
    out = np.empty((space.n_levels, space.n_dims, n), np.int64)
    ok = np.ones(n, bool)
    masks = ((factors[:, 0] > 1) * (1 << np.arange(space.n_dims))[None, :, None]).sum(axis=1)
    for lv in range(space.n_levels):
        for m in np.unique(masks[lv]):
            rows = np.flatnonzero(masks[lv] == m)
            dims = frozenset(d for d in range(space.n_dims) if m >> d & 1)
            wanted = signature(space.workload, tuple(d for d in order[lv] if d in dims))
            match = [r for r in order_tables.order_array(space, lv, int(m))
                     if signature(space.workload, tuple(d for d in r if d in dims)) == wanted]
            if match:
                out[lv][:, rows] = np.asarray(match[0])[:, None]
            else:
                ok[rows] = False
    return out, ok
