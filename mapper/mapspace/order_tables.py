"""Loop orders per level: the order classes (`orders.order_classes`) of a level's non-unit
dims, filtered by the level's order constraints, as arrays and as counts per dim set."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import SpecError
from ..orders import is_stationary, order_classes, signature
from .common import _bits


class OrderTablesMixin:
    """Order classes per level and dim set (`orders_for`, `order_array`) and their counts.

    Part of `Mapspace` (see `space`): it reads `arch`, `workload`, `constraints`, `n_levels`,
    `n_dims`, `level_constraints`, `slots`, `extents`, `choices` and the other mixins' methods."""

    def orders_for(self, lv: int, dims: frozenset[int], constrained: bool = True) -> tuple[tuple[int, ...], ...]:
        """Order classes at level lv for its non-unit dims, filtered by the level's constraints."""
        classes = order_classes(self.workload, dims)
        lc = self.level_constraints[lv]
        if not constrained:
            return classes
        if lc.order is not None:
            fixed = tuple(self._dim_index(n, lv, "order") for n in lc.order)
            if sorted(fixed) != list(range(self.n_dims)):
                raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.order",
                                f"expected every dim once ({', '.join(self.workload.dims)})")
            return (tuple(d for d in fixed if d in dims),)
        if lc.innermost_order is not None:
            classes = self._with_innermost(lv, dims, lc.innermost_order)
        if lc.stationary is not None:
            t = self._tensor_index(lc.stationary, lv, "stationary")
            classes = tuple(o for o in classes if is_stationary(self.workload, o, t))
        if lc.forbid:
            # an order is forbidden when it behaves like a listed one on these non-unit dims
            banned = {signature(self.workload, tuple(d for d in (self._dim_index(n, lv, "forbid") for n in order)
                                                     if d in dims)) for order in lc.forbid}
            classes = tuple(o for o in classes if signature(self.workload, o) not in banned)
        return classes

    def _with_innermost(self, lv: int, dims: frozenset[int], names: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
        """One order per class among the orders whose innermost loops are the non-unit dims of
        `names`, in that order (a unit loop may sit anywhere: it changes nothing); the other
        dims in any order outside them. A class is kept when any of its members qualifies."""
        tail = tuple(d for d in (self._dim_index(n, lv, "innermost_order") for n in names) if d in dims)
        free = sorted(dims - set(tail))
        seen, out = set(), []
        for head in itertools.permutations(free):
            order = head + tail
            key = signature(self.workload, order)
            if key not in seen:
                seen.add(key)
                out.append(order)
        return tuple(out)

    def _order_counts(self, constrained: bool) -> list[np.ndarray]:
        """counts[lv][mask]: number of order classes at lv for the set of non-unit dims `mask`.
        Cached per order rule: levels without order constraints share one table, so a deep
        hierarchy costs no more than a shallow one."""
        cache = self.__dict__.setdefault("_order_count_cache", {})
        out = []
        for lv, lc in enumerate(self.level_constraints):
            rule = (lc.order, lc.innermost_order, lc.stationary, lc.forbid) if constrained else None
            if rule == (None, None, None, ()):
                rule = None                 # no order constraint: the level sees every class
            if rule not in cache:
                cache[rule] = self._order_count_table(lv, constrained=rule is not None)
            out.append(cache[rule])
        return out

    def _order_count_table(self, lv: int, constrained: bool) -> np.ndarray:
        masks = np.arange(1 << self.n_dims)
        lc = self.level_constraints[lv]
        sliding = any(t.has_sliding_axis for t in self.workload.tensors)
        if sliding and (not constrained or (lc.order is None and lc.innermost_order is None and not lc.forbid)):
            # a tensor with a sliding axis sees the whole order (orders.signature): every
            # permutation is a class of its own, so they can be counted without listing them
            if constrained and lc.stationary is not None:
                # stationary: the held tensor's dims (any order) outside all others (any order)
                dims = self.workload.tensors[self._tensor_index(lc.stationary, lv, "stationary")].dims
                held = sum(1 << d for d in dims)
                return np.array([math.factorial(_bits(m & held)) * math.factorial(_bits(m & ~held))
                                 for m in masks.tolist()], np.int64)
            return np.array([math.factorial(_bits(m)) for m in masks.tolist()], np.int64)
        return np.array([len(self.orders_for(lv, self._dims_of(m), constrained)) for m in masks.tolist()],
                        np.int64)

    def _dims_of(self, mask: int) -> frozenset[int]:
        return frozenset(d for d in range(self.n_dims) if mask >> d & 1)

    def order_array(self, lv: int, mask: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_order_array_cache", {})
        if (lv, mask) not in cache:
            dims = frozenset(d for d in range(self.n_dims) if mask >> d & 1)
            rest = [d for d in range(self.n_dims) if d not in dims]
            cache[lv, mask] = np.array([list(o) + rest for o in self.orders_for(lv, dims)], np.int64).reshape(-1, self.n_dims)
        return cache[lv, mask]
