"""One fusion study: every op mapped on its own (unfused), the grouping search (the dynamic
programme over runs of the listed order, then CP-SAT over every legal connected group, the
better kept), the boundaries and the chain's lower bound, under one search context.

Time: the einsums' searches share 85% of the time limit (each fusable variant counted as one
more search), the streaming ops the rest; `SearchContext.share` gives each its seconds on one
deadline.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..opgraph import OpGraph
from ..search import SearchContext
from ..spec import Arch
from .bound import ChainBound, chain_bound
from .cover import best_cover
from .grouping import Boundary, Grouping, best_grouping, boundaries, unfused
from .groups import Grouper
from .kernels import OpSearches

EINSUM_SHARE = 0.85


@dataclass(frozen=True)
class FuseResult:
    arch: Arch
    graph: OpGraph
    objective: str
    unfused: Grouping
    fused: Grouping
    boundaries: tuple[Boundary, ...]
    bound: ChainBound
    searches: OpSearches
    seconds: float
    runs: Grouping                  # the dynamic programme's best over runs of the listed order
    cover_proven: bool              # CP-SAT proved its choice over every connected group


def searches_for(arch: Arch, graph: OpGraph, context: SearchContext, time_limit: float,
                 extra_levels: tuple = ()) -> OpSearches:
    n_einsum = sum(op.family == "einsum" for op in graph.ops)
    n_stream = len(graph.ops) - n_einsum
    # each einsum: on its own, completing its tile, and perhaps with a row whole
    per_einsum = EINSUM_SHARE * time_limit / max(1, 2.5 * n_einsum) if n_einsum else 0.0
    per_stream = (1 - EINSUM_SHARE if n_einsum else 1.0) * time_limit / max(1, n_stream)
    return OpSearches(arch, graph, context, per_einsum, per_stream, extra_levels=extra_levels)


def fuse(arch: Arch, graph: OpGraph, context: SearchContext, time_limit: float,
         objective: str = "energy", extra_levels: tuple = ()) -> FuseResult:
    """`extra_levels`: per-level constraints (a mapspace preset's `levels`, e.g. keeps by role)
    added to every op's space."""
    started = time.perf_counter()
    searches = searches_for(arch, graph, context, time_limit, extra_levels)
    grouper = Grouper(arch, graph, searches, objective)
    n = len(graph.ops)
    base = unfused(grouper, n)
    runs = best_grouping(grouper, n)
    cover, proven = best_cover(grouper, n)
    best = cover if cover.score < runs.score else runs
    return FuseResult(arch, graph, objective, base, best, tuple(boundaries(grouper, best)),
                      chain_bound(arch, graph, searches.level), searches, time.perf_counter() - started,
                      runs, proven)
