"""Greedy search: the level-by-level choice people make by hand.

Rule, top-down from the outermost level: at each level k (k = 0 .. L-2) choose, among every
way to split what level k holds into its own loops, its spatial split and the tile level k+1
will hold (with level k's loop order), the one that
  0. lets level k+1 keep every tensor it may keep (its default, the largest keep set), at its
     usual buffering depth (double-buffered where it may be, else its smallest allowed depth);
     only when no tile fits that way does it try another depth, then drop tensors (the
     largest keep sets that fit first). Keeping nothing is chosen only when nothing else fits:
     an empty level moves no bytes, so rule 2 alone would always pick it;
  1. uses the most of level k's fanout (spatial split first), splitting dims that index the
     output before reduction dims (people spread output tiles over units; split-K is a
     deliberate exception),
  2. then moves the fewest bytes into level k+1 (fills, all instances: the square-root law:
     the largest, squarest tile that fits the capacity wins),
  3. then holds the largest tile at level k+1,
  4. then the fixed content order (so the choice is deterministic),
and fix it before looking further down. Only tiles that fit level k+1 count. When no choice at
a level leaves anything that fits (a dead end: fanout or factor constraints below that the
tile above cannot meet), the descent backs up one level and takes that level's next choice in
the rule's order (at most `ALTERNATIVES` per level, `MAX_BACKTRACKS` in all); the notes say so. At the innermost
level the remaining split is chosen by the search objective. Where a level has many loop
orders (more than `max_orders`, e.g. the seven loops of a convolution), the factors are chosen
first with one representative order, then the order by the same rule. Choices below never revise the
ones above: that is the point of comparing greedy with the joint search.

Time budget: the choices of a level are priced in slices; when the budget is spent, the level
takes the best choice among the slices already priced, and every level below is chosen from
one quick look (about one slice of choices spread evenly over the level, one loop order each),
so the result is always a complete mapping, marked incomplete, never an error. `quick` takes
that quick look at every level from the start: the joint search's first incumbent, a few
tenths of a second whatever the space, the same mapping on any machine.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError
from ..mapspace import Mapspace, counting, infeasible, order_tables, pruning
from .fitting_children import fitting_children
from .context import Budget, SearchContext
from .events import Backtracked, GreedyRule, Hurried
from .objective import Objective, ranking_keys
from .result import Incumbent, SearchResult, settings_of
from .tree import LevelTree, Nodes, feasible

QUICK_LOOK_WINDOWS = 64      # a hurried level looks at this many evenly spread runs of choices
ALTERNATIVES = 8             # ranked choices a level offers when the level below dead-ends
MAX_BACKTRACKS = 64          # dead ends tolerated before the descent gives up


@dataclass(frozen=True)
class Greedy:
    max_orders: int = 24
    slice: int = 50_000              # factor choices priced together (a walk's slice: rows, each
                                     # factor choice that fits with its orders and options)
    quick: bool = False              # one quick look per level, no walk of its choices
    name: str = "greedy"

    def run(self, space: Mapspace, objective: Objective, context: SearchContext | None = None,
            progress=None, tree: LevelTree | None = None) -> SearchResult:
        """`tree`: the space's `LevelTree` where the caller has it (the joint search's start:
        sorting a million factor rows again would take a second or more)."""
        context = context or SearchContext()
        budget = context.budget(context.time_limit)
        context.require_setup(space)
        funnel = counting.funnel(space, stop=context.stopped)     # out of time: estimated
        infeasible.require_nonempty(space, funnel)
        descent = _Descent(self, space, objective, context, budget, tree)
        descent.run()
        events = [GreedyRule()]
        if descent.backtracks:
            events.append(Backtracked(descent.backtracks))
        if descent.hurried_from is not None:
            events.append(Hurried(context.stop_reason(), descent.hurried_from))
        return descent.incumbent.result(self.name, funnel, optimal=False, complete=not descent.hurried,
                                        events=events, settings=settings_of(self))


class _Descent:
    """One top-down run (the strategy object itself stays immutable). `hurried_from` names the
    level where the budget ran out, None while there is time."""

    def __init__(self, greedy: Greedy, space: Mapspace, objective: Objective, context: SearchContext,
                 budget: Budget, tree: LevelTree | None = None):
        self.greedy, self.space, self.objective, self.budget = greedy, space, objective, budget
        self.context = context
        self.tree = tree or LevelTree(space)
        self.incumbent = Incumbent(space, objective, context)
        self.hurried_from: str | None = None
        self.decided: list[str] = []
        self.backtracks = 0
        self.dead_level = 0

    def run(self) -> None:
        root = self.tree.roots().take(np.array([0]))      # the unpadded extents; level 0 keeps all
        if not self._descend(root, 1):
            raise InfeasibleError(self._dead_end(self.dead_level))

    def _descend(self, parent: Nodes, depth: int) -> bool:
        """Choose level depth-1 and everything below; False at a dead end (nothing below fits)."""
        if depth > self.tree.n_levels:
            return True
        everything = frozenset(range(self.space.n_dims))
        many_orders = len(order_tables.orders_for(self.space, depth - 1, everything)) > self.greedy.max_orders
        for rank, node in enumerate(self.choose(parent, depth, first_order_only=many_orders or self.hurried)):
            if rank and self.backtracks >= MAX_BACKTRACKS:
                return False
            self.backtracks += rank > 0
            if many_orders and not self.hurried:
                node = next(self.choose(node, depth, reorder=True))
            self.decided.append(self.space.arch.levels[depth - 1].name)
            if self._descend(node, depth + 1):
                return True
            self.decided.pop()
        self.dead_level = max(self.dead_level, depth - 1)
        return False

    @property
    def hurried(self) -> bool:
        """Whether the levels from here are chosen from one quick look each."""
        return self.greedy.quick or self.hurried_from is not None

    def choose(self, parent: Nodes, depth: int, first_order_only: bool = False, reorder: bool = False):
        """The children of `parent` the greedy rule ranks first for level depth-1 (by the
        objective at the last level), best first: the first tier of level depth's keeps and
        stages that fits anything, then the next tiers, up to `ALTERNATIVES` from each. Lazy:
        a runner-up is priced only when the level below dead-ends."""
        tiers = [self._same_choice_as(parent, depth)] if reorder else self._tiers(depth)
        for wanted in tiers:
            best, finished = None, False
            if not self.hurried:
                best, finished = self._best_child(parent, depth, wanted, first_order_only, reorder, "walk")
            if best is None and not finished:
                best, finished = self._best_child(parent, depth, wanted, True, reorder, "quick look")
            if best is None and not finished:
                # the quick look can miss the few choices that fit: walk them all before giving up
                best, finished = self._best_child(parent, depth, wanted, True, reorder, "patient")
            for row in range(0 if best is None else len(best)):
                yield best.take(np.array([row]))

    def _tiers(self, depth: int) -> list[tuple[frozenset[int], int] | None]:
        """(keep options, stage count) of level `depth` to try, in the rule's order: keep sets
        largest first, each at the preferred depth and then the others; None past the last level."""
        if depth >= self.space.n_levels:
            return [None]
        choice = self.space.choices[depth]
        preferred = 2 if 2 in choice.stages else min(choice.stages)
        stages = [preferred] + sorted(s for s in choice.stages if s != preferred)
        sizes = sorted({len(keep) for keep in choice.keeps}, reverse=True)
        return [(frozenset(i for i, keep in enumerate(choice.keeps) if len(keep) == size), stage)
                for size in sizes for stage in stages]

    def _same_choice_as(self, parent: Nodes, depth: int) -> tuple[frozenset[int], int] | None:
        """Reordering revisits only level depth-1's order: level depth keeps what it was given."""
        if depth >= self.space.n_levels:
            return None
        return frozenset([int(parent.keeps[depth, 0])]), int(parent.stages[depth, 0])

    def _slices(self, parent: Nodes, depth: int, first_order_only: bool, reorder: bool, how: str,
                wanted=None):
        """The children of `parent` in slices of about `slice` factor choices: all of them in
        turn ("walk", "patient"), or one quick look spread over the whole level."""
        tree, size = self.tree, self.greedy.slice
        if reorder:
            yield tree.reorder(parent)
            return
        total = int(tree.factor_children(parent)[0])
        if how == "quick look" and total > size:
            yield self._quick_look(parent, total, first_order_only)
            return
        # only the choices that fit are generated: crossing every choice and ruling out the
        # ones that do not fit was most of greedy's time. Each that fits comes with its orders
        # and options: a slice is `slice` rows after that expansion, so memory stays bounded
        # (docs/RESULTS.md)
        fitting = max(1, size // tree.expansion(parent.depth, first_order_only))
        for _, children in fitting_children(tree, parent, fitting, first_order_only, self._choices(depth, wanted)):
            yield children       # None: a stretch where none fits (the walk asks its budget)

    def _choices(self, depth: int, wanted) -> np.ndarray | None:
        """(stages x keeps) the options of level `depth` in the tier `wanted`: the others are not
        generated (with 8 keep sets they were most of the rows crossed with orders)."""
        if wanted is None:
            return None
        keep_options, stage = wanted
        choice = self.space.choices[depth]
        mask = np.zeros((len(choice.stages), len(choice.keeps)), bool)
        mask[choice.stages.index(stage), sorted(keep_options)] = True
        return mask.reshape(-1)

    def _quick_look(self, parent: Nodes, total: int, first_order_only: bool) -> Nodes:
        """About `slice` factor choices in evenly spaced runs over all `total`: the tree lists a
        level's choices with its own factors growing, so the first slice alone would only hold
        the largest tiles below, often none that fit."""
        width = max(1, self.greedy.slice // QUICK_LOOK_WINDOWS)
        starts = np.unique(np.linspace(0, total - width, QUICK_LOOK_WINDOWS).astype(np.int64))
        # the runs do not overlap (total > slice): generated in one call, the same rows in the
        # same order as run after run, without a fixed cost per run (most of a quick look's time)
        flat = (starts[:, None] + np.arange(width)).reshape(-1)
        return self.tree.children_at(parent, flat, first_order_only=first_order_only)

    def _best_child(self, parent: Nodes, depth: int, wanted, first_order_only: bool, reorder: bool,
                    how: str) -> tuple[Nodes | None, bool]:
        """The best few children (best first, at most `ALTERNATIVES`) whose level-depth keeps and stages are in `wanted` (None when none fits),
        and whether every child was looked at. A "walk" stops when the budget runs out and
        keeps the best of the slices priced so far; a "quick look" prices one spread slice; a
        "patient" walk ignores the budget."""
        space = self.space
        kept: list = []                  # (key, child), the best few so far, best first
        total = 1 if reorder else int(self.tree.factor_children(parent)[0])
        finished = how != "quick look" or total <= self.greedy.slice
        for children in self._slices(parent, depth, first_order_only, reorder, how, wanted):
            if how == "walk" and self._out_of_time(depth):
                return (Nodes.concat([node for _, node in kept]) if kept else None), False
            if children is None:
                continue
            if wanted is not None:
                keep_options, stage = wanted
                children = children.take(np.flatnonzero(np.isin(children.keeps[depth], list(keep_options))
                                                        & (children.stages[depth] == stage)))
            if not len(children):
                continue
            table = self.tree.table(children)
            costs = self.context.price(space.arch, space.workload, table)
            if depth == self.tree.n_levels:
                mask = pruning.valid_mask(space, table)
                self.incumbent.offer(table, costs, mask)
                rows = np.flatnonzero(costs.valid & mask)
                keys = ranking_keys(self.objective, costs, table)
            else:
                self.incumbent.evaluated += len(table)
                rows = np.flatnonzero(feasible(space, depth, table))
                keys = self._level_keys(depth, table, costs)
            if not len(rows):
                continue
            ranked = rows[np.lexsort([k[rows] for k in keys][::-1])[:ALTERNATIVES]]
            found = [(tuple(k[row].item() for k in keys), children.take(np.array([row]))) for row in ranked]
            kept = sorted(kept + found, key=lambda pair: pair[0])[:ALTERNATIVES]
        best = None if not kept else Nodes.concat([node for _, node in kept])
        return best, finished

    def _out_of_time(self, depth: int) -> bool:
        if self.hurried_from is None and self.budget.spent():
            self.hurried_from = self.space.arch.levels[depth - 1].name
        return self.hurried

    def _level_keys(self, depth: int, table, costs) -> list[np.ndarray]:
        """Rules 1 to 4 as sort keys for the choices at level depth-1 (rule 0 picked the tier)."""
        space, lv = self.space, depth - 1
        units = table.factors[lv, 1:].prod(axis=(0, 1))
        reduction = ~space.workload.relevance[space.workload.output]
        split_reduction = table.factors[lv, 1:][:, reduction].prod(axis=(0, 1))
        word_bytes = np.array([space.arch.levels[depth].word_bytes(t) for t in space.workload.tensors])[:, None]
        filled = (costs.level_fills[depth] * word_bytes).sum(axis=0) * costs.level_instances[depth]
        tiles = pruning.tile_words(space, table.factors)
        volume = sum(tiles[t][depth] for t in range(len(space.workload.tensors)))
        return [-units, split_reduction, filled, -volume] + ranking_keys(self.objective, costs, table)[3:]

    def _dead_end(self, level: int) -> str:
        return (f"greedy: after fixing {', '.join(self.decided) or 'nothing'}, no choice at level "
                f"{self.space.arch.levels[level].name} leaves a mapping that fits (a top-down choice cannot "
                "be revised; the joint search can)")
