"""The capacity curve: the least outer-level traffic over capacities of one level, each point
the joint search's optimum, and the thresholds where it drops (Orojenesis's "ski slope",
Huang et al., ISCA 2024, from the search rather than an enumeration of single-level tilings).

Every number comes from the search result, so from the one cost model: a point is the
search's best mapping on the architecture with the level's capacity set to that value
(`arch_with_capacity`), under `bytes:OUTER` (OUTER the outermost level unless the objective
names another). Capacities are searched in increasing order, each search given the previous
point's best mapping as an incumbent: a mapping that fits a smaller buffer fits a larger one,
so the curve never rises, even at a point whose search stops before its proof.

Regimes, after the square-root law and its thresholds (seed notes): a point is
- compulsory: the outer traffic is the compulsory traffic (every tensor once): more capacity
  cannot lower it;
- threshold: some tensor that the curve's first point re-fetched now moves only its
  compulsory traffic (it fits, or its reuse is complete): the curve dropped past its threshold;
- continuous: neither: every tensor that needs reuse is still re-fetched, and the traffic
  falls as 1/sqrt(capacity) for bilinear einsums (capacity a weak lever).
A tensor's threshold is the smallest capacity of the curve from which on the optimum moves
only its compulsory traffic; the working set's is the one where the whole curve reaches its
floor.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from ..errors import InfeasibleError, SpecError
from ..mapping import Mapping
from ..mapspace import Mapspace, infeasible
from ..search import SearchContext, make_strategy, parse_objective
from ..spec import Arch, Workload

FLOOR_SLACK = 1e-9          # relative: traffic this close to compulsory is compulsory
GRID_POINTS = 13            # the default grid: this many capacities, x2 apart, up to the working set
SMALLEST_DEFAULT = 16.0     # bytes: the default grid starts no lower


@dataclass(frozen=True)
class CurvePoint:
    capacity: float                  # bytes per instance of the level
    outer_bytes: float               # through the outer level, all instances
    energy_pj: float
    cycles: float
    proven: bool                     # the search proved its mapping optimal at this capacity
    gap: float | None                # proven relative gap when not proven (None: no bound)
    regime: str                      # continuous, threshold or compulsory
    tensor_bytes: dict[str, float]   # each tensor's traffic through the outer level
    mapping: Mapping
    evaluated: int                   # mappings priced by this point's search
    seconds: float


@dataclass(frozen=True)
class Threshold:
    what: str                        # a tensor's name, or "working set"
    size_bytes: float                # its full size at the outer level
    capacity: float | None           # where it first moves only compulsory traffic (None: not on the grid)
    from_start: bool                 # already so at the curve's first point: no capacity needed


@dataclass(frozen=True)
class CapacityCurve:
    arch: Arch                       # as given (each point's has the level's capacity replaced)
    workload: Workload
    level: str
    outer: str
    objective: str
    compulsory_bytes: float          # the floor: every tensor once through the outer level
    points: tuple[CurvePoint, ...]   # increasing capacity
    infeasible: tuple[float, ...]    # capacities at which no mapping fits
    thresholds: tuple[Threshold, ...]


def curve_level(arch: Arch, name: str) -> int:
    """The index of the level `--capacity` names: a level below the outermost."""
    if name not in arch.level_names[1:]:
        why = ("the outermost level: nothing above it pays for its capacity" if name == arch.level_names[0]
               else f"no level {name!r}")
        raise SpecError("--capacity", "", f"{why}; expected one of {', '.join(arch.level_names[1:])}")
    return arch.level_names.index(name)


def arch_with_capacity(arch: Arch, level: int, capacity: float) -> Arch:
    """`arch` with one level's capacity (bytes per instance) replaced, named for it."""
    if not capacity > 0 or not math.isfinite(capacity):
        raise SpecError("--capacities", "", f"expected capacities > 0 and finite, got {capacity:g} B")
    levels = list(arch.levels)
    levels[level] = replace(levels[level], capacity=float(capacity))
    return replace(arch, levels=tuple(levels), name=f"{arch.name}[{arch.levels[level].name}={capacity:g}B]")


def tensor_sizes(workload: Workload, arch: Arch, level: int) -> dict[str, float]:
    """Each tensor's touched words in bytes as `level` stores them: its compulsory traffic there."""
    return {t.name: workload.touched_words(i) * arch.levels[level].word_bytes(t)
            for i, t in enumerate(workload.tensors)}


def default_capacities(workload: Workload, arch: Arch, level: int) -> tuple[float, ...]:
    """`grid_up_to` the whole working set at `level`'s word sizes: the top point reaches the
    compulsory floor when the level may keep every tensor."""
    return grid_up_to(sum(tensor_sizes(workload, arch, level).values()))


