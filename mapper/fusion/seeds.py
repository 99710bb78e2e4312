"""Mappings carried from one einsum of a graph to another, as starting points of its search.

The einsums of a layer are alike: each dim of a two-input einsum plays one *role*, the set of
its tensors it indexes (rows: output and first input; columns: output and second input; the
reduction: both inputs; a batch: all three). A mapping of one einsum says, per role, how the
role's iteration space is split across the levels, loops and spatial axes; `carried` splits
the other einsum's dims of the same role the same way: the product of each role's factors at
each slot (a level's temporal loops, or one spatial axis) is kept, its ratio to the new role's
size taken at the outermost temporal loop (or divided out of the outermost loops first), and
each slot's product shared among the role's dims, innermost dims first. Keeps and stages are
kept by tensor position (output, first input, second input: the roles of `constraints`).

A carried mapping is only offered to the search (`Joint`'s `incumbents`), which admits it
where the space holds it and prices it: it is never a result by itself. On a large array, where
the greedy start is far from the optimum, one einsum's good mapping is a far better start for
the next than greedy's.
"""
from __future__ import annotations

import math
from dataclasses import replace

from ..mapping import LevelMapping, Mapping
from ..spec import Workload


def roles(wl: Workload) -> dict[tuple, list[int]]:
    """Dims grouped by the tensors (by position) that they index, in the workload's order."""
    out: dict[tuple, list[int]] = {}
    for d in range(len(wl.dims)):
        out.setdefault(tuple(bool(r) for r in wl.relevance[:, d]), []).append(d)
    return out


def _slots(mapping: Mapping) -> list[tuple[int, str, int]]:
    """(level, kind, axis) of every place a factor sits, outermost first."""
    return [(lv, kind, axis) for lv in range(len(mapping.levels)) for kind, axis in
            (("t", 0), ("s", 0), ("s", 1))]


def _products(mapping: Mapping, dims: list[int]) -> dict:
    """Per slot, the product of the loop bounds of `dims` there."""
    out = {slot: 1 for slot in _slots(mapping)}
    for lv, lm in enumerate(mapping.levels):
        for d, bound in lm.temporal:
            if d in dims:
                out[lv, "t", 0] *= bound
        for d, bound, axis in lm.spatial:
            if d in dims:
                out[lv, "s", axis] *= bound
    return out


def _resized(products: dict, have: int, want: int) -> dict | None:
    """`products` whose total `have` becomes `want`: the outermost temporal loop grows by the
    ratio, or the loops lose it outermost first (temporal before spatial); None where the ratio
    is not whole."""
    if want % have == 0:
        products = dict(products)
        products[0, "t", 0] *= want // have
        return products
    if have % want:
        return None
    ratio, products = have // want, dict(products)
    for kind in ("t", "s"):
        for slot in products:
            if slot[1] == kind and ratio > 1:
                g = math.gcd(products[slot], ratio)
                products[slot] //= g
                ratio //= g
    return products if ratio == 1 else None


def carried(mapping: Mapping, source: Workload, target: Workload) -> Mapping | None:
    """`mapping` of `source` carried to `target` by role (module docstring), or None where the
    two differ in their tensors or a role's factors do not share out among its dims."""
    if len(source.tensors) != len(target.tensors) or len(source.tensors) != 3:
        return None
    src, dst = roles(source), roles(target)
    placed: dict = {}                    # (slot, target dim) -> bound
    for role in set(src) | set(dst):
        dims_in, dims_out = src.get(role, []), dst.get(role, [])
        have = math.prod(source.sizes[d] for d in dims_in)
        want = math.prod(target.sizes[d] for d in dims_out)
        products = _products(mapping, dims_in)
        if math.prod(products.values()) != have:
            return None                  # a padded or imperfect factor: not carried
        products = _resized(products, have, want)
        if products is None:
            return None
        left = {d: target.sizes[d] for d in dims_out}
        for slot in reversed(list(products)):        # innermost slots take the innermost dims first
            p = products[slot]
            for d in reversed(dims_out):
                g = math.gcd(p, left[d])
                if g > 1:
                    placed[slot, d] = g
                    p //= g
                    left[d] //= g
            if p != 1:
                return None
    levels = []
    for lv, lm in enumerate(mapping.levels):
        temporal = tuple((d, b) for (slot, d), b in placed.items() if slot == (lv, "t", 0))
        spatial = tuple((d, b, slot[2]) for (slot, d), b in placed.items() if slot[0] == lv and slot[1] == "s")
        levels.append(replace(lm, temporal=_ordered(temporal, lm, src, dst), spatial=spatial))
    return Mapping(tuple(levels))


def _ordered(loops: tuple, lm: LevelMapping, src: dict, dst: dict) -> tuple:
    """The target's loops at one level in the source's order of roles (outermost first)."""
    role_of = {d: role for role, dims in dst.items() for d in dims}
    rank = {}
    for k, (d, _) in enumerate(lm.temporal):
        role = next(r for r, dims in src.items() if d in dims)
        rank.setdefault(role, k)
    return tuple(sorted(loops, key=lambda loop: (rank.get(role_of[loop[0]], -1), loop[0])))
