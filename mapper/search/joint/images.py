"""A new best mapping's images under the workload's symmetries, offered to the incumbent.

A symmetry is a permutation of the workload's dims that carries every tensor onto one of the
same kind (output or input) and format, indexed the same way by the permuted dims, every dim
onto one of the same size: a square GEMM's m <-> n, which swaps A and B. Its image of a mapping
(each dim's factors and place in the loop orders given to its image, each tensor's keeps to
its image) moves the same words in the same patterns, so it costs the same, give or take the
rounding of adding the tensors' energies in another order. The walk may find either first;
where it finds the one that ranks after the other on content, it then walks the subtrees that
hold the other only to tie on cost and win on content (pe-array 768x768x3072, energy: on one
core 100k of the 144k complete mappings priced). The image, offered as soon as the walk finds
a new best, settles the tie at once. An image is offered only where it is a member of the
space (`warm.admit`: the constraints, the architecture's keeps, the orders the space allows),
and priced by the cost model like any mapping, so it never changes what a finished walk
returns, only how soon.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...mapping import MappingTable, from_table
from ...spec import Workload
from ..result import Incumbent
from ..warm import admit

MAX_PERMUTATIONS = 720          # dim permutations examined at most (about 6 ms for 720)


def symmetries(workload: Workload) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every symmetry but the identity, as (the image of each dim, the image of each tensor)."""
    groups = {}
    for d, size in enumerate(workload.sizes):
        groups.setdefault(size, []).append(d)
    if math.prod(math.factorial(len(g)) for g in groups.values()) > MAX_PERMUTATIONS:
        return []
    identity = tuple(range(len(workload.dims)))
    where = {}          # each tensor's signature -> the tensors that have it
    for t, tensor in enumerate(workload.tensors):
        where.setdefault(_signature(tensor), []).append(t)
    out = []
    for per_group in itertools.product(*(itertools.permutations(g) for g in groups.values())):
        image = list(identity)
        for group, permuted in zip(groups.values(), per_group):
            for d, e in zip(group, permuted):
                image[d] = e
        image = tuple(image)
        tensors = _tensor_images(workload, image, where)
        if image != identity and tensors is not None:
            out.append((image, tensors))
    return out


def _signature(tensor, dims=None) -> tuple:
    """What a tensor's image must match: its axes (each a set of (dim, coefficient), the dims
    carried by `dims` where given), kind and format."""
    axes = frozenset(frozenset((d if dims is None else dims[d], c) for d, c in axis if c) for axis in tensor.axes)
    return axes, tensor.is_output, tensor.bits, tensor.dtype, tensor.scales


def _tensor_images(workload: Workload, image: tuple[int, ...], where: dict) -> tuple[int, ...] | None:
    """The tensor each tensor becomes under the dim permutation `image` (`where`: each
    signature's tensors), or None where one becomes no tensor of the workload (of the same
    kind and format, indexed by the same axes)."""
    out = []
    for tensor in workload.tensors:
        match = where.get(_signature(tensor, image))
        if not match or len(match) > 1:       # none, or two alike (which is which is unclear)
            return None
        out.append(match[0])
    return tuple(out) if sorted(out) == list(range(len(out))) else None


def image_of(table: MappingTable, dims: tuple[int, ...], tensors: tuple[int, ...]) -> MappingTable:
    """The mappings of `table` carried by the symmetry (`dims`, `tensors`: each one's image)."""
    factors = np.empty_like(table.factors)
    factors[:, :, list(dims)] = table.factors
    keep = np.empty_like(table.keep)
    keep[:, list(tensors)] = table.keep
    return MappingTable(factors, np.asarray(dims)[table.order], keep, table.stages.copy())


def offer_images(incumbent: Incumbent, found: list) -> None:
    """Offer the incumbent's image under each symmetry `found` (`symmetries`) that its space
    holds (the whole space's: the image of a mapping in one keep vector's part is in another)."""
    if incumbent.table is None:
        return
    best = incumbent.table
    for dims, tensors in found:
        admitted = admit(incumbent.space, from_table(image_of(best, dims, tensors), 0))
        if admitted is not None:
            incumbent.offer(admitted)
