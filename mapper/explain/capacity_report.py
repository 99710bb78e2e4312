"""Text and JSON forms of a `CapacityCurve`, and its plot (nothing here computes a cost)."""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from ..mapping import mapping_to_dict
from ..report import _num, table
from .capacity_curve import CapacityCurve, Threshold
from .plots import saved

REGIME_TEXT = MappingProxyType({   # read-only: the regimes' notes under the table (capacity_curve's docstring)
    "continuous": "every tensor that needs reuse is re-fetched: the square-root law, capacity a weak lever",
    "threshold": "a tensor past its threshold moves only compulsory traffic: capacity was the strong lever",
    "compulsory": "every tensor once: more capacity changes nothing",
})


def size_text(n: float) -> str:
    """Bytes with the largest binary unit that leaves at least one whole unit (`48 KiB`)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.4g} B"


def threshold_line(t: Threshold, outer: str) -> str:
    if t.capacity is None:
        return f"{t.what} ({size_text(t.size_bytes)}): still above its compulsory traffic at the largest capacity"
    if t.from_start:
        return (f"{t.what} ({size_text(t.size_bytes)}): only compulsory {outer} traffic at every capacity "
                "of the curve (its reuse needs no more capacity than the first point's)")
    moves = "at the floor (every tensor once)" if t.what == "working set" else f"only its compulsory {outer} traffic"
    return f"{t.what} ({size_text(t.size_bytes)}): {moves} from {size_text(t.capacity)} on"


def curve_text(curve: CapacityCurve) -> str:
    what = (f"the least {curve.outer} traffic" if curve.objective == f"bytes:{curve.outer}"
            else f"the {curve.outer} traffic of the least {curve.objective}")
    head = (f"capacity curve of {curve.level} for {curve.workload.name} on {curve.arch.name}: {what} at each "
            f"capacity, each point the joint search's best for {curve.objective}")
    rows = [[size_text(p.capacity), _num(p.outer_bytes), _num(p.energy_pj), _num(p.cycles), p.regime,
             "yes" if p.proven else ("no" if p.gap is None else f"gap {p.gap:.1%}")] for p in curve.points]
    body = table([f"{curve.level} capacity", f"{curve.outer} bytes", "energy pJ", "cycles", "regime", "proven"],
                 rows, align_left=1)
    lines = [head, body, f"compulsory floor: {_num(curve.compulsory_bytes)} B (every tensor once through {curve.outer})"]
    if curve.infeasible:
        lines.append("no mapping fits at " + ", ".join(size_text(c) for c in curve.infeasible))
    lines.append("thresholds:")
    lines += [f"  {threshold_line(t, curve.outer)}" for t in curve.thresholds]
    lines.append("regimes:")
    lines += [f"  {r}: {REGIME_TEXT[r]}" for r in REGIME_TEXT if any(p.regime == r for p in curve.points)]
    return "\n".join(lines)


def curve_json(curve: CapacityCurve) -> dict:
    return {"arch": curve.arch.name, "workload": curve.workload.name, "level": curve.level, "outer": curve.outer,
            "objective": curve.objective, "compulsory_bytes": curve.compulsory_bytes,
            "infeasible_capacities": list(curve.infeasible),
            "points": [{"capacity_bytes": p.capacity, "outer_bytes": p.outer_bytes, "energy_pj": p.energy_pj,
                        "cycles": p.cycles, "regime": p.regime, "proven": p.proven, "gap": p.gap,
                        "tensor_bytes": p.tensor_bytes, "evaluated": p.evaluated,
                        "mapping": mapping_to_dict(p.mapping, curve.arch, curve.workload)} for p in curve.points],
            "thresholds": [{"what": t.what, "size_bytes": t.size_bytes, "capacity_bytes": t.capacity,
                            "from_start": t.from_start} for t in curve.thresholds]}


def plot_curve(curve: CapacityCurve, directory) -> Path:
    """The curve on log-log axes, the compulsory floor, and a vertical line at each threshold
    inside the curve; the square-root law drawn through the first point for comparison."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{curve.workload.name}-{curve.arch.name}-capacity-{curve.level}.png"
    caps = np.array([p.capacity for p in curve.points])
    traffic = np.array([p.outer_bytes for p in curve.points])
    fig, ax = plt.subplots(figsize=(7.5, 5))
    if len(caps):
        ax.plot(caps, traffic, "o-", ms=4, label=f"least {curve.outer} traffic (joint search, per capacity)")
        ax.plot(caps, traffic[0] * np.sqrt(caps[0] / caps), ":", color="grey",
                label=r"square-root law $\propto 1/\sqrt{S}$ through the first point")
        open_points = [p for p in curve.points if not p.proven]
        if open_points:
            ax.plot([p.capacity for p in open_points], [p.outer_bytes for p in open_points], "x", color="red",
                    ms=9, label="not proven optimal")
    ax.axhline(curve.compulsory_bytes, color="black", lw=1, label="compulsory (every tensor once)")
    at: dict[float, list[str]] = {}       # one line per capacity, naming all that reach it there
    for t in curve.thresholds:
        if t.capacity is not None and not t.from_start:
            at.setdefault(t.capacity, []).append(f"{t.what} ({size_text(t.size_bytes)})")
    mark_capacities(ax, {c: f"{', '.join(names)}: compulsory from {size_text(c)}" for c, names in at.items()})
    capacity_axes(ax, curve.level, curve.outer,
                  f"{curve.workload.name} on {curve.arch.name}: {curve.outer} traffic vs {curve.level} capacity")
    return saved(fig, ax, path)


def mark_capacities(ax, labels: dict[float, str]) -> None:
    """A dashed vertical line at each capacity of `labels`, in the colours after the first
    (the curve's), its legend entry the label: the thresholds of a capacity curve."""
    import matplotlib.pyplot as plt
    colours = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"][1:])
    for capacity, label in labels.items():
        ax.axvline(capacity, lw=1.2, ls="--", color=next(colours, "red"), label=label)


def capacity_axes(ax, level: str, outer: str, title: str) -> None:
    """The axes of a capacity curve: log-log, capacities in binary units."""
    import matplotlib.ticker
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: size_text(x)))
    ax.set_yscale("log")
    ax.set_xlabel(f"{level} capacity per instance (bytes)")
    ax.set_ylabel(f"bytes through {outer}")
    ax.set_title(title, fontsize=10)
