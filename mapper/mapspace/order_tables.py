"""Loop orders per level: the order classes (`orders.order_classes`) of a level's non-unit
dims, filtered by the level's order constraints, as arrays and as counts per dim set."""
from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SpecError
from ..orders import is_stationary, order_classes, signature
from .common import _bits

if TYPE_CHECKING:
    from .space import Mapspace


def orders_for(space: Mapspace, lv: int, dims: frozenset[int], constrained: bool = True) -> tuple[tuple[int, ...], ...]:
    """Order classes at level lv for its non-unit dims, filtered by the level's constraints."""
    classes = order_classes(space.workload, dims)
    lc = space.level_constraints[lv]
    if not constrained:
        return classes
    if lc.order is not None:
        fixed = tuple(space.dim_index(n, lv, "order") for n in lc.order)
        if sorted(fixed) != list(range(space.n_dims)):
            raise SpecError(f"mapspace {space.constraints.name}", f"levels.{space.arch.levels[lv].name}.order",
                            f"expected every dim once ({', '.join(space.workload.dims)})")
        return (tuple(d for d in fixed if d in dims),)
    if lc.innermost_order is not None:
        classes = _with_innermost(space, lv, dims, lc.innermost_order)
    if lc.stationary is not None:
        t = space.tensor_index(lc.stationary, lv, "stationary")
        classes = tuple(o for o in classes if is_stationary(space.workload, o, t))
    if lc.forbid:
        # an order is forbidden when it behaves like a listed one on these non-unit dims
        banned = {signature(space.workload, tuple(d for d in (space.dim_index(n, lv, "forbid") for n in order)
                                                 if d in dims)) for order in lc.forbid}
        classes = tuple(o for o in classes if signature(space.workload, o) not in banned)
    return classes


def _with_innermost(space: Mapspace, lv: int, dims: frozenset[int],
                    names: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """One order per class among the orders whose innermost loops are the non-unit dims of
    `names`, in that order (a unit loop may sit anywhere: it changes nothing); the other
    dims in any order outside them. A class is kept when any of its members qualifies."""
    tail = tuple(d for d in (space.dim_index(n, lv, "innermost_order") for n in names) if d in dims)
    free = sorted(dims - set(tail))
    seen, out = set(), []
    for head in itertools.permutations(free):
        order = head + tail
        key = signature(space.workload, order)
        if key not in seen:
            seen.add(key)
            out.append(order)
    return tuple(out)


def order_counts(space: Mapspace, constrained: bool) -> list[np.ndarray]:
    """counts[lv][mask]: number of order classes at lv for the set of non-unit dims `mask`.
    Cached per order rule: levels without order constraints share one table, so a deep
    hierarchy costs no more than a shallow one."""
    cache = space.shared.setdefault("order counts", {})
    out = []
    for lv, lc in enumerate(space.level_constraints):
        rule = (lc.order, lc.innermost_order, lc.stationary, lc.forbid) if constrained else None
        if rule == (None, None, None, ()):
            rule = None                 # no order constraint: the level sees every class
        if rule not in cache:
            cache[rule] = _order_count_table(space, lv, constrained=rule is not None)
        out.append(cache[rule])
    return out


def constrained_order_counts(space: Mapspace) -> list[np.ndarray]:
    """`order_counts` under the constraints, built once per space and its parts."""
    if "constrained order counts" not in space.shared:
        space.shared["constrained order counts"] = order_counts(space, True)
    return space.shared["constrained order counts"]


def _order_count_table(space: Mapspace, lv: int, constrained: bool) -> np.ndarray:
    masks = np.arange(1 << space.n_dims)
    lc = space.level_constraints[lv]
    sliding = any(t.has_sliding_axis for t in space.workload.tensors)
    if sliding and (not constrained or (lc.order is None and lc.innermost_order is None and not lc.forbid)):
        # a tensor with a sliding axis sees the whole order (orders.signature): every
        # permutation is a class of its own, so they can be counted without listing them
        if constrained and lc.stationary is not None:
            # stationary: the held tensor's dims (any order) outside all others (any order)
            dims = space.workload.tensors[space.tensor_index(lc.stationary, lv, "stationary")].dims
            held = sum(1 << d for d in dims)
            return np.array([math.factorial(_bits(m & held)) * math.factorial(_bits(m & ~held))
                             for m in masks.tolist()], np.int64)
        return np.array([math.factorial(_bits(m)) for m in masks.tolist()], np.int64)
    return np.array([len(orders_for(space, lv, _dims_of(space, m), constrained)) for m in masks.tolist()],
                    np.int64)


def _dims_of(space: Mapspace, mask: int) -> frozenset[int]:
    return frozenset(d for d in range(space.n_dims) if mask >> d & 1)


def order_array(space: Mapspace, lv: int, mask: int) -> np.ndarray:
    cache = space.shared.setdefault("order arrays", {})
    if (lv, mask) not in cache:
        dims = frozenset(d for d in range(space.n_dims) if mask >> d & 1)
        rest = [d for d in range(space.n_dims) if d not in dims]
        cache[lv, mask] = np.array([list(o) + rest for o in orders_for(space, lv, dims)],
                                   np.int64).reshape(-1, space.n_dims)
    return cache[lv, mask]
