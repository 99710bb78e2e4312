"""Op graphs in a sweep: each model chain of `mapper sweep --fuse` (`sweep.chains`) and each
op-graph workload (a preset or file with `ops:`) is one more point of the sweep per architecture
and mapspace, a fusion study (`fusion.run.fuse`), stored as one row of the results store.

A chain point's key hashes the architecture, the op graph, the mapspace, the fusion setting
(`strategy` "fuse", the grouping's objective) and the time limit (and an evaluation budget when
one is set), so a killed sweep resumes where it stopped and a point with other inputs is
searched again. The mapspace is applied as `mapper fuse --mapspace` applies it: its `levels`
added to every op's space, on CTA pairs where it asks (`fusion.run.fusion_space`), so a chain
point equals `mapper fuse` on the same architecture. Its row holds the fused figures in the usual columns (`energy_pj`,
`cycles`, `edp`, `outer_bytes`; `score` is the fused energy), the architecture's area, both
groupings in `cost` ({"unfused": ..., "fused": ...}) and every candidate group's status there
(`cost["candidates"]`: chosen, legal, refused with its reason).

The chain points run after the layer points, on the sweep's processes (`runner.make_executor`),
each study on one core when several run side by side.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

from ..constraints import Constraints
from ..spec import Arch
from .execute import package_version, recorded
from .points import digest
from .spec import ChainSubject, SweepSpec
from .store import Store

STRATEGY = "fuse"
OBJECTIVE = "energy"          # what the grouping minimises (each kernel's mapping: the joint search's EDP best)
DEFAULT_SECONDS = 60.0        # a sweep without a time limit (time_limit: 0) gives each study this


@dataclass(frozen=True)
class ChainPoint:
    key: str
    slot: str
    arch: Arch
    subject: ChainSubject
    constraints: Constraints
    extra_levels: tuple            # the mapspace's `levels`, checked against the arch and every op
    settings: tuple[tuple[str, float], ...]     # time_limit, and max_evaluations when set

    @property
    def seconds(self) -> float:
        return dict(self.settings)["time_limit"]


@dataclass(frozen=True)
class ChainTask:
    point: ChainPoint
    cores: int | None = None       # cores its op searches may fork onto (None: this machine's)


def chain_points(spec: SweepSpec) -> list[ChainPoint]:
    """One point per (architecture, mapspace, chain or op graph); a mapspace naming what an
    architecture or op lacks is refused here, before anything runs."""
    from ..fusion.run import fusion_space
    settings = {"time_limit": spec.settings.time_limit or DEFAULT_SECONDS}
    if spec.settings.max_evaluations:
        settings["max_evaluations"] = spec.settings.max_evaluations
    out = []
    for arch in spec.archs:
        for constraints in spec.mapspaces:
            for subject in spec.chains:
                graph = subject.chain.graph
                kernel_arch, extra = fusion_space(arch, graph, constraints, strict=False)
                key = digest({"arch": digest(kernel_arch), "graph": digest(graph), "mapspace": digest(constraints),
                              "strategy": STRATEGY, "objective": OBJECTIVE, "settings": settings})
                slot = "|".join([arch.name, graph.name, constraints.name, STRATEGY, OBJECTIVE])
                out.append(ChainPoint(key, slot, kernel_arch, subject, constraints, extra,
                                      tuple(sorted(settings.items()))))
    return out


def run_chain_points(points: list[ChainPoint], store: Store, jobs: int | None = None, scheduler=None,
                     retry_failed: bool = False) -> tuple[list[dict], int]:
    """Study every point not yet in the store, on the sweep's processes; each row is written as
    it finishes. Returns the rows computed and the number skipped."""
    from .runner import REDO, make_executor
    stored = store.statuses()
    unique = list({p.key: p for p in reversed(points)}.values())[::-1]
    todo = [p for p in unique if p.key not in stored or (retry_failed and stored[p.key] in REDO)]
    computed: list[dict] = []
    if not todo:
        return computed, len(unique)
    executor = make_executor(jobs, scheduler, len(todo))
    cores = 1 if executor.slots > 1 else None
    pending: set = set()
    queue = list(todo)
    try:
        while queue or pending:
            while queue and len(pending) < executor.slots:
                pending.add(executor.submit(run_chain_task, ChainTask(queue.pop(0), cores)))
            done, pending = executor.wait(pending)
            for future in done:
                row = future.result()
                store.write(row)
                computed.append(row)
    finally:
        executor.close()
    return computed, len(unique) - len(todo)


def run_chain_task(task: ChainTask) -> dict:
    return chain_row(task.point, task.cores)


def chain_row(point: ChainPoint, cores: int | None = None) -> dict:
    """The stored row of one fusion study; a bad point comes back with its status and reason."""
    layer, graph, arch = point.subject.layer, point.subject.chain.graph, point.arch
    row = {"key": point.key, "slot": point.slot, "arch": arch.name, "workload": graph.name,
           "einsum": " -> ".join(op.name for op in graph.ops), "mapspace": point.constraints.name,
           "strategy": STRATEGY, "objective": OBJECTIVE, "settings": dict(point.settings),
           "sizes": {d: s for op in graph.ops for d, s in zip(op.workload.dims, op.workload.sizes)},
           "macs": sum(op.workload.macs for op in graph.ops if op.family == "einsum"),
           "peak_macs_per_s": arch.peak_macs_per_cycle * arch.clock_hz,
           "outer_bytes_per_s": arch.levels[0].bandwidth * arch.clock_hz,
           "area_mm2": arch.area if arch.area > 0 else None,     # None: the arch gives no area
           "version": package_version(), "worker": f"{socket.gethostname()}:{os.getpid()}"}
    if layer is not None:            # a model's chain; an op-graph workload stands alone
        row.update(model=layer.model, phase=layer.phase, model_inputs=dict(layer.inputs), expansion=layer.label,
                   layers="+".join(layer.layers), count=layer.count, position=layer.position,
                   expansion_groups=layer.groups)
    started = time.perf_counter()
    recorded(row, lambda: _study(point, cores))
    row["search_seconds"] = time.perf_counter() - started
    row["finished_at"] = time.time()
    return row


def _study(point: ChainPoint, cores: int | None) -> dict:
    from ..fusion.report import fuse_json
    from ..fusion.run import fuse
    from ..search import SearchContext
    settings = dict(point.settings)
    context = SearchContext.for_command(point.seconds, settings.get("max_evaluations"))
    result = fuse(point.arch, point.subject.chain.graph, context, point.seconds, OBJECTIVE, point.extra_levels, cores)
    data = fuse_json(result)

    def totals(grouping: dict) -> dict:
        return {"energy_pj": grouping["energy_pj"], "outer_bytes": grouping["outer_bytes"],
                "cycles": grouping["cycles"], "edp": grouping["energy_pj"] * grouping["cycles"],
                "seconds_kernel": grouping["cycles"] / point.arch.clock_hz,
                "groups": [{k: g[k] for k in ("ops", "outer_bytes", "energy_pj", "cycles", "fused", "tile")}
                           for g in grouping["groups"]]}
    fused = data["fused"]
    return {"score": fused["energy_pj"], "energy_pj": fused["energy_pj"], "cycles": fused["cycles"],
            "seconds_kernel": fused["cycles"] / point.arch.clock_hz, "outer_bytes": fused["outer_bytes"],
            "edp": fused["energy_pj"] * fused["cycles"], "optimal": int(data["cover_proven"]),
            "cost": {"unfused": totals(data["unfused"]), "fused": totals(fused),
                     "candidates": data["candidates"], "fusion_level": data["fusion_level"],
                     "lower_bound_outer_bytes": data["lower_bound_outer_bytes"],
                     # the wall clock cut the study short: not the answer the same inputs always give
                     "stopped_by": data["stopped_by"], "estimated_only": data["estimated_only"],
                     "estimate_gap": data["estimate_gap"]},
            "notes": [f"{'+'.join(g['ops'])}: {note}" for g in fused["groups"] for note in g["notes"]]
            + ([f"stopped by the time limit before its work budget was spent; priced by estimate only: "
                f"{', '.join('+'.join(ops) for ops in data['estimated_only']) or 'none'}"]
               if data["stopped_by"] else [])}
