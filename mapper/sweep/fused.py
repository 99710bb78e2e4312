"""`mapper sweep --fuse`: each model chain (`sweep.chains`) as one more point of the sweep, a
fusion study (`fusion.run.fuse`) on one architecture, stored as one row of the results store.

A chain point's key hashes the architecture, the chain's op graph, the fusion setting
(`strategy` "fuse", the grouping's objective) and the time limit, so a killed sweep resumes
where it stopped and a point with other inputs is searched again. Its row holds the fused
figures in the usual columns (`energy_pj`, `cycles`, `outer_bytes`; `score` is the fused
energy) and both groupings in `cost` ({"unfused": ..., "fused": ...}).

The chain points run one after the other in this process, after the layer points: each fusion
study already spreads its op searches over its own time limit.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

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
    seconds: float


def chain_points(spec: SweepSpec) -> list[ChainPoint]:
    """One point per (architecture, model chain of an expansion)."""
    seconds = spec.settings.time_limit or DEFAULT_SECONDS
    out = []
    for arch in spec.archs:
        for subject in spec.chains:
            graph = subject.chain.graph
            key = digest({"arch": digest(arch), "graph": digest(graph), "strategy": STRATEGY,
                          "objective": OBJECTIVE, "settings": {"time_limit": seconds}})
            slot = "|".join([arch.name, graph.name, STRATEGY, OBJECTIVE])
            out.append(ChainPoint(key, slot, arch, subject, seconds))
    return out


def run_chain_points(points: list[ChainPoint], store: Store, retry_failed: bool = False) -> tuple[list[dict], int]:
    """Study every point not yet in the store; returns the rows computed and the number skipped."""
    stored = store.statuses()
    computed, skipped, seen = [], 0, set()
    for point in points:
        if point.key in seen:
            continue
        seen.add(point.key)
        status = stored.get(point.key)
        if status is not None and not (retry_failed and status in ("failed", "timeout")):
            skipped += 1
            continue
        row = chain_row(point)
        store.write(row)
        computed.append(row)
    return computed, skipped


def chain_row(point: ChainPoint) -> dict:
    """The stored row of one fusion study; a bad point comes back with its status and reason."""
    layer, graph, arch = point.subject.layer, point.subject.chain.graph, point.arch
    row = {"key": point.key, "slot": point.slot, "arch": arch.name, "workload": graph.name,
           "einsum": " -> ".join(op.name for op in graph.ops), "mapspace": "default", "strategy": STRATEGY,
           "objective": OBJECTIVE, "settings": {"time_limit": point.seconds},
           "sizes": {d: s for op in graph.ops for d, s in zip(op.workload.dims, op.workload.sizes)},
           "macs": sum(op.workload.macs for op in graph.ops if op.family == "einsum"),
           "model": layer.model, "phase": layer.phase, "model_inputs": dict(layer.inputs),
           "expansion": layer.label, "layers": "+".join(layer.layers), "count": layer.count,
           "position": layer.position, "peak_macs_per_s": arch.peak_macs_per_cycle * arch.clock_hz,
           "outer_bytes_per_s": arch.levels[0].bandwidth * arch.clock_hz,
           "version": package_version(), "worker": f"{socket.gethostname()}:{os.getpid()}"}
    started = time.perf_counter()
    recorded(row, lambda: _study(point))
    row["search_seconds"] = time.perf_counter() - started
    row["finished_at"] = time.time()
    return row


def _study(point: ChainPoint) -> dict:
    from ..fusion.report import fuse_json
    from ..fusion.run import fuse
    from ..search import SearchContext
    result = fuse(point.arch, point.subject.chain.graph, SearchContext.for_command(point.seconds),
                  point.seconds, OBJECTIVE)
    data = fuse_json(result)

    def totals(grouping: dict) -> dict:
        return {"energy_pj": grouping["energy_pj"], "outer_bytes": grouping["outer_bytes"],
                "cycles": grouping["cycles"],
                "groups": [{k: g[k] for k in ("ops", "outer_bytes", "energy_pj", "cycles", "fused", "tile")}
                           for g in grouping["groups"]]}
    fused = data["fused"]
    return {"score": fused["energy_pj"], "energy_pj": fused["energy_pj"], "cycles": fused["cycles"],
            "seconds_kernel": fused["cycles"] / point.arch.clock_hz, "outer_bytes": fused["outer_bytes"],
            "optimal": int(data["cover_proven"]),
            "cost": {"unfused": totals(data["unfused"]), "fused": totals(fused),
                     "fusion_level": data["fusion_level"],
                     "lower_bound_outer_bytes": data["lower_bound_outer_bytes"]},
            "notes": [f"{'+'.join(g['ops'])}: {note}" for g in fused["groups"] for note in g["notes"]]}
