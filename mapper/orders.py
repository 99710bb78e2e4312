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


def tensor_best_orders(workload: Workload, dims: tuple[int, ...], every_link: bool = False) -> tuple[tuple[int, ...], ...]:
    """Orders of the non-unit loops `dims` (outermost first) among which every tensor finds an
    order fetching it the fewest times into each level directly below (no non-unit temporal
    loop between them and this level), whatever the factors; with `every_link`, into every
    level below, whatever loops lie between. A bound that takes, tensor by tensor, the least
    over these orders is below every order's cost (`search/joint/order_free.py`).

    A loop over a dim the tensor does not index moves nothing: its step costs only what the
    loops inside it undo (their wrap), and each of its iterations repeats all that they fetch.
    With nothing below, that is nothing, and with every such loop innermost the tensor comes
    down once per step of its relevant loops, on no more steps than any order gives. A sliding
    axis (p+r) lets the order of the relevant loops decide which steps slide (and which
    cancel: an advance of r undone by p's wrap moves no tile), so each of their orders is
    taken, the others innermost: the innermost loop then moves nothing, which credits every
    slide (docs/COST_MODEL.md), so no other order fetches less on the links directly below.

    Where loops below repeat the fetches, an outer place can be cheaper: the others' steps
    then break a chain of cancelling steps less often (conv: O[k,p,q] += I[c,p+r,q+s]...,
    with r split, reaches its fewest fetches of I with k outermost). Each loop of a block of
    them adds (bound - 1) x what one more pass of the loops inside its place costs, times the
    bounds outside it, the same for every order of the block; so two of them at different
    places never beat both at the cheaper one, except that one left innermost changes which
    slides are credited. So with `every_link` a sliding tensor takes, for each order of its
    relevant loops, the others as one block at each place among them, or one of them
    innermost and the rest as one block at each place."""
    out = set()
    for tensor in workload.tensors:
        relevant = tuple(d for d in dims if d in tensor.dims)
        others = tuple(d for d in dims if d not in tensor.dims)
        if not tensor.has_sliding_axis:
            out.add(relevant + others)
            continue
        for head in itertools.permutations(relevant):
            if not every_link:
                out.add(head + others)
                continue
            for innermost in ((),) + tuple((d,) for d in others if len(others) > 1):
                block = tuple(d for d in others if d not in innermost)
                for place in range(len(head) + 1):
                    out.add(head[:place] + block + head[place:] + innermost)
    return tuple(sorted(out))
