"""One fusion study: every op mapped on its own (unfused), the grouping search (the dynamic
programme over runs of the listed order, then CP-SAT over every legal connected group, the
better kept), the boundaries and the chain's lower bound, under one search context.

Budgets, counted in work, never read off the clock, so that the same command on the same inputs
gives the same result on a loaded machine or a quiet one: the searches run on a work clock
(`SearchContext.counting`), MAPPINGS_PER_SECOND mappings priced to each nominal second of the
time limit. The einsums' searches share 85% of the time limit (each fusable variant counted as
one more search), the streaming ops the rest; the groups fused through a buffer level are
searched in the order of their estimated saving per nominal second of search, while the
command's nominal budget lasts; CP-SAT's choice of groups is capped in its deterministic time.
The wall-clock deadline only stops: when it fires, each search ends with its best so far, and
the result says so (`FuseResult.stopped_by_clock`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..opgraph import OpGraph
from ..search import Budget, SearchContext
from ..spec import Arch
from .bound import ChainBound, chain_bound
from .cover import best_cover
from .grouping import Boundary, Grouping, best_grouping, boundaries, unfused
from .groups import Grouper
from .kernels import OpSearches, signature

EINSUM_SHARE = 0.85
# mappings priced per nominal second of the time limit: a fixed rate, never a measured one (a
# measured rate would carry the machine's load into every budget). Chosen on the GPT-3 layer's
# study at 30 s (docs/RESULTS.md): 0.4823 J in about 16 CPU seconds; 60,000 and 80,000 gave
# 0.519 and 0.535 J in 15.7 and 16.9 (a search's set-up, not its pricing, is most of its cost)
MAPPINGS_PER_SECOND = 100_000
FINISH_S = 2.0             # kept at the end: the last polish and the choice (nominal seconds, and
                           # wall seconds before the deadline for the group searches' stop)
MIN_LEFT_S = 0.5           # nominal seconds of the budget under which no further group is searched
COVER_S, MIN_COVER_S = 10.0, 0.05     # CP-SAT's choice of groups: deterministic seconds; wall seconds
                                      # at least, past the deadline (a stop only)


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
    # groups whose estimate placed them in the best grouping but which the budget left unsearched
    # (so refused in the choice), and how far that grouping's score, with their estimates, lies
    # below the choice's: the gap the unsearched groups leave
    estimated_only: tuple[tuple[int, ...], ...] = ()
    estimate_gap: float = 0.0
    stopped_by_clock: bool = False  # the wall-clock deadline cut a search short: the load shaped it
    grouper: Grouper | None = None  # what priced the groups (each group's price or refusal)

    @property
    def candidates(self) -> tuple:
        """(ops, GroupPrice or Refusal) of every group of two ops or more the study priced, in
        the order they were first priced."""
        priced = self.grouper.priced() if self.grouper is not None else {}
        return tuple((ops, found) for ops, found in priced.items() if len(ops) > 1)


@dataclass(frozen=True)
class Choice:
    """The grouping search's answer: the better grouping, the runs' one, whether CP-SAT proved
    its own, and what the group searches' budget left unsearched (`FuseResult`)."""
    best: Grouping
    runs: Grouping
    proven: bool
    estimated_only: tuple[tuple[int, ...], ...] = ()
    estimate_gap: float = 0.0


def kernel_objective(arch: Arch, objective: str) -> str:
    """What each kernel's search minimises: on a GPU its EDP (an energy-only mapping may leave
    SMs idle, which the report's cycles would then carry); elsewhere the grouping's own
    objective, so that the sum the grouping minimises is a sum of each kernel's optimum (as
    AccelForge's FFM, which maps by energy alone)."""
    if arch.gpu is not None:
        return "edp"
    return f"bytes:{arch.levels[0].name}" if objective == "bytes" else objective


