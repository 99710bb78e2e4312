"""Greedy search: the level-by-level choice people make by hand.

Rule, top-down from the outermost level: at each level k (k = 0 .. L-2) choose, among every
way to split what level k holds into its own loops, its spatial split and the tile level k+1
will hold (with level k's loop order and level k+1's keeps, and level k+1 double-buffered
when it may be, else single), the one that
  1. uses the most of level k's fanout (spatial split first), splitting dims that index the
     output before reduction dims (people spread output tiles over units; split-K is a
     deliberate exception),
  2. then moves the fewest bytes into level k+1 (fills, all instances: the square-root law:
     the largest, squarest tile that fits the capacity wins),
  3. then holds the largest tile at level k+1,
  4. then the fixed content order (so the choice is deterministic),
and fix it before looking further down. Only tiles that fit level k+1 count. At the innermost
level the remaining split is chosen by the search objective. Where a level has many loop
orders (more than `max_orders`, e.g. the seven loops of a convolution), the factors are chosen
first with one representative order, then the order by the same rule. Choices below never revise the
ones above: that is the point of comparing greedy with the joint search.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost import evaluate_many
from ..errors import InfeasibleError
from ..mapspace import Mapspace
from .objective import Objective, ranking_keys
from .result import Budget, Incumbent, SearchResult
from .tree import LevelTree, Nodes, feasible


class BudgetSpent(InfeasibleError):
    """Greedy ran out of its time budget before reaching the innermost level."""


@dataclass(frozen=True)
class Greedy:
    max_orders: int = 24
    time_limit: float | None = None
    slice: int = 50_000              # factor choices priced together
    name: str = "greedy"

    def run(self, space: Mapspace, objective: Objective, progress=None) -> SearchResult:
        budget = Budget(self.time_limit)
        funnel = space.funnel()
        space.require_nonempty(funnel)
        tree = LevelTree(space)
        incumbent = Incumbent(space, objective)
        nodes = self._preferred_stages(space, tree.roots(), 0).take(np.array([0]))
        decisions: list[str] = []
        for depth in range(1, tree.n_levels + 1):
            everything = frozenset(range(space.n_dims))
            first_only = len(space.orders_for(depth - 1, everything)) > self.max_orders
            nodes = self._choose(space, tree, nodes, depth, objective, incumbent, decisions, budget,
                                 first_order_only=first_only)
            if first_only:
                nodes = self._choose(space, tree, nodes, depth, objective, incumbent, decisions, budget,
                                     reorder=True)
            decisions.append(space.arch.levels[depth - 1].name)
        return incumbent.result(self.name, funnel, optimal=False, complete=True,
                                notes=["top-down: spatial split, then fewest bytes into the next "
                                       "level, then the largest tile, one level at a time"])

    def _choose(self, space, tree, parent: Nodes, depth: int, objective, incumbent, decisions, budget,
                first_order_only: bool = False, reorder: bool = False) -> Nodes:
        """The child of `parent` the greedy rule picks for level depth-1 (by the objective at the
        last level), walking the children in slices so memory stays bounded."""
        if reorder:
            slices = [tree.reorder(parent)]
        else:
            total = int(tree.factor_children(parent)[0])
            slices = (tree.children(parent, start, min(total, start + self.slice),
                                    first_order_only=first_order_only)
                      for start in range(0, total, self.slice))
        best_key, best = None, None
        for children in slices:
            if budget.spent():
                raise BudgetSpent(f"greedy ran out of time at level {space.arch.levels[depth - 1].name}")
            if depth < tree.n_levels:
                children = self._preferred_stages(space, children, depth)
            table = tree.table(children)
            costs = evaluate_many(space.arch, space.workload, table)
            if depth == tree.n_levels:
                mask = space.valid_mask(table)
                incumbent.offer(table, costs, mask)
                rows = np.flatnonzero(costs.valid & mask)
                keys = ranking_keys(objective, costs, table)
            else:
                incumbent.evaluated += len(table)
                rows = np.flatnonzero(feasible(space, depth, table))
                keys = self._level_keys(space, objective, depth, table, costs)
            if not len(rows):
                continue
            row = rows[np.lexsort([k[rows] for k in keys][::-1])[0]]
            key = tuple(k[row].item() for k in keys)
            if best_key is None or key < best_key:
                best_key, best = key, children.take(np.array([row]))
        if best is None:
            raise InfeasibleError(self._dead_end(space, depth - 1, decisions))
        return best

    @staticmethod
    def _level_keys(space, objective, depth, table, costs) -> list[np.ndarray]:
        """The greedy rule as sort keys for the choices at level depth-1."""
        lv = depth - 1
        units = table.factors[lv, 1:].prod(axis=(0, 1))
        reduction = ~space.workload.relevance[space.workload.output]
        split_reduction = table.factors[lv, 1:][:, reduction].prod(axis=(0, 1))
        word_bytes = np.array([t.bytes_per_word for t in space.workload.tensors])[:, None]
        filled = (costs.level_fills[depth] * word_bytes).sum(axis=0) * costs.level_instances[depth]
        tiles = space.tile_words(table.factors)
        volume = sum(tiles[t][depth] for t in range(len(space.workload.tensors)))
        return [-units, split_reduction, filled, -volume] + ranking_keys(objective, costs, table)[3:]

    @staticmethod
    def _preferred_stages(space: Mapspace, nodes: Nodes, level: int) -> Nodes:
        """Keep, per node, the stage choice people default to: 2 where allowed, else the
        smallest allowed; and the first keep option (the level's default)."""
        allowed = space.choices[level].stages
        want = 2 if 2 in allowed else min(allowed)
        return nodes.take(np.flatnonzero((nodes.stages[level] == want) & (nodes.keeps[level] == 0)))

    @staticmethod
    def _dead_end(space: Mapspace, level: int, decisions) -> str:
        return (f"greedy: after fixing {', '.join(decisions) or 'nothing'}, no choice at level "
                f"{space.arch.levels[level].name} leaves a mapping that fits (a top-down choice cannot "
                "be revised; the joint search can)")
