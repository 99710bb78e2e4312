"""What a node's own decided loops force to be fetched again: the keepers a tensor can have
below a node, and how many times the deepest decided keeper must send each word down.

`refetched_links` turns that into a lower bound on the traffic into each undecided level that
depends on the node (`link.LinkBounds` bounds the same traffic over every tile, but with none of
the node's loops; `node.lower_bounds` takes the larger)."""
from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from ... import tiles
from ...mapping import MappingTable
from ...mapspace import Mapspace
from .energy import fill_energy, serve_energy

MAX_ORDER_DIMS = 8          # merged loop orders enumerated up to this many dims of size > 1

def merged_orders(workload, counted) -> list[tuple[tuple[int, ...], ...]]:
    """The distinct ways one merged loop per dim above a level, in some order, refetches each
    tensor: per way, per tensor, the dims out to its innermost relevant loop (sorted; () for
    a tensor not in `counted`, or indexed by no dim of size > 1). A dim of size 1 never moves a
    tile and is left out, and orders giving every counted tensor the same dims are one way:
    a 7-dim convolution has far fewer ways than its 5,040 orders. Beyond MAX_ORDER_DIMS dims,
    one way: each tensor at its best alone (a looser bound)."""
    return list(orders_by_way(workload, counted))


def orders_by_way(workload, counted) -> dict[tuple, list[tuple[int, ...]]]:
    """`merged_orders`' ways, each with the orders (of the dims of size > 1, outermost first)
    that make it; beyond MAX_ORDER_DIMS dims, its one way with no order."""
    moving = [d for d, size in enumerate(workload.sizes) if size > 1]
    tensors = workload.tensors
    if len(moving) > MAX_ORDER_DIMS:
        return {tuple(tuple(sorted(d for d in t.dims if d in moving)) if i in counted else ()
                      for i, t in enumerate(tensors)): []}
    ways: dict[tuple, list] = {}
    for order in itertools.permutations(moving):
        way = []
        for i, tensor in enumerate(tensors):
            relevant = [k for k, d in enumerate(order) if d in tensor.dims]
            way.append(tuple(sorted(order[:relevant[-1] + 1])) if i in counted and relevant else ())
        ways.setdefault(tuple(way), []).append(order)
    return ways


class Refetched(NamedTuple):
    energy: np.ndarray      # (L, N) by the level filled (or drained)
    reads: np.ndarray       # (L, N) bytes, by the parent that sends them
    writes: np.ndarray      # (L, N) bytes, by the parent that takes them back (the output's)
    by_link: np.ndarray     # (L, N) the same bytes (reads and writes), by the level filled

def refetched_links(space: Mapspace, depth: int, table: MappingTable) -> Refetched:
    """Per undecided level j, a lower bound on the traffic into it that depends on the node:
    for each tensor whose first possible keeper below the node is j and which j must keep,
    every word of it is filled into j, and read from (for the output: drained to) the deepest
    decided keeper, once per iteration of the decided loops over dims it does not index
    (`refetches`: unless some level below could hold the node's whole tile of it).
    Multicast shares a read among units needing the same word at once, never among
    different words or iterations, so it divides none of this. `LinkBounds` bounds the same
    energy over every tile but with none of the node's loops; the larger of the two holds."""
    arch, workload = space.arch, space.workload
    n = len(table)
    out = Refetched(*(np.zeros((space.n_levels, n)) for _ in range(4)))
    for t, tensor in enumerate(workload.tensors):
        below = [lv for lv in range(depth + 1, space.n_levels) if any(t in k for k in space.choices[lv].keeps)]
        if not below or not all(t in k for k in space.choices[below[0]].keeps):
            continue
        j, level = below[0], arch.levels[below[0]]
        parent = deepest_keeper(space, t, depth, table)
        serve = np.array([serve_energy(lv, tensor) for lv in arch.levels])[parent]
        own = 0.0 if tensor.is_output else fill_energy(level, tensor)
        words = workload.touched_words(t) * refetches(space, t, depth, table)
        out.energy[j] += words * (serve + own)
        moved = out.writes if tensor.is_output else out.reads
        word_bytes = np.array([lv.word_bytes(tensor) for lv in arch.levels])[parent]
        np.add.at(moved, (parent, np.arange(n)), words * word_bytes)
        out.by_link[j] += words * word_bytes
    return out

