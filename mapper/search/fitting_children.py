"""The children of tree nodes that fit, generated without the ones that do not.

`LevelTree.children` crosses every dim's factor choices and then rules out what breaks the
fanout of the level being split or the capacity of the level below it. On the levels near the
compute units almost everything is ruled out: a 16x16 array takes at most 16 units per mesh
axis over all dims together, and a 64-byte register file a tile of a few dozen words, so
nearly all the factor choices a node crosses there do not fit, and generating them was most
of the walk's time (docs/RESULTS.md).

Here the cross product is built one dim at a time, as a join: after each dim the partial
choices whose spatial factors already exceed a mesh axis, or whose tile already overflows the
level below with every later dim at the smallest extent it can take, are dropped before the
next dim multiplies them. Both tests only grow with the dims still to come, so nothing that
fits is lost; the exact test (`LevelTree.fitting_choices`) still runs on what comes out.
Each step expands at most `limit` rows at a time, so memory stays bounded by the rows priced.
The children come out parent by parent (ascending), as `LevelTree.children` numbers them.

Where the level being split has interchangeable mesh axes (`Mapspace.mirrored`), the walk asks
(`mirror`) for one of each pair of mirror images only: a factor choice and the one with its x
and y factors swapped cost exactly the same, and of the two the one whose x factors come first
by content (at the first dim where x and y differ, the smaller x) ranks first
(`objective.ranking_keys`), so it is the one exhaustive search returns. Decided dim by dim as
the dims are crossed in: a partial choice whose x already exceeds its y is dropped before the
later dims multiply it (on pe-array's 16x16 array, half the leaves of a GEMM's walk).
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

import numpy as np

from .. import tiles
from ..mapping import along_last
from ..mapspace import pruning
from .tree import LevelTree, Nodes, in_pieces

EXAMINED_PER_SLICE = 16     # partial choices examined per slice asked for, at most, between slices


class _Partial(NamedTuple):
    parent: np.ndarray      # (M,) index of the node each partial choice extends
    groups: np.ndarray      # (M, d) child group of each dim decided so far
    units: np.ndarray       # (2, M) spatial factors of the split level so far, per mesh axis
    spans: np.ndarray       # (D, M) the tile below: decided dims exact, the rest their least
    tied: np.ndarray        # (M,) its x and y factors equal on every dim decided so far

    def take(self, rows) -> "_Partial":
        return _Partial(self.parent[rows], self.groups[rows], along_last(self.units, rows),
                        along_last(self.spans, rows), self.tied[rows])


def fitting_children(tree: LevelTree, nodes: Nodes, limit, first_order_only: bool = False,
                     choices: np.ndarray | None = None, early=None, cut=None, most_rows=None,
                     mirror: bool = False) -> Iterator[tuple[int, Nodes | None]]:
    """(first parent, children) slices: the children of `nodes` (level k's factors, its loop
    orders, level k+1's stages and keeps; k = nodes.depth) that fit, about `limit` factor
    choices (before orders and choices) per slice; None where a stretch examined found none
    that fits. The first parent is the first whose children are not all out yet. `limit` may
    be a function, asked before each step (the walk sizes its chunks by the time left). With
    `first_order_only`, each factor choice comes with the first of its loop orders only; with
    `choices` (stages x keeps, bool), level k+1 takes only the stage and keep options it marks;
    with `early` ((parents (M,), first dim's child groups (M,)) -> bool), only the factor
    choices whose parent and first dim it marks are expanded (the walk's: a worker's share of
    a walk on several cores, parents the incumbent now beats), decided before the other dims
    are crossed in; with `cut` ((parents (M,), level k's spatial factors per mesh axis (2, M))
    -> bool), the factor choices it marks are dropped before their orders and choices are
    crossed in (the walk's bound from the units they reach; where it has an `allowed` array
    after a call, the stage and keep options it judged for each choice, used instead of judging
    them again; where it has a `reaching` method ((parents (M,), the most units level k's split
    can still reach per mesh axis (2, M), the split of each dim decided so far (d, M)) ->
    bool), the partial choices it does not mark are
    dropped after each dim, before the later dims multiply them); with `most_rows` (a function), a
    slice whose choices expand to more children than it says comes out in several pieces; with
    `mirror`, of two factor choices that are mirror images on a level with interchangeable mesh
    axes, only the one that ranks first (above)."""
    limit = limit if callable(limit) else (lambda rows=limit: rows)
    k, n_dims = nodes.depth, tree.n_dims
    lo, count = tree.factor_rows.child_ranges(nodes.depth, nodes.groups)
    values = [_child_values(tree, d, k) for d in range(n_dims)]
    least = np.stack([tree.factor_rows.smallest_extents(d, k, k + 1)[nodes.groups[:, d]] for d in range(n_dims)])
    n = len(nodes)
    start = _Partial(np.arange(n), np.zeros((n, 0), np.int64), np.ones((2, n), np.int64), least, np.ones(n, bool))
    pending, size, examined = [], 0, 0
    reach = getattr(cut, "reaching", None)
    reach = None if reach is None else (reach, _most_later_units(tree, k, values, nodes))
    mirror = mirror and tree.space.mirrored[k]
    for piece, at, rows in _join(tree, k, lo, count, values, start, 0, limit, early, reach, mirror):
        if piece is not None:
            pending.append(piece)
            size += len(piece.parent)
        examined += rows
        # a slice when enough fit, or (possibly empty) when many were examined: the caller
        # asks its budget between slices, and where almost nothing fits that can take a while
        if size >= limit() or examined >= EXAMINED_PER_SLICE * limit():
            yield from _emit(tree, nodes, pending, at, first_order_only, choices, cut, most_rows)
            pending, size, examined = [], 0, 0
    if pending:
        yield from _emit(tree, nodes, pending, len(nodes) - 1, first_order_only, choices, cut, most_rows)


def _child_values(tree: LevelTree, d: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per child group of dim d at depth k+1: level k's spatial factors on each mesh axis, and
    the extent of the tile level k+1 holds (memoised on the tree: the keep parts share it)."""
    key = ("child values", d, k)
    rows_of = tree.factor_rows
    if key not in rows_of.memo:
        cols, rows = rows_of.cols[d], rows_of.starts[d][k + 1]
        units = [np.ones(len(rows), np.int64) for _ in range(2)]
        extent = cols[0][rows].copy()
        for c, slot in enumerate(rows_of.columns):
            level, kind = tree.space.slots[slot]
            if level <= k:
                extent //= cols[1 + c][rows]
            if level == k and kind > 0:
                units[kind - 1] *= cols[1 + c][rows]
        rows_of.memo[key] = (units[0], units[1], extent)
    return rows_of.memo[key]


def _most_later_units(tree: LevelTree, k: int, values: list, nodes: Nodes) -> np.ndarray:
    """(D + 1, 2, N) per dim d and node, the most units the dims after d can add to level k's
    split per mesh axis (the product of each later dim's largest spatial factor among the
    node's own child groups), capped by the fanout: what a partial choice decided up to d can
    reach at most."""
    fanout = np.array(tree.space.arch.fanout(k), np.int64)[:, None]
    most = np.ones((tree.n_dims + 1, 2, len(nodes)), np.int64)
    for d in range(tree.n_dims - 1, -1, -1):
        # a depth-k group's child groups are consecutive, and every group has some
        below = tree.factor_rows.starts[d][k + 1]
        firsts = np.searchsorted(below, tree.factor_rows.starts[d][k])
        x, y, _ = values[d]
        largest = np.stack([np.maximum.reduceat(x, firsts), np.maximum.reduceat(y, firsts)])[:, nodes.groups[:, d]]
        most[d] = np.minimum(most[d + 1] * largest, fanout)
    return most


def _join(tree, k, lo, count, values, partial: _Partial, d: int,
          limit, early=None, reach=None, mirror: bool = False) -> Iterator[tuple[_Partial | None, int, int]]:
    """(choices that may fit, the parent being expanded, rows examined) over dims d.. of the
    partial choices, depth first, so in ascending parent order; (None, parent, rows) after
    each expansion, so that the caller counts the rows examined. With `reach` (the cut's
    `reaching`, `_most_later_units`), a partial choice is dropped once even the most units
    its later dims can add leave it beaten: the units only grow with them, and a bound from
    the units only falls, so no choice the cut keeps is lost (on a GPU's L2 most factor
    choices split the SMs too little, and were crossed with every later dim first). With
    `mirror`, a partial choice whose x and y factors were equal so far is dropped where dim d's
    x exceeds its y: its mirror image ranks first (module docstring)."""
    if d == tree.n_dims:
        yield partial, int(partial.parent[0]), 0
        return
    width = count[partial.parent, d]
    ends = np.cumsum(width)
    # the expansion numbered flat (partial choice by partial choice, dim d's groups inside),
    # `limit` at a time, a partial choice's groups split across slices where they are many
    total, first = (int(ends[-1]) if len(ends) else 0), 0
    # an `early` that hands out work (the walk's units on several cores) decides a few
    # choices at a time, as they are expanded: not a whole slice's first dims ahead
    step = limit if early is None or d or not hasattr(early, "batch") else (lambda: early.batch)
    while first < total:
        flat = np.arange(first, min(total, first + step()))
        first += len(flat)
        source = np.searchsorted(ends, flat, side="right")
        offset = flat - (ends - width)[source]
        group = lo[partial.parent[source], d] + offset
        x, y, extent = values[d]
        grown = partial.take(source)
        units = grown.units * np.stack([x[group], y[group]])
        spans = grown.spans.copy()
        spans[d] = extent[group]
        ok = _may_fit(tree, k, units, spans)
        tied = grown.tied
        if mirror:
            ok &= ~tied | (x[group] <= y[group])
            tied = tied & (x[group] == y[group])
        if early is not None and d == 0:
            ok &= early(grown.parent, group)
        if reach is not None and d + 1 < tree.n_dims and ok.any():
            rows = np.flatnonzero(ok)
            fanout = np.array(tree.space.arch.fanout(k), np.int64)[:, None]
            most = np.minimum(units[:, rows] * reach[1][d + 1][:, grown.parent[rows]], fanout)
            # each decided dim's split of level k (its factor on both mesh axes)
            decided = np.stack([values[e][0][g] * values[e][1][g] for e, g in
                                enumerate([*grown.groups[rows].T, group[rows]])])
            ok[rows] = reach[0](grown.parent[rows], most, decided)
        yield None, int(partial.parent[source[0]]), len(source)
        if ok.any():
            keep = np.flatnonzero(ok)
            yield from _join(tree, k, lo, count, values,
                             _Partial(grown.parent[keep], np.concatenate([grown.groups[keep], group[keep, None]], axis=1),
                                      units[:, keep], spans[:, keep], tied[keep]), d + 1, limit, reach=reach,
                             mirror=mirror)


def _may_fit(tree: LevelTree, k: int, units: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Where the split so far is within level k's fanout, and level k+1 can hold the tile (its
    later dims at their least) in one of its keep sets with its fewest stages."""
    space = tree.space
    ok = space.arch.fits_fanout(k, units[0], units[1])
    if k + 1 < tree.n_levels:
        choice = space.choices[k + 1]
        if all(choice.keeps):
            least = pruning.option_footprints(tree.space, k + 1, spans, choice.keeps).min(axis=0) * min(choice.stages)
            ok &= tiles.fits_level(space.arch.levels[k + 1], least)
    return ok


def _emit(tree: LevelTree, nodes: Nodes, pending: list[_Partial], at: int, first_order_only: bool,
          choices: np.ndarray | None, cut=None, most_rows=None) -> Iterator[tuple[int, Nodes | None]]:
    """(the first parent not yet wholly expanded, the pending choices' children or None), in
    pieces of at most `most_rows` children where the choices expand to more (a single choice
    may still exceed it)."""
    if not pending:
        yield at, None
        return
    parent = np.concatenate([p.parent for p in pending])
    groups = np.concatenate([p.groups for p in pending])
    first = int(parent[0])      # before the cut: a parent is no further on for what it drops
    allowed = None
    if cut is not None:
        kept = ~cut(parent, np.concatenate([p.units for p in pending], axis=1), groups)
        parent, groups = parent[kept], groups[kept]
        if not len(parent):
            yield first, None
            return
        # a cut that judged the stage and keep options of the choices it kept says so
        judged = getattr(cut, "allowed", None)
        allowed = None if judged is None else judged[kept]
    k = nodes.depth
    factor_nodes = Nodes(k + 1, groups, along_last(nodes.orders, parent),
                         along_last(nodes.stages, parent), along_last(nodes.keeps, parent))
    if allowed is None:
        allowed = tree.fitting_choices(factor_nodes)
    if choices is not None:
        allowed &= choices
    pieces = ([np.arange(len(parent))] if most_rows is None
              else in_pieces(tree.expansions(factor_nodes, k, allowed, first_order_only), most_rows()))
    for rows in pieces:
        if len(rows):
            yield first, tree._with_orders_and_choices(factor_nodes.take(rows), k, first_order_only, allowed[rows])
