"""The branch and bound's walk over the tree (`search/tree.py`), best bound first, depth first.

Children are generated only where they fit (`search/fitting_children.py`), cut before they are
priced where their parent lost since or their compute units make a bound beaten (`cut.py`),
priced and bounded in vectorised slices of bounded rows (`search/bounds/`), and walked in the
order of their bounds; a subtree is dropped only when its bound is beaten by the incumbent
(`objective.beaten`), or ties it on every cost key while its decided factors already rank after
the incumbent's (`objective.outranked`). When the budget stops it, it records the least bound
of what it left unexplored, which gives a proven gap.

A walk is given a frozen `WalkSetup` and keeps its own state; what others ask of it goes
through its methods: walk the parts (`walk_parts`), offer CP-SAT's proposals once they are
ready (`offer_when_ready`), run a job once it has gone on for a while (`run_later`), dive
(`dives.py`, through `price`, `chunk_rows`, `timed`, `offering_to` and `polishing`).
"""
from __future__ import annotations

import functools
import heapq
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...mapspace import Mapspace, pruning
from ..bounds import LinkBounds, NodeBounds, lower_bounds
from ..context import Budget, SearchContext
from ..fitting_children import fitting_children
from ..objective import Objective, beaten, bound_order, bound_primary, outranked
from ..result import Incumbent
from ..tree import LevelTree, Nodes, feasible
from .cut import Cut, Share
from .view import WalkView
from .neighbourhood import improve
from .parallel import Claims, content_hashes
from .parts import Part
from .settings import JointTuning


@dataclass(frozen=True)
class WalkSetup:
    """What a walk is given, for its whole run."""
    space: Mapspace             # the whole space (the local search's polish moves across parts)
    objective: Objective
    tree: LevelTree
    links: LinkBounds           # the whole space's link bounds (the parts' share them)
    context: SearchContext
    budget: Budget              # the search's own
    tuning: JointTuning
    chunk: int                  # rows priced together, at most
    polish: bool                # polish new incumbents by local search
    seed: int = 0
    progress: Callable | None = None
    worker: int = 0             # on several cores (`parallel.py`): this worker, of `workers`,
    workers: int = 1
    claims: Claims | None = None    # and who walks which unit of the tree

    @property
    def parallel(self) -> bool:
        return self.claims is not None


