"""Joint search: branch and bound over the levels, every candidate priced by the cost model.

The space is walked as a tree (`tree.py`): depth k decides level k-1's factors, spatial split
and loop order and level k's stages and keeps, so every level is chosen knowing the ones above
and bounded knowing what any choice below must still cost (`bounds.py`). Children are checked
for capacity and fanout before they are priced, priced in vectorised slices of bounded rows,
best bound first, depth first; a subtree is dropped only when its bound exceeds the incumbent
(`delay,energy`: its cycles bound does, or ties while its energy bound exceeds; `objective.beaten`).
The innermost level's loop order changes no cost, so its nodes are complete mappings.

With keep/bypass searched, the tree is walked in parts, one per keep vector (`keep_parts.py`),
so that the bounds know from the root down what every level keeps, and best first across the
parts' depth-1 nodes; on small spaces it is walked whole.

The incumbent, which does the pruning, comes from (in this order) the greedy mapping, mappings
given from outside (`incumbents`, admitted into the space by `warm.py`), CP-SAT proposals
(`cpsat.py`), sampled dives down the tree (the best-bound child of a random sample at each
level; in parts, one part after another, each dive's mapping improved by a local search inside
its part, until several in a row find nothing better), a local search around the best of these
(`neighbourhood.py`; before the dives when the space is walked whole), when asked for
(`coarse`), the same search on a smaller shape carried back (`coarse.py`, large spaces walked
whole only), and the walk itself; every new
incumbent the dives find, and those the walk finds once it has gone on for a while, is
polished by a short local search. All of them offer
only members of the space, ranked by the same keys as exhaustive search, so the result when the
walk finishes is proven optimal and is exactly the mapping exhaustive search returns. Equally
good mappings are ranked by their contents, and a subtree whose bounds tie the incumbent on
every cost key is dropped when its decided factors already rank after the incumbent's
(`objective.outranked`). When the time limit stops it, the smallest bound of what was left
unexplored gives a proven gap.

On a machine with several cores, once greedy has given a first mapping, the rest runs in as
many forked workers (`parallel.py`): worker 0 takes CP-SAT, polishes its dives and runs the
local search while the others dive quickly and start the walk, whose units each worker claims
as it reaches them, all pruning against the best mapping any of them holds.
"""
from __future__ import annotations

import heapq
import math
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from ..cost import evaluate_many
from ..mapping import along_last, to_table
from ..mapspace import Mapspace
from .bounds import LinkBounds, NodeBounds, compute_floor, lower_bounds
from .coarse import coarse_incumbent
from .fitting_children import fitting_children
from .keep_parts import Part, bounded_part, split_by_keeps
from .greedy import Greedy
from .neighbourhood import _offer_sliced, improve
from .objective import Objective, beaten, bound_order, bound_primary, cost_bound, outranked
from .parallel import Claims, can_fork, content_hashes, default_workers, walk_in_parallel
from .result import Budget, Incumbent, SearchResult, stops
from .tree import LevelTree, Nodes, feasible
from .warm import admit, factor_rows

SLACK = 1e-9        # relative: bounds and scores are sums of the same terms in other orders
COARSE_SHARE = 0.25         # of the time limit, for the coarse shape's search, but
COARSE_MAX_SECONDS = 10.0   # up to this: with a long limit, the time is the walk's (it proves)
COARSE_MIN_SECONDS = 1.0    # below this a coarse search finds too little to be worth it
CPSAT_MIN_LEFT_S = 1.0     # wall seconds to the command's deadline below which CP-SAT is skipped
ORTOOLS_IMPORT_PER_STARTUP = 1.5   # importing OR-Tools, in units of this process's start-up
                                   # (0.35-0.6 s against 0.5 s, measured unloaded; both scale with load)
COARSE_MIN_SPACE = 2e6      # pruned mappings below which the walk alone is quick
PART_POLISH_SECONDS = 0.5   # local search after each dive into one keep vector's part
POLISH_EVERY = 5.0          # seconds between the walk's polishes of what it finds, at least
WALK_POLISH_AFTER = 2.0     # seconds into the walk before its first polish
PRICED_CELLS = 2_000_000    # factor slots (rows x levels x kinds x dims) priced together at most
SPLIT_DEPTH = 2             # where a walk on several cores splits the tree between them
MIN_RUN = 8                 # depth-1 nodes of one part walked together, at least (`_search_across`)
CLAIM_BATCH = 16            # units of the walk a worker claims at a time (`parallel.Claims`)
DIVE_PATIENCE = 6           # dives in a row that find nothing better end them (shared among the
                            # workers of a walk on several cores)
COARSE_RESERVE_S, COARSE_RESERVE = 0.5, 0.2   # of the seconds left, kept from the coarse search
CHUNK_SECONDS = 0.2         # wall seconds a chunk of the walk may take near a deadline,
CHUNK_SHARE = 0.25          # or this share of the seconds left, when that is more
FIRST_CHUNK = 2_000         # rows of the first chunk, before any has been timed,
ASSUMED_ROW_SECONDS = 5e-4  # and fewer near the deadline at this rate: bounding a row takes up to
                            # ~170 us at the top of tpu conv-alexnet-conv3 unloaded, 3x that at 3x load


