"""A mapping of one shape of an einsum carried to another shape of the same einsum.

A neighbouring shape's optimum is a good start for a search (a sweep's neighbours, a warm-start
file, the coarse shape of `search/joint/coarse.py`): the outermost level's loops absorb each
dim's ratio, every inner tile stays as it was, so it still fits.
"""
from __future__ import annotations

import math

from .mapping import LevelMapping, Mapping
from .spec import Workload


def rescale(mapping: Mapping, source: Workload, target: Workload) -> Mapping | None:
    """The mapping of `source` carried to `target` (same einsum, other sizes): each dim whose
    size changed has its outermost temporal loops scaled by the ratio, growing the outermost
    one, or shrinking from the outermost inwards while the bounds divide. None when a ratio is
    not whole or the loops cannot absorb it (then the mapping does not carry over)."""
    if source.einsum != target.einsum or source.dims != target.dims:
        return None
    levels = [[list(lm.temporal), lm] for lm in mapping.levels]
    for d, (old, new) in enumerate(zip(source.sizes, target.sizes)):
        if old == new:
            continue
        if new % old == 0:
            _scale_outermost(levels, d, new // old)
        elif old % new == 0:
            if not _shrink_outer(levels, d, old // new):
                return None
        else:
            return None
    return Mapping(tuple(LevelMapping(tuple((d, b) for d, b in loops if b > 1), lm.spatial, lm.keep, lm.stages)
                         for loops, lm in levels))


def _scale_outermost(levels, d: int, ratio: int) -> None:
    loops = levels[0][0]
    for i, (dim, bound) in enumerate(loops):
        if dim == d:
            loops[i] = (d, bound * ratio)
            return
    loops.insert(0, (d, ratio))


def _shrink_outer(levels, d: int, ratio: int) -> bool:
    for loops, _ in levels:
        for i, (dim, bound) in enumerate(loops):
            if dim != d or ratio == 1:
                continue
            take = math.gcd(bound, ratio)
            loops[i] = (d, bound // take)
            ratio //= take
    return ratio == 1
