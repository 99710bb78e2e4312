"""A bound on the complete mappings of a factor choice before its loop orders are crossed in.

Where a node's children are leaves (complete mappings), each factor choice of its level
expands to every loop order of that level times the next level's stages and keeps: on a
convolution's seven dims up to 720 orders, and the walk priced them all (on h100's ResNet-50
res4-3x3, 3.9 M of the 6.5 M mappings priced to the proof; under a per-tensor bound from each
tensor's exact least over every order, 22 of their 132,645 factor choices stay open;
docs/RESULTS.md).

Every tensor's cost is that of its own traffic, and for each tensor one of a few orders
fetches it the fewest times into each level directly below, with no non-unit loop between
(`orders.tensor_best_orders`). Those are the only links whose traffic the cut takes from the
orders it prices: below the ordered level of a complete mapping lies only the innermost
level, whose own loops move nothing into it, and a partial node's decided traffic is the
fills of the level just below and the reads that serve them. So a factor choice is
priced over those orders only (with every stage and keep option that fits), and bounded by
the least energy each tensor takes among them, summed, plus the MACs' energy (no order
changes it) and the leakage over its cycles bound: the largest of its parent's cycles bound, its
compute time and every level's time with each tensor's fewest bytes through it, none exposed
(`timing.level_time` only grows with the bytes and what is exposed of them). No mapping below it
costs less; the orders priced need not be members of the space (a mapspace may forbid some),
as the least over more orders is only lower.
"""
from __future__ import annotations


import numpy as np

from ...cost.timing import level_time
from ...mapping import along_last
from ...mapspace import pruning
from ...orders import tensor_best_orders
from ..bounds.node import leak_per_cycle, order_free_parts
from ..objective import beaten, cost_bound
from ..tree import Nodes, feasible, in_pieces
from .view import WalkView



WORTH = 2       # the orders' expansion, at most, as a share of the choice's own: else not bounded


