"""One point, searched: the function a worker runs (in this process, a local process pool or a
Dask worker) and the row it returns. It reads no file and writes nothing: everything it needs
travels in the task, and only the sweep's parent writes the store.
"""
from __future__ import annotations

import os
import socket
import time
import traceback
from dataclasses import dataclass

from ..cost import evaluate_many
from ..errors import BudgetExhausted, MapperError, SpecError
from ..mapping import Mapping, level_tiles, mapping_to_dict
from ..mapspace import Mapspace, pruning
from ..report import evaluation_json
from ..search import SearchContext, make_strategy, parse_objective
from ..search.events import WarmStart
from ..search.warm import admit
from .points import Point


@dataclass(frozen=True)
class Task:
    point: Point
    incumbents: tuple[Mapping, ...] = ()     # neighbours' best mappings, rescaled to this shape
    cores: int | None = None                 # processes its search may use (None: this machine's)


def package_version() -> str:
    try:
        from importlib.metadata import version
        return version("mapper")
    except Exception:          # running from a checkout that is not installed
        return "unknown"


def base_row(point: Point) -> dict:
    """The inputs' columns of a point's row (the same whatever the outcome)."""
    layer = point.layer
    arch = point.arch.for_workload(point.workload)       # the MAC rate of its operand dtypes
    return {
        "key": point.key, "slot": point.slot, "arch": arch.name, "workload": point.workload.name,
        "einsum": point.workload.einsum, "mapspace": point.constraints.name, "strategy": point.strategy,
        "objective": point.objective, "settings": dict(point.settings), "sizes": point.sizes,
        "family": point.family, "macs": point.workload.macs,
        "model": layer and layer.model, "phase": layer and layer.phase,
        "model_inputs": layer and dict(layer.inputs), "expansion": layer and layer.label,
        "layers": layer and "+".join(layer.layers), "count": layer and layer.count,
        "position": layer and layer.position, "expansion_groups": layer and layer.groups,
        "peak_macs_per_s": arch.peak_macs_per_cycle * arch.clock_hz,
        "outer_bytes_per_s": arch.levels[0].bandwidth * arch.clock_hz,
        "area_mm2": arch.area if arch.area > 0 else None,     # None: the arch gives no area
        "version": package_version(), "worker": f"{socket.gethostname()}:{os.getpid()}",
    }


def recorded(row: dict, work) -> None:
    """Runs `work()` and records in `row` what it returned and its status: ok, or why not
    (timeout, invalid input, infeasible, or a bug, with where it happened: the sweep goes on)."""
    try:
        row.update(work())
        row["status"] = "ok"
    except BudgetExhausted as exc:
        row.update(status="timeout", reason=str(exc))
    except SpecError as exc:
        row.update(status="invalid", reason=str(exc))
    except MapperError as exc:
        row.update(status="infeasible", reason=str(exc))
    except Exception as exc:          # a bug: recorded with where it happened, the sweep goes on
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        row.update(status="failed", reason=f"{type(exc).__name__}: {exc} "
                   f"({os.path.basename(frame.filename)}:{frame.lineno})")


def run_task(task: Task) -> dict:
    """Search one point; a bad point comes back as a row with its status and reason."""
    point = task.point
    row = base_row(point)
    started = time.perf_counter()
    recorded(row, lambda: _search(point, task.incumbents, task.cores))
    row["search_seconds"] = row.get("search_seconds") or time.perf_counter() - started
    row["finished_at"] = time.time()
    return row


def _search(point: Point, incumbents: tuple[Mapping, ...], cores: int | None = None) -> dict:
    arch, workload = point.arch, point.workload
    options = dict(point.settings)
    time_limit, budget = options.pop("time_limit", None) or None, options.pop("max_evaluations", None)
    # an evaluation budget's clock, or a search's work clock (`SearchContext.for_search`), so
    # the point's result does not depend on the machine's load; the time limit only stops it
    context = (SearchContext.for_command(time_limit, budget).for_search() if time_limit or budget
               else SearchContext())            # no limit: nothing to count against
    if point.strategy == "joint":
        options.update(incumbents=incumbents, workers=cores)
    space = Mapspace(arch, workload, point.constraints)
    objective = parse_objective(point.objective, arch)
    strategy = make_strategy(point.strategy, options, where=f"sweep point {point.key}")
    result = strategy.run(space, objective, context)
    ev = result.evaluation
    out = {
        "score": result.score, "energy_pj": ev.energy_pj, "cycles": ev.cycles,
        "seconds_kernel": ev.cycles / arch.clock_hz, "edp": ev.edp, "utilization": ev.utilization,
        "bottleneck": ev.bottleneck, "outer_bytes": ev.levels[0].traffic_bytes,
        "evaluated": result.evaluated, "search_seconds": result.seconds,
        "seconds_to_best": result.seconds_to_best, "optimal": int(result.optimal),
        "complete": int(result.complete), "gap": result.gap,
        "mapping": mapping_to_dict(result.mapping, arch, workload),
        "tiles": {level.name: dict(zip(workload.dims, tile))
                  for level, tile in zip(arch.levels, level_tiles(result.mapping, len(workload.dims)))},
        "cost": evaluation_json(arch, workload, result.mapping, ev)["cost"],
        "notes": result.notes,
    }
    if point.strategy == "joint":
        out.update(_warm_figures(space, objective, incumbents, result.events))
    return out


def _warm_figures(space, objective, incumbents, events) -> dict:
    """How good a start the neighbours gave: how many lie in this space, the best one's score,
    and the score of greedy's start that the joint search would have had without them."""
    admitted = [t for t in (admit(space, m) for m in incumbents) if t is not None]
    best = None
    for table in admitted:
        costs = evaluate_many(space.arch, space.workload, table)
        valid = costs.valid & pruning.valid_mask(space, table)
        if valid[0]:
            score = float(objective.score(costs)[0])
            best = score if best is None else min(best, score)
    start = next((event.score for event in events if isinstance(event, WarmStart)), None)
    return {"warm_given": len(incumbents), "warm_admitted": len(admitted), "warm_score": best,
            "start_score": start}
