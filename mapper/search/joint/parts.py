"""The tree walked in parts, one per keep vector (every level's keep set fixed first).

Why: with keep/bypass searched, no undecided level *must* keep a tensor, so the bounds on the
traffic into the levels below a node (`bounds.link.LinkBounds`, the operand and innermost bounds)
charge almost nothing until the walk reaches them, and every node near the root looks nearly
free. With the keeps fixed first, each part's bounds charge what its levels hold from the root
down: their root bounds spread widely, the optimum drops most parts whole, and far fewer
depth-1 nodes stay open (docs/RESULTS.md).

The parts cover the space exactly (a mapping has one keep vector) and the walk visits them in
order of their smallest root bound (the roots of each part in order of theirs), so it still
returns what exhaustive search would: a part is skipped only when its bound is beaten by the
incumbent, as a node is.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ... import depths
from ...cost import Costs
from ...mapping import MappingTable
from ...mapspace import Mapspace
from ..bounds import LinkBounds, lower_bound
from ..context import Budget, SearchContext
from ..objective import Objective, bound_order
from ..tree import LevelTree, Nodes

MAX_PARTS = 4_096       # keep vectors walked as parts at most (else the space is walked whole)


@dataclass
class Part:
    space: Mapspace
    tree: LevelTree
    links: LinkBounds
    roots: Nodes            # sorted by bound
    bounds: np.ndarray      # the roots' lower bounds, ascending
    picks: tuple = ()       # its keep vector: per level, the index of its keep set (() : all)

    @property
    def first(self) -> np.ndarray:
        """The smallest root bound (a pair for a lexicographic objective)."""
        return self.bounds[0]


def bounded_part(space: Mapspace, objective: Objective, tree: LevelTree, links: LinkBounds,
                 context: SearchContext) -> Part:
    """A space with its roots sorted by their lower bounds."""
    roots = tree.roots()
    table = tree.table(roots)
    return _sorted(space, objective, tree, links, roots, table, context.price(space.arch, space.workload, table))


def _sorted(space: Mapspace, objective: Objective, tree: LevelTree, links: LinkBounds, roots: Nodes,
            table, costs: Costs, picks: tuple = ()) -> Part:
    """A space (or a part of one, whose keep vector is `picks`) with its roots (priced as
    `table`, `costs`) sorted by their lower bounds."""
    bounds = lower_bound(space, objective, 0, table, costs, links)
    order = bound_order(objective, bounds)
    return Part(space, tree, links, roots.take(order), bounds[order], picks)


def keep_vectors(space: Mapspace) -> int:
    """How many keep vectors the parts walk: every one, or where a level is split into
    sub-levels only the canonical ones (`depths.canonical`)."""
    if not space.group_rules:
        return math.prod(len(choice.keeps) for choice in space.choices)
    return sum(1 for _ in _pick_vectors(space))


def _pick_vectors(space: Mapspace):
    """Per keep vector walked, each level's index of its keep set: of a space whose levels
    are split into sub-levels (`depths`), one of each class of vectors that change no optimum."""
    picks = itertools.product(*[range(len(choice.keeps)) for choice in space.choices])
    if not space.group_rules:
        return picks
    return (p for p in picks
            if depths.canonical([choice.keeps[i] for choice, i in zip(space.choices, p)], space.group_rules,
                                len(space.workload.tensors)))


def split_by_keeps(space: Mapspace, objective: Objective, tree: LevelTree, links: LinkBounds,
                   budget: Budget) -> list[Part] | None:
    """The parts in the order to walk them (smallest root bound first), or None where one
    part would do (a single keep vector), there are too many of them, or the budget ended
    before they were all bounded (then the space is walked whole, under the bounds that see
    all of it)."""
    count = keep_vectors(space)
    if count == 1 or count > MAX_PARTS:
        return None
    wanted = list(_pick_vectors(space))
    spaces = [space.part(picks) for picks in wanted]
    trees = [tree.for_space(part) for part in spaces]
    # the parts' roots priced together: one call of the cost model, not one per part (each
    # row is priced on its own, `Costs.take`)
    roots = [part_tree.roots() for part_tree in trees]
    tables = [part_tree.table(nodes) for part_tree, nodes in zip(trees, roots)]
    costs = budget.context.price(space.arch, space.workload, MappingTable.concat(tables))
    ends = np.cumsum([len(table) for table in tables])
    parts = []
    for i, (picks, part, part_tree) in enumerate(zip(wanted, spaces, trees)):
        if budget.spent():
            return None
        rows = np.arange(ends[i] - len(tables[i]), ends[i])
        parts.append(_sorted(part, objective, part_tree, links.for_space(part), roots[i], tables[i],
                             costs.take(rows), picks))
    order = bound_order(objective, np.stack([p.first for p in parts]))   # stable: ties in keep-vector order
    return [parts[i] for i in order]


def uncovered(space: Mapspace, parts: list[Part], covered) -> list[Part]:
    """The parts whose keep vector `covered` (per level its keep set, the space's group rules
    -> bool) leaves out: those whose best the incumbent already is, or beats
    (`Joint._warm_start_merged`)."""
    return [part for part in parts
            if not covered([choice.keeps[i] for choice, i in zip(space.choices, part.picks)], space.group_rules)]
