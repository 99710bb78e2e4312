"""Joint search: branch and bound over the levels, every candidate priced by the cost model.

The space is walked as a tree (`search/tree.py`): depth k decides level k-1's factors, spatial
split and loop order and level k's stages and keeps, so every level is chosen knowing the ones
above and bounded knowing what any choice below must still cost (`search/bounds/`). The walk
(`walk.py`) goes best bound first, depth first; a subtree is dropped only when its bound is
beaten by the incumbent. With keep/bypass searched, the tree is walked in parts, one per keep
vector (`parts.py`), best first across the parts' depth-1 nodes; small spaces are walked whole.

The incumbent, which does the pruning, comes from the greedy mapping, mappings given from
outside, CP-SAT's proposals, sampled dives, a local search around the best of these and, when
asked for, the same search on a smaller shape (`incumbents.py`), and the walk itself. All of
them offer only members of the space, ranked by the same keys as exhaustive search, so the
result when the walk finishes is proven optimal and is exactly the mapping exhaustive search
returns. When the budget stops it, the smallest bound of what was left unexplored gives a
proven gap.

On a large space, once greedy has given a first mapping, the rest runs in forked workers
(`parallel.py`; two on a search's work clock, else one per core): worker 0 takes CP-SAT,
polishes its dives and runs the local search while the others dive quickly and start the walk,
whose units each worker claims as it reaches them (on the work clock: those its hash names),
all pruning against the best mapping any of them holds (on the work clock: as of counted
points, `synced.py`, so the result never depends on which worker runs ahead).

docs/SEARCH.md describes the design; `settings.JointTuning` holds what tunes it.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace

import numpy as np

from ... import depths
from ...errors import MapperError
from ...mapping import to_table
from ...mapspace import Mapspace, counting, infeasible, sampling
from ..bounds import LinkBounds
from ..context import SearchContext
from ..events import CpsatSkipped, Event, InParts, NoWarmStart, RandomFallback, StoppedEarly, WarmStart
from ..greedy import Greedy
from ..objective import SLACK, Objective, bound_primary
from ..result import Incumbent, SearchResult, settings_of
from ..tree import LevelTree
from . import incumbents
from .neighbourhood import improve
from .parallel import can_fork, default_workers
from .parts import bounded_part, split_by_keeps, uncovered
from .settings import JointTuning
from .walk import Walk, WalkSetup
from .workers import walk_in_parallel


# the share of a search's budget its start with each tensor at one depth may take
# (`Joint._warm_start_merged`), where a level is split into sub-levels
MERGED_SHARE = 0.5


@dataclass(frozen=True)
class Joint:
    chunk: int = 64_000             # rows (mappings or partial mappings) priced together
    warm_start: bool = True
    cpsat_seconds: float = 2.0      # cap on CP-SAT proposals (0: none): its deterministic time on a
                                    # counting clock, wall seconds on the wall clock alone
    local_search: bool = True       # improve the incumbents by moves around them
    incumbents: tuple = ()          # mappings from outside (a neighbouring shape's optimum, ...)
    dives: int = 24                 # sampled dives down the tree before the walk, for incumbents
    # start from a smaller shape's answer (`coarse.py`) on large spaces: off by default, as on
    # the bench cases it never beat the incumbent and its share of the time delayed the walk
    # (docs/RESULTS.md)
    coarse: bool = False
    parts_above: float = 20_000     # pruned mappings above which the walk is split by keep vector
    workers: int | None = None      # processes searching (None: two on a search's work clock, else
                                    # the cores, `parallel.py`); one under an evaluation budget
    # pruned mappings above which the search runs on several cores: below, forking and the
    # workers' duplicated start cost more than they save
    parallel_above: float = 2e6
    seed: int = 0                   # varies the dives' draws, the local search's samples and
                                    # CP-SAT's seed: the path, never a finished walk's result
    tuning: JointTuning = field(default_factory=JointTuning)
    name: str = "joint"

    @property
    def starts(self) -> incumbents.Starts:
        """What the searches for incumbents read of these settings (`incumbents.py`); the
        coarse start runs this search, without it or given mappings, on the smaller shape."""
        coarse = replace(self, incumbents=(), coarse=False) if self.coarse else None
        return incumbents.Starts(self.local_search, self.dives, self.seed, self.cpsat_seconds, self.tuning, coarse)

    def run(self, space: Mapspace, objective: Objective, context: SearchContext | None = None,
            progress=None) -> SearchResult:
        context = context or SearchContext()
        budget = context.budget(context.time_limit)      # covers the warm start and the proposals too
        context.require_setup(space)
        funnel = counting.funnel(space, stop=context.stopped)     # out of time: estimated
        infeasible.require_nonempty(space, funnel)
        tree = LevelTree(space)
        incumbent = Incumbent(space, objective, context)
        events: list[Event] = []
        self._warm_start(space, objective, incumbent, context, events, tree)
        if self.incumbents:
            events.append(incumbents.given(self.incumbents, space, incumbent))
        if context.past_deadline():
            return self._set_up_too_long(space, funnel, incumbent, context, events)
        links = LinkBounds(space, give_up=context.past_deadline)
        if context.past_deadline():
            return self._set_up_too_long(space, funnel, incumbent, context, events)
        # bounding every part costs tens of milliseconds each: a small space is walked whole
        pruned = funnel.after.get("occupancy", funnel.size)
        parts = split_by_keeps(space, objective, tree, links, budget) if pruned > self.parts_above else None
        split = parts is not None
        if parts is None:
            parts = [bounded_part(space, objective, tree, links, context)]
        setup = WalkSetup(space, objective, tree, links, context, budget, self.tuning, self.chunk,
                          self.local_search, self.seed)
        dived = bool(space.arch.capacity_groups) and self.warm_start and incumbent.table is None
        if dived:
            parts = self._start_at_one_depth(setup, incumbent, parts, events)
        if split:
            events.append(InParts(len(parts), float(bound_primary(objective, parts[0].first))))
        lowest = min(float(bound_primary(objective, p.first)) for p in parts)
        setup = replace(setup, progress=_with_figures(progress, incumbent, lowest))
        workers = self.workers or default_workers(context)
        job = lambda walk: self._find_and_walk(walk, parts, funnel, events, dived)     # noqa: E731
        if workers > 1 and pruned > self.parallel_above and can_fork(context) and incumbent.key is not None:
            complete, open_bounds = walk_in_parallel(setup, incumbent, workers, job, parts, events)
        else:
            walk = Walk(setup, incumbent)
            complete, open_bounds = job(walk), walk.open_bounds
        if incumbent.table is None:       # the budget ended before any leaf: take random draws
            _random_draws(space, incumbent)
            events.append(RandomFallback(context.stop_reason(), "tree"))
        lower = incumbent.score if complete else min(open_bounds + [incumbent.score])
        proven = complete or lower >= incumbent.score * (1 - SLACK)
        if not complete:
            events.append(StoppedEarly(context.stop_reason(), proven))
        return incumbent.result(self.name, funnel, optimal=proven, complete=complete,
                                lower_bound=lower, events=events, settings=settings_of(self))

    def _set_up_too_long(self, space, funnel, incumbent, context, events) -> SearchResult:
        """The time limit passed while the search was set up (a large space, a loaded machine):
        its bounds and walk would carry it further past, so the warm start's mapping (else
        random draws') is the result, not proven, with no lower bound."""
        if incumbent.table is None:
            _random_draws(space, incumbent)
            events.append(RandomFallback(context.stop_reason(), "tree"))
        events.append(StoppedEarly(context.stop_reason(), False))
        return incumbent.result(self.name, funnel, optimal=False, complete=False, lower_bound=None,
                                events=events, settings=settings_of(self))

    def _warm_start(self, space, objective, incumbent, context, events, tree=None) -> None:
        """Greedy's mapping as the first incumbent, each level chosen from one quick look
        (`Greedy.quick`: a few tenths of a second). Its full pass cost more than the dives
        that then beat it (pe-array 96x4096x11008: 0.6 s of 2.7, its mapping 1.9x the optimum,
        the dives' 1.003x); on tpu-v4i it took 11 s of 60 and ended at 22x the optimum, where
        the local search from a quick pass reaches it in a second or two (docs/RESULTS.md).
        Where a level is split into sub-levels, none: greedy's level-by-level choice seldom
        leaves sub-levels that fit their one capacity together (pe-array 1024³: 40 s to the
        proof from greedy's start, 40x the optimum), and the start comes once the parts are
        bounded (`_start_at_one_depth`)."""
        if not self.warm_start or space.arch.capacity_groups:
            return
        try:
            warm = Greedy(quick=True).run(space, objective, context, tree=tree)
            incumbent.offer(to_table([warm.mapping], space.n_dims, len(space.workload.tensors)))
            events.append(WarmStart(warm.score))
        except Exception as exc:          # greedy can dead-end; the search does not need it
            events.append(NoWarmStart(str(exc)))

    def _start_at_one_depth(self, setup: WalkSetup, incumbent: Incumbent, parts: list, events) -> list:
        """Where a level is split into sub-levels (`depths`) and no mapping was given: quick
        dives into the parts first, and only where they find no mapping whose sub-levels fit
        their one capacity together, the best with each tensor at one depth
        (`_warm_start_merged`), whose proof drops the parts it covers. Returns the parts left.
        The dives found one on pe-array's 729x343x1125, 1009x1024x768 and GEMV (the walk then
        proved the optimum with 0.1-0.3 s less CPU than from that search), none on 256³ and
        1024³ (walked without that search, twice as long; docs/RESULTS.md)."""
        incumbents.dives(self.starts, Walk(setup, incumbent), parts, events, polish=False)
        if incumbent.table is not None:
            return parts
        covered = self._warm_start_merged(setup.space, setup.objective, incumbent, setup.context, events)
        if covered is None or not parts[0].picks:       # not proven, or one part: the space whole
            return parts
        return uncovered(setup.space, parts, covered) or parts

    def _warm_start_merged(self, space, objective, incumbent, context, events):
        """The best mapping of a space split into sub-levels (`depths`) with each of their
        tensors at one depth, this search's own on that smaller space (`depths.merged`), whose
        mappings are all in this one (`depths.lifted`). It takes at most `MERGED_SHARE` of the
        search's budget (on eyeriss's resnet50-conv3 it proves nothing in 60 s, and took all
        of them). Returns, where that best is proven, which keep vectors it covers
        (`depths.one_depth`: the walk in parts skips them), else None."""
        try:
            arch, constraints = depths.merged(space.arch, space.constraints)
            plain = Mapspace(arch, space.workload, constraints)
            share = None if context.time_limit is None else MERGED_SHARE * context.time_limit
            # on one worker: a short walk, whose second worker cost more than it saved (pe-array
            # 256³ with tensor depths: 1 s of CPU in 7; docs/RESULTS.md)
            found = replace(self, incumbents=(), workers=1).run(plain, objective, context.share(share))
            incumbent.offer(to_table([depths.lifted(found.mapping, space.arch)], space.n_dims,
                                     len(space.workload.tensors)))
            source = "each tensor at one depth, " + ("proven" if found.optimal else "not proven")
            events.append(WarmStart(found.score, source))
            return depths.one_depth if found.optimal else None
        except MapperError as exc:
            events.append(NoWarmStart(f"each tensor at one depth: {exc}"))
            return None

    def _find_and_walk(self, walk: Walk, parts, funnel, events: list[Event], dived: bool = False) -> bool:
        """The incumbents' search, then the walk; True when the walk finished. On several
        cores every worker runs this on its own walk. On the wall clock worker 0 runs the
        searches for better incumbents (`incumbents.improve_incumbent`; in parts only the
        polished dives, the local search across parts later from inside its walk) while the
        others dive quickly and walk, and each walks the units of the tree it claims first. On
        a search's work clock the others start only once worker 0 has walked alone for a
        while (`synced.SyncedKey.start`), and then go straight to the walk; worker 0 runs this
        as on one core, but in parts its polished dives still come first (pe-array's 1000³ and
        768x768x3072: 0.3-0.8 s less CPU to the proof; docs/RESULTS.md). On one core, the quick
        dives and the walk come first, and the walk runs the searches for incumbents itself
        once it has gone on for a while (where the walk proves the optimum quickly, polishing
        the dives first only delays it; docs/RESULTS.md). Under an evaluation budget (and on
        fusion's work clock), or with no time limit, everything runs in order (in parts under
        an evaluation budget, the local search across parts from inside the walk, on the
        budget's clock); on a search's work clock (`context.walk_first`) in the order above,
        every trigger counted and CP-SAT's answer taken at a counted point: either way what is
        priced never depends on the load. `dived`: the quick dives were made already (where a
        level is split into sub-levels, `_start_at_one_depth`)."""
        setup, incumbent, context = walk.setup, walk.incumbent, walk.context
        space = setup.space
        counted = context.per_evaluation is not None
        in_order = (counted and not context.walk_first) or context.time_limit is None
        cpsat = _Cpsat(self.starts, walk, events)
        if incumbents.cpsat_wanted(self.starts, walk):
            if in_order:                # before the rest, which it may start from
                events.append(incumbents.offer_proposals(
                    space, incumbent, incumbents.start_cpsat(self.starts, space, walk.objective, incumbent, context), context))
            else:
                # solved in a thread once the walk has gone on for `walk_polish_after`, and
                # offered by the walk once ready: where the walk proves the optimum sooner it
                # is not started at all (on h100's GEMMs it found nothing within its cap, and
                # its import and thread took a core from the walk; docs/RESULTS.md)
                cpsat.deferred = True
                walk.deferred.run_later(cpsat.start, after=self.tuning.cpsat_after)
        improve_incumbent = lambda: incumbents.improve_incumbent(self.starts, walk, parts, funnel, events)  # noqa: E731
        # walked whole with the others walking beside it from the start (the wall clock),
        # worker 0's local search comes before its walk (it is what finds a large array's
        # optimum); alone first, it walks first, as on one core (h100's GEMMs: 3.6 s to the
        # proof of 16384^3 with its local search first, 1.3 s without; docs/RESULTS.md). In
        # parts (on several cores, or one under an evaluation budget) only its polished dives
        # come first: the walk's units are then the parts' roots, which a worker busy
        # polishing would leave to the others, and the local search across parts found
        # nothing better on the bench cases (docs/RESULTS.md)
        beside = setup.parallel and not setup.alone_first
        if setup.worker == 0 and len(parts) > 1 and (setup.parallel or (counted and in_order)):
            # in parts: the polished dives first (one into each of the best parts finds these
            # spaces' optima), the local search across parts later, from inside the walk; none
            # after the quick dives into a split space's parts (on pe-array's GEMMs with tensor
            # depths they found nothing better, at 0.15 s of 1.35 on 729x343x1125)
            claims = setup.claims       # they end once another worker's walk has ended
            if not dived:
                incumbents.dives(self.starts, walk, parts, events, polish=walk.polish,
                                 until=None if claims is None else claims.some_walk_ended)
            walk.deferred.run_later(lambda: incumbents.across_parts(self.starts, walk, parts, events),
                           after=self.tuning.parts_search_after)
        elif setup.worker == 0 and (in_order or beside):
            improve_incumbent()
        elif setup.worker == 0 or beside:
            if not dived:
                incumbents.dives(self.starts, walk, parts, events, polish=False)
            if setup.worker == 0:       # as on one core: later, from inside the walk
                walk.deferred.run_later(improve_incumbent)
        # else a worker started late (`synced.SyncedKey.start`): straight to the walk, from the
        # best key worker 0 had by then
        try:
            return walk.walk_parts(parts)
        finally:
            if walk.deferred.end():        # the walk ended before CP-SAT answered: no longer wanted
                events.append(CpsatSkipped("walk ended"))
            elif cpsat.deferred and not cpsat.due:
                events.append(CpsatSkipped("walk ended first"))


