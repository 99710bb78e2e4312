"""Loop orders of one level, with the redundant ones removed.

Within a level only the non-unit loops matter (a unit loop changes nothing), and for a tensor
whose axes are single dims the cost model only looks at which non-unit dims sit inside the
tensor's innermost relevant loop (those loops reuse its tile; see docs/COST_MODEL.md). Two orders
with the same such set for every tensor cost exactly the same, so each class keeps one
representative. A tensor with a sliding axis (p+r) is sensitive to the whole order of its
loops, so for it the signature is the full order.
"""
from __future__ import annotations

import itertools
from functools import lru_cache

from .spec import Workload


def signature(workload: Workload, order: tuple[int, ...]) -> tuple:
    """What the cost model can see of `order` (non-unit dims, outermost first)."""
    parts = []
    for tensor in workload.tensors:
        if tensor.has_sliding_axis:
            parts.append(order)
            continue
        inner = []
        for d in reversed(order):
            if d in tensor.dims:
                break
            inner.append(d)
        parts.append(frozenset(inner))
    return tuple(parts)


def order_classes(workload: Workload, dims: frozenset[int]) -> tuple[tuple[int, ...], ...]:
    """One representative order (outermost first) per class, for the non-unit `dims`."""
    return _classes(workload, tuple(sorted(dims)))


@lru_cache(maxsize=256)         # a bounded memo of a pure function (workloads are frozen)
def _classes(workload: Workload, dims: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    if any(t.has_sliding_axis for t in workload.tensors):
        # the full order is part of every signature (see `signature`): each order is its own class
        return tuple(itertools.permutations(dims))
    indexing = [t.dims for t in workload.tensors]      # `signature`, with the tensors' dims hoisted
    seen, out = set(), []
    for order in itertools.permutations(dims):
        parts = []
        for tensor_dims in indexing:
            inner = []
            for d in reversed(order):
                if d in tensor_dims:
                    break
                inner.append(d)
            parts.append(frozenset(inner))
        sig = tuple(parts)
        if sig not in seen:
            seen.add(sig)
            out.append(order)
    return tuple(out)


def is_stationary(workload: Workload, order: tuple[int, ...], tensor: int) -> bool:
    """True when every non-unit loop over a dim not indexing `tensor` is inside all loops that
    index it, i.e. its tile stays put for as long as the order allows."""
    dims = workload.tensors[tensor].dims
    seen_other = False
    for d in order:
        if d not in dims:
            seen_other = True
        elif seen_other:
            return False
    return True


def tensor_best_orders(workload: Workload, dims: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Orders of the non-unit loops `dims` (outermost first) among which every tensor finds an
    order fetching it the fewest times, on every link below the level, whatever the factors.

    A loop over a dim not indexing the tensor refetches its tile only from outside its
    innermost relevant loop, so with every such loop innermost the tensor comes down once per
    step of its relevant loops, the fewest any order gives. With a sliding axis (p+r) the order
    of its relevant loops also decides which steps slide: each of their orders is taken, the
    others still innermost (their steps move nothing). A bound that takes, tensor by tensor,
    the least over these orders is below every order's cost (`search/joint/order_free.py`)."""
    out = set()
    for tensor in workload.tensors:
        relevant = tuple(d for d in dims if d in tensor.dims)
        others = tuple(d for d in dims if d not in tensor.dims)
        for head in (itertools.permutations(relevant) if tensor.has_sliding_axis else (relevant,)):
            out.add(head + others)
    return tuple(sorted(out))
