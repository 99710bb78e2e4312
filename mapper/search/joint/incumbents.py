"""Where the walk's incumbents come from besides the walk itself: mappings given from outside,
CP-SAT's proposals, sampled dives, the local search around the best so far, and (opt-in) the
same search on a smaller shape. Each offers only members of the space, so none changes what a
finished walk returns; each records what it did as an event."""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import numpy as np

from ...mapspace import Mapspace, pruning
from ..context import SearchContext
from ..events import CoarseStart, CpsatProposed, CpsatSkipped, Dives, Event, GivenIncumbents, LocalSearch
from ..objective import Objective
from ..result import Incumbent
from ..warm import admit, factor_rows
from .coarse import coarse_incumbent
from .dives import dive_parts
from .neighbourhood import every_choice, improve, offer_sliced
from .parts import Part
from .settings import JointTuning
from .walk import Walk

TIME_SENSITIVE = ("edp", "cycles", "delay_energy")      # objectives CP-SAT favours parallelism for


@dataclass(frozen=True)
class Starts:
    """What the searches for incumbents are asked to do (the joint strategy's settings they
    read): `coarse`, when given, is the search run on a smaller shape."""
    local_search: bool
    dives: int
    seed: int
    cpsat_seconds: float
    tuning: JointTuning
    coarse: object | None = None


def given(mappings, space: Mapspace, incumbent: Incumbent) -> GivenIncumbents:
    """Offer the mappings given from outside, each first made a member of the space (`admit`)."""
    admitted = [m for m in (admit(space, mapping) for mapping in mappings) if m is not None]
    before = incumbent.score
    for table in admitted:
        incumbent.offer(table, mask=pruning.valid_mask(space, table))
    return GivenIncumbents(len(mappings), len(admitted), incumbent.score if incumbent.score < before else None)


def improve_incumbent(starts: Starts, walk: Walk, parts: list[Part], funnel, events: list[Event]) -> None:
    """Worker 0's searches for better incumbents: walked whole, the local search goes first and
    the dives polish only what beats it; in parts, the dives (each polished inside its part)
    go first, and the local search then starts from the best of them, across parts; then,
    when asked for, the coarse start. On several cores they end once another worker's walk has
    reached its end (every unit of it is then claimed)."""
    space, incumbent, claims = walk.setup.space, walk.incumbent, walk.setup.claims
    others_done = None if claims is None else claims.some_walk_ended
    if starts.local_search and incumbent.table is not None and len(parts) == 1:
        events.append(local_search(starts, walk, others_done))
    dives(starts, walk, parts, events, polish=walk.polish, until=others_done)
    if starts.local_search and incumbent.table is not None and len(parts) > 1:
        incumbent.adopt()
        events.append(local_search(starts, walk, others_done))
    # after the quick starts, so that a walk which proves the optimum is not delayed by the
    # smaller shape's search; in parts not at all: the dives into each part find what the
    # smaller shape's answer brought
    if len(parts) == 1 and _worth_a_coarse_start(starts, walk.context, funnel):
        events.append(coarse_start(starts, space, walk.objective, incumbent, walk.context))


def across_parts(starts: Starts, walk: Walk, parts: list[Part], events: list[Event]) -> None:
    """The local search across parts from the best mapping any worker holds (what
    `improve_incumbent` does after the dives in parts), run from inside the walk once it has
    gone on for a while; on several cores it ends once another worker's walk has ended."""
    claims = walk.setup.claims
    if starts.local_search and walk.incumbent.table is not None and len(parts) > 1:
        walk.incumbent.adopt()
        events.append(local_search(starts, walk, None if claims is None else claims.some_walk_ended))


def dives(starts: Starts, walk: Walk, parts: list[Part], events: list[Event], polish: bool, until=None) -> None:
    """`starts.dives` sampled dives (`dives.py`), within a share of the time limit."""
    if not starts.dives:
        return
    before, time_limit = walk.incumbent.score, walk.context.time_limit
    fraction = 10 if len(parts) == 1 else 4
    share = walk.context.budget(None if time_limit is None else time_limit / fraction, until=until)
    made = dive_parts(walk, parts, starts.dives, share, polish)
    events.append(Dives(made, not polish, before, walk.incumbent.score))


def local_search(starts: Starts, walk: Walk, until=None) -> LocalSearch:
    """The local search around the incumbent, over the whole space, within an eighth of the
    time. On several cores it stops once another worker holds a better mapping while it has
    not improved on its start (polishing this one cannot help the walk then: a dive may find
    the optimum long before the local search from greedy's mapping ends, above it); one that
    is improving goes on, and where it ends at a local optimum another worker's mapping
    beats, it goes on from that one (on tpu-v4i a quick dive's mapping cut short the local
    search from greedy's, which is what reaches the optimum; docs/RESULTS.md)."""
    incumbent, context = walk.incumbent, walk.context
    before = incumbent.score
    share = None if context.time_limit is None else context.time_limit / 8
    budget = context.budget(share, until=until)
    rounds = 0
    while True:
        start = incumbent.score
        # outdone before it improved on its start: polishing this one cannot help the walk
        # (a dive found the optimum meanwhile, say); outdone while it improves: it goes on
        rounds += improve(walk.setup.space, incumbent, budget, seed=starts.seed,
                          stop=lambda: incumbent.outdone() and incumbent.score >= start)
        if budget.spent() or not incumbent.outdone() or incumbent.score >= start:
            break
        # it ended at a local optimum another worker's mapping beats: go on from that one
        incumbent.adopt()
        if incumbent.outdone():         # not taken (it cannot be): nothing more to do here
            break
    return LocalSearch(rounds, before, incumbent.score)


