"""Tiles: how large a tensor's tile is, what a level's kept tiles take, and whether they fit.

A tensor is indexed by affine expressions of the dims (`Tensor.axes`: per axis, (dim,
coefficient) pairs; a convolution's input row is `p + r`). The tile a level holds spans, per
dim, the product of every loop bound at and below that level (`level_spans`). Over those spans
an axis covers its bounding box, 1 + sum of c x (span - 1) (a sliding window's overlap
included), and the tile is the product of its axes' extents (`words`). A level holds a tile of
every tensor it keeps, once per buffering stage: its footprint, per instance, is the sum of
those tiles' bytes times its stages (`kept_bytes`), which must be within its capacity (`fits`).

Every consumer asks here: the mapspace's pruning, the search tree, the bounds, CP-SAT's model,
the cost model (scalar and vectorised), the loader's and the explainer's checks. The functions
take plain numbers, numpy arrays whose first axis is the dim, or solver expressions alike.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .limits import MAX_INSTANCES

# sums `distinct_offsets` enumerates at most (128 MiB of int64): as many as the instances a
# level may have, so that the cost model's progressions (spatial fanouts, whose counts multiply
# to at most the instances) are always counted exactly
MAX_OFFSETS = MAX_INSTANCES


def extent(axis, spans):
    """The bounding-box extent of one axis, 1 + sum over its (dim, c) of c x (spans[dim] - 1);
    `spans[d]` is dim d's span (a number, an array, or a CP-SAT expression). An axis that is a
    single dim with coefficient 1 is that dim's span itself (no copy)."""
    if len(axis) == 1 and axis[0][1] == 1:
        return spans[axis[0][0]]
    return 1 + sum(c * (spans[d] - 1) for d, c in axis)


def words(tensor, spans):
    """Words of `tensor`'s tile over `spans` (the product of its axes' extents)."""
    return box_words(tensor.axes, spans)


def touched_words(tensor, sizes) -> int:
    """Distinct words of `tensor` some iteration point over `sizes` reads or writes, or a lower
    bound on them: per axis the distinct values of its affine expression, their product
    when the axes share no dim (else the largest axis). Below its bounding box (`words`)
    where a strided window skips some (`I[c, 2*p+r]` with r = 1 touches every other word)."""
    counts = [distinct_offsets(tuple((c, int(sizes[d])) for d, c in axis if c)) for axis in tensor.axes]
    dims = [d for axis in tensor.axes for d, c in axis if c]
    if len(dims) != len(set(dims)):
        return max(counts, default=1)
    out = 1
    for count in counts:
        out *= count
    return out


@lru_cache(maxsize=65536)
def distinct_offsets(progressions: tuple[tuple[int, int], ...]) -> int:
    """Size of {sum_k i_k * step_k : 0 <= i_k < count_k}, without building the set where it has
    a closed form: one run of multiples of the smallest step (one progression; a window sliding
    by at most its width, a convolution row `p + r` with a stride up to the kernel), or copies
    of the sums so far that cannot overlap (a stride past the window): a dim of 2^31 - 1 is one
    number, not a set of two billion. Otherwise the sums are enumerated, exactly while they
    number at most MAX_OFFSETS; past that the count of a subset is returned, a lower bound
    (`touched_words`, itself a lower bound, for the traffic bounds). Exact whenever the counts
    multiply to at most MAX_OFFSETS, as every progression of the cost model does."""
    # a negative step mirrors its progression: the same number of distinct sums
    terms = sorted((abs(step), count) for step, count in progressions if count > 1 and step)
    if not terms:
        return 1
    gap, run = terms[0]                  # the sums so far: {0, gap, 2 gap, ..., (run - 1) gap}
    rest = 1
    for step, count in terms[1:]:
        if step % gap or step // gap > run:
            break                        # shifted copies with holes between them: no longer a run
        run += step // gap * (count - 1)
        rest += 1
    size, span = run, gap * (run - 1)    # how many sums, the largest
    sums = np.arange(run, dtype=np.int64) * gap if rest < len(terms) and run <= MAX_OFFSETS else None
    for step, count in terms[rest:]:
        if sums is not None and sums.size * count <= MAX_OFFSETS:
            sums = np.unique((sums[:, None] + step * np.arange(count, dtype=np.int64)).ravel())
            size, span = int(sums.size), int(sums[-1])
        elif step > span:                # the copies shifted by `step` are disjoint
            size, span, sums = size * count, span + step * (count - 1), None
        else:
            return size                  # the sums without this term: a subset
    return size


