"""Brute-force loop-nest simulator: the ground truth for the analytical cost model.

It walks a mapped loop nest step by step, the way Timeloop's nest analysis describes it, and
counts the words that move between storage levels. It is deliberately independent of the
`mapper` package (it imports nothing from it) and uses no closed-form reuse formulas: every
tile is computed from the loop indices of one time step, every fetch is found by comparing that
tile with the one before, and every multicast or spatial reduction is found by comparing the
requests of sibling instances in the same step. (Two caches keep big nests affordable: a box
that recurs is shifted once per instance, and MAC steps whose temporal part names the same
element are worked out once; both only skip recomputing an identical value.)

    simulate(problem, nest, compute_fanout=(1, 1), valid=None) -> dict
    fragments(problem, nest, roles) -> int

problem:
    {'dims': {'m': 4, 'k': 2, 'n': 2},
     'tensors': {'A': {'axes': [{'m': 1}, {'k': 1}], 'output': False},
                 'Z': {'axes': [{'m': 1}, {'n': 1}], 'output': True}, ...}}
    Each axis of a tensor is an affine expression {dim: positive integer coefficient}; the
    coordinate along that axis is sum(coefficient * dim). Exactly one tensor is the output.

nest: storage levels, OUTERMOST FIRST:
    {'name': 'GLB',
     'temporal': [('m', 4), ('k', 2)],           # outermost first
     'spatial': [('n', 2, 'x'), ('m', 2, 'y')],  # fanout to the next level (or to the MACs)
     'keep': {'A', 'B', 'Z'}}
    The outermost level keeps every tensor. For each dim the product of all its bounds equals
    its size.

compute_fanout: (x, y) number of compute units below each instance of the innermost level; the
    spatial loops of the innermost level must fit in it.
instructions: per role (dims, size), a unit that runs whole instructions: each takes every
    distinct word its points name once (brute_force_instructions.py); None: one per MAC.

Result:
    {'macs': int,
     'levels': {name: {'instances': utilized instances,
                       'tensors': {t: {'reads': r, 'fills': f, 'updates': u}}}}}
    with counts per instance (every utilized instance is simulated; they must all agree).

Ragged tails (`valid`, {dim: size} for the dims whose bounds multiply above their size): the
nest runs its padded grid, and each level also reports 'valid': {t: {'reads', 'fills',
'updates'}} summed over all its instances, counting only the words whose every coordinate is
within the valid sizes (what masked loads and stores move); such a dim may only index a tensor
alone on its axes (a box to clamp, not a window). `fragments` counts the MACs a unit with a
native operation shape executes: for every step of the loops above the innermost level and
every unit, the distinct fragments (per role, a (dims, size) pair, the role's flattened offset
within the unit's tile divided by the size) its iteration points fall into, times the
fragment's MACs.

Semantics (Timeloop's conventions):

* The flattened nest is level 0's temporal loops, level 0's spatial loops, level 1's temporal
  loops, ... and one MAC per innermost iteration point. The value of a dim is the sum over its
  loops of index * stride, where the stride of a loop is the product of the bounds of the loops
  of the same dim that come after it in the flattened nest.
* An instance of level i is one setting of the spatial loops of levels 0..i-1; its time steps
  are the settings of the temporal loops of levels 0..i-1, in lexicographic order.
* The tile of a tensor at level i in one step is the axis-aligned box covering every point that
  the loops of levels i.. (temporal and spatial) touch: along each axis, from the minimum to the
  maximum of the axis expression (holes of strided windows included).
* Fetches: the first tile is fetched whole. Later, an unchanged tile fetches nothing; a tile
  that slid along exactly one axis (still overlapping the previous one) fetches only the new
  slice, provided the slide goes in the same direction as the previous slide (or follows a
  whole fetch / no change); anything else fetches the whole tile again.
* Read-only tensors: fills = fetches (0 at the outermost level); reads = words sent to the
  consumers (the next inner level keeping the tensor, else the MACs), where identical requests
  of sibling consumers in the same step are one read (multicast).
* The output tensor: fills = fetches minus the distinct coordinates the instance ever holds
  (first fetch of an element is an initialisation); updates = words written back by the
  producers (the next inner level keeping it: its fetches, since each fetched word is written
  back once; else one per MAC), where identical writes of sibling producers in the same step are
  reduced to one; reads = updates minus the distinct coordinates updated (the first write of an
  element needs no read-modify-write).
"""

from __future__ import annotations

