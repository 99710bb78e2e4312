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
level the remaining split is chosen by the search objective. Choices below never revise the
ones above: that is the point of comparing greedy with the joint search.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost import evaluate_many
from ..errors import InfeasibleError
from ..mapspace import Mapspace
from .objective import Objective, ranking_keys
from .result import Incumbent, SearchResult
from .tree import LevelTree, Nodes, feasible


@dataclass(frozen=True)
class Greedy:
    name: str = "greedy"

    def run(self, space: Mapspace, objective: Objective, progress=None) -> SearchResult:
        funnel = space.funnel()
        space.require_nonempty(funnel)
        tree = LevelTree(space)
        incumbent = Incumbent(space, objective)
        nodes = self._preferred_stages(space, tree.roots(), 0)
        nodes = nodes.take(np.array([0]))
        decisions = []
        for depth in range(1, tree.n_levels + 1):
            children = tree.children(nodes)
            if depth < tree.n_levels:
                children = self._preferred_stages(space, children, depth)
            table = tree.table(children)
            costs = evaluate_many(space.arch, space.workload, table)
            incumbent.evaluated += len(table)
            if depth == tree.n_levels:
                mask = space.valid_mask(table)
                incumbent.evaluated -= len(table)
                incumbent.offer(table, costs, mask)
                if incumbent.table is None:
                    raise InfeasibleError(self._dead_end(space, depth - 1, decisions))
                break
            ok = feasible(space, depth, table)
            rows = np.flatnonzero(ok)
            if not len(rows):
                raise InfeasibleError(self._dead_end(space, depth - 1, decisions))
            lv = depth - 1
            units = table.factors[lv, 1:].prod(axis=(0, 1))
            reduction = ~space.workload.relevance[space.workload.output]
            split_reduction = table.factors[lv, 1:][:, reduction].prod(axis=(0, 1))
            filled = (costs.level_fills[depth] * np.array([t.bytes_per_word for t in space.workload.tensors])[:, None]
                      ).sum(axis=0) * costs.level_instances[depth]
            tiles = space._tiles(table.factors)
            volume = sum(tiles[t][depth] for t in range(len(space.workload.tensors)))
            content = ranking_keys(objective, costs, table)[3:]
            keys = [-units, split_reduction, filled, -volume] + content
            best = rows[np.lexsort([k[rows] for k in keys][::-1])[0]]
            decisions.append(space.arch.levels[lv].name)
            nodes = children.take(np.array([best]))
        return incumbent.result(self.name, funnel, optimal=False, complete=True,
                                notes=["top-down: spatial split, then fewest bytes into the next "
                                       "level, then the largest tile, one level at a time"])

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