@dataclass(frozen=True)
class Joint:
    time_limit: float | None = 60.0
    chunk: int = 64_000             # rows (mappings or partial mappings) priced together
    warm_start: bool = True
    cpsat_seconds: float = 2.0      # wall-clock cap on CP-SAT proposals (0: none)
    local_search: bool = True       # improve the incumbents by moves around them (`_improve`)
    incumbents: tuple = ()          # mappings from outside (a neighbouring shape's optimum, ...)
    dives: int = 24                 # sampled dives down the tree before the walk, for incumbents
    # start from a smaller shape's answer (`coarse.py`) on large spaces: off by default, as on
    # the bench cases (h100 GEMMs 1024^3 to 16384^3, conv, eyeriss conv, Timeloop's designs) it
    # never beat the incumbent, and its share of the time delayed the walk (h100 GEMM 1024^3:
    # proven in 21.7 s without it, 23.5% gap at 30 s with it)
    coarse: bool = False
    parts_above: float = 20_000     # pruned mappings above which the walk is split by keep vector
    workers: int | None = None      # processes searching (None: the cores, `parallel.py`); one
                                    # under an evaluation budget
    # pruned mappings above which the search runs on several cores: below, forking and the
    # workers' duplicated start cost more than they save (the suite's spaces of up to 200,000
    # mappings took 1.5 times as long on two cores as on one)
    parallel_above: float = 2e6
    name: str = "joint"

    def run(self, space: Mapspace, objective: Objective, progress=None) -> SearchResult:
        budget = Budget(self.time_limit)      # covers the warm start and the proposals too
        funnel = space.funnel()
        space.require_nonempty(funnel)
        tree = LevelTree(space)
        incumbent = Incumbent(space, objective)
        notes = []
        # even with the budget already spent (a loaded machine's start-up can use all of a
        # one-second limit): greedy then takes one quick look per level, a complete mapping in
        # a few tenths of a second, where the fallback below draws and prices random mappings
        if self.warm_start:
            try:
                share = None if self.time_limit is None else self.time_limit / 3
                warm = Greedy(time_limit=share).run(space, objective)
                incumbent.offer(to_table([warm.mapping], space.n_dims, len(space.workload.tensors)))
                notes.append(f"warm start (greedy): {warm.score:.6g}")
            except Exception as exc:          # greedy can dead-end; the search does not need it
                notes.append(f"no warm start: {exc}")
        if self.incumbents:
            notes.append(self._outside_incumbents(space, incumbent))
        walk = _Walk(space, objective, tree, incumbent, budget, self.chunk, progress)
        walk.polish = self.local_search
        # bounding every part costs tens of milliseconds each: a small space is walked whole
        large = funnel.after.get("occupancy", funnel.size) > self.parts_above
        parts = split_by_keeps(space, objective, tree, walk.links, budget) if large else None
        if parts is None:
            parts = [bounded_part(space, objective, tree, walk.links)]
        else:
            notes.append(f"walked in {len(parts)} parts, one per keep vector (`keep_parts.py`); "
                         f"smallest root bound {float(bound_primary(objective, parts[0].first)):.6g}")
        workers = self.workers or default_workers()
        if (workers > 1 and funnel.after.get("occupancy", funnel.size) > self.parallel_above
                and can_fork() and incumbent.key is not None):
            complete = walk_in_parallel(walk, workers, lambda: self._find_and_walk(space, funnel, walk, parts, notes),
                                        parts, notes)
        else:
            complete = self._find_and_walk(space, funnel, walk, parts, notes)
        if incumbent.table is None:       # the budget ended before any leaf: take random draws
            rng = np.random.default_rng(0)
            for _ in range(10):
                sample = space.sample(20_000, rng)
                if len(sample):
                    incumbent.offer(sample)
                if incumbent.table is not None:
                    break
            notes.append(f"{stops.reason()} ended the search before the tree reached a mapping; "
                         "the result is the best of random draws")
        lower = incumbent.score if complete else min(walk.open_bounds + [incumbent.score])
        proven = complete or lower >= incumbent.score * (1 - SLACK)
        if not complete:
            notes.append(f"stopped by {stops.reason()}; the bound covers what was left unexplored"
                         + ("; it meets the score, so the value is optimal (equally good "
                            "mappings were not all ranked)" if proven else ""))
        return incumbent.result(self.name, funnel, optimal=proven, complete=complete,
                                lower_bound=lower, notes=notes)


    def _find_and_walk(self, space, funnel, walk, parts, notes) -> bool:
        """The incumbents' search, then the walk; True when the walk finished. On several
        cores every worker runs this, with `walk.split` and `walk.claims` set: worker 0 runs
        the searches for better incumbents (`_improve`) while the others dive quickly and
        walk, and each walks the units of the tree it claims first. On one core, the quick
        dives and the walk come first too, and the walk runs `_improve` itself once it has
        gone on for a while (on `pe-array` GEMM 256^3 the walk proves the optimum 1.2 s after
        the quick dives, where polishing the dives first took 6.5 s). Under an evaluation
        budget, or with no time limit, everything runs in order, so that what is priced
        never depends on the load."""
        incumbent = walk.incumbent
        worker = 0 if walk.split is None else walk.split[0]
        in_order = stops.per_evaluation is not None or self.time_limit is None
        # CP-SAT's model, its wall cap (half of what is left) and the pricing of its proposals:
        # with less than CPSAT_MIN_LEFT_S to the command's deadline (and the time to import
        # OR-Tools, the first time), they would end past it. It solves in a thread while the
        # search goes on, and the walk offers its proposals once they are ready
        cpsat = None
        if (self.cpsat_seconds and worker == 0 and not walk.budget.spent()
                and stops.seconds_left() >= CPSAT_MIN_LEFT_S + _ortools_import_seconds()):
            cpsat = self._start_cpsat(space, walk.objective, incumbent)
            if in_order:                # before the rest, which it may start from
                notes.append(self._offer_proposals(space, incumbent, cpsat))
                cpsat = None
        if worker == 0 and (walk.split is not None or in_order):
            self._improve(space, funnel, walk, parts, notes)
        else:
            self._dive(walk, parts, notes, polish=False)
            if worker == 0:             # one core: later, from inside the walk
                walk.deferred = lambda: self._improve(space, funnel, walk, parts, notes)
        if isinstance(cpsat, str):
            notes.append(cpsat)
        elif cpsat is not None:     # still solving (on h100 GEMMs CP-SAT finds nothing in its 2 s):
            def offer(proposals):   # offered by the walk as soon as they are ready
                before = incumbent.key
                notes.append(self._offer_proposals(space, incumbent, proposals))
                if self.local_search and incumbent.key != before:
                    improve(space, incumbent, Budget(PART_POLISH_SECONDS), stop=walk.budget.spent)
            walk.proposals = (cpsat, offer)
        try:
            return self._walk(walk, parts)
        finally:
            walk.deferred = None
            if walk.proposals is not None:      # the walk ended first: no longer wanted
                walk.proposals[0].cancel()
                walk.proposals = None
                notes.append("CP-SAT stopped: the walk ended before it answered")

    def _improve(self, space, funnel, walk, parts, notes) -> None:
        """Worker 0's searches for better incumbents: walked whole, the local search goes
        first and the dives polish only what beats it; in parts, the dives (each polished
        inside its part) go first, and the local search then starts from the best of them,
        across parts; then, when asked for, the coarse start. On several cores they end once
        another worker's walk has reached its end (every unit of it is then claimed)."""
        incumbent = walk.incumbent
        others_done = None if walk.claims is None else walk.claims.some_walk_ended
        if self.local_search and incumbent.table is not None and len(parts) == 1:
            notes.append(self._local_search(space, incumbent, others_done))
        self._dive(walk, parts, notes, polish=walk.polish, until=others_done)
        if self.local_search and incumbent.table is not None and len(parts) > 1:
            incumbent.adopt()
            notes.append(self._local_search(space, incumbent, others_done))
        # after the quick starts, so that a walk which proves the optimum is not delayed by the
        # smaller shape's search; in parts not at all: the dives into each part find what the
        # smaller shape's answer brought
        if len(parts) == 1 and self._worth_a_coarse_start(funnel):
            notes.append(self._coarse_start(space, walk.objective, incumbent))

    def _dive(self, walk, parts, notes, polish: bool, until=None) -> None:
        if not self.dives:
            return
        before = walk.incumbent.score
        fraction = 10 if len(parts) == 1 else 4
        share = Budget(None if self.time_limit is None else self.time_limit / fraction, until=until)
        done = walk.dive_parts(parts, self.dives, share, polish)
        notes.append(f"{done} {'' if polish else 'quick '}sampled dive(s): {before:.6g} -> {walk.incumbent.score:.6g}")

    def _walk(self, walk, parts) -> bool:
        # the walk polishes what it finds only once it has gone on for a while: on `pe-array`
        # GEMM 256^3 it proves the optimum within 1.2 s of starting, where each polish took 1 s
        walk.polished_at = stops.clock() - POLISH_EVERY + WALK_POLISH_AFTER
        walk.deferred_at = stops.clock() + WALK_POLISH_AFTER
        if walk.claims is None:
            return walk.search_parts(parts)
        if walk.claims.some_walk_ended():       # the others claimed every unit meanwhile
            return True
        complete = walk.search_parts(parts)
        if complete:
            walk.claims.end_reached()
        return complete

    def _local_search(self, space, incumbent, until=None) -> str:
        before = incumbent.score
        share = None if self.time_limit is None else self.time_limit / 8
        # on several cores it stops once another worker holds a better mapping (polishing this
        # one cannot help the walk then): on h100 GEMM 4096^3 a dive finds the optimum in 4 s,
        # while the local search, from greedy's mapping, takes 7.5 s to end above it
        rounds = improve(space, incumbent, Budget(share, until=until), stop=incumbent.outdone)
        return f"local search: {rounds} improving round(s), {before:.6g} -> {incumbent.score:.6g}"

    def _start_cpsat(self, space, objective, incumbent):
        """CP-SAT's proposals, solving in a worker thread (`cpsat.Proposals`), or a note on
        why there are none."""
        from .cpsat import start            # OR-Tools is imported only here
        if stops.seconds_left() < CPSAT_MIN_LEFT_S:
            return "CP-SAT proposals skipped: importing OR-Tools left too little time"
        seconds = self.cpsat_seconds if self.time_limit is None else min(self.cpsat_seconds, self.time_limit / 4)
        return start(space, seconds, favour_parallelism=objective.kind in ("edp", "cycles", "delay_energy"),
                     hint=None if incumbent.table is None else factor_rows(space, incumbent.table))

    def _offer_proposals(self, space, incumbent, proposals) -> str:
        """Wait for CP-SAT's proposals and offer them; the note says what they did."""
        if isinstance(proposals, str):
            return proposals
        factors = proposals.collect()
        if factors is None:
            return "CP-SAT proposals skipped (padded extents)"
        before = incumbent.score
        table = space.expand(factors)
        # in slices, with the wall clock asked between them (an evaluation budget does not
        # cut them: what is priced under --max-evaluations stays as it was)
        _offer_sliced(space, incumbent, table, stops.wall_stopped)
        return (f"CP-SAT proposed {factors.shape[-1]} tilings ({len(table)} mappings priced); "
                + ("improved the incumbent to " + f"{incumbent.score:.6g}" if incumbent.score < before
                   else "none beat the incumbent"))

    def _worth_a_coarse_start(self, funnel) -> bool:
        """Only with a time limit (its share must be worth a search) and on spaces too large to
        walk quickly anyway."""
        return (self.coarse and self.time_limit is not None
                and self._coarse_seconds() >= COARSE_MIN_SECONDS
                # its share must still be left: a coarse search cut short by the command's
                # deadline still finishes its greedy start (a quick look per level), past it
                and stops.seconds_left() >= self._coarse_seconds()
                and funnel.after.get("occupancy", funnel.size) > COARSE_MIN_SPACE)

    def _coarse_seconds(self) -> float:
        return min(self.time_limit * COARSE_SHARE, COARSE_MAX_SECONDS)

    def _coarse_start(self, space, objective, incumbent) -> str:
        """Offer the answer of the same search on a smaller shape, within a share of the time.
        One step only: a shape shrunk twice is usually small enough to fit where the real one
        does not, and its answer has another structure."""
        # its share, but never past what the command has left less a reserve for carrying
        # its answer back and for the walk (wall clock only: infinite under an evaluation budget)
        share, left = self._coarse_seconds(), stops.seconds_left()
        if left != float("inf"):
            share = min(share, left - max(COARSE_RESERVE_S, COARSE_RESERVE * left))
        inner = replace(self, time_limit=share, incumbents=(), coarse=False)
        table, note = coarse_incumbent(space, objective, inner, carry=lambda: not stops.wall_stopped())
        if table is None:
            return note
        before = incumbent.score
        incumbent.offer(table, mask=space.valid_mask(table))
        return note + (f"; carried here: {incumbent.score:.6g}" if incumbent.score < before
                       else "; carried here it does not beat the incumbent")

    def _outside_incumbents(self, space, incumbent) -> str:
        """Offer the given mappings, each first made a member of the space (`admit`)."""
        admitted = [m for m in (admit(space, mapping) for mapping in self.incumbents) if m is not None]
        before = incumbent.score
        for table in admitted:
            incumbent.offer(table, mask=space.valid_mask(table))
        return (f"{len(admitted)} of {len(self.incumbents)} given incumbent(s) lie in the space"
                + (f"; best {incumbent.score:.6g}" if incumbent.score < before else ""))


