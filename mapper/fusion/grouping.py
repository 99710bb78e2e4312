"""The search over groupings: the ops (listed in a topological order) cut into kernels, each a
contiguous run of that order priced by `groups.Grouper`, the sum of the kernels' objective
(energy, cycles or outermost-level bytes) least.

`best_grouping` is a dynamic programme over the order: the best cut of ops[:i] is the best of
(best cut of ops[:j]) + group ops[j:i] over every j, so it is optimal over every grouping into
contiguous runs whose groups are legal, given each group's mapping (the joint search's best
under the group's constraints). `all_groupings` enumerates those groupings one by one, the check
of the programme on small graphs. Ties keep the shorter last group: fusion is chosen only where
it strictly gains. For every boundary left unfused, `boundary_reason` says why.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from .group_price import GroupPrice, Refusal
from .groups import Grouper

MAX_GROUP = 8            # ops in one kernel at most
MAX_EXHAUSTIVE = 14      # ops of a graph `all_groupings` enumerates (2^13 cuts)
TIE = 1e-12              # relative: a fused group must beat its parts by more than rounding


@dataclass(frozen=True)
class Grouping:
    groups: tuple[GroupPrice, ...]
    score: float

    def group_of(self, op: int) -> GroupPrice:
        return next(g for g in self.groups if op in g.ops)


def unfused(grouper: Grouper, n: int) -> Grouping:
    groups = tuple(grouper.price((i,)) for i in range(n))
    return Grouping(groups, sum(g.score(grouper.objective) for g in groups))


def best_grouping(grouper: Grouper, n: int) -> Grouping:
    """The dynamic programme over the order (see the module docstring)."""
    best: list[tuple[float, tuple[GroupPrice, ...]]] = [(0.0, ())]
    for i in range(1, n + 1):
        choice = None
        for j in range(i - 1, max(-1, i - 1 - MAX_GROUP), -1):         # shortest last group first
            group = grouper.price(tuple(range(j, i)))
            if isinstance(group, Refusal):
                continue
            score = best[j][0] + group.score(grouper.objective)
            if choice is None or score < choice[0] * (1 - TIE):
                choice = (score, best[j][1] + (group,))
        best.append(choice)
    return Grouping(best[n][1], best[n][0])


def all_groupings(grouper: Grouper, n: int) -> list[Grouping]:
    """Every grouping into contiguous runs whose groups are all legal (small graphs only)."""
    if n > MAX_EXHAUSTIVE:
        raise ValueError(f"{n} ops: enumerating 2^{n - 1} groupings is not attempted")
    out = []
    for cuts in itertools.product((False, True), repeat=n - 1):
        starts = [0] + [k + 1 for k, cut in enumerate(cuts) if cut] + [n]
        groups = [grouper.price(tuple(range(a, b))) for a, b in zip(starts, starts[1:])]
        if any(isinstance(g, Refusal) for g in groups):
            continue
        out.append(Grouping(tuple(groups), sum(g.score(grouper.objective) for g in groups)))
    return out


@dataclass(frozen=True)
class Boundary:
    """An intermediate between two ops: fused inside a group, or left to the outermost level
    with the reason (kind as the report groups them)."""
    tensor: str
    producer: int
    consumer: int
    fused: bool
    kind: str = ""
    reason: str = ""


def boundaries(grouper: Grouper, grouping: Grouping) -> list[Boundary]:
    graph = grouper.graph
    out = []
    for t in graph.intermediates:
        i = graph.producer(t)
        for j in graph.consumers(t):
            gi, gj = grouping.group_of(i), grouping.group_of(j)
            if gi is gj and t in gi.fused:
                out.append(Boundary(t, i, j, True))
            else:
                out.append(Boundary(t, i, j, False, *boundary_reason(grouper, gi, gj)))
    return out


def boundary_reason(grouper: Grouper, gi: GroupPrice, gj: GroupPrice) -> tuple[str, str]:
    """Why the kernels of groups gi and gj (the same group: a spill) were not one."""
    if gi is gj:
        return "capacity/spill", "; ".join(gi.notes)
    ops = tuple(sorted(set(gi.ops) | set(gj.ops)))
    union = grouper.price(ops)
    if isinstance(union, Refusal):
        return union.kind, union.reason
    if union.spilled:
        return "capacity/spill", "; ".join(n for n in union.notes if "spill" in n)
    objective = grouper.objective
    apart = gi.score(objective) + gj.score(objective)
    if union.score(objective) >= apart * (1 - TIE):
        kernel = gi.kernels[-1]
        levels = max(kernel.level_cycles(lv) for lv in range(kernel.n_levels))
        kind = "compute-bound" if kernel.compute_cycles >= levels else "no gain"
        return kind, f"one kernel would cost {union.score(objective):.4g} against {apart:.4g} apart ({objective})"
    if ops[-1] - ops[0] + 1 != len(ops):
        return "order", (f"one kernel would save {apart - union.score(objective):.4g} ({objective}) but its ops are "
                         "not a run of the listed order, which the grouping search cuts")
    return "other grouping", (f"one kernel would save {apart - union.score(objective):.4g} ({objective}), less "
                              "than the groups chosen around it")
