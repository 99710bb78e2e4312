"""Pipeline depth: the mapping's cycles with 1..4 stages at each level that may buffer, and the
advice that follows from the regime of the levels feeding it (the seed argument for double
buffering: overlap turns load + compute into max(load, compute)):
- compute-bound with two stages: double buffer (the extra capacity costs nothing visible);
- bandwidth-bound: double buffer and no deeper (one stage of overlap removes the stall; more
  stages only take capacity from the reuse tile and raise the term that binds);
- latency-bound: deepen (not enough requests in flight: more stages is the remedy).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


from ..cost import evaluate_many
from ..cost.occupancy import blocks_per_sm, gpu_levels
from ..mapping import Mapping, to_table
from ..spec import Arch, Workload
from .regimes import level_times

DEPTHS = (1, 2, 3, 4)


@dataclass(frozen=True)
class StageRow:
    level: str
    cycles: tuple[float | None, ...]     # per depth in DEPTHS; None: not allowed or does not fit
    why_not: tuple[str, ...]             # per depth: "" or why it is not possible
    regime: str                          # of the slowest feeding level with two stages (or one)
    recommended: int
    advice: str


def _with_stages(mapping: Mapping, lv: int, stages: int) -> Mapping:
    levels = list(mapping.levels)
    levels[lv] = dataclasses.replace(levels[lv], stages=stages)
    return Mapping(tuple(levels))


def _feeders(workload: Workload, mapping: Mapping, lv: int) -> list[int]:
    """Levels that send level lv the tensors it keeps (each tensor's nearest keeper above)."""
    out = []
    for t in mapping.levels[lv].keep:
        above = [p for p in range(lv) if t in mapping.levels[p].keep]
        if above and above[-1] not in out:
            out.append(above[-1])
    return out


def stage_table(arch: Arch, workload: Workload, mapping: Mapping) -> list[StageRow]:
    n_dims, n_tensors = len(workload.dims), len(workload.tensors)
    gpu = gpu_levels(arch)
    rows = []
    for lv, (level, lm) in enumerate(zip(arch.levels, mapping.levels)):
        feeders = _feeders(workload, mapping, lv)
        if level.max_stages < 2 or not lm.keep or not feeders:
            continue
        variants = [_with_stages(mapping, lv, s) for s in DEPTHS]
        costs = evaluate_many(arch, workload, to_table(variants, n_dims, n_tensors))
        cycles, why = [], []
        for i, s in enumerate(DEPTHS):
            reason = ""
            if s > level.max_stages:
                reason = f"{level.name} allows at most {level.max_stages}"
            elif not costs.valid[i]:
                reason = "does not fit"
            elif gpu is not None and blocks_per_sm(arch, costs.level_footprint[gpu[0], i],
                                                   costs.level_footprint[gpu[1], i]) < 1:
                reason = "no block fits an SM"
            why.append(reason)
            cycles.append(None if reason else float(costs.cycles[i]))
        probe = 1 if cycles[1] is None else 2
        times = level_times(arch, costs, DEPTHS.index(probe))
        slowest = max(feeders, key=lambda p: times[p].cycles)
        regime = times[slowest].regime
        feeder = arch.levels[slowest].name
        if cycles[1] is None:
            recommended, advice = 1, "only one stage fits: shrink the tile to double buffer"
        elif regime == "compute-bound":
            recommended, advice = 2, "compute-bound: double buffer (the extra traffic hides under compute)"
        elif regime == "bandwidth-bound":
            recommended, advice = 2, (f"memory-bound on {feeder}'s bandwidth: double buffer and no "
                                      "deeper (more stages only take capacity from the reuse tile)")
        else:
            fitting = [(c, s) for c, s in zip(cycles, DEPTHS) if c is not None and s >= 2]
            recommended = min(fitting)[1]
            advice = (f"latency-bound on {feeder}: deepen the pipeline (too few requests in flight); "
                      f"{recommended} stages is the fastest that fits")
        rows.append(StageRow(level.name, tuple(cycles), tuple(why), regime, recommended, advice))
    return rows
