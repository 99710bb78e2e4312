"""What the innermost level's bound (`innermost.py`) counts for a tensor with a sliding axis
(a convolution's input, p+r), whose tiles overlap as they move and whose copies under a split
may coincide: the multicast of coinciding windows, the words an instance touches, and the
fills of a tile one value wide along each sliding axis, where no slide is partial.
"""
from __future__ import annotations

import numpy as np

from ... import tiles

MAX_WINDOW_ORDERS = 400_000  # (orders x sets of looped dims) walked for a window's refetches at most


def sliding_dims(tensor) -> list[int]:
    """The dims of the tensor's axes that sum several dims."""
    return [d for axis in tensor.axes if sum(1 for _, c in axis if c) > 1 for d, c in axis if c]


def multicast(arch, tensor, vectors: np.ndarray, tile: np.ndarray, innermost: int, levels: list[int]) -> np.ndarray:
    """(cells,) how many units share each transfer of the tensor over the enumerated fanouts
    `levels`, under each cell's split vectors ((cells, j, D)) and tile ((D, cells)): their
    units over the distinct tiles they hold, as the cost model counts them
    (`cost/multicast.py`: along an axis p+r the offsets are a sumset, one progression per
    split dim). The offsets' steps are the spans below each fanout, known where the fanout
    feeds the `innermost` level (the cell's tile); elsewhere each sumset is taken at its
    least possible size, the sum of its progressions' lengths less one per extra progression
    (|A + B| >= |A| + |B| - 1), so the multicast is never less than a completion's. Along an
    axis of one dim, the offsets never collide (mixed radix): the product of its splits."""
    units = np.prod([vectors[:, x].prod(axis=1) for x in levels], axis=0).astype(float)
    groups = [[x] for x in levels] if arch.multicast == "per_fanout" else [levels]
    distinct = np.ones(len(units))
    for group in groups:
        for axis in tensor.axes:
            progressions = [(x, d, c) for x in group for d, c in axis if c]
            counts = np.stack([vectors[:, x, d] for x, d, _ in progressions], axis=1)     # (cells, P)
            if len({d for _, d, _ in progressions}) == 1:
                distinct = distinct * counts.prod(axis=1)
            elif all(x == innermost - 1 for x, _, _ in progressions):
                distinct = distinct * _sumset_sizes(np.stack([c * tile[d] for _, d, c in progressions], axis=1),
                                                    counts)
            else:
                distinct = distinct * np.maximum(1, (counts - 1).sum(axis=1) + 1)
    return units / distinct


