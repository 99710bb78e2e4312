"""What rules out children of a list of nodes before they are expanded and priced (`Cut`),
and which of them this worker walks when the walk is shared between cores (`Share`)."""
from __future__ import annotations


import numpy as np

from ...mapping import along_last
from ..bounds import NodeBounds, compute_bound, lower_bounds
from ..bounds.node import least_macs
from ..objective import beaten, bound_primary, cost_bound, outranked
from ..tree import Nodes
from .cell_cut import CellCut
from .copies_cut import CopiesCut
from .order_free import OrderFreeCut, PartialOrderFreeCut
from .parallel import Claims, content_hashes
from .view import WalkView


class Cut:
    """Rules out children of a list of nodes before they are expanded and priced:
    - all those of a node the incumbent now beats or outranks: kept when the list was made,
      it lost to a mapping found since (by this walk, or another worker's, `parallel.py`). The
      walk's own check, at each slice, only sees the slice's first node and only its bound,
      so a worker whose list was made under a worse incumbent would price whole subtrees that
      tie the optimum another worker found, and rank after it;
    - where the objective depends on time, the factor choices whose compute units make a
      bound beaten: the parent's cycles bound, or the fewest cycles on those units when more,
      with the parent's energy bound. Children with too few units are most of what a walk
      on a GPU would price otherwise. Likewise the least time of every level under the
      splits the choice decides (`bounds.split_chain`): on a convolution's seven dims a
      level's orders and stages multiply each factor choice by dozens. Both are also asked
      of partial choices as their dims are crossed in (`reaching`), with the most units and
      the least chain time the dims still to come leave them.
    It counts what it sees, so that the walk times its slices per row generated: sized per
    row priced, they shrank to a few hundred rows where the cut drops most (docs/RESULTS.md)."""

    def __init__(self, view: WalkView, nodes: Nodes, known: NodeBounds, fresh: bool = True):
        # its own copy: raised where a better incumbent lets the bounds be refined (the walk's
        # own, sorted, must stay as they are)
        self.view, self.nodes, self.known = view, nodes, NodeBounds(*(b.copy() for b in known))
        self.splits = None                  # (L', D, N) spatial splits of the decided levels, per dim
        if view.objective.kind not in ("energy", "bytes"):      # the units bound time only
            self.splits = np.stack([view.tree.level_factors(nodes, level)[1:].prod(axis=0)
                                    for level in range(nodes.depth)] or [np.ones((view.space.n_dims, len(nodes)), np.int64)])
        self.chain = view.links.chain(least_macs(view.space)) if self.splits is not None else None
        # asked of partial factor choices as their dims are crossed in (`fitting_children`)
        self.reaching = self._reaching if self.splits is not None else None
        # the incumbent the nodes were kept under: where not the present one (`fresh` False: a
        # part's depth-1 nodes kept when it was expanded), the first call checks them again
        # (`alive`). Without it, the nodes of a part expanded early that tie the optimum found
        # since, and rank after it, had every child priced (pe-array 768x768x3072: 100k of the
        # 144k leaves priced on one core)
        self.bar = view.incumbent.bar if fresh else None
        self.dead, self.prefix = np.zeros(len(nodes), bool), None
        self.tied = None                    # nodes whose bounds tie the incumbent's key so far
        self.seen = self.kept = 0
        self.allowed = None         # (M, stages, keeps) of the choices of the last call, where judged
        # where the children are leaves: their factor choices bounded before the orders
        self.order_free = next((kind(view, nodes, self.known.cycles) for kind in (OrderFreeCut, PartialOrderFreeCut)
                                if kind.applies(view, nodes)), None)
        # where the children split a fanout that shares nothing: their copies there bounded
        self.copies = CopiesCut(view, nodes, self.known.cycles) if CopiesCut.applies(view, nodes) else None
        # where the children decide the innermost level's cell: each bounded by its own
        self.cells = CellCut(view, nodes, self.known.cycles) if CellCut.applies(view, nodes) else None

    def alive(self, parents: np.ndarray) -> np.ndarray:
        """Whether each of `parents` is still neither beaten nor outranked."""
        view = self.view
        bar = view.incumbent.bar
        if bar != self.bar:                 # a better mapping since the nodes were kept
            self.bar = bar
            self._refine(int(parents.min()) if len(parents) else 0)
            self.dead = (beaten(view.objective, self.known.objective, bar)
                         | outranked(view.objective, self.known, self._prefix(), bar))
            self.tied = None
        return ~self.dead[parents]

    def _refine(self, first: int) -> None:
        """Bound again, under the new incumbent, the nodes from `first` on that it does not
        beat yet: their bounds were refined only as far as the incumbent of the time asked
        (`bounds.node.lower_bounds`, `refine_below`). Without it, a worker that made its list
        under a worse incumbent walks on, after a better one is found, into nodes whose bounds
        refined under it exceed it (docs/RESULTS.md)."""
        view = self.view
        innermost = view.links.innermost
        if (not innermost.enabled or self.nodes.depth >= innermost.level
                or view.objective.kind not in ("energy", "edp", "delay_energy")):
            return
        rows = first + np.flatnonzero(~beaten(view.objective, self.known.objective[first:], self.bar))
        if not len(rows):
            return
        table = view.tree.table(self.nodes.take(rows))
        fresh = lower_bounds(view.space, view.objective, self.nodes.depth, table,
                             view.context.price(view.space.arch, view.space.workload, table), view.links,
                             refine_below=self.bar)
        for known, new in zip(self.known, fresh):
            known[rows] = np.maximum(known[rows], new)

    def _prefix(self) -> np.ndarray:
        """(P, N) the nodes' decided factors, the first content keys (`ranking_keys`)."""
        if self.prefix is None:
            table = self.view.tree.table(self.nodes)
            self.prefix = table.factors[:self.nodes.depth].reshape(-1, len(table))
        return self.prefix

    def _outranked_children(self, parents: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Where a child ranks after the incumbent whatever it costs: its parent's bounds tie
        the incumbent's score, energy and cycles, and the child's content so far (the parent's
        decided factors, then its own level's) compares above the incumbent's. Only parents
        tied that closely are looked at (equally good mappings: an optimum's mirror image and
        its neighbours can cost exactly the same, and their subtrees can be much of the walk;
        docs/RESULTS.md)."""
        view, bar = self.view, self.view.incumbent.bar
        if bar is None:
            return np.zeros(len(parents), bool)
        if self.tied is None:
            columns = [bound_primary(view.objective, self.known.objective), self.known.energy,
                       self.known.cycles, *self._prefix()]
            self.tied = np.all([column == value for column, value in zip(columns, bar)], axis=0)
        rows = np.flatnonzero(self.tied[parents])
        out = np.zeros(len(parents), bool)
        if len(rows):
            nodes, k = self.nodes, self.nodes.depth
            children = Nodes(k + 1, groups[rows], *(along_last(a, parents[rows])
                                                   for a in (nodes.orders, nodes.stages, nodes.keeps)))
            own = view.tree.level_factors(children, k).reshape(-1, len(rows))
            known = NodeBounds(*(b[parents[rows]] for b in self.known))
            prefix = np.concatenate([self._prefix()[:, parents[rows]], own])
            out[rows] = outranked(view.objective, known, prefix, bar)
        return out

    def __call__(self, parents: np.ndarray, units: np.ndarray, groups: np.ndarray) -> np.ndarray:
        bar = self.view.incumbent.bar
        out = ~self.alive(parents) | self._outranked_children(parents, groups)
        if self.splits is not None:
            time = self._compute_time(parents, units)
            if self.chain is not None:
                time = np.maximum(time, self._chain_bound(parents, groups))
            out |= self._beaten_in(parents, time)
        for cut in (self.copies, self.cells):
            rows = np.flatnonzero(~out) if cut is not None and bar is not None else ()
            if len(rows):
                out[rows] = cut(parents[rows], groups[rows], bar)
        self.allowed = None
        if self.order_free is not None and bar is not None:
            rows = np.flatnonzero(~out)
            if len(rows):
                out[rows] = self.order_free(parents[rows], groups[rows], bar)
                # what it judged of every choice left, kept for their expansion (`fitting_children`)
                self.allowed = np.zeros((len(out),) + self.order_free.allowed.shape[1:], bool)
                self.allowed[rows] = self.order_free.allowed
        self.seen += len(out)
        self.kept += len(out) - int(out.sum())
        return out

    def _compute_time(self, parents: np.ndarray, units: np.ndarray) -> np.ndarray:
        """(M,) the fewest cycles of the MACs on the units the choices reach, their split of
        the nodes' level being `units` (its factor per mesh axis, (2, M))."""
        view = self.view
        return compute_bound(view.space, self.nodes.depth + 1,
                             self.splits[:, :, parents].prod(axis=(0, 1)) * units.prod(axis=0), view.links)

    def _beaten_in(self, parents: np.ndarray, time: np.ndarray) -> np.ndarray:
        """(M,) whether the parents' bounds, with `time` as their least cycles where more, are
        beaten by the incumbent."""
        view = self.view
        return beaten(view.objective, cost_bound(view.objective, self.known.energy[parents],
                                                 np.maximum(self.known.cycles[parents], time)), view.incumbent.bar)

    def _reaching(self, parents: np.ndarray, most: np.ndarray, first: np.ndarray) -> np.ndarray:
        """(M,) False where a partial factor choice is beaten with the fewest cycles it can
        still reach: the compute time on the most units its later dims can add (`most`,
        (2, M), per mesh axis), or the least time of every level over the splits that agree
        with its first dims' (`first`, (d, M); `SplitChain.prefix_bound`). The compute time
        only falls as units are added, and the chain's least over more combinations is no
        higher, so every choice it completes to is beaten too: the cut (`__call__`) would
        drop it."""
        if self.view.incumbent.bar is None:
            return np.ones(len(parents), bool)
        time = self._compute_time(parents, most)
        k = self.nodes.depth
        if self.chain is not None and k in self.chain.fanouts:
            above = [self.splits[lv][:, parents] for lv in self.chain.fanouts if lv < k]
            decided = np.stack(above) if above else np.zeros((0, self.view.space.n_dims, len(parents)), np.int64)
            time = np.maximum(time, self.chain.prefix_bound(k, decided, first))
        return ~self._beaten_in(parents, time)

    def _chain_bound(self, parents: np.ndarray, groups: np.ndarray) -> np.ndarray | float:
        """Per factor choice, the chain's bound (`bounds.split_chain`) under the splits it and
        its parent decide."""
        nodes, k = self.nodes, self.nodes.depth
        known = [lv for lv in self.chain.fanouts if lv <= k]
        splits = []
        for lv in known:
            if lv < k:
                splits.append(self.splits[lv][:, parents])
            else:
                children = Nodes(k + 1, groups, *(along_last(a, parents) for a in (nodes.orders, nodes.stages,
                                                                                   nodes.keeps)))
                splits.append(self.view.tree.level_factors(children, k)[1:].prod(axis=0))
        return self.chain.bound(k + 1, np.stack(splits)) if splits else float(self.chain.cycles.min())

    def dilution(self) -> float:
        """Choices seen per choice kept since the last call (1 when none was kept)."""
        ratio = self.seen / self.kept if self.kept else 1.0
        self.seen = self.kept = 0
        return ratio

class Share:
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

    def holding(self) -> "_Holding":
        """This share as a walk uses it whose children are walked later (`Walk._search_across`
        collects a part's depth-1 nodes and walks them best first across the parts): it claims
        as this one does, into this one's record, and marks nothing done; this one marks its
        units done once their nodes are walked."""
        return _Holding(self)


class _Holding:
    """A `Share` that claims but never marks done (`Share.holding`)."""

    def __init__(self, share: Share):
        self.share = share

    def __call__(self, parents: np.ndarray, group: np.ndarray) -> np.ndarray:
        return self.share(parents, group)

    def done_before(self, node: int) -> None:
        """Nothing: a unit is done only once the nodes its children became are walked."""
