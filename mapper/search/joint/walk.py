"""The branch and bound's walk over the tree (`search/tree.py`), best bound first, depth first.

Children are generated only where they fit (`search/fitting_children.py`), cut before they are
priced where their parent lost since or their compute units make a bound beaten (`cut.py`),
priced and bounded in vectorised slices of bounded rows (`search/bounds/`), and walked in the
order of their bounds; a subtree is dropped only when its bound is beaten by the incumbent
(`objective.beaten`), or ties it on every cost key while its decided factors already rank after
the incumbent's (`objective.outranked`). When the budget stops it, it records the least bound
of what it left unexplored, which gives a proven gap.

A walk is given a frozen `WalkSetup` and keeps its own state; what others ask of it goes
through its methods: walk the parts (`walk_parts`), dive (`dives.py`, through `price`,
`offering_to` and `polishing`); what it runs between slices (CP-SAT's proposals once ready, jobs
once it has gone on for a while) is its `deferred` (`deferred.py`), how many rows a slice holds
its `pacing` (`pacing.py`), when it polishes a new incumbent its `polisher` (`polish.py`). How a
slice is priced is `pricing.py`'s; the order it takes across several parts `across.py`'s.
"""
from __future__ import annotations

import functools
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...mapspace import Mapspace
from ..bounds import LinkBounds, NodeBounds
from ..context import Budget, SearchContext
from ..fitting_children import fitting_children
from ..objective import Objective, beaten, bound_order, bound_primary, outranked
from ..result import Incumbent
from ..tree import LevelTree, Nodes
from .across import AcrossParts
from .cut import Cut, Share
from .deferred import Deferred
from .images import offer_images, symmetries
from .parallel import Claims, content_hashes
from .pacing import Pacing
from .polish import Polisher
from .pricing import offer_complete, price_partial, rows_per_pricing
from .parts import Part
from .settings import JointTuning
from .view import WalkView


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

    @property
    def alone_first(self) -> bool:
        """Worker 0 dives, walks and searches for incumbents as on one core, the others
        starting late (on a search's work clock, `synced.SyncedKey.start`); else all start
        at once, worker 0 searching for incumbents while the others walk."""
        return self.context.on_search_clock

    @property
    def divers(self) -> int:
        """The workers that dive at once, sharing the dives (one where worker 0 is alone first)."""
        return 1 if self.alone_first else self.workers