def _sumset_sizes(steps: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(cells,) the size of the sumset of each row's progressions (step, count), computed once
    per distinct row."""
    table = np.concatenate([steps, counts], axis=1).astype(np.int64)
    unique, inverse = np.unique(table, axis=0, return_inverse=True)
    k = steps.shape[1]
    sizes = np.array([tiles.distinct_offsets(tuple(zip(row[:k].tolist(), row[k:].tolist()))) for row in unique],
                     float)
    return sizes[inverse.reshape(-1)]


def touched(tensor, tile: np.ndarray, trips: np.ndarray) -> np.ndarray:
    """(cells,) at least how many distinct words of the tensor one instance touches, in a
    space of exact factors: over dim d it takes tile x trips values, every combination of
    them, so along an axis p+r at least |P| + |R| - 1 sums (|A + B| >= |A| + |B| - 1,
    strides and all), along an axis of one dim its values. Splits over fanouts the cells
    leave out give an instance fewer values but add instances, and never lower the total."""
    values = tile * trips                                                       # (D, cells)
    out = np.ones(tile.shape[1])
    for axis in tensor.axes:
        out = out * (sum(values[d] - 1 for d, c in axis if c) + 1)
    return out


def steps(tensor, trips: np.ndarray, way_orders: list[list[tuple[int, ...]]], cutoffs: dict,
          give_up=None) -> np.ndarray:
    """(ways, cells) at least how many times the tensor's tile, one value wide along each
    sliding axis, is filled per instance under each way's orders (`refetch.orders_by_way`),
    in a space of exact factors: a fill per step out to the window cutoff (`cutoff`) of each
    of the way's orders cut to the dims that have loops in the cell (trips > 1), and per sweep
    inside it the places it visits (`swept`), least over the orders. Where the orders are too
    many to walk per set of such dims, 1. `cutoffs` memoises, per set of looped dims, each
    way's distinct cuts. Once `give_up()` answers True (the search's deadline has passed),
    the cells not yet counted keep 1."""
    masks, inverse = np.unique(trips.T > 1, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    out = np.ones((len(way_orders), trips.shape[1]))
    if len(masks) * sum(len(orders) for orders in way_orders) > MAX_WINDOW_ORDERS:
        return out
    kept = trips - trips / least_prime(trips)      # per dim the trips a loop inside a split keeps, at least
    for m, mask in enumerate(masks):
        if give_up is not None and give_up():
            break
        cells = np.flatnonzero(inverse == m)
        key = tuple(mask.tolist())
        if key not in cutoffs:          # per way, the distinct cuts of its orders under this mask
            # (cut once per distinct order of the looped dims: 5,040 orders of 7 dims are 24 of 4)
            cutoffs[key] = [{_cuts(tensor, looped) for looped in {tuple(d for d in order if mask[d])
                                                                  for order in orders}}
                            for orders in way_orders]
        at, below = trips[:, cells], kept[:, cells]
        counted: dict = {}              # each count once per set of looped dims
        for w, cuts in enumerate(cutoffs[key]):
            per_order = []
            for at_cutoff, splits in cuts:
                if ("swept", at_cutoff) not in counted:
                    counted["swept", at_cutoff] = swept(at, *at_cutoff)
                for split in splits:
                    if split not in counted:
                        counted[split] = revisited(at, below, *split)
                per_order.append(np.max([counted["swept", at_cutoff]] + [counted[split] for split in splits], axis=0))
            if per_order:
                out[w, cells] = np.min(per_order, axis=0)
    return out


def steps_once(tensor, trips: np.ndarray, way_orders, known: dict, cutoffs: dict, give_up=None) -> np.ndarray:
    """`steps` for cells of `trips` ((D, cells)), each distinct column counted once into `known`
    (kept per space: the counts depend on the trips alone, which the innermost bound's node
    splits repeat; h100 ResNet-50 conv1: a sixth of the walk). Counts cut short by `give_up`
    are not kept."""
    columns, inverse = np.unique(trips.T, axis=0, return_inverse=True)
    keys = [c.tobytes() for c in columns]
    if missing := [i for i, key in enumerate(keys) if key not in known]:
        counted = steps(tensor, columns[missing].T, way_orders, cutoffs, give_up)
        known = {**known} if give_up is not None and give_up() else known
        known.update((keys[i], counted[:, j]) for j, i in enumerate(missing))
    return np.stack([known[key] for key in keys], axis=1)[:, inverse.reshape(-1)]


def _cuts(tensor, looped: tuple[int, ...]) -> tuple:
    """What `steps` counts of a looped order: (outside, inside axes) at the window cutoff
    (`swept`), and the same at every split of the order (`revisited`)."""
    def split(at):
        inside = set(looped[at:])
        return (tuple(sorted(looped[:at])),
                tuple(tuple(d for d, c in axis if c and d in inside) for axis in tensor.axes))
    return split(cutoff(tensor, looped)), tuple(sorted({split(at) for at in range(len(looped))}))


def swept(trips: np.ndarray, outside: tuple[int, ...], axes: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """(cells,) fills of a one-value-wide window tile: one per iteration of the loops of the
    dims `outside` the cutoff (each step there moves it), times the distinct places each
    sweep of the loops inside visits, at least, per axis the sum of its dims' values less
    one per extra dim (|A + B| >= |A| + |B| - 1). A dim with loops on both sides gives a
    sweep fewer values but the outside more iterations, never fewer in all."""
    out = trips[list(outside)].prod(axis=0)
    for dims in axes:
        out = out * (sum((trips[d] - 1 for d in dims), np.zeros(trips.shape[1])) + 1)
    return out


def revisited(trips: np.ndarray, kept: np.ndarray, outside: tuple[int, ...],
              axes: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """(cells,) fills of a one-value-wide window tile, split anywhere: each iteration of the
    loops out to a point X (the dims `outside`, whose loops all lie there) sweeps the loops
    inside X, and every place a sweep visits but its first is a fill (a change of place is
    a whole tile: nothing slides partially), however the steps between sweeps fall. A dim
    inside X has a loop of 2 or more there, so at most T / p of its trips T lie outside (p
    its least prime factor, u below), and an axis's dims inside give each sweep at least
    sum(T_i / u_i - 1) + 1 places over prod(u_i) more sweeps: at least sum(T_i (1 - 1 / p_i))
    (`kept`, per dim) fills beyond one a sweep; the best axis counts."""
    out = np.zeros(trips.shape[1])
    for dims in axes:
        if dims:
            out = np.maximum(out, kept[list(dims)].sum(axis=0))
    return trips[list(outside)].prod(axis=0) * out


def least_prime(values: np.ndarray) -> np.ndarray:
    """(N,) the least prime factor of each integer value (>= 2; 1 stays 1)."""
    values = np.rint(values).astype(np.int64)
    out = values.copy()
    for factor in range(int(np.sqrt(max(values.max(initial=1), 1))), 1, -1):
        out = np.where(values % factor == 0, factor, out)
    return np.where(values > 1, np.minimum(out, values), 1).astype(float)


def cutoff(tensor, order: tuple[int, ...]) -> int:
    """How many of the merged loops `order` (outermost first, the dims that have loops only)
    of a tensor with a sliding axis step it to a new tile at every step, where its tile spans
    one value along each sliding axis (so that any move of an axis fetches the tile whole: no
    partial slide).

    A step of loop j advances j's dim and wraps every loop inside j back. Where every
    coefficient is positive, an axis whose dims only wrap moves back, strictly if one of them
    has a loop inside j; the tile stays only where j's own axis is the only one with loops
    inside j and j's advance is undone by the wraps of another dim of that axis (p up, r
    back). So in a real nest every step at or outside the innermost loop of the axis that
    ends second-innermost moves the tile, and every step out to the innermost relevant loop
    does where the innermost axis has one dim past that point. In the merged order of a real
    nest (dims by their innermost loops) the loops of the dims before the cutoff are all at
    or outside it. A dim without loops must be left out of `order`: placed last it would
    seem to undo its axis's steps. A tensor with a negative coefficient gets 0 (nothing
    certain)."""
    if any(c < 0 for axis in tensor.axes for _, c in axis):
        return 0
    last = []               # per axis the merged position of its innermost dim, and its dims
    for axis in tensor.axes:
        dims = {d for d, c in axis if c}
        at = [k for k, d in enumerate(order) if d in dims]
        if at:
            last.append((at[-1], dims))
    if not last:
        return 0
    last.sort(key=lambda item: item[0])
    innermost, dims = last[-1]
    second = last[-2][0] if len(last) > 1 else -1
    past = {d for d in order[second + 1:innermost + 1] if d in dims}
    return innermost + 1 if len(past) <= 1 else second + 1