import itertools
from collections import Counter, namedtuple

# One loop of the flattened nest: its level, 'temporal' or 'spatial', its dim and bound, and
# `stride`, the step it makes in its dim.
Loop = namedtuple("Loop", "level kind dim bound stride axis")


def simulate(problem: dict, nest: list[dict], compute_fanout=(1, 1), valid=None, instructions=None) -> dict:
    _check(problem, nest, compute_fanout)
    loops = _flatten(nest)
    valid = valid or {}

    macs = 1
    for size in problem["dims"].values():
        macs *= size
    result = {"macs": macs, "levels": {}}
    for level, spec in enumerate(nest):
        instances = 1
        for loop in loops:
            if loop.kind == "spatial" and loop.level < level:
                instances *= loop.bound
        result["levels"][spec["name"]] = {"instances": instances, "tensors": {}}

    # One tensor at a time (only its fetch histories are held in memory at once).
    for t, spec in sorted(problem["tensors"].items()):
        keepers = [level for level in range(len(nest)) if t in nest[level]["keep"]]
        history = {level: _fetch_history(loops, level, spec["axes"]) for level in keepers}
        # levels whose fanout network cannot share this tensor (no multicast for an input, no
        # spatial reduction for the output): their children's requests are never merged
        flag = "reduction" if spec["output"] else "multicast"
        private = {level for level, lv_spec in enumerate(nest) if not lv_spec.get(flag, True)}
        if not spec["output"]:
            # block clusters: the CTAs of a cluster (axis y) share an input by multicast, even
            # where the clusters side by side (axis x) cannot
            clustered = {level for level, lv_spec in enumerate(nest) if lv_spec.get("clusters")}
            private = (private - clustered) | {(level, "x") for level in clustered & private}
        limits = _limits(spec["axes"], valid)
        for position, level in enumerate(keepers):
            child = keepers[position + 1] if position + 1 < len(keepers) else None
            if child is None and instructions is not None:   # whole instructions use t from here
                from brute_force_instructions import instruction_traffic
                traffic = instruction_traffic(loops, level, spec["axes"], instructions, len(nest) - 1)
            elif child is None:  # the MACs use t straight from this level
                traffic = _mac_traffic(loops, level, spec["axes"], private)
            else:
                traffic = _child_traffic(loops, level, history[child], private)
            name = nest[level]["name"]
            per_instance = _level_counts(level, history[level], traffic, spec["output"])
            result["levels"][name]["tensors"][t] = _agreed(per_instance, name, t)
            clamped = _level_counts(level, history[level], traffic, spec["output"], limits)
            result["levels"][name].setdefault("valid", {})[t] = {
                key: sum(c[key] for c in clamped.values()) for key in ("reads", "fills", "updates")}
    return result


def _limits(axes, valid):
    """Per axis, the valid size of its dim (None: nothing past it is padding)."""
    out = []
    for axis in axes:
        padded = [dim for dim in axis if dim in valid]
        if padded and (len(axis) > 1 or axis[padded[0]] != 1):
            raise ValueError(f"a padded dim ({padded[0]}) must index its axis alone")
        out.append(valid[padded[0]] if padded else None)
    return out


def _valid_points(points, limits):
    """How many of these coordinates lie within the valid sizes."""
    if limits is None:
        return len(points)
    return sum(all(lim is None or x < lim for x, lim in zip(point, limits)) for point in points)


def _valid_box(box, limits):
    """Words of a box within the valid sizes."""
    if limits is None:
        return _box_size(box)
    size = 1
    for (lo, hi), lim in zip(box, limits):
        size *= max(0, min(hi, lim - 1 if lim is not None else hi) - lo + 1)
    return size