class _Cpsat:
    """CP-SAT's proposals started from inside a walk (`Deferred.run_later`): solved in a thread,
    offered by the walk as soon as they are ready (its first solution may come after its cap),
    and polished by a short local search when they improve the incumbent."""

    def __init__(self, starts: incumbents.Starts, walk: Walk, events: list[Event]):
        self.starts, self.walk, self.events = starts, walk, events
        self.deferred = self.due = False    # given to the walk to start; started (or not wanted by then)

    def start(self) -> None:
        starts, walk, events = self.starts, self.walk, self.events
        space, incumbent, context = walk.setup.space, walk.incumbent, walk.context
        self.due = True
        if not incumbents.cpsat_wanted(starts, walk):        # too little time left by now
            return
        proposals = incumbents.start_cpsat(starts, space, walk.objective, incumbent, context)
        if isinstance(proposals, Event):
            events.append(proposals)
            return

        def offer(proposals):
            before = incumbent.key
            events.append(incumbents.offer_proposals(space, incumbent, proposals, context))
            if starts.local_search and incumbent.key != before:
                improve(space, incumbent, context.budget(starts.tuning.part_polish_seconds), seed=starts.seed,
                        stop=walk.budget.spent)
        # on a counting clock, taken once the walk has counted the solve's deterministic cap
        # (waiting for it then if need be): solved in line, it held up the walk and the other
        # workers, which wait for this one at their next exchange (`synced.py`), for seconds
        # (on h100's GEMMs it finds nothing; docs/RESULTS.md)
        after = incumbents.cpsat_cap(starts, context) if context.per_evaluation is not None else None
        walk.deferred.offer_when_ready(proposals, offer, after)


def _random_draws(space: Mapspace, incumbent: Incumbent) -> None:
    """Random members of the space offered until one is valid (at most ten draws)."""
    rng = np.random.default_rng(0)
    for _ in range(10):
        sample = sampling.sample(space, 20_000, rng)
        if len(sample):
            incumbent.offer(sample)
        if incumbent.table is not None:
            break


def _with_figures(progress, incumbent: Incumbent, lowest: float):
    """`progress(evaluated)`, told also the best score any worker holds (`best`) and the space's
    smallest root bound (`lower`: no mapping scores below it) where it takes those keywords (the
    command line's bar, which shows them); a plain one-argument callback as it is."""
    if progress is None:
        return None
    try:
        params = inspect.signature(progress).parameters
    except (TypeError, ValueError):         # a builtin: no signature to read
        return progress
    if not ({"best", "lower"} <= set(params) or any(p.kind is p.VAR_KEYWORD for p in params.values())):
        return progress

    def report(evaluated: int) -> None:
        bar = incumbent.peek()      # from the progress thread too: never an exchange of keys
        progress(evaluated, best=None if bar is None else bar[0], lower=lowest)
    return report