def cpsat_wanted(starts: Starts, walk: Walk) -> bool:
    """CP-SAT's model, its wall cap (half of what is left) and the pricing of its proposals:
    with less than `cpsat_min_left_seconds` to the command's deadline (and the time to import
    OR-Tools, the first time), they would end past it."""
    context = walk.context
    return bool(starts.cpsat_seconds and walk.setup.worker == 0 and not walk.budget.spent()
                and context.seconds_left() >= starts.tuning.cpsat_min_left_seconds + _ortools_import_seconds(starts, context))


def start_cpsat(starts: Starts, space: Mapspace, objective: Objective, incumbent: Incumbent, context: SearchContext):
    """CP-SAT's proposals, solving in a worker thread (`cpsat.Proposals`), or the event saying
    why there are none."""
    try:
        from .cpsat import start        # OR-Tools is imported only here
    except ImportError:                 # a checkout run without installing it (a GPU machine's image)
        return CpsatSkipped("no OR-Tools")
    if context.seconds_left() < starts.tuning.cpsat_min_left_seconds:
        return CpsatSkipped("import")
    hint = None if incumbent.table is None else factor_rows(space, incumbent.table)
    return start(space, context, cpsat_cap(starts, context), favour_parallelism=objective.kind in TIME_SENSITIVE,
                 hint=hint, seed=starts.seed)


def cpsat_cap(starts: Starts, context: SearchContext) -> float:
    """CP-SAT's seconds: `cpsat_seconds`, at most a quarter of the time limit (on a counting
    clock, its deterministic time)."""
    time_limit = context.time_limit
    return starts.cpsat_seconds if time_limit is None else min(starts.cpsat_seconds, time_limit / 4)


def offer_proposals(space: Mapspace, incumbent: Incumbent, proposals, context: SearchContext) -> Event:
    """Wait for CP-SAT's proposals and offer them; the event says what they did."""
    if isinstance(proposals, Event):
        return proposals
    factors = proposals.collect()
    if factors is None:
        return CpsatSkipped("padded extents")
    before = incumbent.score
    table = every_choice(space, factors, np.random.default_rng(0))
    # in slices, with the wall clock asked between them (an evaluation budget does not
    # cut them: what is priced under an evaluation budget stays as it was)
    offer_sliced(space, incumbent, table, context.wall_stopped)
    return CpsatProposed(factors.shape[-1], len(table), incumbent.score if incumbent.score < before else None)


def _worth_a_coarse_start(starts: Starts, context: SearchContext, funnel) -> bool:
    """Only with a time limit (its share must be worth a search) and on spaces too large to
    walk quickly anyway."""
    tuning = starts.tuning
    return (starts.coarse is not None and context.time_limit is not None
            and _coarse_seconds(starts, context) >= tuning.coarse_min_seconds
            # its share must still be left: a coarse search cut short by the command's
            # deadline still finishes its greedy start (a quick look per level), past it
            and context.seconds_left() >= _coarse_seconds(starts, context)
            and funnel.after.get("occupancy", funnel.size) > tuning.coarse_min_space)


def _coarse_seconds(starts: Starts, context: SearchContext) -> float:
    return min(context.time_limit * starts.tuning.coarse_share, starts.tuning.coarse_max_seconds)


def coarse_start(starts: Starts, space: Mapspace, objective: Objective, incumbent: Incumbent,
                 context: SearchContext) -> CoarseStart:
    """Offer the answer of the same search on a smaller shape, within a share of the time.
    One step only: a shape shrunk twice is usually small enough to fit where the real one
    does not, and its answer has another structure."""
    # its share, but never past what the command has left less a reserve for carrying
    # its answer back and for the walk (wall clock only: infinite under an evaluation budget)
    tuning = starts.tuning
    share, left = _coarse_seconds(starts, context), context.seconds_left()
    if left != float("inf"):
        share = min(share, left - max(tuning.coarse_reserve_seconds, tuning.coarse_reserve_share * left))
    table, event = coarse_incumbent(space, objective, starts.coarse, context.share(share),
                                    carry=lambda: not context.wall_stopped())
    if table is None:
        return event
    before = incumbent.score
    incumbent.offer(table, mask=pruning.valid_mask(space, table))
    return replace(event, carried=incumbent.score if incumbent.score < before else None)


def _ortools_import_seconds(starts: Starts, context: SearchContext) -> float:
    """An estimate of the wall seconds importing OR-Tools takes now: none once imported, else
    in proportion to this command's start-up (`SearchContext.startup`), which shows the
    machine's load. Zero for a library call (no start-up measured)."""
    if f"{__package__}.cpsat" in sys.modules:
        return 0.0
    return starts.tuning.ortools_import_per_startup * context.startup
