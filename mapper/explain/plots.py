"""The plots beside `mapper explain`: the traffic-versus-capacity curve at one level and the
roofline of the mapping. matplotlib is imported here only (Agg backend: files, no display)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from . import Explanation
from .traffic_bounds import (bilinear, compulsory_words, least_traffic, single_level_tilings, smith_bound,
                     subtree_capacity_bytes)


def traffic_curve(ex: Explanation, points: int = 28) -> dict:
    """Minimal traffic (words) between a memory of capacity S and the one above it, as S sweeps
    from 1 KiB to twice the working set; with the Smith et al. bound and compulsory traffic."""
    workload = ex.workload
    min_word = min(t.bytes_per_word for t in workload.tensors)
    working_set = ex.working_set_bytes
    capacities = np.geomspace(1024, 2 * working_set, points)
    capacities = np.unique(np.concatenate([capacities, [ex.threshold_bytes]]))
    tilings = single_level_tilings(workload)           # once for every capacity of the curve
    minimal = [least_traffic(tilings, c) for c in capacities]
    shape = bilinear(workload)
    bound = [smith_bound(shape.macs, c / min_word) if shape else 0.0 for c in capacities]
    return {"capacity_bytes": capacities.tolist(),
            "minimal_words": [None if m is None or math.isinf(m) else m for m in minimal],
            "smith_words": bound, "compulsory_words": float(compulsory_words(workload)),
            "threshold_bytes": ex.threshold_bytes, "working_set_bytes": working_set}


def plot_traffic_curve(ex: Explanation, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    curve = traffic_curve(ex)
    lv = ex.focus
    level = ex.arch.levels[lv]
    traffic = ex.traffic[lv - 1]
    capacity = subtree_capacity_bytes(ex.arch, lv)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    caps = np.array(curve["capacity_bytes"])
    minimal = np.array([np.nan if m is None else m for m in curve["minimal_words"]], float)
    if np.isfinite(minimal).any():
        ax.plot(caps, minimal, "o-", ms=3, label="minimal traffic (best single-level tiling)")
    smith = np.array(curve["smith_words"], float)
    if (smith > 0).any():
        ax.plot(caps[smith > 0], smith[smith > 0], "--", label=r"Smith et al. bound $2W/\sqrt{S}-2S$")
        # the square-root law through the first minimal point: traffic ~ 1/sqrt(S)
        ref = np.flatnonzero(np.isfinite(minimal))
        if len(ref) and (smith > curve["compulsory_words"]).any():     # a continuous regime exists
            i = ref[0]
            ax.plot(caps, minimal[i] * np.sqrt(caps[i] / caps), ":", color="grey",
                    label=r"square-root law $\propto 1/\sqrt{S}$")
    if not np.isfinite(minimal).any() and not (smith > 0).any():
        # said on the plot, not left as an empty frame
        why = ("a sliding window (convolution): single-level tilings are not enumerated"
               if any(t.has_sliding_axis for t in ex.workload.tensors) else "too many tilings to enumerate")
        ax.text(0.02, 0.02, f"no minimal-traffic curve: {why}", transform=ax.transAxes, fontsize=8)
    ax.axhline(curve["compulsory_words"], color="black", lw=1, label="compulsory (each tensor once)")
    ax.axvline(curve["threshold_bytes"], color="red", lw=1, ls="-.",
               label=f"threshold {curve['threshold_bytes'] / 2**20:,.3g} MiB: traffic can be compulsory")
    if math.isfinite(capacity):
        ax.axvline(capacity, color="green", lw=1, ls="--",
                   label=f"{level.name} subtree capacity {capacity / 2**10:,.0f} KiB per instance")
        ax.plot([capacity], [traffic.traffic], "*", ms=14, color="green",
                label=f"this mapping at {level.name}: {traffic.traffic:.3g} words")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("capacity S of the fast memory (bytes)")
    ax.set_ylabel("words moved across its upper boundary")
    ax.set_xlim(caps[0], caps[-1] * 1.5)
    ax.set_title(f"{ex.workload.name}: traffic vs capacity\n(level {level.name} of {ex.arch.name})", fontsize=10)
    return saved(fig, ax, path)


def _rate(value: float, unit: str) -> str:
    """A rate with the prefix that keeps it readable (0.256 TMAC/s reads 256 GMAC/s)."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:,.3g} {prefix}{unit}"
    return f"{value:,.3g} {unit}"


def plot_roofline(ex: Explanation, path: Path) -> Path:
    """Attainable MACs per second against intensity (MACs per byte through a level), one roof
    per level with finite bandwidth (its bandwidth x instances), and the mapping's point at
    every level that moves bytes: its intensity there and the rate it reaches (a level that
    declares no bandwidth has its point and no roof, and the legend says so)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    arch, ev = ex.arch, ex.evaluation
    peak = arch.peak_macs_per_cycle * arch.clock_hz
    achieved = ev.macs / (ev.cycles / arch.clock_hz)
    points = []
    for lc, level in zip(ev.levels, arch.levels):
        if lc.traffic_bytes > 0:
            roof = level.bandwidth * level.instances * arch.clock_hz if math.isfinite(level.bandwidth) else None
            points.append((level.name, ev.macs / lc.traffic_bytes, roof))
    fig, ax = plt.subplots(figsize=(7.5, 5))
    xs = [p[1] for p in points] or [1.0]
    roofs = [p[2] for p in points if p[2]]
    lo, hi = min(xs + [peak / max(roofs, default=peak)]) / 10, max(xs) * 10
    x = np.geomspace(lo, hi, 200)
    ax.axhline(peak, color="black", lw=1.5, label=f"compute peak {_rate(peak, 'MAC/s')} "
               f"({arch.peak_macs_per_cycle:,.0f} MACs/cycle x {_rate(arch.clock_hz, 'Hz')})")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, intensity, bandwidth) in enumerate(points):
        c = colours[i % len(colours)]
        if bandwidth:
            ax.plot(x, np.minimum(peak, bandwidth * x), color=c, lw=1,
                    label=f"{name} roof {_rate(bandwidth, 'B/s')} (all instances)")
        else:
            ax.plot([], [], "o", color=c, label=f"{name}: no bandwidth declared, no roof")
        ax.plot([intensity], [achieved], "o", color=c, ms=8)
        ax.annotate(f"{name}: {intensity:.3g} MAC/B", (intensity, achieved), textcoords="offset points",
                    xytext=(6, -12 - 11 * i), fontsize=7, color=c)
    ax.axhline(achieved, color="grey", ls=":", lw=1,
               label=f"this mapping {_rate(achieved, 'MAC/s')} ({ev.utilization:.0%} of peak)")
    ax.set_ylim(achieved / 20, peak * 3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("intensity (MACs per byte moved through the level)")
    ax.set_ylabel("MACs per second")
    ax.set_title(f"{ex.workload.name} on {arch.name}: roofline\n(overall: {ex.overall.split(';')[0]})",
                 fontsize=10)
    return saved(fig, ax, path)


def write_plots(ex: Explanation, directory) -> list[Path]:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{ex.workload.name}-{ex.arch.name}"
    level = ex.arch.levels[ex.focus].name
    return [plot_traffic_curve(ex, out / f"{stem}-traffic-{level}.png"),
            plot_roofline(ex, out / f"{stem}-roofline.png")]


def saved(fig, ax, path):
    """The explain plots' one finish: a light grid (both log scales' ticks), a small legend,
    120 dpi; the figure closed (pyplot keeps every open one). Returns `path`."""
    import matplotlib.pyplot as plt
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best", framealpha=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
