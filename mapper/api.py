"""The Python API's entry points that run work: `run_search` (one search, with a time
limit or an evaluation budget), `run_capacity_curve` (a search per capacity of one level),
`run_fused_capacity_curve` (an op graph's, fused and unfused: a fusion study per capacity) and
`run_sweep` (a grid of searches into a results store, read back as rows). Each takes what the
loaders take (preset names, file paths, dicts, or spec objects), so a script needs nothing but
`import mapper`; docs/API.md shows them at work.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .load import load_arch, load_constraints, load_workload
from .mapspace import Mapspace
from .units import Where


def run_search(arch, workload, mapspace=None, *, strategy: str = "joint", objective: str = "edp",
               time_limit: float | None = 60.0, max_evaluations: int | None = None, **options):
    """The best mapping of `workload` on `arch` the strategy finds within its budget: a
    `SearchResult` (`.mapping`, `.evaluation`, `.score`, `.optimal`, `.gap`, `.notes`).

    `time_limit` (seconds, counted in work: `SearchContext.for_search`, so the result does not
    depend on the machine's load; the wall clock only stops it, `.stopped_by` then "clock"; None:
    none) or `max_evaluations` (mappings priced, which then replaces the time limit) bound it;
    `options` are the
    strategy's own (`seed`, `samples`, `cpsat_seconds`, `incumbents`, ...: `strategy_options`).
    A spec error raises `SpecError`, an empty space `InfeasibleError`."""
    from .search import SearchContext, make_strategy, parse_objective
    context = SearchContext.for_command(time_limit, max_evaluations).for_search()
    space = Mapspace(load_arch(arch), load_workload(workload), load_constraints(mapspace))
    chosen = make_strategy(strategy, options, where="run_search")
    return chosen.run(space, parse_objective(objective, space.arch), context)


def run_capacity_curve(arch, workload, level: str, capacities=None, mapspace=None, *, objective: str | None = None,
                       time_limit: float | None = 60.0, max_evaluations: int | None = None, **options):
    """The least outer-level traffic over `level`'s capacities (bytes per instance; default
    x2 steps up to the working set): a `CapacityCurve` (`.points`: capacity, outer bytes,
    energy, cycles, regime, proven; `.thresholds`), each point the joint search's best under
    `objective` (default bytes at the outermost level) with `time_limit` or `max_evaluations`
    per point; `options` are the joint strategy's. `mapper explain --capacity` prints it."""
    from .explain.capacity_curve import capacity_curve
    return capacity_curve(load_arch(arch), load_workload(workload), load_constraints(mapspace), level, capacities,
                          objective=objective, time_limit=time_limit, max_evaluations=max_evaluations,
                          options=options)


def run_fused_capacity_curve(arch, opgraph, level: str, capacities=None, mapspace=None, *,
                             time_limit: float | None = 20.0, max_evaluations: int | None = None):
    """An op graph's least outer-level traffic over `level`'s capacities (default x2 steps up
    to the graph's working set), unfused and fused, with the chain's fused bound: a
    `FusedCurve` (`.points`: capacity, `.unfused` and `.fused` bytes, energy and cycles,
    regime, the fused kernels; `.thresholds`, `.group_thresholds`, `.bound`), each point a
    fusion study under bytes with `time_limit` seconds or `max_evaluations` mappings priced;
    `mapspace`: a constraints preset whose `levels` are added to every op's space, on CTA pairs
    where it asks (`fusion.run.fusion_space`). `opgraph`: a preset name, a file's path, the dict
    such a file holds, or an `OpGraph`. `mapper explain ARCH OPGRAPH --capacity LEVEL` prints it."""
    from .fusion.capacity_curve import fused_capacity_curve
    from .fusion.run import fusion_space
    from .load import load_opgraph, opgraph_from_dict
    from .opgraph import OpGraph
    graph = opgraph if isinstance(opgraph, OpGraph) else (
        opgraph_from_dict(opgraph, Where("<op graph dict>")) if isinstance(opgraph, dict) else load_opgraph(opgraph))
    arch = load_arch(arch)
    arch, extra = fusion_space(arch, graph, load_constraints(mapspace)) if mapspace is not None else (arch, ())
    return fused_capacity_curve(arch, graph, level, capacities, time_limit=time_limit,
                                max_evaluations=max_evaluations, extra_levels=extra)


@dataclass
class SweepResults:
    """What `run_sweep` did (`run`: points searched now, skipped, seconds, failures) and every
    point's row as the results store holds it (`rows`: dicts with `arch`, `workload`, `sizes`,
    `strategy`, `objective`, `status`, `score`, `optimal`, `mapping`, ...; `mapper results`
    lists the same)."""
    run: object
    rows: list[dict]

    @property
    def failed(self) -> list[dict]:
        return [row for row in self.rows if row["status"] != "ok"]


def load_sweep(spec):
    """A sweep (`SweepSpec`) from a sweep file's path or the dict such a file holds (its
    archs, mapspaces and workloads by preset name or path, a file's relative to it)."""
    from .sweep.spec import SweepSpec, load_sweep as load_sweep_file, sweep_from_dict
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, dict):
        return sweep_from_dict(spec, Where("<sweep dict>"))
    if isinstance(spec, (str, Path)):
        return load_sweep_file(str(spec))
    raise TypeError(f"expected a sweep file's path or a dict, got {type(spec).__name__}")


def run_sweep(sweep, db="mapper-results.sqlite", *, jobs: int | None = 1, time_limit: float | None = None,
              scheduler=None, progress: bool = False, retry_failed: bool = False) -> SweepResults:
    """Search every point of `sweep` (`load_sweep` takes it) not yet in the store `db`, on
    `jobs` local processes (1: in this process) or a Dask `scheduler`; `time_limit` per point
    overrides the sweep's. Points already stored are skipped (a sweep resumes)."""
    from .sweep.points import expand_points
    from .sweep.runner import run_points
    from .sweep.store import Store
    spec = load_sweep(sweep)
    if time_limit is not None:
        spec = replace(spec, settings=replace(spec.settings, time_limit=float(time_limit)))
    points = expand_points(spec)
    with Store(db) as store:
        run = run_points(points, store, jobs=jobs, scheduler=scheduler, warm_start=spec.warm_start,
                         progress=progress, retry_failed=retry_failed)
        stored = {row["key"]: row for row in store.rows({p.key for p in points})}
    rows = [stored[key] for key in dict.fromkeys(p.key for p in points) if key in stored]
    return SweepResults(run, rows)
