"""What each tensor costs on each cell of the innermost level (`cells.InnermostCells`) that no
keep changes, for the innermost bound (`innermost.py`) to combine per keep set and parents:
- the words filled into every instance of the level if it keeps a tensor, per order of the
  merged loops above it, a window's included (`fills`, `filled`);
- what a parent spends per word it serves, one transfer shared by the widest multicast (or
  reduction) the cell's split allows (`per_word`, `spread`);
- what a parent spends on a tensor the level does not keep (`bypassed`), and what the level
  serves the units of one it keeps (`kept_mac`), the output's read-backs included;
- of the output's fills, those that bring no word in (`first`).
Each is memoised (`memo`) and shared by the parts of a space, which differ only in keeps.
"""
from __future__ import annotations

import math

import numpy as np

from ...spec import Arch, Workload
from . import window
from .cells import InnermostCells
from .energy import cheapest_read_above, drawn, read_back_energy, read_energy, serve_energy, sharing_fanout
from .operand import shared_dims


class DeadlinePassed(Exception):
    """The search's deadline passed while a price was computed (`CellPrices.check`): the call
    that needed it has no innermost bound (a valid, weaker one)."""


class CellPrices:
    def __init__(self, arch: Arch, workload: Workload, cells: InnermostCells, give_up=None):
        """`give_up`: as `LinkBounds`'s, True once the search's deadline has passed."""
        self.arch, self.workload, self.cells, self.give_up = arch, workload, cells, give_up
        self.n_levels = len(arch.levels)
        self.memo: dict = {}

    def check(self) -> None:
        """Raise `DeadlinePassed` once the search's deadline has passed (`give_up`): the prices
        not yet computed are the bound's slow part (seconds on a dim of 62 million)."""
        if self.give_up is not None and self.give_up():
            raise DeadlinePassed()

    def per_word(self, t: int, parents: list[int], stop: int) -> np.ndarray:
        """(cells,) the cheapest energy per word a parent spends serving tensor t to what lies
        below level `stop`-1's fanout, one transfer shared by the split's multicast."""
        key = ("per word", t, tuple(parents), stop)
        if key not in self.memo:
            level, tensor = self.arch.levels, self.workload.tensors[t]
            self.memo[key] = np.min([serve_energy(level[p], tensor) / self.spread(t, p, stop)
                                     for p in parents], axis=0)
        return self.memo[key]

    def spread(self, t: int, p: int, stop: int) -> np.ndarray:
        """(cells,) the widest multicast (or, for the output, reduction) of tensor t between
        level p and what lies below level `stop`-1's fanout, under each cell's split."""
        key = ("spread", t, p, stop)
        if key not in self.memo:
            self.check()
            arch, cells = self.arch, self.cells
            tensor, shared = self.workload.tensors[t], shared_dims(self.workload, t)
            spread = np.ones(cells.n_cells)
            windows = []            # enumerated fanouts over which a window's copies coincide
            for x in range(p, stop):
                if not arch.levels[x].shares(tensor) or not shared.any():
                    continue
                if cells.vectors is None or x >= cells.level:
                    # not enumerated: the whole fanout may multicast (a block cluster's CTAs)
                    spread = spread * arch.sharing_units(x, tensor)
                elif tensor.has_sliding_axis:
                    windows.append(x)
                else:
                    spread = spread * np.minimum(cells.vectors[:, x][:, shared].prod(axis=1),
                                                 arch.sharing_units(x, tensor))
            if windows:
                spread = spread * window.multicast(arch, tensor, cells.vectors, cells.tile, cells.level, windows)
            self.memo[key] = spread
        return self.memo[key]

    def bypassed(self, t: int, parents: list[int], extra: float = 1.0, copies_paid: bool = False) -> np.ndarray:
        """(cells,) the least a parent spends on tensor t when the innermost level does not
        keep it: one read per MAC (or, for the output, one update), shared by the split's
        multicast or reduction; an output's parent also reads back every update but the first
        of each word in each copy (read-modify-write), as where the level keeps it. `extra`
        more copies where a node's split over a fanout the cells leave out is known (not
        memoised: `innermost.InnermostBound.with_split` keeps its totals). `copies_paid`: as
        `kept_mac`'s."""
        copies_paid = copies_paid and self.workload.tensors[t].is_output     # an input has no read-backs
        key = ("bypassed", t, tuple(parents), copies_paid)
        if extra != 1.0:
            return self._bypassed(t, parents, extra, copies_paid)
        if key not in self.memo:
            self.memo[key] = self._bypassed(t, parents, extra, copies_paid)
        return self.memo[key]

    def _bypassed(self, t: int, parents: list[int], extra: float, copies_paid: bool) -> np.ndarray:
        macs = drawn(self.arch, self.workload, t)
        if not self.workload.tensors[t].is_output:
            return macs * self.per_word(t, parents, self.n_levels)
        level, workload = self.arch.levels, self.workload
        tensor = workload.tensors[t]
        costs = []
        for p in parents:
            updates = macs / self.spread(t, p, self.n_levels)
            first = workload.tensor_words(t) * self._copies(t, p) * extra
            costs.append(updates * serve_energy(level[p], tensor)
                         + read_back_energy(updates, first, workload.tensor_words(t), math.prod(self.cells.unsplit[:p]),
                                            read_energy(level[p], tensor), self._read_above(tensor, p, copies_paid)))
        return np.min(costs, axis=0)

    def _copies(self, t: int, p: int) -> np.ndarray:
        """(cells,) at most how many instances of level p hold a copy of a word of tensor t:
        the splits above p over dims t does not index, as far as they are enumerated (the
        rest, `unsplit`, is left to `read_back_energy`)."""
        cells, irrelevant = self.cells, ~self.workload.relevance[t]
        copies = np.full(cells.n_cells, float(math.prod(cells.unenumerated[:p])))
        if cells.vectors is not None:
            for x in range(p):
                copies = copies * cells.vectors[:, x][:, irrelevant].prod(axis=1)
        return copies

    def first(self, t: int) -> np.ndarray:
        """(cells,) how many of the level's fills of tensor t write nothing in: none for an
        input; for the output, each instance's first touch of each word (its partial sum
        starts there), the rest being read-backs written into the level. Counted exactly
        (every instance's tile times its trips over the output's dims) only where every
        fanout above is enumerated and every factor divides its dim; elsewhere all of them."""
        key = ("first", t)
        if key not in self.memo:
            workload, cells = self.workload, self.cells
            if not workload.tensors[t].is_output:
                self.memo[key] = np.zeros(cells.n_cells)
            elif cells.vectors is None or math.prod(cells.unsplit) > 1 or not cells.perfect:
                self.memo[key] = np.full(cells.n_cells, np.inf)
            else:
                relevant = np.flatnonzero(workload.relevance[t])
                self.memo[key] = cells.instances * cells.words[t] * cells.trips[relevant].prod(axis=0)
        return self.memo[key]

    def kept_macs(self, copies_paid: bool = False) -> list[np.ndarray]:
        """Per tensor, `kept_mac` with no extra copies."""
        key = ("kept", copies_paid)
        if key not in self.memo:
            self.memo[key] = [self.kept_mac(t, copies_paid=copies_paid) for t in range(len(self.workload.tensors))]
        return self.memo[key]

    def _read_above(self, tensor, level: int, copies_paid: bool) -> float:
        """What `read_back_energy` charges per word a copy's partial sums are read back above
        `level`: nothing where the node has priced those read-backs (`copies_paid`)."""
        return 0.0 if copies_paid else cheapest_read_above(self.arch, tensor, level)

    def kept_mac(self, t: int, extra: float = 1.0, copies_paid: bool = False) -> np.ndarray:
        """(cells,) what the level serves the units per MAC if it keeps tensor t, and for the
        output its read-modify-write: every update but the first of each word in each copy
        reads. A copy is an instance holding the word beside others that differ in dims it
        does not index, each over a slice of them at least this cell's tile wide: at most
        prod(size / tile) over those dims; `extra` more copies where a node's split over a
        fanout the cells leave out is known (`InnermostBound.with_split`: each takes its
        first updates off the read-backs). `copies_paid`: where a node has made copies
        of the output above its deepest decided keeper over such a fanout, whose partial sums
        are added up there by read-backs the node has already priced (`InnermostBound._copied`):
        the copies are then taken as many as the fanouts allow, at no cost above."""
        arch, workload, cells = self.arch, self.workload, self.cells
        j, tensor = cells.level, workload.tensors[t]
        level, macs = arch.levels[j], drawn(arch, workload, t)
        below = sharing_fanout(arch, tensor, j, self.n_levels)
        served = np.full(cells.n_cells, macs / below * serve_energy(level, tensor))
        if not tensor.is_output:
            return served
        irrelevant = ~workload.relevance[t]
        most = np.prod(np.array(workload.sizes, float)[irrelevant, None] / cells.tile[irrelevant], axis=0)
        copies = np.minimum(cells.split[:, irrelevant].prod(axis=1) * math.prod(cells.unenumerated) * extra, most)
        return served + read_back_energy(macs / below, workload.tensor_words(t) * copies, workload.tensor_words(t),
                                         np.clip(most / copies, 1.0, math.prod(cells.unsplit)),
                                         read_energy(level, tensor), self._read_above(tensor, j, copies_paid))

    def fills(self, t: int) -> np.ndarray:
        """(orders, cells) the words filled into every instance of the innermost level over the
        whole computation if it keeps tensor t, per order of the merged loops above it."""
        key = ("fills", t)
        if key not in self.memo:
            cells = self.cells
            self.memo[key] = self.filled(t, cells.instances, cells.words[t], cells.trips)
        return self.memo[key]

    def filled(self, t: int, instances: np.ndarray, words: np.ndarray, trips: np.ndarray,
               tile: np.ndarray | None = None) -> np.ndarray:
        """(orders, cells) the same for cells of `instances` instances holding tiles of `words`
        words of tensor t under merged loops of `trips` ((D, cells)): each instance's tile is
        filled once per step of the loops out to the tensor's innermost relevant one. A window
        (p+r) moving along its axis fetches only the new slice, which that whole-tile count does
        not see: each instance fills at least its tile, and in a space of exact factors every
        word it touches (`window.touched`), whatever the order, and where its tile spans one
        value along each sliding axis, a whole tile per step out to each order's window cutoff
        (`window.steps`). `tile` ((D, cells)): the cells' tiles, where not all of them."""
        self.check()
        cells = self.cells
        once = instances * words
        stepped = np.stack([once * trips[list(way[t])].prod(axis=0) for way in cells.orders])
        tensor = self.workload.tensors[t]
        if not tensor.has_sliding_axis:
            return stepped
        tile = cells.tile if tile is None else tile
        if not cells.perfect:         # whole values per dim, and loops wherever trips > 1
            return np.repeat(once[None], len(cells.orders), axis=0)
        least = instances * np.maximum(words, window.touched(tensor, tile, trips))
        out = np.repeat(least[None], len(cells.orders), axis=0)
        unit = np.flatnonzero((tile[window.sliding_dims(tensor)] == 1).all(axis=0))
        if len(unit):
            out[:, unit] = np.maximum(out[:, unit], once[unit] * window.steps_once(
                tensor, trips[:, unit], cells.way_orders, self.memo.setdefault(("window steps", t), {}),
                self.memo.setdefault(("window cutoffs", t), {}), self.give_up))
        return out
