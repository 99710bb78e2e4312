"""The traffic into a level as a function of how its instances split the work: a floor that
holds whatever the tiles, loop orders and stages, per count of busy instances.

The instances of level j that work divide each dim d into s_d regions (the product of the
spatial factors above j), and every instance must receive, at least once, every word its
region touches (an output: drain it). Summed over the instances, for a tensor t:
- along a dim t does not index, each of the s_d regions needs its own copy: x s_d;
- along an axis of t over one dim, the regions partition it: their words add up to the
  size, whatever their lengths;
- along a window axis `sigma*p + r`, a region of a positions and b taps touches
  a*min(b, sigma) + max(b - sigma, 0) words (contiguous once b >= sigma, else disjoint),
  linear in a: summed over the regions, size_p * sum_j min(b_j, sigma) + s_p * sum_j
  max(b_j - sigma, 0), and those sums are at least max(s_r, min(size_r, sigma)) and
  max(size_r - s_r * sigma, 0) for any lengths b_j >= 1 adding to size_r.
Valid sizes are used throughout: a masked level moves only valid words, a padded one more.
A parent's transfer serves at most `spread` instances and moves every touched word at least
once, so it moves at least max(touched, copies / spread) words.

Unlike the per-tile floor (`link._copies_floor`), which bounds each tensor on its own, this
one is joint: the split that spares one tensor's copies multiplies another's. The splits
are the space's own (each dim's spatial products above j in its tables), kept where the
product fits the instances and a fused tensor-core role can still be met in the regions
(`fragments_possible`): a convolution's m = n.p.q of a multiple of 16 rules out p and q
regions of 14 when 28 = 4 x 7.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ...mapspace import Mapspace, pruning, tables
from ...rows import unique_rows
from .grid import LinkCost

MAX_SPLIT_VECTORS = 2_000_000


class SplitFloor(NamedTuple):
    """Per count of busy instances (ascending), the least traffic of every split keeping at
    least that many at work."""
    busy: np.ndarray            # (V,) ascending
    least_from: np.ndarray      # (V,) the minimum over the splits at or after each

    def at_least(self, busy: int) -> float:
        """The floor of every mapping keeping at least `busy` instances at work (inf: none)."""
        index = int(np.searchsorted(self.busy, busy, side="left"))
        return float(self.least_from[index]) if index < len(self.busy) else np.inf


def split_floor(space: Mapspace, j: int, costs: dict[int, LinkCost], splits: np.ndarray | None) -> SplitFloor | None:
    """The floor of the bytes into level j (`split_traffic`, without read-backs) per count of
    busy instances, over `splits` (`split_vectors`), or None where there are none or j keeps
    nothing."""
    if splits is None or not costs:
        return None
    total = split_traffic(space, j, costs, splits, read_backs=False)
    busy = splits.prod(axis=0)
    order = np.argsort(busy, kind="stable")
    least_from = np.minimum.accumulate(total[order][::-1])[::-1]
    return SplitFloor(busy[order], least_from)


def split_vectors(space: Mapspace, j: int) -> np.ndarray | None:
    """(D, V) the splits above level j the space allows (each dim's spatial products above j
    in its tables, combined where their product fits j's instances and a fused tensor-core
    role still fits the regions), or None where j has one instance, there are too many, or
    none is left. They do not depend on keeps: the parts of a space share them."""
    instances = space.arch.levels[j].instances
    if instances <= 1:
        return None
    vectors = _split_vectors(space, j, instances)
    if vectors is None:
        return None
    splits, regions, extents = vectors
    splits = splits[:, pruning.fragments_possible(space, regions, extents)]
    return splits if splits.shape[1] else None


def split_traffic(space: Mapspace, j: int, costs: dict[int, LinkCost], splits: np.ndarray,
                  read_backs: bool) -> np.ndarray:
    """(V,) the least bytes into level j under each split vector ((D, V), the product of
    the spatial factors above j per dim), per word as `costs` say (`grid.bytes_sent`, per
    tensor j must keep; a read-back moves the parent's word).
    An output whose partial sums from several instances meet at a parent of one instance
    that does not add them on the way (no reduction network) is read back there once per
    update but the first of each word (Timeloop's rule), with `read_backs`: not traffic
    between the levels but the parent's own, which the link bounds leave to the node's
    decided traffic (and costs with no parent, level j's own fills and drains, have none)."""
    total = np.zeros(splits.shape[1])
    for t, cost in costs.items():
        copies, touched = _copies(space, t, splits.astype(float))
        parents = [parent * np.maximum(touched, copies / spread) for parent, spread in cost.parents]
        total = total + cost.fill * copies + (functools.reduce(np.minimum, parents) if parents else 0.0)
        if read_backs and space.workload.tensors[t].is_output and _lone_accumulator(space, j, t):
            total = total + min(parent for parent, _ in cost.parents) * np.maximum(copies - touched, 0.0)
    return total


def _lone_accumulator(space: Mapspace, j: int, t: int) -> bool:
    """Whether every level that may take output t's partial sums from level j has one
    instance and no network between adds them: its read-backs are then updates - words."""
    arch = space.arch
    nearest_must = max(p for p in range(j) if all(t in k for k in space.choices[p].keeps))
    tensor = space.workload.tensors[t]
    return all(arch.levels[p].instances == 1 and not any(arch.levels[x].shares(tensor) for x in range(p, j))
               for p in range(nearest_must, j) if any(t in k for k in space.choices[p].keeps))


def _split_vectors(space: Mapspace, j: int, instances: int):
    """(D, V) the splits (product of the spatial factors above j per dim), with each
    instance's region and the dim's extent, over the combinations of the per-dim options
    whose product fits the instances; None when too many."""
    options = []
    for rows in space.dim_tables:
        _, spatial, tile = tables.level_view(space, rows)
        split, extent = spatial[:, :j].prod(axis=1), tile[:, 0]
        fits = split <= instances
        split, extent = unique_rows(np.stack([split[fits], extent[fits]], axis=1)).T
        options.append(np.stack([split, extent // split, extent], axis=1))
    if math.prod(len(o) for o in options) > 50 * MAX_SPLIT_VECTORS:
        return None
    picks = joined(options, np.array([instances]), MAX_SPLIT_VECTORS)
    if picks is None:
        return None
    columns = [np.stack([options[d][picks[:, d], k] for d in range(len(options))]) for k in range(3)]
    return columns[0], columns[1], columns[2]


def joined(options: list[np.ndarray], limits: np.ndarray, most: int) -> np.ndarray | None:
    """(C, D) per combination of the dims' options ((M_d, K) each, its first len(limits)
    columns products to keep within `limits`), the row each dim takes: built dim by dim,
    the partial combinations over a limit dropped as they appear (products only grow);
    None when more than `most`."""
    picks = np.zeros((1, 0), np.int64)
    product = np.ones((1, len(limits)), np.int64)
    for option in options:
        index = np.repeat(np.arange(len(option)), len(picks))
        grown = np.tile(product, (len(option), 1)) * option[index, :len(limits)]
        ok = np.all(grown <= limits, axis=1)
        picks = np.hstack([np.tile(picks, (len(option), 1)), index[:, None]])[ok]
        product = grown[ok]
        if len(picks) > most:
            return None
    return picks


def _copies(space: Mapspace, t: int, splits: np.ndarray):
    """(copies, touched): the words of tensor t every instance together must receive at least
    (over each split vector), and its touched words (what a parent moves at least once)."""
    workload = space.workload
    tensor, sizes = workload.tensors[t], np.array(workload.sizes, float)
    touched = float(workload.touched_words(t))
    dims = [d for axis in tensor.axes for d, c in axis if c]
    if len(dims) != len(set(dims)):         # axes sharing a dim: only the compulsory words
        return np.full(splits.shape[1], touched), touched
    copies = np.prod([splits[d] for d in range(len(sizes)) if d not in dims], axis=0) * np.ones(splits.shape[1])
    for axis in tensor.axes:
        terms = [(d, c) for d, c in axis if c]
        if len(terms) == 1:
            copies = copies * sizes[terms[0][0]]
        elif len(terms) == 2:
            copies = copies * _window_words(terms, sizes, splits)
        else:                               # a longer window: each region touches at least its longest dim
            copies = copies * np.max([sizes[d] * np.prod([splits[e] for e, _ in terms if e != d], axis=0)
                                      for d, _ in terms], axis=0)
    return copies, touched


def _window_words(terms, sizes: np.ndarray, splits: np.ndarray) -> np.ndarray:
    """Summed over the regions of a window axis `c1*d1 + c2*d2`, the words they touch (module
    docstring), where one coefficient is 1; else each region touches at least its longer side."""
    (d1, c1), (d2, c2) = terms
    if c2 != 1 and c1 == 1:
        (d1, c1), (d2, c2) = (d2, c2), (d1, c1)
    if c2 != 1:
        return np.maximum(sizes[d1] * splits[d2], sizes[d2] * splits[d1])
    sigma, size_p, size_r, s_p, s_r = c1, sizes[d1], sizes[d2], splits[d1], splits[d2]
    return (size_p * np.maximum(s_r, min(size_r, sigma))
            + s_p * np.maximum(size_r - s_r * sigma, 0.0))
