"""One fusion study: every op mapped on its own (unfused), the grouping search (the dynamic
programme over runs of the listed order, then CP-SAT over every legal connected group, the
better kept), the boundaries and the chain's lower bound, under one search context.

Time: the einsums' searches share 85% of the time limit (each fusable variant counted as one
more search), the streaming ops the rest; `SearchContext.share` gives each its seconds on one
deadline.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..opgraph import OpGraph
from ..search import SearchContext
from ..spec import Arch
from .bound import ChainBound, chain_bound
from .cover import best_cover
from .grouping import Boundary, Grouping, best_grouping, boundaries, unfused
from .groups import Grouper
from .kernels import OpSearches, signature

EINSUM_SHARE = 0.85
FINISH_S = 2.0             # kept at the end of the searches: the last polish and the choice
MIN_LEFT_S = 0.5           # seconds before that end under which no further group is searched
COVER_S, MIN_COVER_S = 10.0, 0.05     # CP-SAT's seconds for the choice of groups, most and least


@dataclass(frozen=True)
class FuseResult:
    arch: Arch
    graph: OpGraph
    objective: str
    unfused: Grouping
    fused: Grouping
    boundaries: tuple[Boundary, ...]
    bound: ChainBound
    searches: OpSearches
    seconds: float
    runs: Grouping                  # the dynamic programme's best over runs of the listed order
    cover_proven: bool              # CP-SAT proved its choice over every connected group
    grouper: Grouper | None = None  # what priced the groups (each group's price or refusal)

    @property
    def candidates(self) -> tuple:
        """(ops, GroupPrice or Refusal) of every group of two ops or more the study priced, in
        the order they were first priced."""
        priced = self.grouper.priced() if self.grouper is not None else {}
        return tuple((ops, found) for ops, found in priced.items() if len(ops) > 1)


def kernel_objective(arch: Arch, objective: str) -> str:
    """What each kernel's search minimises: on a GPU its EDP (an energy-only mapping may leave
    SMs idle, which the report's cycles would then carry); elsewhere the grouping's own
    objective, so that the sum the grouping minimises is a sum of each kernel's optimum (as
    AccelForge's FFM, which maps by energy alone)."""
    if arch.gpu is not None:
        return "edp"
    return f"bytes:{arch.levels[0].name}" if objective == "bytes" else objective


def mapspace_levels(arch: Arch, graph: OpGraph, constraints) -> tuple:
    """What a mapspace adds to a fusion study (`mapper fuse --mapspace`, a sweep's chain
    points): its `levels`, added to every op's space; each level, dim and tensor they name is
    checked here against `arch` and every op (by name or role), since each op's search merges
    them into a mapspace of its own, whose errors would name that space, not this file."""
    from ..bind import check_constraint_names
    for op in graph.ops:
        check_constraint_names(arch, op.workload, constraints)
    return constraints.levels


def searches_for(arch: Arch, graph: OpGraph, context: SearchContext, time_limit: float,
                 extra_levels: tuple = (), objective: str = "energy", workers: int | None = None) -> OpSearches:
    # identical einsums (one signature) are searched once
    n_einsum = len({signature(op.workload) for op in graph.ops if op.family == "einsum"})
    n_stream = sum(op.family != "einsum" for op in graph.ops)
    # each einsum: on its own, completing its tile, and perhaps with a row whole
    per_einsum = EINSUM_SHARE * time_limit / max(1, 2.5 * n_einsum) if n_einsum else 0.0
    per_stream = (1 - EINSUM_SHARE if n_einsum else 1.0) * time_limit / max(1, n_stream)
    return OpSearches(arch, graph, context, per_einsum, per_stream, kernel_objective(arch, objective),
                      extra_levels=extra_levels, workers=workers)


