"""`mapper results --pareto A,B[,C] --plot DIR`: one PNG per front (matplotlib, Agg).

Two figures: one scatter, A across, B up. Three: one scatter per pair of figures, side by side,
the points of the three-figure front marked in each. Dominated points are grey; front points
coloured and labelled with their architecture's changes (`[GlobalBuffer.capacity=32MiB]`, and
"unfused" for a fusion study's unfused figures, drawn as crosses). An axis is logarithmic where
its values span more than LOG_SPAN (all positive).
"""
from __future__ import annotations

import itertools
from pathlib import Path
from types import MappingProxyType

from .arch_grid import changes_of
from .fronts import Front
from .plots import pyplot, safe_name

LOG_SPAN = 30.0            # max / min of an axis above which it is drawn logarithmic
UNITS = MappingProxyType({"energy_pj": "pJ", "cycles": "", "area_mm2": "mm^2", "edp": "pJ x cycles",
         "seconds_kernel": "s", "outer_bytes": "B"})


def _log(values: list[float]) -> bool:
    return bool(values) and min(values) > 0 and max(values) / min(values) > LOG_SPAN


def _axis(name: str, column: str) -> str:
    unit = UNITS.get(column, "")
    return f"{name} ({unit})" if unit else name


def point_labels(found: Front) -> tuple[list[str], str]:
    """What is written beside each candidate, and what the values name: where every candidate
    varies the same fields, their values alone (`64MiB, 512x128`), the fields said once in the
    title; otherwise each candidate's whole label."""
    changes = [changes_of(c.arch)[1] for c in found.candidates]
    paths = {tuple(path for path, _ in ch) for ch in changes}
    if len(paths) != 1 or not next(iter(paths)):
        return [c.label for c in found.candidates], ""
    labels = []
    for c, ch in zip(found.candidates, changes):
        rest = c.label[c.label.index("]") + 1:] if c.label.startswith("[") else ""
        labels.append(", ".join(value for _, value in ch) + rest)
    return labels, ", ".join(next(iter(paths)))


def draw_front(plt, found: Front, figures: tuple[tuple[str, str], ...]):
    """The figure of one front; returns it and, per panel, the labels written on it (those of
    the front's points, in the front's order)."""
    pairs = list(itertools.combinations(range(len(figures)), 2))
    fig, axes = plt.subplots(1, len(pairs), figsize=(6.4 * len(pairs), 5.2), squeeze=False)
    kept = set(found.kept)
    texts, varied = point_labels(found)
    labelled = []
    for ax, (a, b) in zip(axes[0], pairs):
        (name_a, col_a), (name_b, col_b) = figures[a], figures[b]
        xs = [c.figures[col_a] for c in found.candidates]
        ys = [c.figures[col_b] for c in found.candidates]
        dominated = [i for i in range(len(found.candidates)) if i not in kept]
        ax.scatter([xs[i] for i in dominated], [ys[i] for i in dominated], color="0.7", s=22,
                   label="dominated" if dominated else None, zorder=2)
        written = []
        for rank, i in enumerate(found.kept):
            unfused = found.candidates[i].strategy == "unfused"
            ax.scatter([xs[i]], [ys[i]], color=f"C{rank % 10}", s=42, marker="x" if unfused else "o", zorder=3)
            # one change a line; left out of the layout, so long labels do not squeeze the axes
            right = xs[i] > (min(xs) + max(xs)) / 2      # a label in the right half reads leftwards
            note = ax.annotate(texts[i] if varied else texts[i].replace(",", ",\n"), (xs[i], ys[i]), fontsize=7,
                               xytext=(-4 if right else 4, 4), textcoords="offset points",
                               ha="right" if right else "left", color=f"C{rank % 10}")
            note.set_in_layout(False)
            written.append(texts[i])
        labelled.append(written)
        ax.set_xscale("log" if _log(xs) else "linear")
        ax.set_yscale("log" if _log(ys) else "linear")
        ax.set_xlabel(_axis(name_a, col_a))
        ax.set_ylabel(_axis(name_b, col_b))
        ax.grid(True, alpha=0.3)
        if dominated:
            ax.legend(fontsize=7)
    names = ", ".join(name for name, _ in figures)
    points = f"\npoints labelled by {varied}" if varied else ""
    fig.suptitle(f"Pareto front of {found.kind} {found.subject} over {names}: {len(found.kept)} of "
                 f"{len(found.candidates)} points (lower is better){points}", fontsize=10)
    fig.tight_layout()
    return fig, labelled


def write_fronts(found: list[Front], figures: tuple[tuple[str, str], ...], out: Path) -> list[Path]:
    """A PNG per front with points; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    plt = pyplot()
    written = []
    for f in found:
        if not f.kept:
            continue
        fig, _ = draw_front(plt, f, figures)
        path = out / f"pareto-{safe_name(f.kind)}-{safe_name(f.subject)}-{'-'.join(n for n, _ in figures)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
