"""A bound on the factor choices that decide the innermost level's cell (its tile and the
split of every fanout above it), before their orders are crossed in.

The children of a node one level above the innermost one decide the last factors: the
innermost tile and every split are then known, which is one cell of the innermost level's
bound (`InnermostBound.cell_least`: its least total over the keep sets and merged loop
orders). Each choice is bounded by its own cell on top of what its parent has decided
(`bounds.node.split_terms`), where the node's bound took the least over every cell. On
TPU's 3x3 convolutions the walk priced every order of every such choice under the depth-1
nodes that the root's bound could not cut (docs/RESULTS.md).
"""
from __future__ import annotations


import numpy as np

from ...mapping import along_last
from ...rows import unique_rows
from ..bounds.cells import cell_of
from ..tree import Nodes
from .copies_cut import CopiesCut
from .view import WalkView



class CellCut(CopiesCut):
    """Which factor choices of `nodes` the incumbent beats once their innermost cell is
    known (`__call__`); `known_cycles` are the nodes' cycles bounds (the cut's copy). What it
    takes from the nodes is the copies cut's (`split_terms`)."""

    def __init__(self, view: WalkView, nodes: Nodes, known_cycles: np.ndarray):
        super().__init__(view, nodes, known_cycles)
        # the factors the nodes decided, per level above theirs: (levels, 3, D, N)
        self.decided = np.stack([view.tree.level_factors(nodes, level) for level in range(nodes.depth)])

    @staticmethod
    def applies(view: WalkView, nodes: Nodes) -> bool:
        """Whether the objective has an energy part, the children decide the level just above
        the innermost one, and the innermost bound enumerates every fanout's splits in a
        space of exact factors (so that a choice's tile and splits name one of its cells)."""
        cells = view.links.innermost.cells
        return (view.objective.kind not in ("bytes", "cycles") and cells is not None
                and nodes.depth == cells.level - 1 and cells.vectors is not None
                and not any(x > 1 for x in cells.unsplit) and cells.perfect)

    def __call__(self, parents: np.ndarray, groups: np.ndarray, bar: tuple) -> np.ndarray:
        """(M,) True where every completion of the factor choice (`parents`, its `groups`) is
        beaten by the incumbent's ranking key `bar`."""
        view, nodes, k, terms = self.view, self.nodes, self.nodes.depth, self.terms
        inner = view.links.innermost
        children = Nodes(k + 1, groups, *(along_last(a, parents) for a in (nodes.orders, nodes.stages, nodes.keeps)))
        mine = view.tree.level_factors(children, k)                                     # (3, D, M)
        levels = np.concatenate([self.decided[:, :, :, parents], mine[None]])           # (k + 1, 3, D, M)
        sizes = np.array(view.space.workload.sizes, np.int64)[:, None]
        tile = sizes // levels.prod(axis=(0, 1))                                        # (D, M)
        vectors = levels[:, 1:].prod(axis=1).transpose(2, 0, 1)                         # (M, k + 1, D)
        cells = inner.cells
        cell = cell_of(cells.tile, cells.vectors, tile, vectors[:, :cells.level], inner.prices.memo)
        least = np.zeros(len(parents))
        deepest = np.stack([d[parents] for d in terms.deepest])                         # (T, M)
        combos, which = unique_rows(deepest.T, return_inverse=True)
        for c, combo in enumerate(combos.tolist()):
            rows = np.flatnonzero((which == c) & (cell >= 0))
            least[rows] = inner.cell_least(k, tuple(combo))[cell[rows]]
        return self._beaten(parents, least, bar)
