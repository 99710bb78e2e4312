"""Lower bounds on the traffic into each level, and the mapping's traffic split against them.

Traffic "at level L" is what crosses the boundary between L's subtree (L and the levels below
it) and the levels above: every word an instance of the subtree receives from above plus every
word it sends back up, summed over L's instances (a multicast read delivers one word to each
receiver: the bound is about what each fast memory must take in). Read off the cost model as
the fills of each tensor's outermost keeper at or below L (for the output also its write-backs,
one per tile residency), or one word per MAC when no level at or below L keeps the tensor.

Two lower bounds hold for any mapping:
- compulsory: each tensor crosses once (inputs read, the output written): the sum of the
  tensors' words;
- capacity, for bilinear einsums (GEMM, batched GEMM, GEMV: three tensors, every dim in two or
  three of them, single-dim axes): Smith, Lowery, Langou and van de Geijn, "A Tight I/O Lower
  Bound for Matrix Multiplication" (arXiv:1702.02017, 2019; ACM TOMS 2022): a fast memory of S
  words executing W multiply-adds moves at least 2W/sqrt(S) - 2S words. Batched products obey
  the same bound with W the total MACs (Hoelder's inequality over the batch, as in the paper's
  segment argument). With P instances each doing a share of the work and holding S words,
  the sum over instances is at least 2W/sqrt(S) - 2PS; every mapping here gives its P utilized
  instances equal shares, so the bound used is P x max(0, 2(W/P)/sqrt(S) - 2S), P the
  mapping's utilized instances of the level.
  S is everything one instance of L's subtree can hold (L and the levels below it, the share
  under one instance), counted in words of the smallest element type: a larger S only lowers
  the bound, so it stays a bound with mixed precisions. For other einsums no capacity bound is
  claimed: the bound is the compulsory traffic (documented in docs/COST_MODEL.md).
The larger of the two is the bound.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .. import mma, tiles
from ..cost import Evaluation
from ..spec import Arch, Workload


@dataclass(frozen=True)
class Bilinear:
    """A bilinear einsum Z = A x B as (batch, m, n, k) products of dim sizes."""
    batch: int
    m: int
    n: int
    k: int

    @property
    def macs(self) -> int:
        return self.batch * self.m * self.n * self.k


def bilinear(workload: Workload) -> Bilinear | None:
    """The GEMM-like structure of the einsum, or None (sliding windows, more or fewer than two
    inputs, or a dim indexing only one tensor)."""
    if len(workload.tensors) != 3 or any(t.has_sliding_axis for t in workload.tensors):
        return None
    if any(len(axis) != 1 for t in workload.tensors for axis in t.axes):
        return None
    z = workload.tensors[workload.output]
    a, b = [t for t in workload.tensors if not t.is_output]
    sizes = dict(batch=1, m=1, n=1, k=1)
    for d, size in enumerate(workload.sizes):
        where = (d in z.dims, d in a.dims, d in b.dims)
        kind = {(True, True, True): "batch", (True, True, False): "m", (True, False, True): "n",
                (False, True, True): "k"}.get(where)
        if kind is None:
            if size == 1:
                continue
            return None
        sizes[kind] *= size
    return Bilinear(**sizes)


def compulsory_words(workload: Workload) -> int:
    """Every touched word of every tensor crosses once: inputs read, the output written."""
    return sum(workload.touched_words(t) for t in range(len(workload.tensors)))


def smith_bound(macs: float, words: float, instances: int = 1) -> float:
    """P x max(0, 2(W/P)/sqrt(S) - 2S) (Smith et al. 2019, per instance of P with equal shares
    of W); S infinite gives zero."""
    if math.isinf(words):
        return 0.0
    return instances * max(0.0, 2 * macs / instances / math.sqrt(words) - 2 * words)


def subtree_capacity_bytes(arch: Arch, lv: int) -> float:
    """Bytes one instance of level lv and everything below it can hold."""
    inst = arch.levels[lv].instances
    return sum(level.capacity * (level.instances // inst) for level in arch.levels[lv:])


@dataclass(frozen=True)
class LevelTraffic:
    level: str
    feeders: tuple[str, ...]     # the levels above that send it data
    capacity_words: float        # S: words one instance of its subtree holds
    instances: int
    traffic: float               # words across its upper boundary, all instances
    compulsory: float
    capacity_bound: float        # Smith et al. (bilinear einsums), else 0
    bytes: float                 # the same traffic in bytes

    @property
    def bound(self) -> float:
        return max(self.compulsory, self.capacity_bound)

    @property
    def capacity_part(self) -> float:
        """Traffic above compulsory: what a larger capacity (or a better tiling) could save."""
        return max(0.0, self.traffic - self.compulsory)

    @property
    def ratio(self) -> float:
        return self.traffic / self.bound if self.bound else math.inf

    @property
    def bound_kind(self) -> str:
        return "capacity (Smith et al.)" if self.capacity_bound > self.compulsory else "compulsory"


def _unit_words(arch: Arch, workload: Workload, mapping, ev: Evaluation) -> list:
    """Per tensor, the words all compute units take from its innermost keeper: one per MAC
    run, or per instruction where the unit reads whole fragments (`mma.unit_words`)."""
    innermost = tiles.unit_tile(mapping, len(workload.dims))
    executed = ev.macs_executed // ev.compute_instances      # per unit, padding included
    return [words * ev.compute_instances
            for words in mma.unit_words(arch, workload, innermost, executed, executed)]


def level_traffic(arch: Arch, workload: Workload, mapping, ev: Evaluation) -> list[LevelTraffic]:
    """Per level below the outermost: the mapping's traffic across its upper boundary (words
    each of its instances receives or sends, multicast copies counted per receiver), and the
    bounds on it."""
    structure = bilinear(workload)
    min_word = min(t.bytes_per_word for t in workload.tensors)
    compulsory = compulsory_words(workload)
    drawn = _unit_words(arch, workload, mapping, ev)
    out = []
    for lv in range(1, len(arch.levels)):
        words = bytes_ = 0.0
        feeders = []
        for t, tensor in enumerate(workload.tensors):
            inside = [c for c in range(lv, len(arch.levels)) if t in mapping.levels[c].keep]
            if inside:
                c = inside[0]
                cost = ev.levels[c].tensors[tensor.name]
                per_instance = cost.fills + (cost.fills + cost.partition_words if tensor.is_output else 0)
                crossing = per_instance * ev.levels[c].instances
            else:                       # served straight to (or drained from) the compute units
                crossing = drawn[t] * (2 if tensor.is_output else 1)
            words += crossing
            bytes_ += crossing * tensor.bytes_per_word
            parent = max(p for p in range(lv) if t in mapping.levels[p].keep)
            if crossing and arch.levels[parent].name not in feeders:
                feeders.append(arch.levels[parent].name)
        capacity_words = subtree_capacity_bytes(arch, lv) / min_word
        instances = ev.levels[lv].instances             # utilized, each with an equal share
        smith = smith_bound(structure.macs, capacity_words, instances) if structure else 0.0
        out.append(LevelTraffic(arch.levels[lv].name, tuple(feeders), capacity_words, instances,
                                words, compulsory, smith, bytes_))
    return out


# ----------------------------------------------------------------------------- traffic vs capacity

def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] if n <= 4096 else sorted(
        {d for i in range(1, int(math.isqrt(n)) + 1) if n % i == 0 for d in (i, n // i)})


def single_level_tilings(workload: Workload, max_tiles: int = 400_000):
    """(footprint bytes, least traffic in words) of every single-level tiling (a tile of every
    dim dividing its size, the best loop order above it), or None when the einsum has sliding
    windows or the tiles are too many. A tensor's traffic is its tile times its fetches (the
    steps of the loops down to the innermost one over a dim indexing it); the output is written
    back as often as fetched and read back each time but the first. Not cached (cheap on the
    presets): a caller asking for several capacities computes it once (`least_traffic`)."""
    if any(t.has_sliding_axis for t in workload.tensors):
        return None
    dims = [d for d, s in enumerate(workload.sizes) if s > 1]
    choices = [_divisors(workload.sizes[d]) for d in dims]
    if math.prod(len(c) for c in choices) > max_tiles:
        return None
    if not dims:
        footprint = sum(t.bytes_per_word for t in workload.tensors)
        return np.array([footprint]), np.array([float(compulsory_words(workload))])
    grid = np.stack([g.ravel() for g in np.meshgrid(*[np.array(c, float) for c in choices], indexing="ij")])
    sizes = np.array([workload.sizes[d] for d in dims], float)[:, None]
    trips = sizes / grid
    rel = [[d in t.dims for d in dims] for t in workload.tensors]
    tile = [np.prod(np.where(np.array(r)[:, None], grid, 1.0), axis=0) for r in rel]
    footprint = sum(tl * t.bytes_per_word for tl, t in zip(tile, workload.tensors))
    best = np.full(grid.shape[1], np.inf)
    for order in itertools.permutations(range(len(dims))):
        total = 0.0
        for t, tensor in enumerate(workload.tensors):
            fetches = np.ones(grid.shape[1])
            running = np.ones(grid.shape[1])
            for i in order:                        # outermost first
                running = running * trips[i]
                if rel[t][i]:
                    fetches = running.copy()
            if tensor.is_output:
                total = total + tile[t] * fetches * 2 - workload.tensor_words(t)
            else:
                total = total + tile[t] * fetches
        best = np.minimum(best, total)
    return footprint, best


def least_traffic(tilings, capacity_bytes: float) -> float | None:
    """The least traffic (words) of the `tilings` (`single_level_tilings`' table) that fit
    `capacity_bytes`; inf when none fits, None when the table is None (not computable)."""
    if tilings is None:
        return None
    footprint, traffic = tilings
    fits = tiles.within(footprint, capacity_bytes)
    return float(traffic[fits].min()) if fits.any() else math.inf


def min_traffic(workload: Workload, capacity_bytes: float) -> float | None:
    """The exact minimum traffic (words) over single-level tilings that fit `capacity_bytes`
    (see `single_level_tilings`); inf when none fits, None when not computable."""
    return least_traffic(single_level_tilings(workload), capacity_bytes)


def threshold_bytes(workload: Workload) -> float:
    """The least capacity at which some single-level tiling moves only compulsory traffic (the
    threshold where traffic collapses from the square-root law to compulsory); the working set
    where that cannot be computed."""
    table = single_level_tilings(workload)
    working_set = sum(workload.tensor_words(t) * tensor.bytes_per_word
                      for t, tensor in enumerate(workload.tensors))
    if table is None:
        return working_set
    footprint, traffic = table
    at_compulsory = traffic <= compulsory_words(workload) * (1 + 1e-12)
    return float(footprint[at_compulsory].min()) if at_compulsory.any() else working_set
