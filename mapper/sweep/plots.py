"""Plots of a sweep (matplotlib, PNG): the greedy-vs-joint gap over a 2-D grid of shapes, the
tile each level chose across shapes, every point against its architecture's roofline, and a
model's time and energy per layer as stacked bars. Each reads only the stored rows."""
from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict
from pathlib import Path
from types import MappingProxyType

from .points import Point
from .report import gap

MAX_PANELS = 6


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80]


def pyplot():
    try:
        import matplotlib
    except ImportError:
        from ..errors import MapperError
        raise MapperError("--plot needs matplotlib: pip install 'mapper[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def write_plots(points: list[Point], rows: dict[str, dict], out: Path) -> list[Path]:
    """Every plot the sweep's points allow; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    plt = pyplot()
    written = []
    families = defaultdict(lambda: defaultdict(dict))     # (arch, mapspace, objective, family) -> sizes -> strategy -> row
    names = {}
    for p in points:
        row = rows.get(p.key)
        if row is None or p.layer is not None:
            continue
        section = (p.arch.name, p.constraints.name, p.objective, p.family)
        families[section][p.workload.sizes][p.strategy] = row
        names[section] = (p.workload.dims, p.workload.einsum)
    for section, by_shape in families.items():
        dims, einsum = names[section]
        if len(by_shape) < 2:
            continue
        stem = f"{section[0]}-{section[2]}-{safe_name(einsum.split('+=')[0].strip())}-{section[3][:6]}"
        path = _gap_heatmap(plt, by_shape, dims, section, out / f"gap-{stem}.png")
        if path:
            written.append(path)
        path = _tiles(plt, by_shape, dims, section, out / f"tiles-{stem}.png")
        if path:
            written.append(path)
    written += _rooflines(plt, points, rows, out)
    written += _model_bars(plt, points, rows, out)
    return written


def _varying(by_shape, dims) -> list[int]:
    return [d for d in range(len(dims)) if len({s[d] for s in by_shape}) > 1]


def _gap_heatmap(plt, by_shape, dims, section, path: Path):
    """Rows and columns: the two dims with the most values; a panel per value of the others."""
    if not any("greedy" in v and "joint" in v for v in by_shape.values()):
        return None
    varying = sorted(_varying(by_shape, dims), key=lambda d: -len({s[d] for s in by_shape}))
    if len(varying) < 2:
        varying = varying + [d for d in range(len(dims)) if d not in varying][:2 - len(varying)]
    x, y, rest = varying[0], varying[1], varying[2:]
    panels = sorted({tuple(s[d] for d in rest) for s in by_shape})[:MAX_PANELS]
    xs = sorted({s[x] for s in by_shape})
    ys = sorted({s[y] for s in by_shape})
    fig, axes = plt.subplots(1, len(panels), figsize=(1.2 + 0.9 * len(xs) * len(panels) + 1.5, 1.5 + 0.6 * len(ys)),
                             squeeze=False)
    image = None
    values = [gap(v.get("greedy"), v.get("joint")) for v in by_shape.values()]
    top = max([abs(v) for v in values if v is not None] + [1e-9]) * 100
    for ax, panel in zip(axes[0], panels):
        grid = [[math.nan] * len(xs) for _ in ys]
        for shape, by_strategy in by_shape.items():
            if tuple(shape[d] for d in rest) != panel:
                continue
            g = gap(by_strategy.get("greedy"), by_strategy.get("joint"))
            if g is not None:
                grid[ys.index(shape[y])][xs.index(shape[x])] = 100 * g
        image = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0, vmax=top, aspect="auto")
        for i, j in itertools.product(range(len(ys)), range(len(xs))):
            if not math.isnan(grid[i][j]):
                ax.text(j, i, f"{grid[i][j]:.1f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i][j] < top * 0.6 else "black")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=45, fontsize=7)
        ax.set_yticks(range(len(ys)), [str(v) for v in ys], fontsize=7)
        ax.set_xlabel(dims[x])
        ax.set_ylabel(dims[y])
        if rest:
            ax.set_title(", ".join(f"{dims[d]}={v}" for d, v in zip(rest, panel)), fontsize=8)
    fig.colorbar(image, ax=list(axes[0]), label=f"greedy loses (% {section[2]})")
    fig.suptitle(f"greedy vs joint on {section[0]} ({section[1]} mapspace)", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _best(by_strategy: dict) -> dict | None:
    ok = [r for r in by_strategy.values() if r and r["status"] == "ok"]
    joint = [r for r in ok if r["strategy"] == "joint"]
    pool = joint or ok
    return min(pool, key=lambda r: r["score"]) if pool else None


def _tiles(plt, by_shape, dims, section, path: Path):
    """One panel per level below the outermost: the tile extent per dim, shape by shape."""
    shapes = sorted(by_shape)
    best = [(s, _best(by_shape[s])) for s in shapes]
    best = [(s, r) for s, r in best if r is not None]
    if len(best) < 2:
        return None
    levels = list(best[0][1]["tiles"])[1:]
    fig, axes = plt.subplots(len(levels), 1, figsize=(max(5.0, 0.35 * len(best) + 2), 2.0 * len(levels)),
                             sharex=True, squeeze=False)
    labels = ["x".join(str(v) for v in s) for s, _ in best]
    for ax, level in zip(axes[:, 0], levels):
        for d, dim in enumerate(dims):          # nudged sideways and styled apart: equal tiles overlap
            shift = (d - (len(dims) - 1) / 2) * 0.08
            ax.plot([i + shift for i in range(len(best))], [r["tiles"][level][dim] for _, r in best],
                    marker="osD^v<>"[d % 7], ms=4, ls=("-", "--", ":", "-.")[d % 4], label=dim)
        ax.set_yscale("log", base=2)
        ax.set_ylabel(f"{level} tile", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=len(dims), loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False)
    axes[-1, 0].set_xticks(range(len(best)), labels, rotation=60, fontsize=6)
    axes[-1, 0].set_xlabel(" x ".join(dims))
    fig.suptitle(f"tile per level of the best mapping found, {section[0]}, objective {section[2]}", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


STRATEGY_MARKERS = MappingProxyType({"joint": "o", "greedy": "s"})    # any other strategy: "^"


def _level_roofs(arch) -> list[tuple[str, float | None]]:
    """(level, bytes per second through all its instances) of each level with a bandwidth, as
    explain's roofline draws them; the outermost level without a roof when none has one."""
    roofs = [(lv.name, lv.bandwidth * lv.instances * arch.clock_hz) for lv in arch.levels
             if math.isfinite(lv.bandwidth)]
    return roofs or [(arch.levels[0].name, None)]


def _level_bytes(row: dict, level: str, outermost: bool) -> float:
    """A row's traffic through `level` (its cost's level details; a fused row has the outer
    level's bytes only)."""
    details = (row.get("cost") or {}).get("level_details") or {}
    if level in details:
        return details[level]["traffic_bytes"]
    return row["outer_bytes"] if outermost else 0.0


def _rooflines(plt, points, rows, out: Path) -> list[Path]:
    """A hierarchical roofline per architecture: achieved MACs per second against intensity
    (MACs per byte through a level), one roof per level with a bandwidth and each point once per
    such level, in the level's colour; the marker's shape says the strategy, a filled one a
    proven optimum, a hollow one a point not proven optimal."""
    by_arch = defaultdict(dict)
    archs = {}
    for p in points:
        row = rows.get(p.key)
        if row and row["status"] == "ok" and row["outer_bytes"]:
            by_arch[p.arch.name][row["key"]] = row
            archs[p.arch.name] = p.arch
    written = []
    for name, arch_rows in by_arch.items():
        arch = archs[name]
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        peak = arch.peak_macs_per_cycle * arch.clock_hz
        xs = []
        for i, (level, bandwidth) in enumerate(_level_roofs(arch)):
            for row in arch_rows.values():
                traffic = _level_bytes(row, level, level == arch.levels[0].name)
                if traffic <= 0:
                    continue
                xs.append(row["macs"] / traffic)
                marker = STRATEGY_MARKERS.get(row["strategy"], "^")
                proven = bool(row.get("optimal"))
                # hollow ones larger and on top: one around a proven point at the same place shows
                ax.scatter(xs[-1], row["macs"] / row["seconds_kernel"], marker=marker, s=22 if proven else 60,
                           facecolors=f"C{i}" if proven else "none", edgecolors=f"C{i}",
                           zorder=3 if proven else 4)
        _draw_roofs(ax, arch, peak, xs)
        _roofline_legend(ax, {row["strategy"] for row in arch_rows.values()})
        ax.set_xlabel("MACs per byte through the level")
        ax.set_ylabel("achieved MACs per second")
        ax.grid(alpha=0.3, which="both")
        ax.set_title(f"{name}: every point against every level's roof", fontsize=9)
        path = out / f"roofline-{safe_name(name)}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def _draw_roofs(ax, arch, peak: float, xs: list[float]) -> None:
    """The compute peak, and each level's roof (bandwidth x intensity) up to it, on log axes
    wide enough for every point and every ridge."""
    roofs = [(i, level, bw) for i, (level, bw) in enumerate(_level_roofs(arch)) if bw]
    ridges = [peak / bw for _, _, bw in roofs]
    low = min([x / 4 for x in xs] + [r / 8 for r in ridges] + [1.0])
    high = max([x * 4 for x in xs] + [r * 8 for r in ridges] + [2.0])
    grid = [low * (high / low) ** (k / 200) for k in range(201)]
    ax.axhline(peak, color="k", lw=1, label=f"compute peak {peak:.3g} MAC/s")
    for i, level, bw in roofs:
        ax.plot(grid, [min(peak, bw * x) for x in grid], color=f"C{i}", lw=1,
                label=f"{level} roof {bw:.3g} B/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def _roofline_legend(ax, strategies: set[str]) -> None:
    """The roofs (by colour), the strategies (by shape) and proven vs not proven (filled vs hollow)."""
    from matplotlib.lines import Line2D
    handles = list(ax.get_lines())
    for strategy in sorted(strategies):
        handles.append(Line2D([], [], ls="", marker=STRATEGY_MARKERS.get(strategy, "^"), color="0.3",
                              markerfacecolor="0.3", label=strategy))
    handles.append(Line2D([], [], ls="", marker="o", color="0.3", markerfacecolor="0.3",
                          label="filled: proven optimal"))
    handles.append(Line2D([], [], ls="", marker="o", color="0.3", markerfacecolor="none",
                          label="hollow: not proven"))
    ax.legend(handles=handles, fontsize=7, loc="lower right")


def _model_bars(plt, points, rows, out: Path) -> list[Path]:
    """Per model expansion: one bar per strategy for time and one for energy, stacked by layer
    group (each group's figure times its count)."""
    sections = defaultdict(lambda: defaultdict(dict))
    for p in points:
        if p.layer is None:
            continue
        key = (p.layer.label, p.arch.name, p.constraints.name, p.objective)
        sections[key][(p.layer.position, "+".join(p.layer.layers), p.layer.count)][p.strategy] = rows.get(p.key)
    written = []
    for (label, arch, mapspace, objective), groups in sections.items():
        strategies = list(dict.fromkeys(s for g in groups.values() for s in g))
        fig, axes = plt.subplots(1, 2, figsize=(3.5 + 1.2 * len(strategies), 4.5))
        ordered = sorted(groups)
        colours = plt.get_cmap("tab20")
        for ax, (field, scale, unit) in zip(axes, [("seconds_kernel", 1e3, "time (ms)"),
                                                   ("energy_pj", 1e-9, "energy (mJ)")]):
            for i, strategy in enumerate(strategies):
                bottom = 0.0
                for j, group in enumerate(ordered):
                    row = groups[group].get(strategy)
                    if not row or row["status"] != "ok":
                        continue
                    value = group[2] * row[field] * scale
                    ax.bar(i, value, bottom=bottom, color=colours(j % 20), edgecolor="white", lw=0.5,
                           label=f"{group[1]} x{group[2]}" if i == 0 else None)
                    bottom += value
            ax.set_xticks(range(len(strategies)), strategies)
            ax.set_ylabel(unit)
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles[::-1], names[::-1], fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.suptitle(f"{label} on {arch} (objective {objective}): per layer, times its count", fontsize=9)
        fig.tight_layout()
        path = out / f"model-{safe_name(label)}-{safe_name(arch)}-{safe_name(objective)}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written