# a mapspace's keys a fused study cannot apply: each op's search takes its family's own mapspace
# (`kernels.OpSearches`), to which only `levels` are added
NOT_APPLIED = ("factors", "max_padding", "align_to_native", "min_utilization", "min_occupancy", "clusters",
               "swap_operands")


def fusion_space(arch: Arch, graph: OpGraph, constraints, strict: bool = True) -> tuple[Arch, tuple]:
    """What a mapspace gives a fusion study (`mapper fuse --mapspace`, a sweep's chain points):
    the arch its kernels run on (CTA pairs where it asks: `bind.kernel_arch`) and its `levels`,
    added to every op's space. Each level, dim and tensor they name is checked here against the
    arch and every op (by name or role), since each op's search merges them into a mapspace of
    its own, whose errors would name that space, not this file. `strict`: a key the study cannot
    apply (`NOT_APPLIED`) set away from its default is refused, naming it, rather than ignored (a
    sweep's mapspace applies it to its one-einsum points, so the sweep passes False)."""
    from ..bind import check_constraint_names, kernel_arch
    from ..constraints import Constraints
    from ..errors import SpecError
    default = Constraints()
    for key in NOT_APPLIED if strict else ():
        if getattr(constraints, key) != getattr(default, key):
            raise SpecError(constraints.file or f"mapspace {constraints.name}", key,
                            f"a fusion study applies a mapspace's levels and cta_pairs only, not {key} (each op is "
                            "searched on its own kind's mapspace): leave it out of this mapspace")
    for key, level in constraints.levels:
        if level.tensor_depths:     # a fused group holds whole tiles in its buffer level
            raise SpecError(constraints.file or f"mapspace {constraints.name}", f"levels.{key}.tensor_depths",
                            "a fusion study holds each kernel's tiles under its levels' loops: search one einsum "
                            "(`mapper search`) with tensor_depths, or leave it out of this mapspace")
    arch = kernel_arch(arch, constraints)
    for op in graph.ops:
        check_constraint_names(arch, op.workload, constraints)
    return arch, constraints.levels


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


def best_of(grouper: Grouper, n: int) -> Choice:
    """The better of the dynamic programme's and CP-SAT's groupings, the programme's, and
    whether CP-SAT proved its own. CP-SAT solves for at most COVER_S of its deterministic time
    (the same answer whatever the load), stopped at the searches' deadline (at least
    MIN_COVER_S): the choice must not carry the command past its limit."""
    runs = best_grouping(grouper, n)
    context = grouper.searches.context
    wall = None if context.deadline is None else max(MIN_COVER_S, context.deadline - time.perf_counter())
    found = best_cover(grouper, n, seconds=COVER_S, wall_seconds=wall)
    context.past_deadline()             # recorded when the stop cut the solve
    if found is None:                   # too many connected groups to price: the runs' choice
        return Choice(runs, runs, False)
    cover, proven = found
    return Choice(cover if cover.score < runs.score else runs, runs, proven)


def settled(grouper: Grouper, n: int, budget: Budget | None = None) -> Choice:
    """The groupings, the groups fused through a buffer level searched lazily. Each round
    chooses the best grouping with every such group not yet searched priced by its estimate
    (`buffered.estimate`: its ops' own kernels, less the intermediates' traffic, plus the
    inputs read again) and searches the slices of the estimated groups it chose, the largest
    saving per nominal second of search first (`Grouper.search_seconds`, from the searches'
    shares), while `budget` (on the work clock; None: none) leaves MIN_LEFT_S; the rounds end when the
    choice holds no estimate or the budget is spent. Then the choice over the groups whose
    prices are their own searches' (the others refused: `not searched`): optimal over the
    groups searched, and the estimated groups left in the last round's choice reported with
    the gap they leave. The wall clock only stops the searches, FINISH_S before the command's
    deadline (kept for the last polish and the choice)."""
    if not grouper.slices_possible():
        return best_of(grouper, n)
    searches, searched = grouper.searches, grouper.searched
    context = searches.context
    if context.deadline is not None:          # a share: the same tally, Ctrl-C and budget
        searches.context = replace(context, deadline=context.deadline - FINISH_S)
    try:
        while True:
            grouper.slices = "estimate"
            estimate = best_of(grouper, n)
            pending = _by_saving(grouper, estimate)
            if not pending or not _work_left(searches.context, budget):
                break
            grouper.slices = "searched"
            for ops in pending:
                if not _work_left(searches.context, budget):
                    break
                searched.add(ops)
                grouper.price(ops)
    finally:
        searches.context = context
    grouper.slices = "searched"
    final = best_of(grouper, n)
    if not pending:
        return final
    gap = max(0.0, final.best.score - estimate.best.score) / final.best.score if final.best.score else 0.0
    return replace(final, estimated_only=tuple(pending), estimate_gap=gap)


