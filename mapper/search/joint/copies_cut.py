"""A bound on the factor choices of a node from the split they decide over a fanout that
shares no transfer, before their orders are crossed in.

Where a fanout shares nothing (h100's L2 to its 132 SMs: no multicast, no reduction), the
innermost level's bound does not enumerate its splits, and counts one instance under it: one
SM's fills. Every SM fills its own copy of what it keeps, and the split over the SMs is
decided by the factor choices of the level above them, so each choice is bounded with its
own split (`InnermostBound.with_split`) on top of what its parent has decided
(`bounds.node.split_terms`). On h100 ResNet-50 conv1 most of the walk was pricing the
children of four depth-1 nodes, whose bound had every SM fill only its own share
(docs/RESULTS.md).
"""
from __future__ import annotations


import numpy as np

from ...mapping import along_last
from ..bounds.node import leak_per_cycle, split_terms
from ..objective import beaten, cost_bound
from ..tree import Nodes
from .view import WalkView



class CopiesCut:
    """Which factor choices of `nodes` the incumbent beats once their split over the fanout
    at the nodes' level is known (`__call__`); `known_cycles` are the nodes' cycles bounds
    (the cut's copy, raised in place as the incumbent improves)."""

    def __init__(self, view: WalkView, nodes: Nodes, known_cycles: np.ndarray):
        self.view, self.nodes, self.known_cycles = view, nodes, known_cycles
        space = view.space
        table = view.tree.table(nodes)
        self.terms = split_terms(space, nodes.depth, table, view.context.price(space.arch, space.workload, table),
                                 view.links)
        self.leak = leak_per_cycle(view.space.arch)

    @staticmethod
    def applies(view: WalkView, nodes: Nodes) -> bool:
        """Whether the objective has an energy part and the nodes' level splits a fanout
        that shares nothing, which the innermost bound takes (`takes_split_at`)."""
        return (view.objective.kind not in ("bytes", "cycles")
                and view.links.innermost.takes_split_at(nodes.depth))

    def __call__(self, parents: np.ndarray, groups: np.ndarray, bar: tuple) -> np.ndarray:
        """(M,) True where every completion of the factor choice (`parents`, its `groups`) is
        beaten by the incumbent's ranking key `bar`."""
        nodes, k, terms = self.nodes, self.nodes.depth, self.terms
        children = Nodes(k + 1, groups, *(along_last(a, parents) for a in (nodes.orders, nodes.stages, nodes.keeps)))
        split = self.view.tree.level_factors(children, k)[1:].prod(axis=0)             # (D, M)
        if terms.split is not None:
            split = split * terms.split[:, parents]
        return self._beaten(parents, self.view.links.innermost.with_split(k, [d[parents] for d in terms.deepest], split),
                            bar)

    def _beaten(self, parents: np.ndarray, inner: np.ndarray, bar: tuple) -> np.ndarray:
        """(M,) whether the choices under `parents` are beaten by `bar`, with `inner` (M,)
        their innermost level's bound on top of what their nodes decided."""
        terms = self.terms
        share = terms.inner_share[parents] if np.ndim(terms.inner_share) else terms.inner_share
        cycles = self.known_cycles[parents]
        energy = terms.base[parents] + share * inner + self.leak * cycles
        return beaten(self.view.objective, cost_bound(self.view.objective, energy, cycles), bar)