def box_words(axes, spans):
    """Words of the bounding box of `axes` (per axis, its (dim, coefficient) pairs) over `spans`."""
    out = 1
    for axis in axes:
        out = out * extent(axis, spans)
    return out


def level_spans(factors: np.ndarray) -> np.ndarray:
    """(L, D, N) the span of every dim in the tile each level holds: the product of the
    factors (temporal and spatial) at that level and below, from a (L, 3, D, N) factor array."""
    # explicit products: numpy's reduce over the middle axis and cumprod over a reversed
    # view took twice as long, and the search prices millions of rows through here
    full = factors[:, 0].copy()
    for kind in range(1, factors.shape[1]):
        full *= factors[:, kind]
    for level in range(len(full) - 2, -1, -1):
        full[level] *= full[level + 1]
    return full


def tile_words(workload, factors: np.ndarray) -> list[np.ndarray]:
    """Per tensor, (L, N) the words of the tile each level holds, from (L, 3, D, N) factors."""
    spans = np.moveaxis(level_spans(factors), 1, 0)         # (D, L, N): spans[d] per level
    return [words(tensor, spans) for tensor in workload.tensors]


def kept_bytes(arch, workload, tiles: list, keep: np.ndarray, stages: np.ndarray) -> np.ndarray:
    """(L, N) bytes each level's kept tiles take per instance, times its stages: `tiles` per
    tensor (L, N) words, `keep` (L, T, N) what each level keeps, `stages` (L, N)."""
    out = 0.0
    for t, tensor in enumerate(workload.tensors):
        word_bytes = np.array([level.word_bytes(tensor) for level in arch.levels])[:, None]
        out = out + tiles[t] * keep[:, t] * word_bytes
    return out * stages


def level_bytes(level, workload, tiles: list, keep: np.ndarray, stages) -> np.ndarray:
    """(N,) bytes one level's kept tiles take per instance, times its stages: `tiles` per
    tensor (N,) words at this level, `keep` (T, N)."""
    used = sum(tiles[t] * keep[t] * level.word_bytes(tensor) for t, tensor in enumerate(workload.tensors))
    return used * stages


def option_bytes(level, workload, tiles: list, keeps, n: int) -> np.ndarray:
    """(keep options, N) bytes of one stage of each keep option of a level (each a tuple of
    tensor indices), from per-tensor words at this level (`tiles`, each (N,))."""
    per_tensor = [tiles[t] * level.word_bytes(tensor) for t, tensor in enumerate(workload.tensors)]
    return np.stack([sum((per_tensor[t] for t in keep), np.zeros(n)) for keep in keeps])


def within(used, capacity):
    """Whether `used` bytes fit in `capacity` bytes: the one capacity comparison of the package
    (tests/test_architecture.py finds no other). `used` a number, a numpy array (elementwise)
    or a CP-SAT linear expression (a constraint of its model)."""
    return used <= capacity


def fits_level(level, used):
    """Whether `used` bytes per instance fit `level` (a number or an array, elementwise)."""
    return within(used, level.capacity)


def fits(arch, used: np.ndarray) -> np.ndarray:
    """(N,) whether every level's bytes `used` ((L, N), per instance) are within its capacity,
    the sub-levels of one level (`Arch.capacity_groups`) within it together."""
    capacity = np.array([level.capacity for level in arch.levels])[:, None]
    ok = within(used, capacity).all(axis=0)
    for members in arch.capacity_groups:
        ok = ok & within(group_bytes(used, members), arch.levels[members[0]].capacity)
    return ok


def group_bytes(used, members):
    """Bytes the sub-levels `members` of one level take together (`used` indexed by level:
    a list or an (L, N) array, per instance)."""
    return sum(used[lv] for lv in members)


def unit_tile(mapping, n_dims: int) -> list[int]:
    """Per dim, the extent of one compute unit's own tile: the innermost level's temporal loops
    (its spatial loops are the units side by side)."""
    tile = [1] * n_dims
    for d, b in mapping.levels[-1].temporal:
        tile[d] *= b
    return tile
