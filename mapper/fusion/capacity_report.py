"""Text and JSON forms of a `FusedCurve`, and its plot, in the einsum curve's forms
(`explain.capacity_report`: its sizes, threshold lines, regime notes and axes); nothing here
computes a cost."""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from ..explain.capacity_curve import Threshold
from ..explain.capacity_report import REGIME_TEXT, capacity_axes, mark_capacities, size_text, threshold_line
from ..explain.plots import saved
from ..report import _num, table
from .capacity_curve import FusedCurve

BOUND_NAME = "fused bound"
FUSED_REGIMES = MappingProxyType({   # read-only: the einsum curve's notes, compulsory said for a graph
    **REGIME_TEXT, "compulsory": "at the fused bound: every input read once, every result written once, every "
                                 "intermediate on chip; more capacity changes nothing"})


def fused_threshold_line(t: Threshold, curve: FusedCurve) -> str:
    """A tensor's threshold as the einsum curve says it; an intermediate's is where it stays on
    chip, the whole curve's where it meets the fused bound."""
    size = size_text(t.size_bytes)
    if t.what == BOUND_NAME:
        if t.capacity is None:
            return f"fused bound ({size}): not met at the largest capacity"
        return f"fused bound ({size}): met from {size_text(t.capacity)} on" + (
            " (every capacity of the curve)" if t.from_start else "")
    if t.what not in curve.graph.intermediates:
        return threshold_line(t, curve.outer)
    if t.capacity is None:
        return f"{t.what} ({size}, intermediate): still through {curve.outer} at the largest capacity"
    if t.from_start:
        return f"{t.what} ({size}, intermediate): on chip at every capacity of the curve"
    return f"{t.what} ({size}, intermediate): stays on chip (no {curve.outer} traffic) from {size_text(t.capacity)} on"


def _kernels(point) -> str:
    text = " | ".join("+".join(g) for g in point.groups)
    return text if point.source == "search" else f"{text} ({point.source})"


def fused_curve_text(curve: FusedCurve) -> str:
    outer = curve.outer
    head = (f"capacity curve of {curve.level} for {curve.graph.name} on {curve.arch.name}: the least {outer} "
            f"traffic of the ops unfused and of the best fused grouping at each capacity (each point a fusion "
            f"study under bytes, fused at {curve.fusion_level})")
    bound = curve.bound.outer_bytes
    rows = [[size_text(p.capacity), _num(p.unfused.outer_bytes), _num(p.fused.outer_bytes),
             f"{p.fused.outer_bytes / bound:.3g}x" if bound else "-", _num(p.unfused.energy_pj),
             _num(p.fused.energy_pj), _num(p.unfused.cycles), _num(p.fused.cycles), p.regime, _kernels(p)]
            for p in curve.points]
    body = table([f"{curve.level} capacity", f"unfused {outer} B", f"fused {outer} B", "fused/bound",
                  "unfused pJ", "fused pJ", "unfused cycles", "fused cycles", "regime", "fused kernels"],
                 rows, align_left=1)
    lines = [head, body,
             f"fused bound: {_num(bound)} B (every graph input read once, every result written once; the same at "
             f"every capacity); the graph's working set (every tensor once) {size_text(curve.working_set_bytes)}"]
    if curve.infeasible:
        lines.append("no mapping of some op fits at " + ", ".join(size_text(c) for c in curve.infeasible))
    lines += [stopped_line(p) for p in curve.points if p.stopped_by_clock]
    lines.append("thresholds:")
    lines += [f"  {fused_threshold_line(t, curve)}" for t in curve.thresholds]
    if curve.group_thresholds:
        lines.append("fused groups (ops sharing a kernel):")
        lines += [f"  {'+'.join(g.ops)}: " + ", ".join(
            [f"fits from {size_text(g.legal_from)}" if g.legal_from is not None else "never priced fitting",
             f"chosen from {size_text(g.chosen_from)}" if g.chosen_from is not None else "never chosen"])
            for g in curve.group_thresholds]
    lines.append("regimes:")
    lines += [f"  {r}: {FUSED_REGIMES[r]}" for r in FUSED_REGIMES if any(p.regime == r for p in curve.points)]
    return "\n".join(lines)