def fragments(problem, nest, roles):
    """MACs a native-shape unit executes (see the module docstring): `roles` is a list of
    (dims, size); every dim of the problem outside the roles is one MAC per point."""
    loops = _flatten(nest)
    innermost = len(nest) - 1
    outer = [loop for loop in loops if loop.level < innermost or loop.kind == "spatial"]
    inner = [loop for loop in loops if loop.level == innermost and loop.kind == "temporal"]
    size = 1
    for _, native in roles:
        size *= native
    total = 0
    for _ in _settings(outer):
        blocks = set()
        for point in _settings(inner):
            local = _dim_values(inner, point)
            key = []
            for dims, native in roles:        # the role's offset, flattened, in fragments
                flat = 0
                for dim in dims:
                    extent = 1
                    for loop in inner:
                        if loop.dim == dim:
                            extent *= loop.bound
                    flat = flat * extent + local.get(dim, 0)
                key.append(flat // native)
            rest = tuple(local.get(dim, 0) for dim in problem["dims"]
                         if all(dim not in dims for dims, _ in roles))
            blocks.add((tuple(key), rest))
        total += len(blocks) * size
    return total


# ----------------------------------------------------------------------------------------------
# Checking the input


def _check(problem, nest, compute_fanout):
    dims = problem["dims"]
    tensors = problem["tensors"]
    if sum(1 for spec in tensors.values() if spec["output"]) != 1:
        raise ValueError("exactly one tensor must be the output")
    for name, spec in tensors.items():
        for axis in spec["axes"]:
            for dim, coef in axis.items():
                if dim not in dims:
                    raise ValueError(f"tensor {name} uses unknown dim {dim!r}")
                if not isinstance(coef, int) or coef <= 0:
                    raise ValueError(f"tensor {name}: coefficient of {dim} must be a positive int")
    if not nest:
        raise ValueError("the nest needs at least one level")
    if len({spec["name"] for spec in nest}) != len(nest):
        raise ValueError("level names must be unique")
    if set(nest[0]["keep"]) != set(tensors):
        raise ValueError("the outermost level must keep every tensor")
    product = dict.fromkeys(dims, 1)
    for spec in nest:
        for t in spec["keep"]:
            if t not in tensors:
                raise ValueError(f"level {spec['name']} keeps unknown tensor {t!r}")
        for dim, bound, *_ in list(spec.get("temporal", ())) + list(spec.get("spatial", ())):
            if dim not in dims:
                raise ValueError(f"level {spec['name']} loops over unknown dim {dim!r}")
            if not isinstance(bound, int) or bound < 1:
                raise ValueError(f"level {spec['name']}: bound of {dim} must be a positive int")
            product[dim] *= bound
        for dim, bound, axis in spec.get("spatial", ()):
            if axis not in ("x", "y"):
                raise ValueError(f"level {spec['name']}: spatial axis must be 'x' or 'y'")
    for dim, size in dims.items():
        if product[dim] != size:
            raise ValueError(f"bounds of {dim} multiply to {product[dim]}, not its size {size}")
    fanout = {"x": 1, "y": 1}
    for dim, bound, axis in nest[-1].get("spatial", ()):
        fanout[axis] *= bound
    if fanout["x"] > compute_fanout[0] or fanout["y"] > compute_fanout[1]:
        raise ValueError(f"innermost spatial loops ({fanout['x']}, {fanout['y']}) exceed the "
                         f"compute fanout {tuple(compute_fanout)}")


# ----------------------------------------------------------------------------------------------
# The flattened nest


def _flatten(nest):
    """All loops, outermost first: per level its temporal loops, then its spatial loops."""
    raw = []
    for level, spec in enumerate(nest):
        for dim, bound in spec.get("temporal", ()):
            raw.append((level, "temporal", dim, bound, None))
        for dim, bound, axis in spec.get("spatial", ()):
            raw.append((level, "spatial", dim, bound, axis))
    loops = []
    for position, (level, kind, dim, bound, axis) in enumerate(raw):
        stride = 1
        for later in raw[position + 1:]:
            if later[2] == dim:
                stride *= later[3]
        loops.append(Loop(level, kind, dim, bound, stride, axis))
    return loops


def _settings(loops):
    """Every setting of these loops' indices, in lexicographic order (the first loop slowest)."""
    return itertools.product(*[range(loop.bound) for loop in loops])


def _dim_values(loops, indices):
    """The contribution of these loops, at these indices, to the value of each dim."""
    values = {}
    for loop, index in zip(loops, indices):
        values[loop.dim] = values.get(loop.dim, 0) + index * loop.stride
    return values


def _coordinates(axes, values):
    """The tensor coordinate (one number per axis) at these dim values (missing dims are 0)."""
    return tuple(sum(coef * values.get(dim, 0) for dim, coef in axis.items()) for axis in axes)


def _split(loops, level):
    """(temporal loops above `level`, spatial loops above `level`, loops at or below `level`)."""
    time = [loop for loop in loops if loop.level < level and loop.kind == "temporal"]
    space = [loop for loop in loops if loop.level < level and loop.kind == "spatial"]
    below = [loop for loop in loops if loop.level >= level]
    return time, space, below


# ----------------------------------------------------------------------------------------------
# Boxes (axis-aligned hyper-rectangles): a tuple of inclusive (lo, hi) ranges, one per axis


def _box_size(box):
    size = 1
    for lo, hi in box:
        size *= hi - lo + 1
    return size


def _box_points(box):
    return itertools.product(*[range(lo, hi + 1) for lo, hi in box])


def _tile_history(loops, level, axes):
    """(instance, [tile box at each time step]) for each instance of `level`, for one tensor.

    The tile is the bounding box of the points the loops at and below `level` touch. Those loops
    move every dim from its base value (set by the loops above) up by at most sum((bound - 1) *
    stride); every coefficient is positive, so along each axis the expression is smallest with
    every dim at its base value and largest with every dim at its top.
    """
    time, space, below = _split(loops, level)
    top = _dim_values(below, [loop.bound - 1 for loop in below])
    extent = _coordinates(axes, top)  # hi - lo of the tile along each axis
    # The temporal loops above and the spatial loops above add up to the base of every dim, so
    # a tile is the box the temporal loops give, moved by what the instance's spatial loops add.
    box_at_step = []
    for step in _settings(time):
        low = _coordinates(axes, _dim_values(time, step))
        box_at_step.append(tuple((lo, lo + e) for lo, e in zip(low, extent)))
    for instance in _settings(space):
        here = _coordinates(axes, _dim_values(space, instance))
        moved = {box: tuple([(lo + h, hi + h) for (lo, hi), h in zip(box, here)])
                 for box in set(box_at_step)}
        yield instance, [moved[box] for box in box_at_step]


def _fetches(tiles):
    """What is fetched at each time step, given the tile at each time step.

    Returns a list of boxes (the words fetched in that step) or None (nothing fetched). This is
    Timeloop's delta of two axis-aligned boxes with its 'gradient' rule: a partial fetch (the
    slice a tile slid into along one axis) is only allowed while the tile keeps sliding along
    the same axis in the same direction; a change of direction refetches the whole tile.
    """
    fetched = []
    previous = None
    gradient = None  # (axis, +1 or -1) of the last partial fetch, or None
    for tile in tiles:
        if previous is None:
            delta = tile
        elif tile == previous:
            delta = None
            gradient = None
        else:
            moved = [a for a in range(len(tile)) if tile[a] != previous[a]]
            delta, new_gradient = tile, None  # unless a partial fetch applies: the whole tile
            if len(moved) == 1:
                a = moved[0]
                (lo, hi), (p_lo, p_hi) = tile[a], previous[a]
                assert hi - lo == p_hi - p_lo, "tiles of one level all have the same shape"
                overlap = lo <= p_hi and p_lo <= hi  # (along the other axes they are equal)
                direction = (a, 1 if lo > p_lo else -1)
                if overlap and gradient in (None, direction):
                    new_slice = (p_hi + 1, hi) if lo > p_lo else (lo, p_lo - 1)
                    delta = tile[:a] + (new_slice,) + tile[a + 1:]
                    new_gradient = direction
            gradient = new_gradient
        fetched.append(delta)
        previous = tile
    return fetched


def _fetch_history(loops, level, axes):
    """{instance: (set of the distinct tiles it held, what it fetched at each time step)}."""
    return {instance: (set(tiles), _fetches(tiles))
            for instance, tiles in _tile_history(loops, level, axes)}


# ----------------------------------------------------------------------------------------------
# Counting


def _level_counts(level, history, traffic, output, limits=None):
    """{instance: {'reads', 'fills', 'updates'}} for one tensor kept at `level`; with `limits`
    (per axis, its valid size or None), only the words within them.

    history: this level's {instance: (distinct tiles, fetches)}; traffic: {instance: (words
    moved to / from the child level or MACs, the boxes moved with how often, set of coordinates
    moved)}.
    """
    counts = {}
    for instance, (tiles, fetches) in history.items():
        loads = sum(_valid_box(box, limits) for box in fetches if box is not None)
        words, moved, touched = traffic[instance]
        if limits is not None:
            words = sum(weight * _valid_box(box, limits) for box, weight in moved)
        touched = _valid_points(touched, limits)
        if output:
            held = set()
            for box in tiles:
                held.update(_box_points(box))
            counts[instance] = {"reads": words - touched,
                                "fills": loads - _valid_points(held, limits),
                                "updates": words}
        else:
            counts[instance] = {"reads": words,
                                "fills": loads if level > 0 else 0,
                                "updates": 0}
    return counts


def _private_positions(loops, level, private, below=None):
    """Positions, within a key of spatial indices, of the spatial loops at levels >= `level`
    (and < `below`) whose network cannot share data."""
    spatial = [loop for loop in loops if loop.kind == "spatial" and (below is None or loop.level < below)]
    return [i for i, loop in enumerate(spatial) if loop.level >= level and _private(loop, private)]


def _private(loop, private) -> bool:
    """Whether a spatial loop's network cannot share: its level's, or its axis's at that level."""
    return loop.level in private or (loop.level, loop.axis) in private


def _child_traffic(loops, level, child_history, private=frozenset()):
    """Words moved between each instance of `level` and its child instances.

    For each parent instance and each time step of the children: the distinct boxes its
    children fetch in that step (identical requests are served by one multicast read; identical
    write-backs of a spatial reduction arrive as one update; a child writes back each word it
    fetched once, when it is replaced or at the end). Returns {parent: (words, [(box moved, 1)],
    set of coordinates moved)}.
    """
    # A child's instance key (its spatial indices) starts with its parent's instance key.
    prefix = len([loop for loop in loops if loop.level < level and loop.kind == "spatial"])
    child_level = None
    families = {}
    for instance, (tiles, fetches) in child_history.items():
        families.setdefault(instance[:prefix], []).append((instance, fetches))
        child_level = child_level or len(instance)
    positions = [i for i in _private_positions(loops, level, private) if i < child_level]
    traffic = {}
    for parent, members in families.items():
        words = 0
        boxes_seen = set()
        moved = []
        for step in range(len(members[0][1])):
            requests = {(fetches[step], tuple(instance[i] for i in positions))
                        for instance, fetches in members if fetches[step] is not None}
            words += sum(_box_size(box) for box, _ in requests)
            moved.extend((box, 1) for box, _ in requests)
            boxes_seen.update(box for box, _ in requests)
        touched = set()
        for box in boxes_seen:
            touched.update(_box_points(box))
        traffic[parent] = (words, moved, touched)
    return traffic


def _mac_traffic(loops, level, axes, private=frozenset()):
    """Words moved between each instance of `level` and the MACs below it.

    Every MAC step (a setting of all temporal loops), every MAC unit under the instance (a
    setting of the spatial loops of `level` and below) reads, or updates, the one element its
    iteration point names. Units asking for the same element in the same step are served by one
    read (or reduced into one update). Returns {instance: (words, [(element moved as a one-point
    box, how often)], set of coordinates moved)}.
    """
    time = [loop for loop in loops if loop.kind == "temporal"]
    outer = [loop for loop in loops if loop.level < level and loop.kind == "spatial"]
    inner = [loop for loop in loops if loop.level >= level and loop.kind == "spatial"]
    # The element a unit names is (what the temporal loops contribute) + (what the spatial loops
    # contribute). Steps whose temporal part names the same coordinate make the same requests,
    # so each such coordinate is worked out once and counted as often as it occurs.
    steps = Counter(_coordinates(axes, _dim_values(time, step)) for step in _settings(time))
    mine = [i for i, loop in enumerate(inner) if _private(loop, private)]
    traffic = {}
    for instance in _settings(outer):
        here = _coordinates(axes, _dim_values(outer, instance))
        units = []
        for unit in _settings(inner):
            offset = _coordinates(axes, _dim_values(inner, unit))
            units.append((tuple(a + b for a, b in zip(here, offset)), tuple(unit[i] for i in mine)))
        words = 0
        touched = set()
        moved = []
        for step, occurrences in steps.items():
            requests = {(tuple(a + b for a, b in zip(step, unit)), who) for unit, who in units}
            words += occurrences * len(requests)
            moved.extend((tuple((x, x) for x in element), occurrences) for element, _ in requests)
            touched |= {element for element, _ in requests}
        traffic[instance] = (words, moved, touched)
    return traffic


def _agreed(per_instance, level_name, t):
    """The counts every instance shares; raises if two instances disagree."""
    distinct = {(c["reads"], c["fills"], c["updates"]) for c in per_instance.values()}
    if len(distinct) != 1:
        raise RuntimeError(f"instances of {level_name} disagree on {t} "
                           f"(reads, fills, updates): {sorted(distinct)}")
    reads, fills, updates = distinct.pop()
    return {"reads": reads, "fills": fills, "updates": updates}
