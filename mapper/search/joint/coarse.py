"""Coarse-to-fine incumbents: the same question on a smaller shape, its answer carried back.

What makes a mapping good is mostly its structure: which level keeps which tensor, the spatial
split, the tiles of the inner levels and their loop orders. That structure carries over between
shapes of one einsum, while the space of a smaller shape is far smaller and its search gets
much closer to its optimum in the same time. So the joint search first solves the shape with
every large dim divided (`shrunk`), within a share of its time, and offers that answer carried
to the real shape (`mapper/rescale.py`: the outermost level's loops grow by the ratio, every inner
tile stays as it was, so it still fits) as an incumbent; the local search then adapts it
(docs/RESULTS.md: where it helped, and why it is off by default, `Joint.coarse`).

This changes only which incumbent the walk starts with, never what the walk returns when it
finishes (incumbents are ranked like exhaustive search ranks mappings).
"""
from __future__ import annotations

from dataclasses import replace

from ...errors import MapperError
from ...mapspace import Mapspace, counting, infeasible
from ...rescale import rescale
from ..context import SearchContext
from ..events import CoarseStart
from ..objective import Objective
from ..warm import admit

SMALLEST = 16          # dims at or below this size are kept as they are
SHRINK = (4, 2)        # divide a larger dim by the first of these that divides it


def shrunk(space: Mapspace) -> Mapspace | None:
    """The space of the same architecture and constraints for the workload with every dim
    larger than `SMALLEST` divided by 4 (or 2, where 4 does not divide it); None when no dim
    shrinks or the smaller shape has no legal mapping (a constraint may need the full size)."""
    workload = space.workload
    sizes = []
    for size in workload.sizes:
        ratio = next((r for r in SHRINK if size % r == 0 and size // r >= SMALLEST), 1)
        sizes.append(size // ratio)
    if tuple(sizes) == tuple(workload.sizes):
        return None
    smaller = replace(workload, name=f"{workload.name} (coarse)", sizes=tuple(sizes))
    try:
        coarse = Mapspace(space.arch, smaller, space.constraints)
        infeasible.require_nonempty(coarse, counting.funnel(coarse))
    except MapperError:
        return None
    return coarse


def coarse_incumbent(space: Mapspace, objective: Objective, search, context: SearchContext,
                     carry=None) -> tuple[object | None, CoarseStart]:
    """The best mapping `search` (a strategy, run under `context`) finds on the shrunk space,
    carried to `space` and admitted as a one-row table (None when there is no smaller shape, or
    the answer does not carry over), and what happened. `carry()`, when given and False after
    the search, leaves the answer where it is: the command's time is up, and carrying it
    (rescale, admit, the masks) would end past it."""
    coarse = shrunk(space)
    if coarse is None:
        return None, CoarseStart("no shape")
    shape = "x".join(str(s) for s in coarse.workload.sizes)
    try:
        result = search.run(coarse, objective, context)
    except MapperError as exc:
        return None, CoarseStart("failed", shape, detail=str(exc))
    if carry is not None and not carry():
        return None, CoarseStart("out of time", shape, result.score)
    carried = rescale(result.mapping, coarse.workload, space.workload)
    table = None if carried is None else admit(space, carried)
    if table is None:
        return None, CoarseStart("does not carry", shape, result.score)
    return table, CoarseStart("carried", shape, result.score)