class Walk:
    """One run of the branch and bound over a space's parts, pruning against `incumbent`."""

    def __init__(self, setup: WalkSetup, incumbent: Incumbent):
        self.setup, self.incumbent = setup, incumbent
        self.objective, self.context, self.budget = setup.objective, setup.context, setup.budget
        self.space, self.tree, self.links = setup.space, setup.tree, setup.links    # of the part walked
        self.part_key = 0                                   # the keep vector of the part walked
        self.open_bounds: list[float] = []
        self.polish = setup.polish
        # (CP-SAT solving meanwhile, what to do with its answer, the clock reading to take it
        # at: None, as soon as it is ready)
        self._proposals = None
        # (seconds into the walk on the budget clock, job): each run once by the walk, when it
        # has gone on for that long; `_due` the same with the clock readings, once it started
        self._deferred: list[tuple[float, Callable[[], None]]] = []
        self._due: list[tuple[float, Callable[[], None]]] = []
        self._polished_at = -np.inf
        self.polish_seconds = 0.0   # wall seconds spent polishing, left out of the chunks' timing
        self._row_seconds: dict[int, float] = {}    # depth -> wall seconds per child row, last chunk
        self._rows_per_choice: dict[int, float] = {}    # depth -> child rows per factor choice kept, last chunk
        # where the walk is split into units between workers (`_share`): across parts at the
        # parts' roots (`_search_across`), else `split_depth`
        self.split_depth = setup.tuning.split_depth

    # ------------------------------------------------------------------ what others ask of it

    def use(self, part: Part) -> None:
        """Walk `part` from now on."""
        self.space, self.tree, self.links = part.space, part.tree, part.links
        self.part_key = int(content_hashes(np.array([[len(part.picks)], *[[pick] for pick in part.picks]]))[0][0])

    def offer_when_ready(self, proposals, offer: Callable, after: float | None = None) -> None:
        """Between slices, once `proposals` (`cpsat.Proposals`) are ready: `offer(proposals)`;
        with `after`, once the budget clock has gone on that long instead, waiting for them
        then if need be (on a counting clock: the walk goes on while CP-SAT solves, and what it
        prunes never depends on when the solve ended)."""
        self._proposals = (proposals, offer, None if after is None else self.context.clock() + after)

    def run_later(self, job: Callable[[], None], after: float | None = None) -> None:
        """Run `job` once, between slices, once the walk has gone on for a while
        (`walk_polish_after`, or `after` seconds of the budget clock; its state is kept as it
        was around it). Jobs due at once run in the order they were given."""
        self._deferred.append((self.setup.tuning.walk_polish_after if after is None else after, job))

    def end_hooks(self) -> bool:
        """Forget what was to run later; True when CP-SAT's proposals were still awaited (they
        are cancelled: no longer wanted)."""
        self._deferred, self._due = [], []
        if self._proposals is None:
            return False
        self._proposals[0].cancel()
        self._proposals = None
        return True

    def walk_parts(self, parts: list[Part]) -> bool:
        """Walk `parts` to the end (True) or until the budget stops it. The walk polishes what it
        finds only once it has gone on for a while (`walk_polish_after`): a polish can take
        longer than a whole quick walk (docs/RESULTS.md)."""
        tuning, clock = self.setup.tuning, self.context.clock()
        self._polished_at = clock - tuning.polish_every + tuning.walk_polish_after
        self._due = [(clock + after, job) for after, job in self._deferred]
        self._deferred = []
        claims = self.setup.claims
        if claims is None:
            return self.search_parts(parts)
        if claims.some_walk_ended():       # the others claimed every unit meanwhile
            return True
        claims.join()
        complete = self.search_parts(parts)
        if complete:
            claims.end_reached()
        return complete

    def add_open_bounds(self, bounds: list[float]) -> None:
        """Bounds another worker's walk left open on what it did not explore (`workers.py`)."""
        self.open_bounds.extend(bounds)

    @contextmanager
    def offering_to(self, incumbent: Incumbent):
        """While inside: what the walk finds goes to `incumbent`, unpolished (a dive into one
        part offers to the part's own best)."""
        best, polish = self.incumbent, self.polish
        self.incumbent, self.polish = incumbent, False
        try:
            yield
        finally:
            self.incumbent, self.polish = best, polish

    @contextmanager
    def polishing(self, polish: bool):
        """While inside: polish new incumbents or not (quick dives polish nothing they find)."""
        before, self.polish = self.polish, polish
        try:
            yield
        finally:
            self.polish = before

    # ------------------------------------------------------------------ pricing

    def price(self, children: Nodes, force_polish: bool = False):
        """Complete mappings are offered to the incumbent (a new best is polished): None.
        Partial ones (None when none fits) are checked for capacity and fanout (no pricing
        needed, and it rules out most), then priced and bounded: (rows that fit, their
        `NodeBounds`, their decided factors as content keys)."""
        space, tree = self.space, self.tree
        table = tree.table(children)
        # the cost model's intermediates grow with the slots of a mapping: wide tables are
        # priced a part at a time, so that memory stays bounded (docs/RESULTS.md)
        step = max(1, self.setup.tuning.priced_cells // math.prod(table.factors.shape[:-1]))
        if children.depth >= tree.leaf_depth:
            rows = np.flatnonzero(pruning.valid_mask(space, table))
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
            costs = self.context.price(space.arch, space.workload, part)
            bounds = lower_bounds(space, self.objective, children.depth, part, costs, self.links,
                                  refine_below=self.incumbent.bar)
            # the content keys begin with the factors of the decided levels (`ranking_keys`)
            parts.append((bounds, part.factors[:children.depth].reshape(-1, len(part))))
        self.incumbent.evaluated += len(rows)
        bounds = NodeBounds(*(np.concatenate([b[i] for b, _ in parts]) for i in range(3)))
        return rows, bounds, np.concatenate([prefix for _, prefix in parts], axis=1)

    def chunk_rows(self, depth: int) -> int:
        """Child rows generated and priced together at `depth`: `chunk`, but against a wall-clock
        deadline no more than what takes `chunk_share` of the seconds left, or `chunk_seconds`
        when that is more, at the last rate measured there (or the slowest measured anywhere;
        before any, `first_chunk`, or `chunk_share` of the seconds left at `assumed_row_seconds`,
        a slow row's rate): a chunk cannot be cut, and a full one can take seconds at the top
        of a large space, more under load (docs/RESULTS.md). Far from the deadline chunks stay
        large: best bound first is ordered within a chunk, and small ones slow the walk. Under
        an evaluation budget it stays `chunk`, so the walk's order never depends on the
        machine's load."""
        chunk, tuning, context = self.setup.chunk, self.setup.tuning, self.context
        if context.per_evaluation is not None:
            return chunk
        left = min(context.seconds_left(), float("inf") if self.budget.deadline is None
                   else self.budget.deadline - time.perf_counter())
        if left == float("inf"):
            return chunk
        rate = self._row_seconds.get(depth, max(self._row_seconds.values(), default=None))
        if rate is None:
            return int(min(chunk, tuning.first_chunk, max(1, tuning.chunk_share * left / tuning.assumed_row_seconds)))
        seconds = max(tuning.chunk_seconds, tuning.chunk_share * left)
        return int(min(chunk, max(1, seconds / max(rate, 1e-9))))

    def _choices_per_slice(self, depth: int):
        """How many factor choices of a depth-`depth` node one slice generates (a function,
        asked anew before each step as the deadline nears): `chunk_rows` over the rows one
        choice kept by the cut expands to, as the last slice measured them (the orders, stages
        and keeps that fit it; before any, the most it can expand to). Sized by the most, a
        convolution's slices held a few dozen rows where a choice could take 720 orders but
        took about ten, and most choices were cut: the pricing of each slice was then mostly
        its set-up (eyeriss, ResNet-50 conv3: 66 rows per pricing). A slice whose choices
        expand to more than `chunk_rows` comes in pieces (`fitting_children`'s `most_rows`)."""
        most = self.tree.expansion(depth)

        def chunk() -> int:
            per_choice = min(most, max(1.0, self._rows_per_choice.get(depth + 1, most)))
            return max(1, int(self.chunk_rows(depth + 1) / per_choice))
        return chunk

    def timed(self, children: Nodes, started: float, polished: float, generated: float) -> None:
        """Record the wall seconds per child row generated (`generated`: more than `children`
        where a cut dropped some before pricing), generated and priced since `started` (less
        the polishing done meanwhile, which had `polish_seconds` at `polished`)."""
        if len(children):
            seconds = time.perf_counter() - started - (self.polish_seconds - polished)
            self._row_seconds[children.depth] = seconds / generated

    def _polish(self, force: bool = False) -> None:
        """A short local search around a new incumbent the walk found (at most one second,
        at most every `polish_every` seconds): its neighbours often beat it, and the bound it
        sets prunes the rest of the walk."""
        now = self.context.clock()      # the budget clock: evaluations under an evaluation budget
        if now - self._polished_at < self.setup.tuning.polish_every and not force:
            return
        started, start = time.perf_counter(), self.incumbent.score
        # outdone by another worker before it improved on its start: polishing this one cannot
        # help the walk (as in `incumbents.local_search`)
        improve(self.setup.space, self.incumbent, self.context.budget(1.0), seed=self.setup.seed,
                stop=lambda: self.budget.spent() or (self.incumbent.outdone() and self.incumbent.score >= start))
        self._polished_at = self.context.clock()
        self.polish_seconds += time.perf_counter() - started

    def _between_slices(self) -> None:
        """What the walk does between slices besides walking: offer CP-SAT's proposals once
        they are ready; run what was deferred once its time has come, leaving the walk's own
        state as it was."""
        if self._proposals is not None:
            proposals, offer, at = self._proposals
            if proposals.ready() if at is None else self.context.clock() >= at:
                self._proposals = None
                offer(proposals)
        while self._due:
            now = self.context.clock()
            due = next((i for i, (at, _) in enumerate(self._due) if now >= at), None)
            if due is None:
                break
            _, deferred = self._due.pop(due)
            state = self.space, self.tree, self.links, self.part_key
            try:
                deferred()
            finally:
                self.space, self.tree, self.links, self.part_key = state

    # ------------------------------------------------------------------ the walk

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
        optimum's own, while the optimum's nodes, bounded tightly, waited in a later part
        (docs/RESULTS.md)."""
        objective = self.objective
        key = (lambda bound: tuple(bound.tolist())) if objective.lexicographic else float
        heap = [(key(part.first), i, -1) for i, part in enumerate(parts)]
        heapq.heapify(heap)
        lists = {}              # part -> its depth-1 nodes, their bounds (sorted)
        # on several cores the units are the parts' roots and their children's first dim:
        # bounding the depth-1 nodes is most of the walk on such spaces, and every worker
        # bounded all of them when the units were one level down (docs/RESULTS.md)
        self.split_depth = 1
        held = {}               # part -> the units (`Share`) this worker claimed there, done
                                # once the part's depth-1 nodes are all walked or pruned
        while heap:
            first, i, at = heap[0]
            if beaten(objective, np.array(first), self.incumbent.bar):
                _finish(*held.values())
                return True                   # everything left is provably no better
            heapq.heappop(heap)
            self.use(parts[i])
            if self.budget.spent():
                self.open_bounds.append(float(bound_primary(objective, np.array(first))))   # the least left
                return False
            if at < 0:                        # the part's turn: its depth-1 nodes
                found, held[i] = [], []
                if not self.search(parts[i].roots, parts[i].bounds, deeper=lambda *nodes: found.append(nodes) or True,
                                   held=held[i]):
                    return self._left_open(heap)
                if found:
                    lists[i] = _sorted_nodes(objective, found)
                    heapq.heappush(heap, (key(lists[i][1].objective[0]), i, 0))
                else:
                    _finish(held.pop(i))
                continue
            nodes, bounds = lists[i]
            # a run of them, up to the next bound in the heap (at least a few: each run is one
            # `search`, with its own set-up)
            end = at + 1
            while end < len(nodes) and (end - at < self.setup.tuning.min_run or not heap
                                        or key(bounds.objective[end]) <= heap[0][0]):
                end += 1
            rows = np.arange(at, end)
            run = NodeBounds(*(b[rows] for b in bounds))
            if not self.search(nodes.take(rows), run.objective, run):
                return self._left_open(heap)
            if end < len(nodes):
                heapq.heappush(heap, (key(bounds.objective[end]), i, end))
            else:
                del lists[i]
                _finish(held.pop(i, []))
        _finish(*held.values())
        return True

    def _left_open(self, heap: list) -> bool:
        """False, after recording the least bound in the heap: the search that stopped recorded
        what it left of its own nodes, whose bounds may be above those of another part's."""
        if heap:
            self.open_bounds.append(float(bound_primary(self.objective, np.array(heap[0][0]))))
        return False

    def search(self, nodes: Nodes, bounds: np.ndarray | None = None, known: NodeBounds | None = None,
               deeper=None, held: list | None = None) -> bool:
        """Depth-first over `nodes` (sorted by `bounds` when given; `known`: their energy and
        cycles bounds too), their children that fit generated in slices of about `chunk` rows
        (`fitting_children`: factor choices times the orders and choices each expands to);
        False when the budget ran out, after recording the smallest bound left unexplored.
        The children kept (sorted, with their bounds) go to `deeper` (default: this walk,
        one level down), which answers as this does. With `held` (a list), this worker's units
        among the children (`Share`) are not marked done here but added to it: they are done
        only once the nodes handed to `deeper` are walked."""
        tree, incumbent = self.tree, self.incumbent
        chunk = self._choices_per_slice(nodes.depth)

        started, polished = time.perf_counter(), self.polish_seconds
        cut, share = self._cut(nodes, known), self._share(nodes)
        if share is not None and held is not None:
            held.append(share)
            share = share.holding()
        most_rows = functools.partial(self.chunk_rows, nodes.depth + 1)
        for node, children in fitting_children(tree, nodes, chunk, early=self._early(cut, share), cut=cut,
                                               most_rows=most_rows):
            if bounds is not None and beaten(self.objective, bounds[node], incumbent.bar):
                if share is not None:
                    share.done_before(len(nodes))
                return True                   # this node and the rest are provably no better
            if self.budget.spent():
                self.open_bounds.append(self._open_bound(bounds, node))
                return False
            priced = None if children is None else self.price(children)
            dilution = 1.0 if cut is None else cut.dilution()     # choices seen per kept, this slice
            if children is not None:        # generated (since the last slice) and priced
                self.timed(children, started, polished, len(children) * dilution)
                self._rows_per_choice[children.depth] = len(children) / _factor_choices(children)
            if self.setup.progress:         # every slice: a worker's count reaches the parent often
                self.setup.progress(incumbent.evaluated)
            if priced is not None:
                rows, child_bounds, prefix = priced
                bound, bar = child_bounds.objective, incumbent.bar
                keep = np.flatnonzero(~beaten(self.objective, bound, bar)
                                      & ~outranked(self.objective, child_bounds, prefix, bar))
                keep = keep[bound_order(self.objective, bound[keep])]
                below = NodeBounds(*(b[keep] for b in child_bounds))
                del priced, child_bounds, prefix      # not held while the walk goes deeper
                if len(keep) and not (deeper or self.search)(children.take(rows[keep]), below.objective, below):
                    self.open_bounds.append(self._open_bound(bounds, node))
                    return False
            if share is not None:             # the parents before `node` are walked to the end
                share.done_before(node)
            self._between_slices()
            started, polished = time.perf_counter(), self.polish_seconds    # the next slice's clock
        if share is not None:
            share.done_before(len(nodes))
        return True

    def _open_bound(self, bounds: np.ndarray | None, node: int) -> float:
        """The bound on what is left from `node` on (none known at the roots: -inf)."""
        return -np.inf if bounds is None else float(bound_primary(self.objective, bounds[node]))

    def _early(self, cut: Cut | None, share: Share | None):
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
            early.batch = self.setup.tuning.claim_batch
        return early

    def _share(self, nodes: Nodes) -> Share | None:
        """Which children of `nodes` this worker walks (None: all): when the walk is shared
        (`parallel.py`), at the split depth (or the leaves, if nearer), those of the units (a
        parent and its children's first dim) no other worker claimed first. Shallower depths
        are walked by every worker: they are few, and units at the root's children would be
        few and uneven (a handful of depth-1 nodes may hold most of the leaves; docs/RESULTS.md)."""
        claims = self.setup.claims
        if claims is None or nodes.depth + 1 != min(self.split_depth, self.tree.leaf_depth):
            return None
        return Share(claims, nodes, self.part_key)

    def _cut(self, nodes: Nodes, known: NodeBounds | None) -> Cut | None:
        """What rules out children of `nodes` before they are priced (`Cut`); None for the
        roots, whose energy and cycles bounds are not kept."""
        return None if known is None else Cut(self.view(), nodes, known)

    def view(self) -> WalkView:
        """What the cuts read of this walk, for the part it walks now."""
        return WalkView(self.objective, self.space, self.tree, self.links, self.incumbent, self.context,
                        self.chunk_rows)


def _factor_choices(children: Nodes) -> int:
    """How many factor choices (with their parents) `children` came from: each one's children
    are consecutive (`LevelTree.children_at`)."""
    n = len(children)
    if not n:
        return 1
    identity = np.vstack([children.groups.T, children.orders[:-1].reshape(-1, n),
                          children.stages[:-1], children.keeps[:-1]])
    return 1 + int(np.any(identity[:, 1:] != identity[:, :-1], axis=0).sum())


def _finish(*held: list) -> None:
    """Mark done the units of each list of `Share`s (their nodes are walked or pruned)."""
    for shares in held:
        for share in shares:
            share.done_before(np.inf)


def _sorted_nodes(objective: Objective, found: list) -> tuple[Nodes, NodeBounds]:
    """The nodes `search` handed to `deeper` (a list of (nodes, bounds, known)), concatenated
    and sorted by their bounds."""
    nodes = Nodes.concat([f[0] for f in found])
    bounds = NodeBounds(*(np.concatenate([f[2][b] for f in found]) for b in range(3)))
    order = bound_order(objective, bounds.objective)
    return nodes.take(order), NodeBounds(*(b[order] for b in bounds))
