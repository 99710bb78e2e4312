"""The mapspace as a tree over levels, for searches that decide one level at a time.

Depth k fixes, for every dim, its padded extent and its factors at the slots of levels < k
(so the tile each level >= k holds is known down to level k), the loop orders of levels < k,
and the stages and keep sets of levels <= k. Per dim, the factorisation rows are sorted by
(extent, slots of level 0, slots of level 1, ...), so the rows sharing a depth-k prefix are a
contiguous group; a node is one group id per dim (plus its orders, stages and keeps), and its
children are the sub-groups of the next depth, crossed over dims. Every leaf is one mapping of
the space and every mapping is one leaf, so a search over the tree covers the space exactly.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..mapping import MappingTable
from ..mapspace import TEMPORAL, Mapspace


@dataclass
class Nodes:
    """N nodes of one depth, as arrays (the mapping axis last where a table needs it)."""

    depth: int
    groups: np.ndarray      # (N, D) group id per dim at this depth
    orders: np.ndarray      # (depth, D, N) loop orders of the decided levels
    stages: np.ndarray      # (depth + 1, N) stage counts of levels <= depth
    keeps: np.ndarray       # (depth + 1, N) keep-option index of levels <= depth

    def __len__(self) -> int:
        return self.groups.shape[0]

    def take(self, rows) -> "Nodes":
        return Nodes(self.depth, self.groups[rows], self.orders[..., rows], self.stages[..., rows],
                     self.keeps[..., rows])


class LevelTree:
    def __init__(self, space: Mapspace):
        self.space = space
        self.n_levels, self.n_dims = space.n_levels, space.n_dims
        self.columns = sorted(range(len(space.slots)), key=lambda k: space.slots[k])
        self.column_level = np.array([space.slots[k][0] for k in self.columns])
        self.rows, self.starts = [], []
        for table in space.dim_tables:
            data = np.concatenate([table.prod(axis=1, keepdims=True), table[:, self.columns]], axis=1)
            data = data[np.lexsort(data.T[::-1])]
            self.rows.append(data)
            starts = []
            for depth in range(self.n_levels + 1):
                width = 1 + int((self.column_level < depth).sum())
                change = np.any(data[1:, :width] != data[:-1, :width], axis=1)
                starts.append(np.concatenate([[0], np.flatnonzero(change) + 1]))
            self.starts.append(starts)

    def roots(self) -> Nodes:
        """Depth-0 nodes: every combination of padded extents, with level 0's stages and keeps."""
        choice = self.space.choices[0]
        per_dim = [np.arange(len(s[0])) for s in self.starts]
        combos = [np.array(c) for c in itertools.product(*per_dim, range(len(choice.stages)),
                                                         range(len(choice.keeps)))]
        combos = np.array(combos).reshape(-1, self.n_dims + 2)
        n = len(combos)
        return Nodes(0, combos[:, :self.n_dims], np.zeros((0, self.n_dims, n), np.int64),
                     np.array(choice.stages)[combos[:, self.n_dims]][None], combos[:, self.n_dims + 1][None])

    def _prefix_rows(self, depth: int, groups: np.ndarray) -> list[np.ndarray]:
        """A representative row (extent + slots in level order) per node and dim."""
        return [self.rows[d][self.starts[d][depth][groups[:, d]]] for d in range(self.n_dims)]

    def _child_ranges(self, nodes: Nodes):
        """Per node and dim, the first child group and the number of child groups."""
        k = nodes.depth
        lo, count = [], []
        for d in range(self.n_dims):
            starts, below = self.starts[d][k], self.starts[d][k + 1]
            ends = np.append(starts[1:], len(self.rows[d]))
            first = np.searchsorted(below, starts[nodes.groups[:, d]])
            lo.append(first)
            count.append(np.searchsorted(below, ends[nodes.groups[:, d]]) - first)
        return np.stack(lo, axis=1), np.stack(count, axis=1)

    def factor_children(self, nodes: Nodes) -> np.ndarray:
        """Per node, how many ways level k's factors can be chosen (before orders and choices)."""
        return self._child_ranges(nodes)[1].prod(axis=1)

    def children(self, nodes: Nodes, start: int = 0, stop: int | None = None,
                 first_order_only: bool = False) -> Nodes:
        """Children of the nodes: level k's factors (k = nodes.depth), its loop order, and level
        k+1's stages and keep set. Factor choices are numbered node by node; only those in
        [start, stop) are generated, so a caller can walk a huge expansion in slices."""
        k, n_dims = nodes.depth, self.n_dims
        lo, count = self._child_ranges(nodes)
        per_node = count.prod(axis=1)
        ends = np.cumsum(per_node)
        stop = int(ends[-1]) if stop is None else stop
        flat = np.arange(start, stop, dtype=np.int64)
        parent = np.searchsorted(ends, flat, side="right")
        local = flat - (ends - per_node)[parent]
        groups = np.empty((len(parent), n_dims), np.int64)
        for d in range(n_dims - 1, -1, -1):
            c = count[parent, d]
            groups[:, d] = lo[parent, d] + local % c
            local //= c
        factor_nodes = Nodes(k + 1, groups, nodes.orders[..., parent], nodes.stages[..., parent],
                             nodes.keeps[..., parent])
        return self._with_orders_and_choices(factor_nodes, k, first_order_only)

    def reorder(self, nodes: Nodes) -> Nodes:
        """The same nodes with every order class of their last decided level."""
        k = nodes.depth - 1
        base = Nodes(nodes.depth, nodes.groups, nodes.orders[:k], nodes.stages[:k + 1], nodes.keeps[:k + 1])
        return self._with_orders_and_choices(base, k)

    def _with_orders_and_choices(self, nodes: Nodes, level: int, first_order_only: bool = False) -> Nodes:
        """Expand each node over level `level`'s order classes (or just the first) and level+1's
        stages/keeps."""
        temporal = self.level_factors(nodes, level)[TEMPORAL]                       # (D, N)
        masks = ((temporal > 1) * (1 << np.arange(self.n_dims))[:, None]).sum(axis=0)
        options = {int(m): self.space.order_array(level, int(m)) for m in np.unique(masks)}
        if first_order_only:
            options = {m: table[:1] for m, table in options.items()}
        n_orders = np.array([len(options[int(m)]) for m in masks])
        next_level = level + 1
        if next_level < self.n_levels:
            choice = self.space.choices[next_level]
            n_choice = len(choice.stages) * len(choice.keeps)
        else:
            n_choice = 1
        per_node = n_orders * n_choice
        parent = np.repeat(np.arange(len(nodes)), per_node)
        local = np.arange(len(parent)) - np.repeat(np.cumsum(per_node) - per_node, per_node)
        order_index, choice_index = local // n_choice, local % n_choice
        order = np.empty((self.n_dims, len(parent)), np.int64)
        for m, table in options.items():
            rows = np.flatnonzero(masks[parent] == m)
            order[:, rows] = table[order_index[rows]].T
        orders = np.concatenate([nodes.orders[..., parent], order[None]], axis=0)
        stages, keeps = nodes.stages[..., parent], nodes.keeps[..., parent]
        if next_level < self.n_levels:
            stage_values = np.array(choice.stages)[choice_index // len(choice.keeps)]
            stages = np.concatenate([stages, stage_values[None]], axis=0)
            keeps = np.concatenate([keeps, (choice_index % len(choice.keeps))[None]], axis=0)
        return Nodes(nodes.depth, nodes.groups[parent], orders, stages, keeps)

    def level_factors(self, nodes: Nodes, level: int) -> np.ndarray:
        """(3, D, N) factors of `level` (decided: level < nodes.depth)."""
        rows = self._prefix_rows(nodes.depth, nodes.groups)
        out = np.ones((3, self.n_dims, len(nodes)), np.int64)
        for c, k in enumerate(self.columns):
            lv, kind = self.space.slots[k]
            if lv == level:
                for d in range(self.n_dims):
                    out[kind, d] *= rows[d][:, 1 + c]
        return out

    def table(self, nodes: Nodes) -> MappingTable:
        """Each node as a mapping: decided levels as chosen, the remaining tile of every dim as
        temporal loops of level `depth`, deeper levels empty (unit loops, first keep option)."""
        k, n = nodes.depth, len(nodes)
        rows = self._prefix_rows(k, nodes.groups)
        factors = np.ones((self.n_levels, 3, self.n_dims, n), np.int64)
        for d in range(self.n_dims):
            decided = np.ones(n, np.int64)
            for c, col in enumerate(self.columns):
                lv, kind = self.space.slots[col]
                if lv < k:
                    factors[lv, kind, d] = rows[d][:, 1 + c]
                    decided *= rows[d][:, 1 + c]
            if k < self.n_levels:
                factors[k, TEMPORAL, d] = rows[d][:, 0] // decided
        order = np.tile(np.arange(self.n_dims)[None, :, None], (self.n_levels, 1, n))
        order[:k] = nodes.orders
        stages = np.ones((self.n_levels, n), np.int64)
        stages[:k + 1] = nodes.stages[:k + 1]
        keep = np.zeros((self.n_levels, len(self.space.workload.tensors), n), bool)
        for lv, choice in enumerate(self.space.choices):
            index = nodes.keeps[lv] if lv <= k else np.zeros(n, np.int64)
            table = np.zeros((len(choice.keeps), keep.shape[1]), bool)
            for i, option in enumerate(choice.keeps):
                table[i, list(option)] = True
            keep[lv] = table[index].T
        return MappingTable(factors, order, keep, stages)


def feasible(space: Mapspace, depth: int, table) -> np.ndarray:
    """What can already be ruled out: the decided levels' fanout and capacity."""
    ok = np.ones(len(table), bool)
    fanout = np.array([space.arch.fanout(lv) for lv in range(depth)]).reshape(depth, 2, 1)
    if depth:
        ok &= (table.factors[:depth, 1:].prod(axis=2) <= fanout).all(axis=(0, 1))
    tiles = space.tile_words(table.factors)
    for lv in range(depth + 1):
        used = sum(tiles[t][lv] * table.keep[lv, t] * tensor.bytes_per_word
                   for t, tensor in enumerate(space.workload.tensors)) * table.stages[lv]
        ok &= used <= space.arch.levels[lv].capacity
    return ok
