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
"""
from __future__ import annotations

import math
import numpy as np

from ... import tiles
from ...mapspace import Mapspace, tables
from .energy import (cheapest_read_above, drawn, fill_energy, read_back_energy, read_energy, serve_energy,
                     sharing_fanout)
from .cells import Candidates, CellTerms, innermost_cells, smallest_total
from .operand import SplitVectors, shared_dims
from . import window
from .refetch import orders_by_way


MAX_TILES = 200_000        # tile vectors of the innermost level (else no bound from here)
MAX_CANDIDATES = 2_000_000  # (order, keep set, cell) triples kept sorted per set of parents

class _GaveUp(Exception):
    """The search's deadline passed while a bound was computed (`InnermostBound._check`): the
    call that needed it has no innermost bound (a valid, weaker one)."""


class InnermostBound:
    def __init__(self, space: Mapspace, splits: SplitVectors, give_up=None, whole: "InnermostBound | None" = None):
        """`whole`: the bound of the whole space, whose keep-free parts `for_space` shares."""
        self.space, self.give_up = space, give_up      # `give_up`: as `LinkBounds`'s
        # per part: per (depth, deepest keepers), and the exact refined minima
        self.cache: dict[tuple, float] = {}
        self.terms: dict[tuple, CellTerms] = {}
        self.least: dict[tuple, float] = {}
        self.candidates: dict[tuple, Candidates] = {}
        if whole is not None:
            self._share(whole)
            return
        workload = space.workload
        self.level = space.n_levels - 1
        # what does not depend on keeps, shared with the parts' bounds (`for_space`)
        self.keep_free: dict = {}
        values = [np.unique(tables.level_view(space, rows)[2][:, self.level]) for rows in space.dim_tables]
        self.enabled = self.level >= 1 and math.prod(len(v) for v in values) <= MAX_TILES
        if not self.enabled:
            return
        cells = innermost_cells(space, splits, values)
        self.tile, self.cell_vectors, self.cell_split, self.instances, self.trips = cells
        # the fanouts above the level no vector splits (a network that shares nothing is
        # not enumerated, `SplitVectors`): a word may have a copy under each of their units
        self.unsplit = [space.arch.fanout_units(x) if splits.per_level[x] is None else 1
                        for x in range(self.level)]
        # and the sharing fanouts, when the vectors are too many to enumerate: at their whole
        self.unenumerated = [space.arch.fanout_units(x) if cells.vectors is None and splits.per_level[x] is not None
                             else 1 for x in range(self.level)]
        self.words = [tiles.words(tensor, self.tile) for tensor in workload.tensors]
        # per way the merged loops above may refetch them, per tensor the dims out to its
        # innermost relevant one, and the orders that make each (a window counts by them)
        by_way = orders_by_way(workload, {t for t, tensor in enumerate(workload.tensors)
                                          if not tensor.has_sliding_axis})
        self.orders, self.way_orders = list(by_way), list(by_way.values())

    def _share(self, whole: "InnermostBound") -> None:
        """What `whole` holds that does not depend on keeps (`__init__` builds it)."""
        self.level, self.keep_free, self.enabled = whole.level, whole.keep_free, whole.enabled
        if self.enabled:
            self.tile, self.cell_vectors, self.cell_split, self.instances, self.trips, self.words = (
                whole.tile, whole.cell_vectors, whole.cell_split, whole.instances, whole.trips, whole.words)
            self.unsplit, self.unenumerated, self.orders, self.way_orders = (
                whole.unsplit, whole.unenumerated, whole.orders, whole.way_orders)

    def for_space(self, part: Mapspace) -> "InnermostBound":
        """The bound of a part of the space (`Mapspace.part`): its minima, which depend on keeps, anew."""
        return InnermostBound(part, None, self.give_up, whole=self)

    def bound(self, depth: int, deepest: list[np.ndarray]) -> np.ndarray | None:
        """Per node, the bound on what is still open at and below the deepest decided keepers,
        given per tensor the deepest decided keeper of each node (`deepest[t]`, (N,)), each
        word coming down once; None when the innermost level's keeps are already decided or
        the bound is disabled."""
        if not self.enabled or depth >= self.level:
            return None
        return self._per_node(depth, np.stack(deepest), lambda key, rows: self._least(depth, key))

    def refined(self, depth: int, deepest: list[np.ndarray], repeats: list[np.ndarray],
                caps: np.ndarray) -> np.ndarray:
        """The same, each word of tensor t coming down past the node at least `repeats[t]`
        times ((N,), `refetch.refetches`: its decided loops over dims it does not index):
        filled that often into the innermost level if it keeps t, and read that often from
        one of its parents. Exact where it exceeds the node's `caps` (what would prune it);
        elsewhere a valid bound at or below the cap, found as soon as one candidate is below
        it (nodes alike in all but their caps are computed together, to the largest cap)."""
        columns = np.vstack([np.stack(deepest), np.rint(np.stack(repeats)).astype(np.int64)])
        t = len(deepest)
        return self._per_node(depth, columns, lambda key, rows: self._bounded(
            depth, key[:t], key[t:], float(caps[rows].max())))

    def _per_node(self, depth: int, columns: np.ndarray, value) -> np.ndarray:
        """`value(key, rows)` for each distinct column of `columns` (integers, (K, N)), given
        the nodes that share it, spread back over the nodes; 0 (a valid bound, the weakest) for
        every node once the search's deadline passes (`_GaveUp`)."""
        n = columns.shape[1]
        order = np.lexsort(columns[::-1])
        ordered = columns[:, order]
        starts = np.flatnonzero(np.r_[True, (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)])
        ends = np.r_[starts[1:], n]
        try:
            values = [value(tuple(int(x) for x in ordered[:, a]), order[a:b]) for a, b in zip(starts, ends)]
        except _GaveUp:
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
            except _GaveUp:
                return np.zeros(self.tile.shape[1])
            out = np.full(self.tile.shape[1], np.inf)
            for _, _, fits, total in self._base_totals(terms):
                np.minimum.at(out, fits, total)
            self.least[key] = out
        return self.least[key]

    def _least(self, depth: int, deepest: tuple[int, ...]) -> float:
        """The smallest total with each word coming down once."""
        key = (depth, deepest)
        if key not in self.least:
            self.least[key] = smallest_total(self._base_totals(self._terms(depth, deepest)))
        return self.least[key]

    def node_split(self, depth: int, table) -> np.ndarray | None:
        """(D, N) the nodes' splits over the decided fanouts above whose splits the cells
        leave out (they share no transfer, `unsplit`), per dim; None where the nodes have
        decided none, or the bound does not take them (`with_split`)."""
        fanouts = [x for x in range(min(depth, self.level)) if self.unsplit[x] > 1]
        if not self.enabled or depth >= self.level or not fanouts or not self.perfect():
            return None
        return np.prod([table.factors[x, 1:].prod(axis=0) for x in fanouts], axis=0)

    def takes_split_at(self, level: int) -> bool:
        """Whether `with_split` takes a split of the fanout at `level` (one whose splits the
        cells leave out, above the innermost level, in a space of exact factors)."""
        return self.enabled and level < self.level and self.unsplit[level] > 1 and self.perfect()

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

    def perfect(self) -> bool:
        """Whether every factor row of every dim multiplies to the dim's size (no padded
        extents, no masked tails): only then does a completion's tile times its splits
        divide each dim, which `with_split` counts on."""
        key = ("perfect",)
        if key not in self.keep_free:
            space = self.space
            self.keep_free[key] = all((rows.prod(axis=1) == size).all()
                                      for rows, size in zip(space.dim_tables, space.workload.sizes))
        return self.keep_free[key]

    def _least_split(self, depth: int, deepest: tuple[int, ...], split: tuple[int, ...]) -> float:
        """The smallest total with each word coming down once, under the node split `split`
        (per dim) beside each cell's own."""
        key = ("split", depth, deepest, split)
        if key not in self.least:
            sizes = np.array(self.space.workload.sizes, float)
            spans = self.tile * self.cell_split.T * np.array(split, float)[:, None]
            cells = np.flatnonzero((np.mod(sizes[:, None], spans) == 0).all(axis=0))
            trips = sizes[:, None] / spans[:, cells]
            instances = self.instances[cells] * math.prod(split)
            workload = self.space.workload
            fills = [self._filled(t, instances, self.words[t][cells], trips, self.tile[:, cells])
                     for t in range(len(workload.tensors))]
            # the output's copies under the split take their first updates off its read-backs
            terms = self._terms(depth, deepest)
            kept_mac, bypass = list(terms.kept_mac), list(terms.bypass)
            for t, tensor in enumerate(workload.tensors):
                if tensor.is_output:
                    extra = float(np.prod(np.array(split, float)[~workload.relevance[t]]))
                    kept_mac[t] = self._kept_mac(t, extra)
                    bypass[t] = self._bypassed_energy(t, terms.parents[t], extra)
            terms = terms._replace(kept_mac=kept_mac, bypass=bypass)
            self.least[key] = smallest_total(self._base_totals(terms, cells, fills))
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

    def _per_word(self, t: int, parents: list[int], stop: int) -> np.ndarray:
        """(cells,) the cheapest energy per word a parent spends serving tensor t to what lies
        below level `stop`-1's fanout, one transfer shared by the split's multicast (memoised:
        it does not depend on keeps, and the parts of a space ask for the same ones)."""
        key = ("per word", t, tuple(parents), stop)
        if key not in self.keep_free:
            level, tensor = self.space.arch.levels, self.space.workload.tensors[t]
            self.keep_free[key] = np.min([serve_energy(level[p], tensor) / self._spread(t, p, stop)
                                         for p in parents], axis=0)
        return self.keep_free[key]

    def _check(self) -> None:
        """Raise `_GaveUp` once the search's deadline has passed (`give_up`): the terms not yet
        computed are the bound's slow part (seconds on a dim of 62 million)."""
        if self.give_up is not None and self.give_up():
            raise _GaveUp()

    def _spread(self, t: int, p: int, stop: int) -> np.ndarray:
        """(cells,) the widest multicast (or, for the output, reduction) of tensor t between
        level p and what lies below level `stop`-1's fanout, under each cell's split."""
        key = ("spread", t, p, stop)
        if key not in self.keep_free:
            self._check()
            arch, workload = self.space.arch, self.space.workload
            tensor, shared = workload.tensors[t], shared_dims(workload, t)
            spread = np.ones(self.tile.shape[1])
            windows = []            # enumerated fanouts over which a window's copies coincide
            for x in range(p, stop):
                if not arch.levels[x].shares(tensor) or not shared.any():
                    continue
                if self.cell_vectors is None or x >= self.level:
                    # not enumerated: the whole fanout may multicast (a block cluster's CTAs)
                    spread = spread * arch.sharing_units(x, tensor)
                elif tensor.has_sliding_axis:
                    windows.append(x)
                else:
                    spread = spread * np.minimum(self.cell_vectors[:, x][:, shared].prod(axis=1),
                                                 arch.sharing_units(x, tensor))
            if windows:
                spread = spread * window.multicast(arch, tensor, self.cell_vectors, self.tile, self.level, windows)
            self.keep_free[key] = spread
        return self.keep_free[key]

    def _bypassed(self, t: int, parents: list[int]) -> np.ndarray:
        """(cells,) the least a parent spends on tensor t when the innermost level does not
        keep it: one read per MAC (or, for the output, one update), shared by the split's
        multicast or reduction; an output's parent also reads back every update but the first
        of each word in each copy (read-modify-write), as where the level keeps it."""
        key = ("bypassed", t, tuple(parents))
        if key not in self.keep_free:
            self.keep_free[key] = self._bypassed_energy(t, parents)
        return self.keep_free[key]

    def _bypassed_energy(self, t: int, parents: list[int], extra: float = 1.0) -> np.ndarray:
        macs = drawn(self.space, t)
        if not self.space.workload.tensors[t].is_output:
            return macs * self._per_word(t, parents, self.space.n_levels)
        level, workload = self.space.arch.levels, self.space.workload
        tensor = workload.tensors[t]
        costs = []
        for p in parents:
            updates = macs / self._spread(t, p, self.space.n_levels)
            first = workload.tensor_words(t) * self._copies(t, p) * extra
            costs.append(updates * serve_energy(level[p], tensor)
                         + read_back_energy(updates, first, math.prod(self.unsplit[:p]), read_energy(level[p], tensor),
                                            cheapest_read_above(self.space.arch, tensor, p)))
        return np.min(costs, axis=0)

    def _copies(self, t: int, p: int) -> np.ndarray:
        """(cells,) at most how many instances of level p hold a copy of a word of tensor t:
        the splits above p over dims t does not index, as far as they are enumerated (the
        rest, `unsplit`, is left to `read_back_energy`)."""
        irrelevant = ~self.space.workload.relevance[t]
        copies = np.full(self.tile.shape[1], float(math.prod(self.unenumerated[:p])))
        if self.cell_vectors is not None:
            for x in range(p):
                copies = copies * self.cell_vectors[:, x][:, irrelevant].prod(axis=1)
        return copies

    def _bounded(self, depth: int, deepest: tuple[int, ...], repeats: tuple[int, ...], cap: float) -> float:
        """The minimum over the candidates (order, keep set, cell) of their total with each word
        of tensor t coming down `repeats[t]` times, or a bound on it at or below `cap`. Every
        candidate costs at least its total with each word once (`Candidates.base`, sorted)
        and at least what its parents serve: the candidates are priced in that order until
        the next one's base is above the best total so far (exact), or one's total is at or
        below the cap (the bound then is the least of that total and the next base)."""
        key = (depth, deepest, repeats)
        if key in self.cache:
            return self.cache[key]
        workload, levels = self.space.workload, self.space.arch.levels
        terms = self._terms(depth, deepest)
        least = [workload.touched_words(t) * repeats[t] for t in range(len(workload.tensors))]
        served = [least[t] * min(serve_energy(levels[p], tensor) for p in terms.parents[t])
                  for t, tensor in enumerate(workload.tensors)]
        bound = sum(served)
        if bound > cap:
            return bound
        if (depth, deepest) not in self.candidates:
            self.candidates[depth, deepest] = self._candidates(depth, deepest)
        c = self.candidates[depth, deepest]
        best, start, step = np.inf, 0, 1_024
        while start < len(c.base) and c.base[start] < best:
            if best <= cap:             # the node is not pruned here: no need to be exact
                return max(bound, min(best, float(c.base[start])))
            rows = slice(start, start + step)
            cell, order, keep = c.cell[rows], c.order[rows], c.keep[rows]
            total = np.zeros(len(cell))
            for t in range(len(workload.tensors)):
                fills = terms.fills[t][order, cell]
                written = np.maximum(np.maximum(fills, least[t]) - terms.first[t][cell], 0.0)
                kept = (written * terms.write[t]
                        + np.maximum(fills * terms.fill_word[t][cell], served[t]) + terms.kept_mac[t][cell])
                total += np.where(terms.kept[keep, t], kept, np.maximum(terms.bypass[t][cell], served[t]))
            best = min(best, float(total.min()))
            start, step = start + step, step * 2
        best = min(best, c.beyond)      # the candidates not kept cost at least that
        self.cache[key] = max(bound, best) if np.isfinite(best) else bound
        return self.cache[key]

    def _terms(self, depth: int, deepest: tuple[int, ...]) -> "CellTerms":
        """What each tensor costs on each cell, for one combination of deepest keepers."""
        key = (depth, deepest)
        if key in self.terms:
            return self.terms[key]
        space, workload = self.space, self.space.workload
        j, level = self.level, self.space.arch.levels[self.level]
        n_tensors = len(workload.tensors)
        parents = [self._parents(t, depth, deepest[t]) for t in range(n_tensors)]
        if "kept" not in self.keep_free:
            self.keep_free["kept"] = [self._kept_mac(t) for t in range(n_tensors)]
        kept_mac = self.keep_free["kept"]
        self.terms[key] = CellTerms(
            parents, np.array([[t in keep for t in range(n_tensors)] for keep in space.choices[j].keeps]),
            [self._fills(t) for t in range(n_tensors)],
            [self._per_word(t, parents[t], j) for t in range(n_tensors)], kept_mac,
            [self._bypassed(t, parents[t]) for t in range(n_tensors)],
            [fill_energy(level, tensor) for tensor in workload.tensors],
            [self._first(t) for t in range(n_tensors)])
        return self.terms[key]

    def _first(self, t: int) -> np.ndarray:
        """(cells,) how many of the level's fills of tensor t write nothing in: none for an
        input; for the output, each instance's first touch of each word (its partial sum
        starts there), the rest being read-backs written into the level. Counted exactly
        (every instance's tile times its trips over the output's dims) only where every
        fanout above is enumerated and every factor divides its dim; elsewhere all of them."""
        key = ("first", t)
        if key not in self.keep_free:
            workload, cells = self.space.workload, self.tile.shape[1]
            if not workload.tensors[t].is_output:
                self.keep_free[key] = np.zeros(cells)
            elif self.cell_vectors is None or math.prod(self.unsplit) > 1 or not self.perfect():
                self.keep_free[key] = np.full(cells, np.inf)
            else:
                relevant = np.flatnonzero(workload.relevance[t])
                self.keep_free[key] = self.instances * self.words[t] * self.trips[relevant].prod(axis=0)
        return self.keep_free[key]

    def _kept_mac(self, t: int, extra: float = 1.0) -> np.ndarray:
        """(cells,) what the level serves the units per MAC if it keeps tensor t, and for the
        output its read-modify-write: every update but the first of each word in each copy
        reads. A copy is an instance holding the word beside others that differ in dims it
        does not index, each over a slice of them at least this cell's tile wide: at most
        prod(size / tile) over those dims; `extra` more copies where a node's split over a
        fanout the cells leave out is known (`with_split`: each takes its first updates off
        the read-backs)."""
        space, workload = self.space, self.space.workload
        arch, j, tensor = space.arch, self.level, workload.tensors[t]
        level, macs = arch.levels[j], drawn(space, t)
        below = sharing_fanout(arch, tensor, j, space.n_levels)
        served = np.full(self.tile.shape[1], macs / below * serve_energy(level, tensor))
        if not tensor.is_output:
            return served
        irrelevant = ~workload.relevance[t]
        most = np.prod(np.array(workload.sizes, float)[irrelevant, None] / self.tile[irrelevant], axis=0)
        copies = np.minimum(self.cell_split[:, irrelevant].prod(axis=1) * math.prod(self.unenumerated) * extra, most)
        return served + read_back_energy(macs / below, workload.tensor_words(t) * copies,
                                         np.clip(most / copies, 1.0, math.prod(self.unsplit)),
                                         read_energy(level, tensor), cheapest_read_above(arch, tensor, j))

    def _base_totals(self, c: "CellTerms", cells: np.ndarray | None = None, fills: list | None = None):
        """(keep set, order, cells that fit, their totals with each word coming down once), for
        every keep set and order; among `cells` only, with their `fills` (per tensor, (orders,
        len(cells))), where given."""
        workload, level = self.space.workload, self.space.arch.levels[self.level]
        choice = self.space.choices[self.level]
        cells = np.arange(self.tile.shape[1]) if cells is None else cells
        own = fills is not None             # indexed by position in `cells`, not by cell
        fills = fills if own else c.fills
        for k, keep in enumerate(choice.keeps):
            footprint = tiles.option_bytes(level, workload, [w[cells] for w in self.words], [keep], len(cells))[0]
            at = np.flatnonzero(tiles.fits_level(level, footprint * min(choice.stages)))
            fits = cells[at]
            for o in range(len(self.orders)):
                total = np.zeros(len(fits))
                for t in range(len(workload.tensors)):
                    if c.kept[k, t]:
                        filled = fills[t][o, at] if own else fills[t][o, fits]
                        # an output's read-backs (not under a node's own split: `first` misses its copies)
                        first = (np.inf if own else c.first[t][fits]) if workload.tensors[t].is_output else 0.0
                        written = np.maximum(filled - first, 0.0)
                        total += written * c.write[t] + filled * c.fill_word[t][fits] + c.kept_mac[t][fits]
                    else:
                        total += c.bypass[t][fits]
                yield k, o, fits, total

    def _candidates(self, depth: int, deepest: tuple[int, ...]) -> "Candidates":
        """Every (order, keep set, cell) whose tile fits, by its total where each word comes
        down once, ascending; the smallest MAX_CANDIDATES only, the rest bounded below by the
        first of them left out."""
        base, cells, orders, keeps = [], [], [], []
        for k, o, fits, total in self._base_totals(self._terms(depth, deepest)):
            base.append(total)
            cells.append(fits)
            orders.append(np.full(len(fits), o, np.int32))
            keeps.append(np.full(len(fits), k, np.int16))
        base = np.concatenate(base) if base else np.zeros(0)
        beyond = np.inf
        if len(base) > MAX_CANDIDATES:
            chosen = np.argpartition(base, MAX_CANDIDATES)[:MAX_CANDIDATES + 1]
            chosen = chosen[np.argsort(base[chosen], kind="stable")]
            beyond, chosen = float(base[chosen[-1]]), chosen[:-1]
        else:
            chosen = np.argsort(base, kind="stable")
        return Candidates(base[chosen], np.concatenate(cells)[chosen].astype(np.int32),
                           np.concatenate(orders)[chosen], np.concatenate(keeps)[chosen], beyond)

    def _fills(self, t: int) -> np.ndarray:
        """(orders, cells) the words filled into every instance of the innermost level over the
        whole computation if it keeps tensor t, per order of the merged loops above it."""
        key = ("fills", t)
        if key not in self.keep_free:
            self.keep_free[key] = self._filled(t, self.instances, self.words[t], self.trips)
        return self.keep_free[key]

    def _filled(self, t: int, instances: np.ndarray, words: np.ndarray, trips: np.ndarray,
                tile: np.ndarray | None = None) -> np.ndarray:
        """(orders, cells) the same for cells of `instances` instances holding tiles of `words`
        words of tensor t under merged loops of `trips` ((D, cells)): each instance's tile is
        filled once per step of the loops out to the tensor's innermost relevant one. A window
        (p+r) moving along its axis fetches only the new slice, which that whole-tile count does
        not see: each instance fills at least its tile, and in a space of exact factors every
        word it touches (`window.touched`), whatever the order, and where its tile spans one
        value along each sliding axis, a whole tile per step out to each order's window cutoff
        (`window.steps`). `tile` ((D, cells)): the cells' tiles, where not all of them."""
        self._check()
        once = instances * words
        stepped = np.stack([once * trips[list(way[t])].prod(axis=0) for way in self.orders])
        tensor = self.space.workload.tensors[t]
        if not tensor.has_sliding_axis:
            return stepped
        tile = self.tile if tile is None else tile
        if not self.perfect():         # whole values per dim, and loops wherever trips > 1
            return np.repeat(once[None], len(self.orders), axis=0)
        least = instances * np.maximum(words, window.touched(tensor, tile, trips))
        out = np.repeat(least[None], len(self.orders), axis=0)
        unit = np.flatnonzero((tile[window.sliding_dims(tensor)] == 1).all(axis=0))
        if len(unit):
            out[:, unit] = np.maximum(out[:, unit], once[unit] * window.steps_once(
                tensor, trips[:, unit], self.way_orders, self.keep_free.setdefault(("window steps", t), {}),
                self.keep_free.setdefault(("window cutoffs", t), {}), self.give_up))
        return out
