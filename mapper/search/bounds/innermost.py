"""A lower bound on the traffic through the innermost storage level while its keeps are open.

With keep/bypass searched, no level *must* keep a tensor, so `link.LinkBounds` (the cheapest
traffic into a level over the tiles that fit it, for what it must keep) has nothing to bound,
and the per-MAC bound (`operand_bound`) alone lets a node look as if a tiny register file could
reuse everything. Here the innermost level's choice is enumerated instead of assumed: for each
keep set it may take, each tile that fits it with that keep set, each split of the fanouts
above it and each order of one merged loop per dim above it,
- a tensor it keeps is filled (every copy: instances that differ only in dims the tensor does
  not index hold the same words), each fill read from the tensor's parent and shared by the
  widest multicast the split allows, then read (or updated, for the output) once per MAC;
- a tensor it does not keep is read from (or updated at) the parent once per MAC, shared by the
  split's multicast (or reduction) below the parent; an output's parent also reads back every
  update but the first of each word in each of its copies (read-modify-write).
The parent is the cheapest level that can serve it at that node: the deepest decided keeper or
an undecided level between it and the innermost one that may keep the tensor (whose own fills
are left out, so the bound stays below every completion). The minimum over all these choices
does not depend on the node except through the parent of each tensor, so it is computed once
per combination of parents.

Merging the loops above the level into one per dim in the best order never adds traffic, and
every relaxation here (the node's own tile and loop order ignored, padding ignored, block
rounding ignored) only lowers the minimum: it is a valid bound, taken as the larger of it and
the general bound in `node.lower_bound`.

Refined (`refined`): the node's own loops over dims a tensor does not index bring each of its
words down past the node again and again (`refetch.refetches`), which the merged loops do not
see. Each candidate (order, keep set, cell) then fills a tensor it keeps, and reads from its
parent, at least that many words. That makes the minimum depend on the node, so it is computed
only for the nodes the incumbent does not beat yet, and only as far as the incumbent asks: the
candidates, sorted by their total without it (a bound on each one's with it), are priced in
that order until the rest cannot be lower, or one is found below what would prune the node.

Copies the node has made (`_copied`): where a node has split a fanout the cells leave out (one
that shares nothing) along a dim the output does not index, above the output's deepest decided
keeper, each copy's partial sums reach that keeper's parent apart, and the node has priced the
parent's read-backs among its decided traffic. The innermost level's read-backs, or those of the
parent that serves the units, are then bounded as if the copies were as many as the fanouts
allow, at no cost above (`CellPrices.kept_mac`'s `copies_paid`): not traded against read-backs
above them that the node has already counted.

The cells and what they cost that no keep changes (`cells.InnermostCells`,
`cell_prices.CellPrices`) are shared by the parts of a space; the choices are priced in
`candidates.py`; here the bound of one space (or part) combines them per set of parents.
"""
from __future__ import annotations

import math

import numpy as np

from ...mapping import MappingTable
from ...mapspace import Mapspace
from .candidates import Candidates, base_totals, least_with_repeats, smallest_total, sorted_candidates
from .cell_prices import CellPrices, DeadlinePassed
from .cells import CellTerms, InnermostCells, innermost_level_cells
from .energy import fill_energy, serve_energy
from .operand import SplitVectors


