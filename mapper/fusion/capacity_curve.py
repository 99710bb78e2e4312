"""The capacity curve of an op graph: over capacities of one level, the least outermost-level
traffic of the ops run unfused (each op's own kernel, every intermediate written out and read
back), of the best grouping into fused kernels, and the chain's fused bound (every graph input
read once, every result written once: `bound.chain_bound`, the same at every capacity).

Each point is a fusion study (`run.fuse`, objective bytes) on the architecture with the level's
capacity set (`explain.capacity_curve.arch_with_capacity`), so every figure is the one cost
model's. Capacities are studied in increasing order and both curves are monotone by
construction: kernels that fit a smaller level fit a larger one with the same traffic, so each
point also prices the previous point's choice again on its own architecture (`replay`: the
same mappings and slice plans, no search) and keeps it where the new study's is worse; per op
for the unfused curve (the einsum curve's incumbent rule), per grouping for the fused one,
which may also take the unfused point's kernels (fusing nothing is a grouping).

Thresholds, in the einsum curve's terms (`explain.capacity_curve.with_regimes`): each graph
input and result moves only its own size from some capacity on, each intermediate moves
nothing (it stays on chip), and the whole curve meets the fused bound. Per fused group (ops
sharing a kernel): the first capacity at which the study priced it legal (its fused working set
fits) and the first at which the grouping chose it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import MapperError, SpecError
from ..explain.capacity_curve import Threshold, arch_with_capacity, curve_level, grid_up_to, with_regimes
from ..opgraph import OpGraph
from ..search import SearchContext
from ..spec import Arch
from .bound import ChainBound, chain_bound
from .grouping import Grouping
from .group_price import GroupPrice
from .kernels import fusion_level
from .replay import pins_of, repriced, singles_pins
from .run import fuse

OBJECTIVE = "bytes"          # each study's: outermost-level traffic
STUDY_SECONDS = 20.0         # a point's study without a time limit given (its shares need one)
SOURCES = ("search", "previous capacity", "unfused")   # where a point's fused grouping came from


@dataclass(frozen=True)
class Figures:
    outer_bytes: float
    energy_pj: float
    cycles: float


@dataclass(frozen=True)
class FusedPoint:
    capacity: float                          # bytes per instance of the level
    unfused: Figures
    fused: Figures
    outer_bytes: float                       # the fused curve's (the regimes read it)
    tensor_bytes: dict[str, float]           # each graph tensor's outer traffic in the fused grouping
    regime: str
    source: str                              # one of SOURCES
    groups: tuple[tuple[str, ...], ...]      # the fused grouping's kernels, by op names
    kept: tuple[str, ...]                    # intermediates that stay on chip
    legal: tuple[tuple[str, ...], ...]       # groups of several ops priced legal (fitting) here
    grouping: Grouping
    seconds: float
    # the study's time limit stopped it (the wall clock: the machine's load shaped this point),
    # leaving these groups priced by estimate only (refused in its choice)
    stopped_by_clock: bool = False
    estimated_only: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class GroupThreshold:
    ops: tuple[str, ...]
    legal_from: float | None                 # the first capacity at which it fits
    chosen_from: float | None                # the first at which the best grouping takes it


@dataclass(frozen=True)
class FusedCurve:
    arch: Arch
    graph: OpGraph
    level: str
    outer: str
    fusion_level: str
    bound: ChainBound
    working_set_bytes: float                 # every tensor of the graph once
    points: tuple[FusedPoint, ...]
    infeasible: tuple[float, ...]            # capacities at which some op has no mapping
    thresholds: tuple[Threshold, ...]        # per tensor, and the fused bound
    group_thresholds: tuple[GroupThreshold, ...]


def fused_capacity_curve(arch: Arch, graph: OpGraph, level: str, capacities=None, *,
                         time_limit: float | None = STUDY_SECONDS, max_evaluations: int | None = None,
                         extra_levels: tuple = ()) -> FusedCurve:
    """The curves over `level`'s capacities (default `grid_up_to` the graph's working set), each
    point a fusion study with `time_limit` seconds or `max_evaluations` mappings priced;
    `extra_levels`: a mapspace preset's per-level constraints added to every op's space."""
    lv = curve_level(arch, level)
    sizes = {t: graph.tensor(t).bytes for t in graph.inputs + graph.intermediates + graph.outputs}
    caps = sorted(set(capacities or grid_up_to(sum(sizes.values()))))
    points, infeasible, previous = [], [], None
    for capacity in caps:
        found = _point(arch_with_capacity(arch, lv, capacity), graph, capacity, previous, time_limit,
                       max_evaluations, extra_levels)
        if found is None:
            infeasible.append(capacity)
            continue
        point, previous = found
        points.append(point)
    floors = {t: 0.0 if t in graph.intermediates else b for t, b in sizes.items()}
    points, thresholds = with_regimes(points, sizes, floors, whole_name="fused bound")
    return FusedCurve(arch, graph, level, arch.level_names[0], arch.level_names[fusion_level(arch)],
                      chain_bound(arch, graph, fusion_level(arch)), sum(sizes.values()), tuple(points),
                      tuple(infeasible), thresholds, _group_thresholds(points))


def _point(arch, graph, capacity, previous, time_limit, max_evaluations, extra):
    """One capacity's point and what the next one replays ((unfused pins, fused op sets, fused
    pins)), or None when some op has no mapping at this capacity."""
    started = time.perf_counter()
    context = SearchContext.for_command(time_limit, max_evaluations)
    try:
        study = fuse(arch, graph, context, time_limit or STUDY_SECONDS, OBJECTIVE, extra)
    except SpecError:
        raise
    except MapperError:
        return None
    n = len(graph.ops)
    frees, singles = [study.searches.free(i) for i in range(n)], list(study.unfused.groups)
    candidates = [(study.fused, SOURCES[0], lambda: pins_of(study.fused, study.grouper))]
    if previous is not None:
        unfused_pins, op_sets, fused_pins = previous
        again = repriced(arch, graph, unfused_pins, [(i,) for i in range(n)], OBJECTIVE, extra)
        if again is not None:                # per op, the previous kernel where it moves less
            for i, group in enumerate(again[0].groups):
                if group.score(OBJECTIVE) < singles[i].score(OBJECTIVE):
                    frees[i], singles[i] = again[1].searches.free(i), group
        kept = repriced(arch, graph, fused_pins, op_sets, OBJECTIVE, extra)
        if kept is not None:
            candidates.append((kept[0], SOURCES[1], lambda: pins_of(kept[0], kept[1])))
    unfused = Grouping(tuple(singles), sum(g.score(OBJECTIVE) for g in singles))
    own = singles_pins(tuple(frees))
    candidates.append((unfused, SOURCES[2], lambda: own))
    best, source, pins = min(candidates, key=lambda c: c[0].score)       # ties: the first listed
    legal = _legal(study, best)
    point = FusedPoint(capacity, _figures(unfused), _figures(best), best.score, _tensor_bytes(graph, best), "",
                       source, tuple(_names(graph, g) for g in best.groups),
                       tuple(t for g in best.groups for t in g.fused), legal, best, time.perf_counter() - started,
                       study.stopped_by_clock, tuple(tuple(graph.ops[i].name for i in ops) for ops in study.estimated_only))
    return point, (own, tuple(g.ops for g in best.groups), pins())


def _figures(grouping: Grouping) -> Figures:
    return Figures(grouping.score, sum(g.energy_pj for g in grouping.groups), sum(g.cycles for g in grouping.groups))


def _tensor_bytes(graph: OpGraph, grouping: Grouping) -> dict[str, float]:
    names = graph.inputs + graph.intermediates + graph.outputs
    return {t: sum(k.tensor_bytes(t, 0) for g in grouping.groups for k in g.kernels) for t in names}


def _names(graph: OpGraph, group: GroupPrice) -> tuple[str, ...]:
    return tuple(graph.ops[i].name for i in group.ops)


def _legal(study, best: Grouping) -> tuple[tuple[str, ...], ...]:
    """The groups of several ops the study priced legal (fused, not spilled), and those chosen."""
    graph = study.graph
    fits = {ops for ops, g in study.grouper.priced().items()
            if len(ops) > 1 and isinstance(g, GroupPrice) and not g.spilled and not g.estimated}
    fits |= {g.ops for g in best.groups if len(g.ops) > 1 and not g.spilled}
    return tuple(tuple(graph.ops[i].name for i in ops) for ops in sorted(fits))


def _group_thresholds(points) -> tuple[GroupThreshold, ...]:
    """Each group of several ops legal or chosen somewhere: where it first fits, first chosen."""
    seen = dict.fromkeys(g for p in points for g in p.legal)
    first = {}
    for p in points:
        chosen = {g for g in p.groups if len(g) > 1}
        for g in seen:
            if g in p.legal:
                first.setdefault((g, "legal"), p.capacity)
            if g in chosen:
                first.setdefault((g, "chosen"), p.capacity)
    return tuple(GroupThreshold(g, first.get((g, "legal")), first.get((g, "chosen"))) for g in seen)