class Walk:
    """One run of the branch and bound over a space's parts, pruning against `incumbent`."""

    def __init__(self, setup: WalkSetup, incumbent: Incumbent):
        self.setup, self.incumbent = setup, incumbent
        self.objective, self.context, self.budget = setup.objective, setup.context, setup.budget
        self.space, self.tree, self.links = setup.space, setup.tree, setup.links    # of the part walked
        self.part_key = 0                                   # the keep vector of the part walked
        self.open_bounds: list[float] = []
        self.polish = setup.polish
        self.deferred = Deferred(self.context, setup.tuning.walk_polish_after)     # between slices
        self.pacing = Pacing(setup.chunk, setup.tuning, self.context, self.budget)  # rows per slice
        self.polisher = Polisher(setup.space, setup.tuning, self.context, self.budget, self.pacing, setup.seed)
        # where the walk is split into units between workers (`_share`): across parts at the
        # parts' roots (`_search_across`), else `split_depth`
        self.split_depth = setup.tuning.split_depth
        self.symmetries = symmetries(setup.space.workload)     # a new best's images are offered too

    # ------------------------------------------------------------------ what others ask of it

    def use(self, part: Part) -> None:
        """Walk `part` from now on."""
        self.space, self.tree, self.links = part.space, part.tree, part.links
        self.part_key = int(content_hashes(np.array([[len(part.picks)], *[[pick] for pick in part.picks]]))[0][0])

    def walk_parts(self, parts: list[Part]) -> bool:
        """Walk `parts` to the end (True) or until the budget stops it. The walk polishes what it
        finds only once it has gone on for a while (`walk_polish_after`): a polish can take
        longer than a whole quick walk (docs/RESULTS.md)."""
        self.polisher.start()
        self.deferred.start()
        claims = self.setup.claims
        if claims is None:
            return self.search_parts(parts)
        if claims.some_walk_ended():       # the others claimed every unit meanwhile
            return True
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
        Partial ones, priced and bounded (`pricing.price_partial`): (rows that fit, their
        `NodeBounds`, their decided factors as content keys), or None when none fits."""
        table = self.tree.table(children)
        step = rows_per_pricing(table, self.setup.tuning.priced_cells)
        if children.depth < self.tree.leaf_depth:
            return price_partial(self.space, self.objective, self.context, self.links, self.incumbent,
                                 children.depth, table, step)
        before = self.incumbent.key
        offer_complete(self.space, self.incumbent, table, step)
        if self.symmetries and self.incumbent.key != before:
            offer_images(self.incumbent, self.symmetries)
        # polished when it is the best any worker holds: one that only beats this worker's
        # own (the second worker's walk starts from greedy's mapping) does not help
        if self.polish and self.incumbent.key != before and not self.incumbent.outdone():
            self.polisher(self.incumbent, force=force_polish)
        return None

    @contextmanager
    def _kept(self):
        """While inside: whatever a deferred job does, the part walked stays the walk's."""
        state = self.space, self.tree, self.links, self.part_key
        try:
            yield
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
        """The parts' depth-1 nodes walked in the order of their bounds across all the parts
        (`across.AcrossParts`), each part's expanded only once its root bound comes first."""
        order = AcrossParts(self.objective, parts, self.setup.tuning.min_run)
        # on several cores the units are the parts' roots and their children's first dim:
        # bounding the depth-1 nodes is most of the walk on such spaces, and every worker
        # bounded all of them when the units were one level down (docs/RESULTS.md)
        self.split_depth = 1
        while (first := order.least()) is not None:
            if beaten(self.objective, first, self.incumbent.bar):
                break                         # everything left is provably no better
            i, at = order.pop()
            self.use(parts[i])
            if self.budget.spent():
                self.open_bounds.append(float(bound_primary(self.objective, first)))   # the least left
                return False
            if at < 0:                        # the part's turn: its depth-1 nodes
                found = []
                if not self.search(parts[i].roots, parts[i].bounds, deeper=lambda *nodes: found.append(nodes) or True,
                                   held=order.holding(i)):
                    return self._left_open(order)
                order.expanded(i, found)
                continue
            nodes, run, end = order.run(i, at)
            # kept when their part was expanded, under the incumbent of then
            if not self.search(nodes, run.objective, run, fresh=False):
                return self._left_open(order)
            order.walked(i, end)
        order.finish()
        return True

    def _left_open(self, order: AcrossParts) -> bool:
        """False, after recording the least bound left across the parts: the search that
        stopped recorded what it left of its own nodes, whose bounds may be above those of
        another part's."""
        if (least := order.least()) is not None:
            self.open_bounds.append(float(bound_primary(self.objective, least)))
        return False

    def search(self, nodes: Nodes, bounds: np.ndarray | None = None, known: NodeBounds | None = None,
               deeper=None, held: list | None = None, fresh: bool = True) -> bool:
        """Depth-first over `nodes` (sorted by `bounds` when given; `known`: their energy and
        cycles bounds too), their children that fit generated in slices of about `chunk` rows
        (`fitting_children`: factor choices times the orders and choices each expands to);
        False when the budget ran out, after recording the smallest bound left unexplored.
        The children kept (sorted, with their bounds) go to `deeper` (default: this walk,
        one level down), which answers as this does. With `held` (a list), this worker's units
        among the children (`Share`) are not marked done here but added to it: they are done
        only once the nodes handed to `deeper` are walked. `fresh`: the nodes were kept under
        the incumbent of now (a list made just above); else they are checked against it again
        before their children are generated (`Cut`)."""
        tree, incumbent = self.tree, self.incumbent
        chunk = self.pacing.choices_per_slice(nodes.depth, tree.expansion(nodes.depth))

        started, polished = time.perf_counter(), self.pacing.polish_seconds
        cut, share = self._cut(nodes, known, fresh), self._share(nodes)
        if share is not None and held is not None:
            held.append(share)
            share = share.holding()
        most_rows = functools.partial(self.pacing.chunk_rows, nodes.depth + 1)
        for node, children in fitting_children(tree, nodes, chunk, early=self._early(cut, share), cut=cut,
                                               most_rows=most_rows, mirror=True):
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
                self.pacing.timed(children, started, polished, len(children) * dilution)
                self.pacing.expanded(children)
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
            self.deferred.run_due(self._kept)
            started, polished = time.perf_counter(), self.pacing.polish_seconds    # the next slice's clock
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

    def _cut(self, nodes: Nodes, known: NodeBounds | None, fresh: bool = True) -> Cut | None:
        """What rules out children of `nodes` before they are priced (`Cut`); None for the
        roots, whose energy and cycles bounds are not kept."""
        return None if known is None else Cut(self.view(), nodes, known, fresh)

    def view(self) -> WalkView:
        """What the cuts read of this walk, for the part it walks now."""
        return WalkView(self.objective, self.space, self.tree, self.links, self.incumbent, self.context,
                        self.pacing.chunk_rows)

