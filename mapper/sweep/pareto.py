"""Pareto fronts of a results store: `mapper results --pareto energy,cycles,area`.

A design point's figures are its optimal mapping's (energy, cycles, EDP) and its architecture's
area (the loader's, `area: auto` included, stored with each row). A point is on the front when
no other point of the same subject (a workload, an op graph, a model: `fronts`) is at least as
good in every figure and better in one: lower is better in each. Points equal in every figure
are all kept (neither dominates).
"""
from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from ..errors import MapperError

# a figure's name on the command line -> the store's column
FIGURES = MappingProxyType({"energy": "energy_pj", "cycles": "cycles", "area": "area_mm2", "edp": "edp",
                            "seconds": "seconds_kernel", "bytes": "outer_bytes"})


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a is at least as good as b everywhere and better somewhere (lower is better)."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def front(values: Sequence[Sequence[float]]) -> list[int]:
    """Indices of the non-dominated points, in their given order.

    Sorted lexicographically, a point can be dominated only by one before it; and a point
    dominated by anything is dominated by a front point (dominance is transitive and the
    order is finite), so each point is checked against the front found so far."""
    order = sorted(range(len(values)), key=lambda i: tuple(values[i]))
    kept: list[int] = []
    for i in order:
        if not any(dominates(values[j], values[i]) for j in kept):
            kept.append(i)
    return sorted(kept)


def figure_columns(text: str) -> tuple[tuple[str, str], ...]:
    """(name, column) of each figure of `--pareto a,b[,c]`: two or three known names, each once."""
    names = [part.strip() for part in text.split(",")]
    unknown = [n for n in names if n not in FIGURES]
    if unknown or not 2 <= len(names) <= 3 or len(set(names)) != len(names):
        raise MapperError(f"--pareto: expected two or three of {', '.join(FIGURES)}, each once "
                          f"(e.g. energy,cycles,area), got {text!r}")
    return tuple((n, FIGURES[n]) for n in names)