def stopped_line(point) -> str:
    """What a point's study stopped by the time limit leaves out: the wall clock (a short limit
    or a loaded machine), not the work budget, ended it, so the point is not the one the same
    inputs always give, and a longer limit (or --max-evaluations) may fuse more."""
    left = "; groups left priced by estimate only: " + ", ".join("+".join(g) for g in point.estimated_only) \
        if point.estimated_only else ""
    return (f"{size_text(point.capacity)}: its study was stopped by the time limit before its work budget was "
            f"spent (the wall clock shaped this point){left}; a larger --time-limit, or --max-evaluations, "
            f"searches them")


def _figures(f) -> dict:
    return {"outer_bytes": f.outer_bytes, "energy_pj": f.energy_pj, "cycles": f.cycles}


def fused_curve_json(curve: FusedCurve) -> dict:
    return {"arch": curve.arch.name, "workload": curve.graph.name, "level": curve.level, "outer": curve.outer,
            "fusion_level": curve.fusion_level, "objective": "bytes", "fused_bound_bytes": curve.bound.outer_bytes,
            "working_set_bytes": curve.working_set_bytes, "infeasible_capacities": list(curve.infeasible),
            "points": [{"capacity_bytes": p.capacity, "unfused": _figures(p.unfused), "fused": _figures(p.fused),
                        "regime": p.regime, "source": p.source, "groups": [list(g) for g in p.groups],
                        "on_chip": list(p.kept), "fitting_groups": [list(g) for g in p.legal],
                        "tensor_bytes": p.tensor_bytes, "seconds": p.seconds,
                        "stopped_by": "time_limit" if p.stopped_by_clock else None,
                        "estimated_only": [list(g) for g in p.estimated_only]} for p in curve.points],
            "thresholds": [{"what": t.what, "size_bytes": t.size_bytes, "capacity_bytes": t.capacity,
                            "from_start": t.from_start, "intermediate": t.what in curve.graph.intermediates}
                           for t in curve.thresholds],
            "groups": [{"ops": list(g.ops), "fits_from_bytes": g.legal_from, "chosen_from_bytes": g.chosen_from}
                       for g in curve.group_thresholds]}


def plot_fused_curve(curve: FusedCurve, directory) -> Path:
    """The unfused and fused curves on log-log axes, the fused bound as a horizontal line, and
    a vertical line where an input or result first moves only its size, an intermediate first
    stays on chip, a group is first chosen, and the curve meets the bound."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{curve.graph.name}-{curve.arch.name}-capacity-{curve.level}.png"
    caps = [p.capacity for p in curve.points]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    if caps:
        ax.plot(caps, [p.unfused.outer_bytes for p in curve.points], "s--", ms=4, color="grey",
                label=f"unfused: each op's least {curve.outer} traffic, summed")
        ax.plot(caps, [p.fused.outer_bytes for p in curve.points], "o-", ms=4, color="C0",
                label="fused: the best grouping into kernels")
    ax.axhline(curve.bound.outer_bytes, color="black", lw=1, label="fused bound (inputs once, results once)")
    at: dict[float, list[str]] = {}          # one line per capacity, naming all that happen there
    for t in curve.thresholds:
        if t.capacity is not None and not t.from_start:
            at.setdefault(t.capacity, []).append(
                "bound met" if t.what == BOUND_NAME else f"{t.what} on chip" if t.what in curve.graph.intermediates
                else f"{t.what} once")
    for g in curve.group_thresholds:
        if g.chosen_from is not None and curve.points and g.chosen_from > curve.points[0].capacity:
            at.setdefault(g.chosen_from, []).append(f"{'+'.join(g.ops)} chosen")
    mark_capacities(ax, {c: f"{size_text(c)}: {', '.join(names)}" for c, names in sorted(at.items())})
    capacity_axes(ax, curve.level, curve.outer,
                  f"{curve.graph.name} on {curve.arch.name}: {curve.outer} traffic vs {curve.level} capacity")
    return saved(fig, ax, path)