class InnermostBound:
    def __init__(self, space: Mapspace, prices: CellPrices | None):
        """The bound of `space` (or a part of it) from the keep-free `prices` (None: disabled)."""
        self.space, self.prices = space, prices
        self.level = space.n_levels - 1
        self.cells: InnermostCells | None = None if prices is None else prices.cells
        self.enabled = prices is not None
        # per (depth, deepest keepers, copied): the terms, the least totals, the candidates
        # sorted; per (depth, deepest keepers, copied, repeats) the refined minima found exact
        self.terms: dict[tuple, CellTerms] = {}
        self.least: dict[tuple, float] = {}
        self.candidates: dict[tuple, Candidates] = {}
        self.cache: dict[tuple, float] = {}

    @classmethod
    def of_space(cls, space: Mapspace, splits: SplitVectors, give_up=None) -> "InnermostBound":
        """The bound of the whole space; `give_up`: as `LinkBounds`'s."""
        cells = innermost_level_cells(space, splits)
        return cls(space, None if cells is None else CellPrices(space.arch, space.workload, cells, give_up))

    def for_space(self, part: Mapspace) -> "InnermostBound":
        """The bound of a part of the space (`Mapspace.part`): its minima, which depend on keeps, anew."""
        return InnermostBound(part, self.prices)

    def bound(self, depth: int, table: MappingTable, deepest: list[np.ndarray]) -> np.ndarray | None:
        """Per node (of `table`, the nodes' completions), the bound on what is still open at
        and below the deepest decided keepers, given per tensor the deepest decided keeper of
        each node (`deepest[t]`, (N,)), each word coming down once; None when the innermost
        level's keeps are already decided or the bound is disabled."""
        if not self.enabled or depth >= self.level:
            return None
        t = len(deepest)
        return self._per_node(depth, np.vstack([np.stack(deepest), self._copied(depth, table, deepest)]),
                              lambda key, rows: self._least(depth, key[:t], key[t]))

    def _copied(self, depth: int, table: MappingTable, deepest: list[np.ndarray]) -> np.ndarray:
        """(N,) whether a node's own splits over fanouts the cells leave out (`unsplit`) copy
        the output at its deepest decided keeper: split along a dim the output does not index,
        above that keeper. Each copy's partial sums then reach the keeper's parent apart, read
        back there by traffic the node has decided and priced, which the read-backs below
        must not be traded against again (`CellPrices.kept_mac`'s `copies_paid`)."""
        workload, copied = self.space.workload, np.zeros(len(table), bool)
        if not self.enabled:
            return copied
        for t, tensor in enumerate(workload.tensors):
            if not tensor.is_output:
                continue
            irrelevant = ~workload.relevance[t]
            for x in range(min(depth, self.level)):
                if self.cells.unsplit[x] > 1:
                    split = table.factors[x, 1:][:, irrelevant].prod(axis=(0, 1))
                    copied |= (split > 1) & (x < deepest[t])
        return copied

    def refined(self, depth: int, table: MappingTable, deepest: list[np.ndarray], repeats: list[np.ndarray],
                caps: np.ndarray) -> np.ndarray:
        """The same, each word of tensor t coming down past the node at least `repeats[t]`
        times ((N,), `refetch.refetches`: its decided loops over dims it does not index):
        filled that often into the innermost level if it keeps t, and read that often from
        one of its parents. Exact where it exceeds the node's `caps` (what would prune it);
        elsewhere a valid bound at or below the cap, found as soon as one candidate is below
        it (nodes alike in all but their caps are computed together, to the largest cap)."""
        copied = self._copied(depth, table, deepest)
        columns = np.vstack([np.stack(deepest), copied, np.rint(np.stack(repeats)).astype(np.int64)])
        t = len(deepest)
        return self._per_node(depth, columns, lambda key, rows: self._bounded(
            depth, key[:t], key[t], key[t + 1:], float(caps[rows].max())))

    def _per_node(self, depth: int, columns: np.ndarray, value) -> np.ndarray:
        """`value(key, rows)` for each distinct column of `columns` (integers, (K, N)), given
        the nodes that share it, spread back over the nodes; 0 (a valid bound, the weakest) for
        every node once the search's deadline passes (`DeadlinePassed`)."""
        n = columns.shape[1]
        order = np.lexsort(columns[::-1])
        ordered = columns[:, order]
        starts = np.flatnonzero(np.r_[True, (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)])
        ends = np.r_[starts[1:], n]
        try:
            values = [value(tuple(int(x) for x in ordered[:, a]), order[a:b]) for a, b in zip(starts, ends)]
        except DeadlinePassed:
            return np.zeros(n)
        out = np.empty(n)
        out[order] = np.repeat(values, ends - starts)
        return out

    def cell_least(self, depth: int, deepest: tuple[int, ...]) -> np.ndarray:
        """(cells,) each cell's smallest total with each word coming down once (inf: no keep fits)."""
        key = ("cells", depth, deepest)
        if key not in self.least:
            try:
                terms = self._terms(depth, deepest)
            except DeadlinePassed:
                return np.zeros(self.cells.n_cells)
            out = np.full(self.cells.n_cells, np.inf)
            for _, _, fits, total in self._base_totals(terms):
                np.minimum.at(out, fits, total)
            self.least[key] = out
        return self.least[key]

    def _least(self, depth: int, deepest: tuple[int, ...], copied: int) -> float:
        """The smallest total with each word coming down once."""
        key = (depth, deepest, copied)
        if key not in self.least:
            self.least[key] = smallest_total(self._base_totals(self._terms(depth, deepest, copied)))
        return self.least[key]

    def node_split(self, depth: int, table) -> np.ndarray | None:
        """(D, N) the nodes' splits over the decided fanouts above whose splits the cells
        leave out (they share no transfer, `InnermostCells.unsplit`), per dim; None where the
        nodes have decided none, or the bound does not take them (`with_split`)."""
        if not self.enabled or depth >= self.level or not self.cells.perfect:
            return None
        fanouts = [x for x in range(depth) if self.cells.unsplit[x] > 1]
        if not fanouts:
            return None
        return np.prod([table.factors[x, 1:].prod(axis=0) for x in fanouts], axis=0)

    def takes_split_at(self, level: int) -> bool:
        """Whether `with_split` takes a split of the fanout at `level` (one whose splits the
        cells leave out, above the innermost level, in a space of exact factors)."""
        return self.enabled and level < self.level and self.cells.unsplit[level] > 1 and self.cells.perfect

    def with_split(self, depth: int, deepest: list[np.ndarray], split: np.ndarray) -> np.ndarray:
        """Per node, the same bound (each word once) with the node's own splits `split` ((D, N)
        per dim, `node_split`) over the fanouts above whose splits the cells leave out (they
        share no transfer): every instance under them fills its own copy of what it keeps,
        which the cells, counting one instance per such fanout, do not see (h100 ResNet-50
        conv1: one SM's fills for 132). Only in a space where every factor divides its dim,
        so that a completion's innermost tile, cell split and node split divide each dim."""
        t = len(deepest)
        columns = np.vstack([np.stack(deepest), split])
        return self._per_node(depth, columns, lambda key, rows: self._least_split(depth, key[:t], key[t:]))

    def _least_split(self, depth: int, deepest: tuple[int, ...], split: tuple[int, ...]) -> float:
        """The smallest total with each word coming down once, under the node split `split`
        (per dim) beside each cell's own."""
        key = ("split", depth, deepest, split)
        if key not in self.least:
            prices, cells, workload = self.prices, self.cells, self.space.workload
            sizes = np.array(workload.sizes, float)
            spans = cells.tile * cells.split.T * np.array(split, float)[:, None]
            among = np.flatnonzero((np.mod(sizes[:, None], spans) == 0).all(axis=0))
            trips = sizes[:, None] / spans[:, among]
            instances = cells.instances[among] * math.prod(split)
            fills = [prices.filled(t, instances, cells.words[t][among], trips, cells.tile[:, among])
                     for t in range(len(workload.tensors))]
            # the output's copies under the split take their first updates off its read-backs
            terms = self._terms(depth, deepest)
            kept_mac, bypass = list(terms.kept_mac), list(terms.bypass)
            for t, tensor in enumerate(workload.tensors):
                if tensor.is_output:
                    extra = float(np.prod(np.array(split, float)[~workload.relevance[t]]))
                    kept_mac[t] = prices.kept_mac(t, extra)
                    bypass[t] = prices.bypassed(t, terms.parents[t], extra)
            terms = terms._replace(kept_mac=kept_mac, bypass=bypass)
            self.least[key] = smallest_total(self._base_totals(terms, among, fills))
        return self.least[key]

    def _parents(self, t: int, depth: int, deepest: int) -> list[int]:
        """Levels that may serve tensor t to the innermost level: the deepest decided keeper and
        the undecided levels between that may keep it; where an undecided level must keep it,
        only the deepest such and those below it (the innermost level's words pass through
        it), so that the traffic into the levels between is disjoint from what is charged
        here and `node.lower_bounds` adds their link bounds to this one."""
        choices = self.space.choices
        may = [lv for lv in range(depth + 1, self.level) if any(t in keep for keep in choices[lv].keeps)]
        must = [lv for lv in may if all(t in keep for keep in choices[lv].keeps)]
        return [lv for lv in may if lv >= must[-1]] if must else [deepest] + may

    def _bounded(self, depth: int, deepest: tuple[int, ...], copied: int, repeats: tuple[int, ...],
                 cap: float) -> float:
        """The minimum over the candidates (order, keep set, cell) of their total with each word
        of tensor t coming down `repeats[t]` times, or a bound on it at or below `cap`
        (`candidates.least_with_repeats`); at least what the parents serve of those words."""
        key = (depth, deepest, copied, repeats)
        if key in self.cache:
            return self.cache[key]
        workload, levels = self.space.workload, self.space.arch.levels
        terms = self._terms(depth, deepest, copied)
        least = [workload.touched_words(t) * repeats[t] for t in range(len(workload.tensors))]
        served = [least[t] * min(serve_energy(levels[p], tensor) for p in terms.parents[t])
                  for t, tensor in enumerate(workload.tensors)]
        bound = sum(served)
        if bound > cap:
            return bound
        if (depth, deepest, copied) not in self.candidates:
            self.candidates[depth, deepest, copied] = sorted_candidates(self._base_totals(terms))
        best, exact = least_with_repeats(self.candidates[depth, deepest, copied], terms, least, served, cap)
        if not exact:
            return max(bound, best)
        self.cache[key] = max(bound, best) if np.isfinite(best) else bound
        return self.cache[key]

    def _terms(self, depth: int, deepest: tuple[int, ...], copied: int = 0) -> CellTerms:
        """What each tensor costs on each cell, for one combination of deepest keepers, and
        whether the output's deepest keeper holds copies made by the node (`copied`)."""
        key = (depth, deepest, copied)
        if key in self.terms:
            return self.terms[key]
        prices, workload, j = self.prices, self.space.workload, self.level
        level, n_tensors = self.space.arch.levels[j], len(workload.tensors)
        parents = [self._parents(t, depth, deepest[t]) for t in range(n_tensors)]
        kept_mac = prices.kept_macs(bool(copied))
        self.terms[key] = CellTerms(
            parents, np.array([[t in keep for t in range(n_tensors)] for keep in self.space.choices[j].keeps]),
            [prices.fills(t) for t in range(n_tensors)],
            [prices.per_word(t, parents[t], j) for t in range(n_tensors)], kept_mac,
            [prices.bypassed(t, parents[t], copies_paid=bool(copied)) for t in range(n_tensors)],
            [fill_energy(level, tensor) for tensor in workload.tensors],
            [prices.first(t) for t in range(n_tensors)])
        return self.terms[key]

    def _base_totals(self, terms: CellTerms, among: np.ndarray | None = None, fills: list | None = None):
        """`candidates.base_totals` over this space's choices of the innermost level."""
        choice = self.space.choices[self.level]
        return base_totals(self.space.arch, self.space.workload, choice.keeps, choice.stages, self.cells,
                           terms, among, fills, self.prices.memo)