def grid_up_to(working_set: float) -> tuple[float, ...]:
    """Powers of two from the first one holding `working_set` bytes down by x2, `GRID_POINTS`
    of them, none under `SMALLEST_DEFAULT`: the default grid of every capacity curve."""
    top = 2.0 ** math.ceil(math.log2(max(1.0, working_set)))
    return tuple(c for c in (top / 2 ** i for i in reversed(range(GRID_POINTS))) if c >= SMALLEST_DEFAULT)


def capacity_curve(arch: Arch, workload: Workload, constraints, level: str, capacities=None, *,
                   objective: str | None = None, time_limit: float | None = 60.0,
                   max_evaluations: int | None = None, options: dict | None = None) -> CapacityCurve:
    """The curve of `level`'s capacities (bytes per instance, default `default_capacities`),
    each point the joint search's best under `objective` (default bytes at the outermost
    level) with `time_limit` seconds or `max_evaluations` mappings per point; `options` are
    the joint strategy's (not `incumbents`: the curve gives those)."""
    lv = curve_level(arch, level)
    caps = sorted(set(capacities or default_capacities(workload, arch, lv)))
    goal = parse_objective(objective or f"bytes:{arch.level_names[0]}", arch)
    outer = goal.level if goal.kind == "bytes" else 0
    sizes = tensor_sizes(workload, arch, outer)
    points, infeasible, previous = [], [], ()
    for capacity in caps:
        point = _search_point(arch_with_capacity(arch, lv, capacity), workload, constraints, goal, outer,
                              capacity, previous, time_limit, max_evaluations, options or {})
        if point is None:
            infeasible.append(capacity)
            continue
        points.append(point)
        previous = (point.mapping,)
    points, thresholds = with_regimes(points, sizes)
    return CapacityCurve(arch, workload, level, arch.level_names[outer], goal.name,
                         sum(sizes.values()), tuple(points), tuple(infeasible), thresholds)


def _search_point(arch, workload, constraints, goal, outer, capacity, previous, time_limit,
                  max_evaluations, options) -> CurvePoint | None:
    """One capacity's search, or None when no mapping fits it."""
    space = Mapspace(arch, workload, constraints)
    # the point's clock starts before the space is counted: counting a large space exactly
    # took seconds past a short limit, and stops (estimating) once the limit is reached
    context = SearchContext.for_command(time_limit, max_evaluations).for_search()
    try:
        infeasible.require_nonempty(space, stop=context.stopped)
    except InfeasibleError:
        return None
    strategy = make_strategy("joint", {**options, "incumbents": previous}, where="capacity curve")
    started = time.perf_counter()
    result = strategy.run(space, goal, context)
    ev = result.evaluation
    outer_level = ev.levels[outer]
    per_tensor = {t.name: float(outer_level.tensors[t.name].bytes_moved) if t.name in outer_level.tensors else 0.0
                  for t in workload.tensors}
    return CurvePoint(float(capacity), float(outer_level.traffic_bytes), ev.energy_pj, ev.cycles,
                      result.optimal, result.gap, "", per_tensor, result.mapping, result.evaluated,
                      time.perf_counter() - started)


def _at_floor(moved: float, compulsory: float) -> bool:
    return moved <= compulsory * (1 + FLOOR_SLACK)


def _floor_from(values: list[float], compulsory: float) -> int | None:
    """The first index from which every value is at the floor, or None."""
    first = None
    for i in reversed(range(len(values))):
        if not _at_floor(values[i], compulsory):
            break
        first = i
    return first


def with_regimes(points: list, sizes: dict[str, float], floors: dict[str, float] | None = None,
                 whole_name: str = "working set"):
    """The points (each with `capacity`, `outer_bytes`, `tensor_bytes` and `regime`) with their
    regimes, and the thresholds (see the module's docstring). `floors`: each tensor's least
    traffic (default its size: every tensor once; an op graph's intermediate kept on chip
    moves none); the whole curve's floor, named `whole_name`, is their sum."""
    if not points:
        return [], ()
    floors = sizes if floors is None else floors
    firsts = {name: _floor_from([p.tensor_bytes[name] for p in points], floors[name]) for name in sizes}
    whole = _floor_from([p.outer_bytes for p in points], sum(floors.values()))
    thresholds = [Threshold(name, sizes[name], None if i is None else points[i].capacity, i == 0)
                  for name, i in firsts.items()]
    thresholds.append(Threshold(whole_name, sum(floors.values()),
                                None if whole is None else points[whole].capacity, whole == 0))
    crossed = [i for i in firsts.values() if i]          # thresholds inside the curve (not at its start)
    out = []
    for i, p in enumerate(points):
        regime = ("compulsory" if whole is not None and i >= whole
                  else "threshold" if any(i >= first for first in crossed) else "continuous")
        out.append(replace(p, regime=regime))
    return out, tuple(sorted(thresholds, key=lambda t: (t.capacity is None, t.capacity or 0.0, t.what)))