class _Cut:
    """Rules out children of a list of nodes before they are expanded and priced:
    - all those of a node the incumbent now beats or outranks: kept when the list was made,
      it lost to a mapping found since (by this walk, or another worker's, `parallel.py`). The
      walk's own check, at each slice, only sees the slice's first node and only its bound:
      on h100 attention-qk (unaligned) the second worker, which made its list under greedy's
      mapping, priced 7.2M rows of nodes whose bounds tie the optimum the first worker had
      found, and which rank after it;
    - where the objective depends on time, the factor choices whose compute units make a
      bound beaten: the parent's cycles bound, or the fewest cycles on those units when more,
      with the parent's energy bound. On h100 GEMM 4096^3 that rules out 78% of the depth-2
      children (too few SMs), whose pricing was most of the walk.
    It counts what it sees, so that the walk times its slices per row generated: sized per
    row priced, they shrank to a few hundred rows (eyeriss conv-alexnet-conv3)."""

    def __init__(self, walk: "_Walk", nodes: Nodes, known: NodeBounds):
        # its own copy: raised where a better incumbent lets the bounds be refined (the walk's
        # own, sorted, must stay as they are)
        self.walk, self.nodes, self.known = walk, nodes, NodeBounds(*(b.copy() for b in known))
        self.decided = None                 # spatial splits of the decided levels
        if walk.objective.kind not in ("energy", "bytes"):      # the units bound time only
            self.decided = np.ones(len(nodes), np.int64)
            for level in range(nodes.depth):
                self.decided = self.decided * walk.tree.level_factors(nodes, level)[1:].prod(axis=(0, 1))
        self.bar, self.dead, self.prefix = walk.incumbent.bar, np.zeros(len(nodes), bool), None
        self.tied = None                    # nodes whose bounds tie the incumbent's key so far
        self.seen = self.kept = 0

    def alive(self, parents: np.ndarray) -> np.ndarray:
        """Whether each of `parents` is still neither beaten nor outranked."""
        walk = self.walk
        bar = walk.incumbent.bar
        if bar != self.bar:                 # a better mapping since the nodes were kept
            self.bar = bar
            self._refine(int(parents.min()) if len(parents) else 0)
            self.dead = (beaten(walk.objective, self.known.objective, bar)
                         | outranked(walk.objective, self.known, self._prefix(), bar))
            self.tied = None
        return ~self.dead[parents]

    def _refine(self, first: int) -> None:
        """Bound again, under the new incumbent, the nodes from `first` on that it does not
        beat yet: their bounds were refined only as far as the incumbent of the time asked
        (`bounds.lower_bounds`, `refine_below`). On `pe-array` GEMM 1024^3 the second worker
        walked a part under a dive's mapping (3.03 pJ/MAC) and went on for 2.7 s after the
        first found the optimum (2.697), into nodes whose bounds refined under it exceed it."""
        walk = self.walk
        floor = walk.links.innermost
        if (not floor.enabled or self.nodes.depth >= floor.level
                or walk.objective.kind not in ("energy", "edp", "delay_energy")):
            return
        rows = first + np.flatnonzero(~beaten(walk.objective, self.known.objective[first:], self.bar))
        if not len(rows):
            return
        table = walk.tree.table(self.nodes.take(rows))
        fresh = lower_bounds(walk.space, walk.objective, self.nodes.depth, table,
                             evaluate_many(walk.space.arch, walk.space.workload, table), walk.links,
                             refine_below=self.bar)
        for known, new in zip(self.known, fresh):
            known[rows] = np.maximum(known[rows], new)

    def _prefix(self) -> np.ndarray:
        """(P, N) the nodes' decided factors, the first content keys (`ranking_keys`)."""
        if self.prefix is None:
            table = self.walk.tree.table(self.nodes)
            self.prefix = table.factors[:self.nodes.depth].reshape(-1, len(table))
        return self.prefix

    def _outranked_children(self, parents: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Where a child ranks after the incumbent whatever it costs: its parent's bounds tie
        the incumbent's score, energy and cycles, and the child's content so far (the parent's
        decided factors, then its own level's) compares above the incumbent's. Only parents
        tied that closely are looked at (equally good mappings: on `pe-array` GEMM 256^3 the
        optimum has its mirror image and its neighbours at exactly the same energy, and their
        subtrees' leaves were half of the walk)."""
        walk, bar = self.walk, self.walk.incumbent.bar
        if bar is None:
            return np.zeros(len(parents), bool)
        if self.tied is None:
            columns = [bound_primary(walk.objective, self.known.objective), self.known.energy,
                       self.known.cycles, *self._prefix()]
            self.tied = np.all([column == value for column, value in zip(columns, bar)], axis=0)
        rows = np.flatnonzero(self.tied[parents])
        out = np.zeros(len(parents), bool)
        if len(rows):
            nodes, k = self.nodes, self.nodes.depth
            children = Nodes(k + 1, groups[rows], *(along_last(a, parents[rows])
                                                   for a in (nodes.orders, nodes.stages, nodes.keeps)))
            own = walk.tree.level_factors(children, k).reshape(-1, len(rows))
            known = NodeBounds(*(b[parents[rows]] for b in self.known))
            prefix = np.concatenate([self._prefix()[:, parents[rows]], own])
            out[rows] = outranked(walk.objective, known, prefix, bar)
        return out

    def __call__(self, parents: np.ndarray, units: np.ndarray, groups: np.ndarray) -> np.ndarray:
        walk, bar = self.walk, self.walk.incumbent.bar
        out = ~self.alive(parents) | self._outranked_children(parents, groups)
        if self.decided is not None:
            compute = compute_floor(walk.space, self.nodes.depth + 1, self.decided[parents] * units.prod(axis=0),
                                    walk.links)
            out |= beaten(walk.objective, cost_bound(walk.objective, self.known.energy[parents],
                                                     np.maximum(self.known.cycles[parents], compute)), bar)
        self.seen += len(out)
        self.kept += len(out) - int(out.sum())
        return out

    def dilution(self) -> float:
        """Choices seen per choice kept since the last call (1 when none was kept)."""
        ratio = self.seen / self.kept if self.kept else 1.0
        self.seen = self.kept = 0
        return ratio


class _Share:
    """The units (a parent among `nodes` and its children's first dim) this worker walks, when
    the walk runs on several cores (`parallel.Claims`): claimed as they are reached, and
    marked done once the walk has gone past their parent."""

    def __init__(self, claims: Claims, nodes: Nodes, part_key: int):
        self.claims = claims
        n = len(nodes)
        # a parent's identity: its part's keep vector and everything it decided
        self.identity = np.vstack([np.full((1, n), part_key), nodes.groups.T, nodes.orders.reshape(-1, n),
                                   nodes.stages, nodes.keeps])
        self.parents, self.slots = np.zeros(0, np.int64), np.zeros(0, np.int64)     # mine, not yet done

    def __call__(self, parents: np.ndarray, group: np.ndarray) -> np.ndarray:
        first, second = content_hashes(np.vstack([self.identity[:, parents], group[None]]))
        mine, slots = self.claims.take(first, second)
        self.parents = np.concatenate([self.parents, parents[mine]])
        self.slots = np.concatenate([self.slots, slots[mine]])
        return mine

    def done_before(self, node: int) -> None:
        """Mark done this worker's units whose parent comes before `node`."""
        finished = self.parents < node
        if finished.any():
            self.claims.done(self.slots[finished])
            self.parents, self.slots = self.parents[~finished], self.slots[~finished]


def _ortools_import_seconds() -> float:
    """An estimate of the wall seconds importing OR-Tools takes now: none once imported, else
    in proportion to this command's start-up (`stops.startup`), which shows the machine's load.
    Zero for a library call (no start-up measured)."""
    if "mapper.search.cpsat" in sys.modules:
        return 0.0
    return ORTOOLS_IMPORT_PER_STARTUP * stops.startup


class _Walk:
    """One run of the branch and bound (the strategy object itself stays immutable)."""

    def __init__(self, space, objective, tree, incumbent, budget, chunk, progress):
        self.space, self.objective, self.tree, self.incumbent = space, objective, tree, incumbent
        self.whole = space          # the local search's polish moves across parts
        self.budget, self.chunk, self.progress = budget, chunk, progress
        self.open_bounds: list[float] = []
        self.links = LinkBounds(space)
        self.polish = False
        self.split: tuple[int, int] | None = None     # (worker, workers) when walked in parallel
        self.claims: Claims | None = None               # then, who walks which unit
        self.proposals = None       # (CP-SAT solving meanwhile, what to do with its answer)
        self.deferred = None        # run once by the walk, when it has gone on for a while
        self.deferred_at = np.inf   # (the budget clock)
        self.part_key = 0                               # the keep vector of the part walked
        self.polished_at = -np.inf
        self.polish_seconds = 0.0   # wall seconds spent polishing, left out of the chunks' timing
        self.row_seconds: dict[int, float] = {}     # depth -> wall seconds per child row, last chunk

    def use(self, part: Part) -> None:
        self.space, self.tree, self.links = part.space, part.tree, part.links
        self.part_key = int(content_hashes(np.array([[len(part.picks)], *[[pick] for pick in part.picks]]))[0][0])

    def dive_parts(self, parts: list[Part], count: int, share: Budget, polish: bool) -> int:
        """Up to `count` dives, one per part in turn (best bound first) among the parts whose
        bound is below the incumbent, round after round: a part's best mappings are often far
        from another's, and the walk reaches the later parts only after the earlier ones.
        With several parts and `polish`, each dive's mapping is improved by a local search
        inside its part before it is offered: across parts the local search drifts to the keep
        vector of the incumbent, and would never polish a part whose dive does not beat it
        first. Quick dives (no `polish`) only offer what they find."""
        worker, workers = self.split or (0, 1)     # on several cores: every workers-th part
        patience = -(-DIVE_PATIENCE // workers)
        # quick dives polish nothing they find (`polish`): the walk comes next
        walk_polish, self.polish = self.polish, polish
        try:
            return self._dive_parts(parts, count, share, worker, workers, patience)
        finally:
            self.polish = walk_polish

    def _dive_parts(self, parts, count, share, worker, workers, patience) -> int:
        if len(parts) == 1:
            self.use(parts[0])
            return self.dive(parts[0].roots, -(-count // workers), share, np.random.default_rng(worker),
                             patience=patience)
        rngs = [np.random.default_rng(i) for i in range(len(parts))]
        made, fruitless = 0, 0
        while made < count and not share.spent() and not self.budget.spent():
            eligible = [i for i, p in enumerate(parts)
                        if not beaten(self.objective, p.first, self.incumbent.bar)][worker::workers]
            if not eligible:
                break
            for i in eligible[:count - made]:
                if fruitless >= patience or share.spent():
                    return made     # the dives have stopped finding better: the walk's turn
                self.use(parts[i])
                local, best, polish = Incumbent(parts[i].space, self.objective), self.incumbent, self.polish
                self.incumbent, self.polish = local, False      # the dive offers to the part's own best
                try:
                    made += self.dive(parts[i].roots, 1, share, rngs[i])
                finally:
                    self.incumbent, self.polish = best, polish
                before = best.key
                if local.table is not None:
                    if polish:          # the local search is on (`Joint.local_search`)
                        improve(parts[i].space, local, Budget(PART_POLISH_SECONDS), stop=share.spent)
                    best.offer(local.table)
                best.evaluated += local.evaluated
                fruitless = 0 if best.key != before else fruitless + 1
        return made

    def dive(self, roots: Nodes, count: int, share: Budget, rng: np.random.Generator,
             samples: int = 4_000, patience: int | None = None) -> int:
        """Up to `count` dives from the roots (fewer when `patience` dives in a row find nothing
        better), each taking at every level the child of best bound among `samples` drawn at
        random, down to a mapping that is offered; every new incumbent is polished by local
        search. Returns the dives made."""
        tree = self.tree
        made, fruitless = 0, 0
        while made < count and not share.spent() and not self.budget.spent():
            if patience is not None and fruitless >= patience:
                break
            made += 1
            before = self.incumbent.key
            node = roots.take(np.array([int(rng.integers(len(roots)))]))
            while len(node) and node.depth < tree.leaf_depth and not share.spent():
                total = int(tree.factor_children(node)[0])
                # one loop order per factor choice (the smallest): the dive samples tilings and
                # keeps widely; the local search then tries the other orders of what it finds
                most = self._chunk_rows(node.depth + 1)
                draws = min(total, max(1, min(samples, most // tree.expansion(node.depth, True))))
                picks = np.unique(rng.integers(0, total, size=draws))
                started, polished = time.perf_counter(), self.polish_seconds
                children = tree.children_at(node, picks, first_order_only=True)
                priced = self._price(children, force_polish=not share.spent())
                self._timed(children, started, polished, len(children))
                if priced is None:
                    break
                rows, bounds, _ = priced
                node = children.take(rows[[int(bound_order(self.objective, bounds.objective)[0])]])
            fruitless = 0 if self.incumbent.key != before else fruitless + 1
        return made

    def _price(self, children: Nodes, force_polish: bool = False):
        """Complete mappings are offered to the incumbent (a new best is polished): None.
        Partial ones (None when none fits) are checked for capacity and fanout (no pricing needed, and it rules out
        most), then priced and bounded: (rows that fit, their `NodeBounds`, their decided
        factors as content keys)."""
        space, tree = self.space, self.tree
        table = tree.table(children)
        # the cost model's intermediates grow with the slots of a mapping: wide tables are
        # priced a part at a time (on a 6-level, 7-dim conv 64,000 rows took 320 MiB at once)
        step = max(1, PRICED_CELLS // math.prod(table.factors.shape[:-1]))
        if children.depth >= tree.leaf_depth:
            rows = np.flatnonzero(space.valid_mask(table))
            before = self.incumbent.key
            for start in range(0, len(rows), step):
                self.incumbent.offer(table.take(rows[start:start + step]))
            # polished when it is the best any worker holds: one that only beats this worker's
            # own (the second worker's walk starts from greedy's mapping) does not help
            if self.polish and self.incumbent.key != before and not self.incumbent.outdone():
                self._polish(force=force_polish)
            return None
        rows = np.flatnonzero(feasible(space, children.depth, table))
        if not len(rows):
            return None
        parts = []
        for start in range(0, len(rows), step):
            part = table.take(rows[start:start + step])
            costs = evaluate_many(space.arch, space.workload, part)
            bounds = lower_bounds(space, self.objective, children.depth, part, costs, self.links,
                                  refine_below=self.incumbent.bar)
            # the content keys begin with the factors of the decided levels (`ranking_keys`)
            parts.append((bounds, part.factors[:children.depth].reshape(-1, len(part))))
        self.incumbent.evaluated += len(rows)
        bounds = NodeBounds(*(np.concatenate([b[i] for b, _ in parts]) for i in range(3)))
        return rows, bounds, np.concatenate([prefix for _, prefix in parts], axis=1)

    def _between_slices(self) -> None:
        """What the walk does between slices besides walking: offer CP-SAT's proposals once
        they are ready; run what was deferred (`deferred`) once its time has come, leaving
        the walk's own state as it was."""
        if self.proposals is not None and self.proposals[0].ready():
            proposals, offer = self.proposals
            self.proposals = None
            offer(proposals)
        if self.deferred is not None and stops.clock() >= self.deferred_at:
            deferred, self.deferred = self.deferred, None
            state = self.space, self.tree, self.links, self.part_key
            try:
                deferred()
            finally:
                self.space, self.tree, self.links, self.part_key = state

    def _early(self, cut: "_Cut | None", share: "_Share | None"):
        """What `fitting_children` asks of each factor choice once its first dim is chosen
        (None: nothing): that its parent be still alive, and the choice in this worker's share
        (claimed only for the parents alive)."""
        if cut is None and share is None:
            return None

        def early(parents, group):
            ok = np.ones(len(parents), bool) if cut is None else cut.alive(parents)
            if share is not None:
                ok[ok] = share(parents[ok], group[ok])
            return ok
        if share is not None:       # claimed a few at a time, as the walk reaches them
            early.batch = CLAIM_BATCH
        return early

    def _share(self, nodes: Nodes) -> "_Share | None":
        """Which children of `nodes` this worker walks (None: all): when the walk is shared
        (`parallel.py`), at depth 2 (or the leaves, if nearer), those of the units (a parent
        and its children's first dim) no other worker claimed first. Shallower depths are
        walked by every worker: they are few, and units at the root's children would be few
        and uneven (on pe-array a handful of depth-1 nodes hold most of the leaves)."""
        if self.claims is None or nodes.depth + 1 != min(SPLIT_DEPTH, self.tree.leaf_depth):
            return None
        return _Share(self.claims, nodes, self.part_key)

    def _cut(self, nodes: Nodes, known: NodeBounds | None) -> "_Cut | None":
        """What rules out children of `nodes` before they are priced (`_Cut`); None for the
        roots, whose energy and cycles bounds are not kept."""
        return None if known is None else _Cut(self, nodes, known)

    def _polish(self, force: bool = False) -> None:
        """A short local search around a new incumbent the walk found (at most one second,
        at most every few seconds): its neighbours often beat it, and the bound it sets prunes
        the rest of the walk."""
        now = stops.clock()      # the budget clock: evaluations under --max-evaluations
        if now - self.polished_at < POLISH_EVERY and not force:
            return
        started = time.perf_counter()
        improve(self.whole, self.incumbent, Budget(1.0), stop=self.budget.spent)
        self.polished_at = stops.clock()
        self.polish_seconds += time.perf_counter() - started

    def _chunk_rows(self, depth: int) -> int:
        """Child rows generated and priced together at `depth`: `chunk`, but against a wall-clock
        deadline no more than what takes CHUNK_SHARE of the seconds left, or CHUNK_SECONDS when
        that is more, at the last rate measured there (or the slowest measured anywhere;
        before any, FIRST_CHUNK, or CHUNK_SHARE of the seconds left at ASSUMED_ROW_SECONDS): a chunk cannot be cut, and one of 64,000 rows takes up to ten
        seconds at the top of a large space (~150 us a row), unloaded. Far from the deadline
        chunks stay large: best bound first is ordered within a chunk, and small ones slow the
        walk. Under an evaluation budget it stays `chunk`, so the walk's order never depends
        on the machine's load."""
        if stops.per_evaluation is not None:
            return self.chunk
        left = min(stops.seconds_left(), float("inf") if self.budget.deadline is None
                   else self.budget.deadline - time.perf_counter())
        if left == float("inf"):
            return self.chunk
        rate = self.row_seconds.get(depth, max(self.row_seconds.values(), default=None))
        if rate is None:
            return int(min(self.chunk, FIRST_CHUNK, max(1, CHUNK_SHARE * left / ASSUMED_ROW_SECONDS)))
        seconds = max(CHUNK_SECONDS, CHUNK_SHARE * left)
        return int(min(self.chunk, max(1, seconds / max(rate, 1e-9))))

    def _timed(self, children: Nodes, started: float, polished: float, generated: float) -> None:
        """Record the wall seconds per child row generated (`generated`: more than `children`
        where a cut dropped some before pricing), generated and priced since `started` (less
        the polishing done meanwhile, which had `polish_seconds` at `polished`)."""
        if len(children):
            seconds = time.perf_counter() - started - (self.polish_seconds - polished)
            self.row_seconds[children.depth] = seconds / generated

    def search_parts(self, parts: list[Part]) -> bool:
        """Walk the parts until every bound left exceeds the incumbent; False when the budget
        ran out, after recording a bound on everything left unexplored. One part is walked
        depth first from its roots; several, best first across them (`_search_across`)."""
        if len(parts) > 1:
            return self._search_across(parts)
        part = parts[0]
        if beaten(self.objective, part.first, self.incumbent.bar):
            return True
        self.use(part)
        if self.budget.spent():
            self.open_bounds.append(float(bound_primary(self.objective, part.first)))
            return False
        return self.search(part.roots, part.bounds)     # False: it recorded what it left open

    def _search_across(self, parts: list[Part]) -> bool:
        """The parts' depth-1 nodes walked in the order of their bounds across all the parts,
        each part's expanded only once its root bound comes first (a heap of root and node
        bounds): a part's root bound, over every tile, is loose, and walked part by part in
        that order the walk went deep into parts whose nodes' bounds were all above the
        optimum's own (on `pe-array` GEMM 256^3 the optimum's nodes are bounded exactly, at
        2.838 pJ/MAC, in the fifth part)."""
        objective = self.objective
        key = (lambda bound: tuple(bound.tolist())) if objective.lexicographic else float
        heap = [(key(part.first), i, -1) for i, part in enumerate(parts)]
        heapq.heapify(heap)
        lists = {}              # part -> its depth-1 nodes, their bounds (sorted)
        while heap:
            first, i, at = heap[0]
            if beaten(objective, np.array(first), self.incumbent.bar):
                return True                   # everything left is provably no better
            heapq.heappop(heap)
            self.use(parts[i])
            if self.budget.spent():
                self.open_bounds.append(float(bound_primary(objective, np.array(first))))   # the least left
                return False
            if at < 0:                        # the part's turn: its depth-1 nodes
                found = []
                if not self.search(parts[i].roots, parts[i].bounds, deeper=lambda *nodes: found.append(nodes) or True):
                    return self._left_open(heap)
                if found:
                    nodes = Nodes.concat([f[0] for f in found])
                    bounds = NodeBounds(*(np.concatenate([f[2][b] for f in found]) for b in range(3)))
                    order = bound_order(objective, bounds.objective)
                    lists[i] = (nodes.take(order), NodeBounds(*(b[order] for b in bounds)))
                    heapq.heappush(heap, (key(lists[i][1].objective[0]), i, 0))
                continue
            nodes, bounds = lists[i]
            # a run of them, up to the next bound in the heap (at least a few: each run is one
            # `search`, with its own set-up)
            end = at + 1
            while end < len(nodes) and (end - at < MIN_RUN or not heap or key(bounds.objective[end]) <= heap[0][0]):
                end += 1
            rows = np.arange(at, end)
            run = NodeBounds(*(b[rows] for b in bounds))
            if not self.search(nodes.take(rows), run.objective, run):
                return self._left_open(heap)
            if end < len(nodes):
                heapq.heappush(heap, (key(bounds.objective[end]), i, end))
            else:
                del lists[i]
        return True

    def _left_open(self, heap: list) -> bool:
        """False, after recording the least bound in the heap: the search that stopped recorded
        what it left of its own nodes, whose bounds may be above those of another part's."""
        if heap:
            self.open_bounds.append(float(bound_primary(self.objective, np.array(heap[0][0]))))
        return False

    def search(self, nodes: Nodes, bounds: np.ndarray | None = None, known: NodeBounds | None = None,
               deeper=None) -> bool:
        """Depth-first over `nodes` (sorted by `bounds` when given; `known`: their energy and
        cycles bounds too), their children that fit generated in slices of about `chunk` rows
        (`fitting_children`: factor choices times the orders and choices each expands to);
        False when the budget ran out, after recording the smallest bound left unexplored.
        The children kept (sorted, with their bounds) go to `deeper` (default: this walk,
        one level down), which answers as this does."""
        tree, incumbent = self.tree, self.incumbent
        expansion = tree.expansion(nodes.depth)

        def chunk() -> int:         # factor choices per slice, asked anew as the deadline nears
            return max(1, self._chunk_rows(nodes.depth + 1) // expansion)

        started, polished = time.perf_counter(), self.polish_seconds
        cut, share = self._cut(nodes, known), self._share(nodes)
        for node, children in fitting_children(tree, nodes, chunk, early=self._early(cut, share), cut=cut):
            if bounds is not None and beaten(self.objective, bounds[node], incumbent.bar):
                if share is not None:
                    share.done_before(len(nodes))
                return True                   # this node and the rest are provably no better
            if self.budget.spent():
                self.open_bounds.append(-np.inf if bounds is None else float(bound_primary(self.objective, bounds[node])))
                return False
            priced = None if children is None else self._price(children)
            dilution = 1.0 if cut is None else cut.dilution()     # choices seen per kept, this slice
            if children is not None:        # generated (since the last slice) and priced
                self._timed(children, started, polished, len(children) * dilution)
            if priced is None:
                if self.progress:
                    self.progress(incumbent.evaluated)
            else:
                rows, child_bounds, prefix = priced
                bound = child_bounds.objective
                bar = incumbent.bar
                keep = np.flatnonzero(~beaten(self.objective, bound, bar)
                                      & ~outranked(self.objective, child_bounds, prefix, bar))
                keep = keep[bound_order(self.objective, bound[keep])]
                below = NodeBounds(*(b[keep] for b in child_bounds))
                del priced, child_bounds, prefix      # not held while the walk goes deeper
                if len(keep) and not (deeper or self.search)(children.take(rows[keep]), below.objective, below):
                    self.open_bounds.append(-np.inf if bounds is None else float(bound_primary(self.objective, bounds[node])))
                    return False
            if share is not None:             # the parents before `node` are walked to the end
                share.done_before(node)
            self._between_slices()
            started, polished = time.perf_counter(), self.polish_seconds    # the next slice's clock
        if share is not None:
            share.done_before(len(nodes))
        return True