class OrderFreeCut:
    """Which factor choices of `nodes` (whose children are leaves) the incumbent beats whatever
    their loop order, stages and keeps (`__call__`); `known_cycles` are the nodes' own cycles
    bounds (the cut's copy, which it raises in place as the incumbent improves)."""

    def __init__(self, view: WalkView, nodes: Nodes, known_cycles: np.ndarray):
        self.view, self.nodes, self.known_cycles = view, nodes, known_cycles
        self._orders: dict[tuple[int, int], np.ndarray] = {}
        self.allowed = None         # the stage and keep options that fit the choices of the last call
        arch, tensors = view.space.arch, view.space.workload.tensors
        self._leaks = np.array([level.leak for level in arch.levels])[:, None]
        self._word_bytes = np.array([[level.word_bytes(t) for t in tensors] for level in arch.levels])[:, :, None]

    @staticmethod
    def applies(view: WalkView, nodes: Nodes) -> bool:
        """Whether the nodes' children are leaves and the objective has a cost bound."""
        return nodes.depth + 1 == view.tree.leaf_depth and view.objective.kind != "bytes"

    def _order_rows(self, level: int, mask: int) -> np.ndarray:
        """(K, D) `tensor_best_orders` of the loops in `mask`, unit dims after them."""
        if (level, mask) not in self._orders:
            n_dims = self.view.tree.n_dims
            dims = tuple(d for d in range(n_dims) if mask >> d & 1)
            rest = [d for d in range(n_dims) if not mask >> d & 1]
            self._orders[level, mask] = np.array([list(o) + rest for o in tensor_best_orders(
                self.view.space.workload, dims)], np.int64).reshape(-1, n_dims)
        return self._orders[level, mask]

    def __call__(self, parents: np.ndarray, groups: np.ndarray, bar: tuple) -> np.ndarray:
        """(M,) True where every completion of the factor choice (`parents`, its `groups`) is
        beaten by the incumbent's ranking key `bar`, or none is valid; False where its own
        expansion is too small for the bound to save pricing."""
        nodes, k, tree = self.nodes, self.nodes.depth, self.view.tree
        choices = Nodes(k + 1, groups, *(along_last(a, parents) for a in (nodes.orders, nodes.stages, nodes.keeps)))
        allowed = self.allowed = tree.fitting_choices(choices)
        priced = self._priced_options(allowed)
        # only where the rows priced here are at most half of what the choice expands to
        mine = tree.expansions(choices, k, priced, order_rows=self._order_rows)
        worth = np.flatnonzero(WORTH * mine <= tree.expansions(choices, k, allowed))
        out = np.zeros(len(parents), bool)
        if not len(worth):
            return out
        # priced a slice's rows at a time (`Walk.chunk_rows`), so that memory stays bounded
        for piece in in_pieces(mine[worth], self.view.chunk_rows(k + 1)):
            rows = worth[piece]
            out[rows] = self._beaten(choices.take(rows), priced[rows], parents[rows], bar)
        return out

    def _priced_options(self, allowed: np.ndarray) -> np.ndarray:
        """The next level's stage and keep options the bound prices (of those `allowed`): all
        of them."""
        return allowed

    def _beaten(self, choices: Nodes, allowed: np.ndarray, parents: np.ndarray, bar: tuple) -> np.ndarray:
        energy, cycles = self.bounds(choices, allowed, parents)
        return beaten(self.view.objective, cost_bound(self.view.objective, energy, cycles), bar)

    def bounds(self, choices: Nodes, allowed: np.ndarray, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(energy, cycles) bounds on every completion of each factor choice (`choices`, with the
        next level's options `allowed`, of the nodes `parents`): inf where none is valid."""
        view, space, tree = self.view, self.view.space, self.view.tree
        rows, choice_of = tree.expand(choices, self.nodes.depth, allowed=allowed, order_rows=self._order_rows)
        table = tree.table(rows)
        valid = np.flatnonzero(pruning.valid_mask(space, table))
        out = np.full(len(parents), np.inf), np.full(len(parents), np.inf)
        if not len(valid):
            return out
        costs = view.context.price(space.arch, space.workload, table.take(valid))
        view.incumbent.evaluated += len(valid)
        # the rows come choice by choice (`LevelTree.expand`): `least` takes each choice's least
        choice_of = choice_of[valid]
        first = np.flatnonzero(np.r_[True, choice_of[1:] != choice_of[:-1]])
        priced = choice_of[first]

        def least(values: np.ndarray) -> np.ndarray:
            return np.minimum.reduceat(values, first, axis=-1)
        arch = space.arch
        tensor_energy = costs.level_energy.sum(axis=0)                                  # (T, V)
        if arch.leakage == "utilized":
            leak = (self._leaks * costs.level_instances).sum(axis=0)
        else:
            leak = np.full(len(valid), float(sum(lv.leak * lv.instances for lv in arch.levels)))
        macs = costs.energy_pj - tensor_energy.sum(axis=0) - leak * costs.cycles      # no order changes it
        # each level's time with each tensor's fewest bytes, none of them exposed
        compute = least(costs.compute_cycles)
        cycles = np.maximum(self.known_cycles[parents[priced]], compute)
        read = (self._word_bytes * least(costs.level_reads)).sum(axis=1)
        write = (self._word_bytes * least(costs.level_fills + costs.level_updates)).sum(axis=1)
        for lv, level in enumerate(arch.levels):
            cycles = np.maximum(cycles, level_time(level, arch.cycle_rule, compute, read[lv], write[lv], 0.0, 0.0))
        out[0][priced] = least(tensor_energy).sum(axis=0) + least(macs) + least(leak) * cycles
        out[1][priced] = cycles
        return out


class PartialOrderFreeCut(OrderFreeCut):
    """The same where the children are not leaves: a child's energy bound (`lower_bounds`)
    is at least its decided traffic's, tensor by tensor, plus what no loop order of the
    node's level changes (the MACs, the innermost level's bound under the child's splits,
    the links between; `bounds.node.order_free_parts`), so each tensor's least over
    `tensor_best_orders` bounds it; its cycles bound is at least every level's time with the
    decided bytes that each tensor's least over those orders moves through it, none exposed
    (as the leaves' cut bounds them), and its parent's. On h100 ResNet-50 conv1, pricing the
    children of the depth-1 nodes with every order of the L2's loops was most of the walk,
    and most of them were then pruned; on h100's GEMMs the L2's time with the fewest bytes
    each tensor sends to the SMs rules out most factor choices of the L2 (docs/RESULTS.md).

    A level's stage count changes no traffic (only what fits, and what is exposed, which the
    bound takes as nothing), so each keep option is priced at its fewest stages that fit:
    with more, the same choice fits no better (`tree.feasible` grows with the stages).
    """

    def __init__(self, view: WalkView, nodes: Nodes, known_cycles: np.ndarray):
        super().__init__(view, nodes, known_cycles)
        self._leak = leak_per_cycle(view.space.arch)
        choice = view.space.choices[nodes.depth + 1]
        self._fewest_first = np.argsort(choice.stages, kind="stable")     # stage options, fewest first
        self._keep_options = len(choice.keeps)

    @staticmethod
    def applies(view: WalkView, nodes: Nodes) -> bool:
        """Whether the nodes' children are partial nodes and the objective has a cost bound."""
        return nodes.depth + 1 < view.tree.leaf_depth and view.objective.kind != "bytes"

    def _priced_options(self, allowed: np.ndarray) -> np.ndarray:
        """Per keep option allowed, its fewest stages allowed only ((N, stages x keeps), laid out
        as `LevelTree.fitting_choices` lays them out)."""
        n = len(allowed)
        by_stage = allowed.reshape(n, -1, self._keep_options)[:, self._fewest_first]     # (N, S, K)
        first = by_stage & (np.cumsum(by_stage, axis=1) == 1)
        priced = np.zeros_like(by_stage)
        priced[:, self._fewest_first] = first
        return priced.reshape(n, -1)

    def bounds(self, choices: Nodes, allowed: np.ndarray, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        view, space, tree = self.view, self.view.space, self.view.tree
        rows, choice_of = tree.expand(choices, self.nodes.depth, allowed=allowed, order_rows=self._order_rows)
        table = tree.table(rows)
        kept = np.flatnonzero(feasible(space, self.nodes.depth + 1, table))
        out = np.full(len(parents), np.inf), np.full(len(parents), np.inf)
        if not len(kept):
            return out
        table = table.take(kept)
        costs = view.context.price(space.arch, space.workload, table)
        view.incumbent.evaluated += len(kept)
        by_tensor, rest, moved = order_free_parts(space, self.nodes.depth + 1, table, costs, view.links)
        choice_of = choice_of[kept]
        first = np.flatnonzero(np.r_[True, choice_of[1:] != choice_of[:-1]])
        priced = choice_of[first]
        least = [np.minimum.reduceat(values, first, axis=-1) for values in (by_tensor, rest)]
        read, write = np.minimum.reduceat(moved, first, axis=-1).sum(axis=1)       # (L, M) each
        arch = space.arch
        cycles = self.known_cycles[parents[priced]]
        for lv, level in enumerate(arch.levels):
            cycles = np.maximum(cycles, level_time(level, arch.cycle_rule, 0.0, read[lv], write[lv], 0.0, 0.0))
        out[0][priced] = least[0].sum(axis=0) + least[1] + self._leak * cycles
        out[1][priced] = cycles
        return out
