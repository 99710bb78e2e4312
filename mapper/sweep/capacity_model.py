"""A model's capacity curve (`mapper explain ARCH MODEL --capacity LEVEL`): over capacities of
one level, the model's least outermost-level traffic as the count-weighted sum of its layers'
curves (each group of identical layers one einsum curve, `explain.capacity_curve`), and with its
chains (`sweep.chains`: layers with their non-GEMM ops) in place of the layers they stand for,
each chain's unfused and fused curve (`fusion.capacity_curve`). Every term is monotone in
capacity, so every sum is. A capacity at which some layer or chain has no mapping is left out.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SpecError
from ..explain.capacity_curve import CapacityCurve, capacity_curve, curve_level, grid_up_to, tensor_sizes
from ..explain.capacity_report import size_text
from ..fusion.capacity_curve import STUDY_SECONDS, FusedCurve, fused_capacity_curve
from ..explain.capacity_command import capacity_grid
from ..fusion.capacity_curve import OBJECTIVE
from ..load import load_arch
from ..report import _num, strict_json, table
from ..spec import Arch
from .models import Expansion, expand, load_model


@dataclass(frozen=True)
class ModelPoint:
    capacity: float
    layers_bytes: float           # every layer's einsum alone, count-weighted
    unfused_bytes: float          # chains' ops unfused in place of their layers
    fused_bytes: float            # chains fused


@dataclass(frozen=True)
class ModelCurve:
    arch: Arch
    expansion: Expansion
    level: str
    outer: str
    points: tuple[ModelPoint, ...]
    layer_curves: tuple[tuple[str, int, CapacityCurve], ...]   # (layers, count, curve) per group
    chain_curves: tuple[tuple[str, int, FusedCurve], ...]      # (chain, count, curve)


def model_capacity_curve(arch: Arch, model, level: str, capacities=None, *, phase: str | None = None,
                         time_limit: float | None = STUDY_SECONDS, max_evaluations: int | None = None,
                         extra_levels: tuple = ()) -> ModelCurve:
    """The sums over `level`'s capacities (default `grid_up_to` the largest working set of a
    layer or chain), each term's points searched with `time_limit` or `max_evaluations`."""
    lv = curve_level(arch, level)
    expansion = expand(load_model(model) if isinstance(model, str) else model, phase, {})
    if capacities is None:           # up to the largest working set of a layer or chain
        sets = [sum(tensor_sizes(g.workload, arch, lv).values()) for g in expansion.groups]
        sets += [sum(c.graph.tensor(t).bytes for t in c.graph.inputs + c.graph.intermediates + c.graph.outputs)
                 for c in expansion.chains]
        capacities = grid_up_to(max(sets))
    caps = sorted(set(capacities))
    budget = {"time_limit": time_limit, "max_evaluations": max_evaluations}
    layers = tuple(("+".join(g.layers), g.count, capacity_curve(arch, g.workload, None, level, caps, **budget))
                   for g in expansion.groups)
    chains = tuple((c.name, c.count, fused_capacity_curve(arch, c.graph, level, caps, extra_levels=extra_levels,
                                                          **budget)) for c in expansion.chains)
    chained = {name: c.count for c in expansion.chains for name in c.layers}
    points = []
    for capacity in caps:
        at = [{p.capacity: p for p in curve.points}.get(capacity) for _, _, curve in layers + chains]
        if any(p is None for p in at):
            continue
        layer_at, chain_at = at[:len(layers)], at[len(layers):]
        alone = [(g.count - sum(chained.get(n, 0) for n in g.layers)) * p.outer_bytes
                 for g, p in zip(expansion.groups, layer_at)]
        whole = sum(g.count * p.outer_bytes for g, p in zip(expansion.groups, layer_at))

        def with_chains(figure) -> float:
            return sum(alone) + sum(count * figure(p) for (_, count, _), p in zip(chains, chain_at))
        points.append(ModelPoint(capacity, whole, with_chains(lambda p: p.unfused.outer_bytes),
                                 with_chains(lambda p: p.fused.outer_bytes)))
    return ModelCurve(arch, expansion, level, arch.level_names[0], tuple(points), layers, chains)


def model_curve_text(curve: ModelCurve) -> str:
    outer, ex = curve.outer, curve.expansion
    head = (f"capacity curve of {curve.level} for model {ex.model} ({ex.phase}) on {curve.arch.name}: the least "
            f"{outer} traffic of its layers (each layer's curve times its count) and with its "
            f"{len(curve.chain_curves)} chain(s) in place of their layers, unfused and fused")
    rows = [[size_text(p.capacity), _num(p.layers_bytes), _num(p.unfused_bytes), _num(p.fused_bytes)]
            for p in curve.points]
    body = table([f"{curve.level} capacity", f"layers {outer} B", f"chains unfused {outer} B",
                  f"chains fused {outer} B"], rows, align_left=1)
    lines = [head, body, "terms (count x curve):"]
    lines += [f"  layer {name} x{count}: {_num(c.points[-1].outer_bytes) if c.points else '-'} B at the largest "
              "capacity" for name, count, c in curve.layer_curves]
    lines += [f"  chain {name} x{count}: fused {_num(c.points[-1].fused.outer_bytes) if c.points else '-'} B at the "
              f"largest capacity, bound {_num(c.bound.outer_bytes)} B" for name, count, c in curve.chain_curves]
    return "\n".join(lines)


def model_curve_json(curve: ModelCurve) -> dict:
    return {"arch": curve.arch.name, "model": curve.expansion.model, "phase": curve.expansion.phase,
            "level": curve.level, "outer": curve.outer,
            "points": [{"capacity_bytes": p.capacity, "layers_bytes": p.layers_bytes,
                        "chains_unfused_bytes": p.unfused_bytes, "chains_fused_bytes": p.fused_bytes}
                       for p in curve.points],
            "layers": [{"layers": n, "count": k} for n, k, _ in curve.layer_curves],
            "chains": [{"chain": n, "count": k, "fused_bound_bytes": c.bound.outer_bytes}
                       for n, k, c in curve.chain_curves]}


def capacity_command(args) -> int:
    """Print the curves of the model WORKLOAD names (its first phase)."""
    grid = capacity_grid(args)
    if args.objective not in (None, OBJECTIVE) or args.plot or args.mapspace:
        flag = "--objective" if args.objective not in (None, OBJECTIVE) else "--plot" if args.plot else "--mapspace"
        raise SpecError(flag, "", "a model's capacity curve takes no --objective (bytes only), --plot or --mapspace yet")
    arch = load_arch(args.arch)
    curve_level(arch, args.capacity)
    curve = model_capacity_curve(arch, args.workload, args.capacity, grid, time_limit=args.time_limit,
                                 max_evaluations=args.max_evaluations)
    print(strict_json(model_curve_json(curve)) if args.json else model_curve_text(curve))
    return 0