def _by_saving(grouper: Grouper, choice: Choice) -> list[tuple[int, ...]]:
    """The estimated groups of `choice` not yet searched, the largest saving (estimated, against
    their ops apart) per nominal second of search first; ties in the order the choice lists them."""
    estimated = {g.ops: g for g in choice.best.groups + choice.runs.groups
                 if g.estimated and g.ops not in grouper.searched}
    objective = grouper.objective
    return sorted(estimated, key=lambda ops: (estimated[ops].score(objective) - sum(
        grouper.price((i,)).score(objective) for i in ops)) / max(grouper.search_seconds(ops), 1e-3))


def _work_left(context: SearchContext, budget: Budget | None) -> bool:
    """Whether the group searches' budget (on the work clock) leaves MIN_LEFT_S for another
    group's searches, and the wall clock has not stopped the searches."""
    return not context.past_deadline() and (budget is None or budget.deadline is None or context.clock() + MIN_LEFT_S <= budget.deadline)


def fuse(arch: Arch, graph: OpGraph, context: SearchContext, time_limit: float,
         objective: str = "energy", extra_levels: tuple = (), workers: int | None = None, *,
         rate: float = MAPPINGS_PER_SECOND) -> FuseResult:
    """`extra_levels`: per-level constraints (`fusion_space`: a mapspace preset's `levels`,
    e.g. keeps by role) added to every op's space; `workers`: cores each op's joint search may
    fork onto (None: this machine's; a sweep running studies side by side gives each one).
    `rate`: mappings priced per nominal second of `time_limit` (the work clock's; an evaluation
    budget's context keeps its own)."""
    started = time.perf_counter()
    # one MAC rate for the kernels fused from several ops: the first contraction's operands'
    # (a graph's ops share its dtypes; each op's own search resolves its own in any case)
    einsums = [op.workload for op in graph.ops if op.kind == "einsum"]
    arch = arch.for_workload(einsums[0]) if einsums else arch
    context = context.counting(rate)
    budget = context.budget(max(time_limit - FINISH_S, 0.0))
    searches = searches_for(arch, graph, context, time_limit, extra_levels, objective, workers)
    grouper = Grouper(arch, graph, searches, objective)
    n = len(graph.ops)
    unfused(grouper, n)                       # every op searched on its own first
    if searches.polish():                      # each answer against the others' carried to it
        grouper.forget()
    choice = settled(grouper, n, budget)
    if not context.past_deadline() and searches.polish():
        grouper.forget()
        choice = replace(best_of(grouper, n), estimated_only=choice.estimated_only, estimate_gap=choice.estimate_gap)
    base = unfused(grouper, n)
    return FuseResult(arch, graph, objective, base, choice.best, tuple(boundaries(grouper, choice.best)),
                      chain_bound(arch, graph, searches.level), searches, time.perf_counter() - started,
                      choice.runs, choice.proven, choice.estimated_only, choice.estimate_gap,
                      context.stopped_by_clock, grouper)
