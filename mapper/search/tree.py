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

from .. import depths, tiles
from ..cost.vectorised import fits_every_fanout
from ..mapping import MappingTable, along_last
from ..mapspace import TEMPORAL, Mapspace, order_tables, pruning, sampling
from .factor_rows import FactorRows


JUDGED_ABOVE = 8        # loop orders a choice may take, at most, before it is judged on one (`_judged`)


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
        return Nodes(self.depth, self.groups[rows], along_last(self.orders, rows),
                     along_last(self.stages, rows), along_last(self.keeps, rows))

    @staticmethod
    def concat(parts: list["Nodes"]) -> "Nodes":
        """Nodes of one depth, concatenated."""
        return Nodes(parts[0].depth, np.concatenate([p.groups for p in parts]),
                     np.concatenate([p.orders for p in parts], axis=-1),
                     np.concatenate([p.stages for p in parts], axis=-1),
                     np.concatenate([p.keeps for p in parts], axis=-1))


class LevelTree:
    def __init__(self, space: Mapspace, whole: "LevelTree | None" = None):
        """The tree of `space`; with `whole`, the tree of a part of whole's space
        (`Mapspace.part`): the same sorted factor rows, which do not depend on keeps, shared,
        under the part's keep and stage choices."""
        self.space = space
        self.n_levels, self.n_dims = space.n_levels, space.n_dims
        self.factor_rows = whole.factor_rows if whole is not None else FactorRows(space)
        self.column_level = self.factor_rows.column_level

    def for_space(self, part: Mapspace) -> "LevelTree":
        """The tree of a part of this space (`Mapspace.part`), sharing its sorted rows."""
        return LevelTree(part, whole=self)

    def roots(self) -> Nodes:
        """Depth-0 nodes: every combination of padded extents, with level 0's stages and keeps."""
        choice = self.space.choices[0]
        per_dim = [np.arange(len(s[0])) for s in self.factor_rows.starts]
        combos = [np.array(c) for c in itertools.product(*per_dim, range(len(choice.stages)),
                                                         range(len(choice.keeps)))]
        combos = np.array(combos).reshape(-1, self.n_dims + 2)
        n = len(combos)
        return Nodes(0, combos[:, :self.n_dims], np.zeros((0, self.n_dims, n), np.int64),
                     np.array(choice.stages)[combos[:, self.n_dims]][None], combos[:, self.n_dims + 1][None])

    @property
    def leaf_depth(self) -> int:
        """The depth whose nodes are already complete mappings: the last one, or the one above
        when the innermost level has no spatial split (its factors are then what is left of
        every dim, and its loop order changes no cost)."""
        last = self.n_levels - 1
        return last if (self.column_level == last).sum() == 1 else self.n_levels

    def expansion(self, depth: int, first_order_only: bool = False) -> int:
        """The most children one factor choice of a depth-`depth` node expands to (loop orders
        of level `depth` times the next level's stage and keep options): slices of factor
        choices are sized by it so that the rows priced together stay bounded."""
        if depth == self.n_levels - 1 or first_order_only:
            orders = 1
        else:
            orders = max(len(order_tables.orders_for(self.space, depth, sampling.looping_dims(self.space, depth))), 1)
        if depth + 1 < self.n_levels:
            choice = self.space.choices[depth + 1]
            return orders * len(choice.stages) * len(choice.keeps)
        return orders

    def factor_children(self, nodes: Nodes) -> np.ndarray:
        """Per node, how many ways level k's factors can be chosen (before orders and choices)."""
        return self.factor_rows.child_ranges(nodes.depth, nodes.groups)[1].prod(axis=1)

    def children(self, nodes: Nodes, start: int = 0, stop: int | None = None,
                 first_order_only: bool = False) -> Nodes:
        """Children of the nodes: level k's factors (k = nodes.depth), its loop order, and level
        k+1's stages and keep set. Factor choices are numbered node by node; only those in
        [start, stop) are generated, so a caller can walk a huge expansion in slices."""
        if stop is None:
            stop = int(self.factor_children(nodes).sum())
        return self.children_at(nodes, np.arange(start, stop, dtype=np.int64), first_order_only)

    def children_at(self, nodes: Nodes, flat: np.ndarray, first_order_only: bool = False) -> Nodes:
        """The children of the factor choices numbered `flat` (ascending), as `children` numbers them."""
        k, n_dims = nodes.depth, self.n_dims
        lo, count = self.factor_rows.child_ranges(k, nodes.groups)
        per_node = count.prod(axis=1)
        ends = np.cumsum(per_node)
        parent = np.searchsorted(ends, flat, side="right")
        local = flat - (ends - per_node)[parent]
        groups = np.empty((len(parent), n_dims), np.int64)
        for d in range(n_dims - 1, -1, -1):
            c = count[parent, d]
            groups[:, d] = lo[parent, d] + local % c
            local //= c
        factor_nodes = Nodes(k + 1, groups, along_last(nodes.orders, parent),
                             along_last(nodes.stages, parent), along_last(nodes.keeps, parent))
        return self._with_orders_and_choices(factor_nodes, k, first_order_only,
                                             self.fitting_choices(factor_nodes))

    def spans(self, nodes: Nodes) -> np.ndarray:
        """(D, N) extent of every dim in the tile level `nodes.depth` holds."""
        return self.factor_rows.spans(nodes.depth, nodes.groups)

    def fitting_choices(self, nodes: Nodes) -> np.ndarray:
        """(N, stages x keeps) which of level `depth`'s stage and keep options fit its capacity
        with the tile the node gives it, all False where level depth-1's split exceeds its
        fanout: what is ruled out here is never crossed with loop orders."""
        space, lv = self.space, nodes.depth
        level_above = self.level_factors(nodes, lv - 1)
        units = level_above[1:].prod(axis=1)
        fits_fanout = space.arch.fits_fanout(lv - 1, units[0], units[1])
        if lv >= self.n_levels:
            fits = fits_fanout[:, None]
        else:
            choice = space.choices[lv]
            footprint = pruning.option_footprints(self.space, lv, self.spans(nodes), choice.keeps)
            capacity = space.arch.levels[lv].capacity - _siblings_bytes(self, nodes)
            fits = np.stack([tiles.within(footprint * s, capacity) for s in choice.stages])        # (S, K, N)
            fits = fits.reshape(-1, len(nodes)).T & (fits_fanout & self._deeper_levels_can_fit(nodes)
                                                     & _sub_level_loops_allowed(self, nodes, level_above))[:, None]
        # judged apart only where a choice may take many orders: else pricing judges it as cheaply
        return self._judged(nodes, fits) if self.expansion(lv - 1) >= JUDGED_ABOVE * max(fits.shape[1], 1) else fits

    def _judged(self, nodes: Nodes, fits: np.ndarray) -> np.ndarray:
        """`fits` ((N, stages x keeps), of nodes whose last loop order is still to come) where
        the node is valid (`pruning.valid_mask`: fragments, occupancy, every capacity) if
        complete, else `feasible`, judged on one order: no loop order changes either, and a
        convolution's children, crossed with up to 720 orders each, were mostly ruled out
        there, row by row (on h100's res2-3x3, most of the walk's time)."""
        natural = np.arange(self.n_dims)[None]         # one order per choice, whichever
        rows, _ = self.expand(nodes, nodes.depth - 1, allowed=fits, order_rows=lambda level, mask: natural)
        table = self.table(rows)
        out = np.zeros_like(fits)
        out[np.nonzero(fits)] = (pruning.valid_mask(self.space, table) if nodes.depth >= self.leaf_depth
                                 else feasible(self.space, nodes.depth, table))
        return out

    def _deeper_levels_can_fit(self, nodes: Nodes) -> np.ndarray:
        """(N,) False where some level below `nodes.depth` cannot hold even the smallest tile any
        completion of the node leaves it (per dim the smallest extent among the node's factor
        rows, which the dims reach independently), in its smallest keep set and stage count:
        such a node has no mapping below it. This is what stops a top-down choice from leaving
        a tile that a one-word register under a dummy level can never take."""
        ok = np.ones(len(nodes), bool)
        for lv in range(nodes.depth + 1, self.n_levels):
            choice = self.space.choices[lv]
            if any(not keep for keep in choice.keeps):
                continue
            spans = np.stack([self.factor_rows.smallest_extents(d, nodes.depth, lv)[nodes.groups[:, d]]
                              for d in range(self.n_dims)])
            least = pruning.option_footprints(self.space, lv, spans, choice.keeps).min(axis=0) * min(choice.stages)
            ok &= tiles.fits_level(self.space.arch.levels[lv], least)
        return ok

    def reorder(self, nodes: Nodes) -> Nodes:
        """The same nodes with every order class of their last decided level."""
        k = nodes.depth - 1
        base = Nodes(nodes.depth, nodes.groups, nodes.orders[:k], nodes.stages[:k + 1], nodes.keeps[:k + 1])
        return self._with_orders_and_choices(base, k)

    def _with_orders_and_choices(self, nodes: Nodes, level: int, first_order_only: bool = False,
                                 allowed: np.ndarray | None = None) -> Nodes:
        """Expand each node over level `level`'s order classes (or just the first) and level+1's
        stages/keeps (those `allowed`, (N, stages x keeps), when given)."""
        return self.expand(nodes, level, first_order_only, allowed)[0]

    def expand(self, nodes: Nodes, level: int, first_order_only: bool = False, allowed: np.ndarray | None = None,
               order_rows=None) -> tuple[Nodes, np.ndarray]:
        """(`_with_orders_and_choices`'s children, the node each came from); with `order_rows`
        ((level, mask of non-unit loops) -> (K, D) orders), over those orders instead of the
        space's classes."""
        options, mask_class = self._order_options(nodes, level, first_order_only, order_rows)
        n_orders = np.array([len(table) for table in options])[mask_class]
        next_level = level + 1
        if next_level < self.n_levels:
            choice = self.space.choices[next_level]
            n_choice = len(choice.stages) * len(choice.keeps)
        else:
            n_choice = 1
        if allowed is None:
            allowed = np.ones((len(nodes), n_choice), bool)
        node_of, choice_of = np.nonzero(allowed)               # fitting (node, choice) pairs
        per_pair = n_orders[node_of]
        pair = np.repeat(np.arange(len(node_of)), per_pair)
        order_index = np.arange(len(pair)) - np.repeat(np.cumsum(per_pair) - per_pair, per_pair)
        parent, choice_index = node_of[pair], choice_of[pair]
        order = np.empty((self.n_dims, len(parent)), np.int64)
        parent_class = mask_class[parent]
        for c, table in enumerate(options):
            rows = np.flatnonzero(parent_class == c)
            order[:, rows] = table[order_index[rows]].T
        orders = np.concatenate([along_last(nodes.orders, parent), order[None]], axis=0)
        stages, keeps = along_last(nodes.stages, parent), along_last(nodes.keeps, parent)
        if next_level < self.n_levels:
            stage_values = np.array(choice.stages)[choice_index // len(choice.keeps)]
            stages = np.concatenate([stages, stage_values[None]], axis=0)
            keeps = np.concatenate([keeps, (choice_index % len(choice.keeps))[None]], axis=0)
        return Nodes(nodes.depth, nodes.groups[parent], orders, stages, keeps), parent

    def _order_options(self, nodes: Nodes, level: int, first_order_only: bool = False, order_rows=None):
        """Level `level`'s order classes (or `order_rows`, as in `expand`) for each node: (the
        distinct tables of orders, each node's table), by which of its loops are not unit."""
        temporal = self.level_factors(nodes, level)[TEMPORAL]                       # (D, N)
        masks = ((temporal > 1) * (1 << np.arange(self.n_dims))[:, None]).sum(axis=0)
        unique, mask_class = np.unique(masks, return_inverse=True)
        # the innermost level's loop order changes no cost (nothing below it is refetched),
        # and equally good mappings rank by content: the smallest order is the one kept
        if order_rows is not None:
            return [order_rows(level, int(m)) for m in unique], mask_class.reshape(-1)
        options = [self._orders(level, int(m), first_order_only or level == self.n_levels - 1)
                   for m in unique]
        return options, mask_class.reshape(-1)

    def expansions(self, nodes: Nodes, level: int, allowed: np.ndarray, first_order_only: bool = False,
                   order_rows=None) -> np.ndarray:
        """(N,) the children each node expands to over level `level`'s order classes (or
        `order_rows`, as in `expand`) and the next level's stage and keep options `allowed`
        ((N, stages x keeps), bool)."""
        options, mask_class = self._order_options(nodes, level, first_order_only, order_rows)
        return np.array([len(table) for table in options])[mask_class] * allowed.sum(axis=1)

    def _orders(self, level: int, mask: int, first_only: bool) -> np.ndarray:
        """Level `level`'s order classes for the loops in `mask`, sorted (memoised: the keep
        parts share them, as orders do not depend on keeps)."""
        key = (level, mask)
        memo = self.factor_rows.order_rows
        if key not in memo:
            memo[key] = _sorted_rows(order_tables.order_array(self.space, level, mask))
        rows = memo[key]
        return rows[:1] if first_only else rows

    def level_factors(self, nodes: Nodes, level: int) -> np.ndarray:
        """(3, D, N) factors of `level` (decided: level < nodes.depth)."""
        return self.factor_rows.level_factors(nodes.depth, nodes.groups, level)

    def table(self, nodes: Nodes) -> MappingTable:
        """Each node as a mapping: decided levels as chosen, the remaining tile of every dim as
        temporal loops of level `depth`, deeper levels empty (unit loops, first keep option)."""
        k, n = nodes.depth, len(nodes)
        factors = np.ones((self.n_levels, 3, self.n_dims, n), np.int64)
        columns = self.factor_rows.columns
        chosen = [c for c, col in enumerate(columns) if self.space.slots[col][0] < k]
        values = self.factor_rows.prefix_columns(k, nodes.groups, [0] + [1 + c for c in chosen])
        for d in range(self.n_dims):
            extent, *slots = values[d]
            decided = np.ones(n, np.int64)
            for c, value in zip(chosen, slots):
                lv, kind = self.space.slots[columns[c]]
                factors[lv, kind, d] = value
                decided *= value
            if k < self.n_levels:
                factors[k, TEMPORAL, d] = extent // decided
        order = np.tile(np.arange(self.n_dims)[None, :, None], (self.n_levels, 1, n))
        order[:k] = nodes.orders
        if k < self.n_levels:       # the smallest order the space allows for level k's loops
            masks = ((factors[k, TEMPORAL] > 1) * (1 << np.arange(self.n_dims))[:, None]).sum(axis=0)
            for m in np.unique(masks):
                rows = np.flatnonzero(masks == m)
                allowed = self._orders(k, int(m), True)
                # a mapspace may forbid every order of these loops at level k (its constraints
                # allow them only once some move deeper): this row stands for its children
                # and is priced, never offered, so it keeps the natural order
                if len(allowed):
                    order[k][:, rows] = allowed[0][:, None]
        stages = np.ones((self.n_levels, n), np.int64)
        stages[:k + 1] = nodes.stages[:k + 1]
        keep = np.zeros((self.n_levels, len(self.space.workload.tensors), n), bool)
        for lv, choice in enumerate(self.space.choices):
            index = nodes.keeps[lv] if lv <= k else np.zeros(n, np.int64)
            keep[lv] = choice.keep_table(keep.shape[1])[index].T
        return MappingTable(factors, order, keep, stages)


def _sub_level_loops_allowed(tree: LevelTree, nodes: Nodes, level_above: np.ndarray) -> np.ndarray | bool:
    """(N,) False where level depth-1, a sub-level that keeps nothing, was given loops it may
    not have (`depths.idle_loops`); `level_above` its factors (3, D, N)."""
    arch, lv = tree.space.arch, nodes.depth - 1
    if not arch.levels[lv].group:
        return True
    members = arch.one_memory(lv)
    holds = np.stack([np.array([bool(keep) for keep in tree.space.choices[s].keeps])[nodes.keeps[s]]
                      for s in members if s <= lv])
    return ~depths.idle_loops(arch, lv, level_above[0], holds[members.index(lv)], holds.any(axis=0))


def _siblings_bytes(tree: LevelTree, nodes: Nodes) -> np.ndarray | float:
    """(N,) bytes the sub-levels above level `nodes.depth` in its level's one capacity
    (`depths`) already take: what the level's own tiles may not (0 for a level of its own)."""
    lv = nodes.depth
    group = tree.space.arch.levels[lv].group
    used = 0.0
    if not group:
        return used
    for s in (s for s in range(lv) if tree.space.arch.levels[s].group == group):
        choice = tree.space.choices[s]
        options = pruning.option_footprints(tree.space, s, tree.factor_rows.spans(lv, nodes.groups, s),
                                            choice.keeps)
        used = used + options[nodes.keeps[s], np.arange(len(nodes))] * nodes.stages[s]
    return used


def in_pieces(rows: np.ndarray, most: int) -> list[np.ndarray]:
    """Indices of consecutive items, each expanding to `rows` ((M,)), cut into pieces whose
    rows come to about `most` (a piece exceeds it by less than one item)."""
    block = (np.cumsum(rows) - 1) // max(1, most)      # the block of `most` each item's last row falls in
    return np.split(np.arange(len(rows)), np.flatnonzero(np.diff(block)) + 1)


def _sorted_rows(table: np.ndarray) -> np.ndarray:
    return table[np.lexsort(table.T[::-1])]


def feasible(space: Mapspace, depth: int, table) -> np.ndarray:
    """What can already be ruled out: the decided levels' fanout and capacity, and a tile at
    level `depth` in which no innermost tile can meet the fragments of a fused role."""
    level = min(depth, space.n_levels - 1)
    ok = pruning.fragments_possible(space, table.factors[level:].prod(axis=(0, 1)), table.factors.prod(axis=(0, 1)))
    if depth:
        ok &= fits_every_fanout(space.arch, table.factors[:depth])
    words = pruning.tile_words(space, table.factors)
    used = []
    for lv in range(depth + 1):
        level = space.arch.levels[lv]
        used.append(tiles.level_bytes(level, space.workload, [w[lv] for w in words], table.keep[lv], table.stages[lv]))
        ok &= tiles.fits_level(level, used[-1])
    for members in space.arch.capacity_groups:      # the decided sub-levels of a level in its one capacity
        decided = [lv for lv in members if lv <= depth]
        if len(decided) > 1:
            ok &= tiles.fits_level(space.arch.levels[members[0]], tiles.group_bytes(used, decided))
    if space.group_rules:
        ok &= depths.keeps_in_groups(table.keep, space.group_rules, decided=depth)
        ok &= depths.loops_in_groups(space.arch, table.factors, table.keep, decided=depth)
    return ok