def best_of(grouper: Grouper, n: int) -> tuple[Grouping, Grouping, bool]:
    """The better of the dynamic programme's and CP-SAT's groupings, the programme's, and
    whether CP-SAT proved its own. CP-SAT solves until the searches' deadline (at most
    COVER_S, at least MIN_COVER_S): the choice must not carry the command past its limit."""
    runs = best_grouping(grouper, n)
    seconds = min(COVER_S, max(MIN_COVER_S, grouper.searches.context.seconds_left()))
    found = best_cover(grouper, n, seconds=seconds)
    if found is None:                   # too many connected groups to price: the runs' choice
        return runs, runs, False
    cover, proven = found
    return (cover if cover.score < runs.score else runs), runs, proven


def settled(grouper: Grouper, n: int) -> tuple[Grouping, Grouping, bool]:
    """The groupings, the groups fused through a buffer level searched lazily. Each round
    chooses the best grouping with every such group not yet searched priced by its estimate
    (`buffered.estimate`: its ops' own kernels, less the intermediates' traffic, plus the
    inputs read again) and searches the slices of the estimated groups it chose, the largest
    saving per second of search first (`Grouper.search_seconds`), on a deadline FINISH_S before the command's (kept for the last polish and
    the choice); the rounds end when the choice holds no estimate or that deadline has
    passed. Then the choice over the groups whose prices are their own searches' (the others
    refused: `not searched`): optimal over the groups searched."""
    if not grouper.slices_possible():
        return best_of(grouper, n)
    searches, searched = grouper.searches, grouper.searched
    context = searches.context
    if context.deadline is not None:          # a share: the same tally, Ctrl-C and budget
        searches.context = replace(context, deadline=context.deadline - FINISH_S)
    try:
        while _time_left(searches.context):
            grouper.slices = "estimate"
            best, runs, _ = best_of(grouper, n)
            estimated = {g.ops: g for g in best.groups + runs.groups if g.estimated and g.ops not in searched}
            # the largest saving per second of search first
            pending = sorted(estimated, key=lambda ops: (estimated[ops].score(grouper.objective) - sum(
                grouper.price((i,)).score(grouper.objective) for i in ops)) / max(grouper.search_seconds(ops), 1e-3))
            if not pending:
                break
            grouper.slices = "searched"
            for ops in pending:
                if not _time_left(searches.context):
                    break
                searched.add(ops)
                grouper.price(ops)
    finally:
        searches.context = context
    grouper.slices = "searched"
    return best_of(grouper, n)


def _time_left(context: SearchContext) -> bool:
    """Whether the deadline leaves MIN_LEFT_S for another group's searches (read off the clock:
    `SearchContext.stopped` would count the stretch since its last check, a whole search, as
    one step of the next search's look-ahead)."""
    return context.deadline is None or context.deadline - time.perf_counter() > MIN_LEFT_S


def fuse(arch: Arch, graph: OpGraph, context: SearchContext, time_limit: float,
         objective: str = "energy", extra_levels: tuple = (), workers: int | None = None) -> FuseResult:
    """`extra_levels`: per-level constraints (`mapspace_levels`: a mapspace preset's `levels`,
    e.g. keeps by role) added to every op's space; `workers`: cores each op's joint search may
    fork onto (None: this machine's; a sweep running studies side by side gives each one)."""
    started = time.perf_counter()
    searches = searches_for(arch, graph, context, time_limit, extra_levels, objective, workers)
    grouper = Grouper(arch, graph, searches, objective)
    n = len(graph.ops)
    unfused(grouper, n)                       # every op searched on its own first
    if searches.polish():                      # each answer against the others' carried to it
        grouper.forget()
    best, runs, proven = settled(grouper, n)
    if (context.deadline is None or time.perf_counter() < context.deadline) and searches.polish():
        grouper.forget()
        best, runs, proven = best_of(grouper, n)
    base = unfused(grouper, n)
    return FuseResult(arch, graph, objective, base, best, tuple(boundaries(grouper, best)),
                      chain_bound(arch, graph, searches.level), searches, time.perf_counter() - started,
                      runs, proven, grouper)