def refetches(space: Mapspace, t: int, depth: int, table: MappingTable) -> np.ndarray:
    """How many times, at least, the deepest decided keeper of input t sends each word down
    (of the output: takes each word back): the decided temporal loops over
    dims t does not depend on, unless some level below could hold the node's whole tile of t
    per instance (then no undecided loop over t's dims sits above that keeper, and the decided
    loops may reuse it)."""
    workload, arch = space.workload, space.arch
    n = len(table)
    if depth == 0 or depth >= space.n_levels:
        return np.ones(n)
    irrelevant = ~workload.relevance[t]
    repeats = table.factors[:depth, 0][:, irrelevant].prod(axis=(0, 1)).astype(float)
    spans = table.factors[depth:].prod(axis=(0, 1))
    tile = tiles.words(workload.tensors[t], spans)
    could_hold = np.zeros(n, bool)
    spread = 1
    for lv in range(depth + 1, space.n_levels):
        spread *= arch.fanout_units(lv - 1)
        if any(t in k for k in space.choices[lv].keeps):
            could_hold |= tiles.fits_level(arch.levels[lv], tile / spread * arch.levels[lv].word_bytes(workload.tensors[t]))
    return np.where(could_hold, _outside_relevant(space, t, depth, table), repeats)

def _outside_relevant(space: Mapspace, t: int, depth: int, table: MappingTable) -> np.ndarray:
    """(N,) the product of the decided temporal loops over dims t does not depend on that lie
    outside the innermost decided loop over a dim it does: whatever the completion, each of
    their iterations brings t's words below the node afresh (the inner loop moved them on),
    so no level below can reuse them."""
    relevance = space.workload.relevance[t]
    n = len(table)
    seen = np.zeros(n, bool)
    product = np.ones(n)
    for lv in range(depth - 1, -1, -1):
        # the level's temporal trips and relevance in loop order (one gather per level)
        trips = np.take_along_axis(table.factors[lv, 0], table.order[lv], axis=0)     # (D, N)
        relevant = relevance[table.order[lv]]
        for position in range(space.n_dims - 1, -1, -1):       # innermost loop first
            looping = trips[position] > 1
            product = np.where(seen & looping & ~relevant[position], product * trips[position], product)
            seen |= looping & relevant[position]
    return product

def keepers(space: Mapspace, t: int, depth: int, table: MappingTable):
    """Which levels may keep t, the deepest decided keeper per node, and the undecided levels
    that must keep t."""
    may_keep = [any(t in k for k in c.keeps) for c in space.choices]
    must_keep = [all(t in k for k in c.keeps) for c in space.choices]
    deeper_must = [lv for lv in range(depth + 1, space.n_levels) if must_keep[lv]]
    return may_keep, deepest_keeper(space, t, depth, table), deeper_must

def may_be_innermost(lv: int, depth: int, deepest: np.ndarray, deeper_must: list[int]) -> np.ndarray:
    """Per node, whether level lv can be t's innermost keeper: at or below the deepest level
    that must keep it, else the deepest decided keeper or an undecided level."""
    if deeper_must:
        return np.full(len(deepest), lv >= max(deeper_must))
    return (lv > depth) | (lv == deepest)

def deepest_keeper(space: Mapspace, t: int, depth: int, table: MappingTable) -> np.ndarray:
    """The innermost decided level keeping t (the innermost keeper is at or below it)."""
    deepest = np.zeros(len(table), np.int64)
    for lv in range(min(depth, space.n_levels - 1) + 1):
        deepest = np.where(table.keep[lv, t], lv, deepest)
    return deepest
