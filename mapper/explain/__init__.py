"""`mapper explain`: where a mapping stands against what is possible, level by level.

For one mapping (or the joint search's best): per level the traffic across its upper boundary,
split into compulsory and capacity parts, and its ratio to the lower bound (`traffic_bounds.py`); per
level the regime its time is in, and overall (`regimes.py`); the pipeline-depth table and its
advice (`stages.py`); occupancy (resident blocks, waves) on a GPU; plots beside it (`plots.py`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..cost import Evaluation, evaluate, evaluate_many
from ..cost.occupancy import gpu_levels
from ..errors import SpecError
from ..mapping import Mapping, to_table
from ..spec import Arch, Workload
from .traffic_bounds import LevelTraffic, level_traffic, subtree_capacity_bytes, threshold_bytes
from .regimes import LevelTime, Structure, capacity_regime, level_times, overall, structure
from .stages import StageRow, stage_table


@dataclass(frozen=True)
class Explanation:
    arch: Arch
    workload: Workload
    mapping: Mapping
    evaluation: Evaluation
    traffic: list[LevelTraffic]          # levels 1.. (the outermost has no boundary above)
    capacity_regimes: list[str]          # per entry of `traffic`
    times: list[LevelTime]               # every level
    structure: Structure
    overall: str
    stages: list[StageRow]
    resident: int
    waves: int
    blocks: int                          # thread blocks per SM the mapping runs (GPU)
    focus: int                           # the level the curve is drawn for
    threshold_bytes: float               # capacity from which traffic can be compulsory

    @property
    def working_set_bytes(self) -> float:
        return sum(self.workload.tensor_words(t) * tensor.bytes_per_word
                   for t, tensor in enumerate(self.workload.tensors))


def focus_level(arch: Arch, name: str | None) -> int:
    """The level named by --level, else a GPU's shared memory, else the level below the top."""
    if name is not None:
        if name not in arch.level_names:
            raise SpecError("--level", "", f"expected one of {', '.join(arch.level_names[1:])}, got {name!r}")
        lv = arch.level_names.index(name)
        if lv == 0:
            raise SpecError("--level", "", f"{name} is the outermost level: no traffic crosses into it; "
                            f"choose one of {', '.join(arch.level_names[1:])}")
        return lv
    gpu = gpu_levels(arch)
    return gpu[0] if gpu else min(1, len(arch.levels) - 1)


def explain(arch: Arch, workload: Workload, mapping: Mapping, level: str | None = None) -> Explanation:
    ev = evaluate(arch, workload, mapping)
    costs = evaluate_many(arch, workload, to_table([mapping], len(workload.dims), len(workload.tensors)))
    traffic = level_traffic(arch, workload, mapping, ev)
    threshold = threshold_bytes(workload)
    regimes = [capacity_regime(tr, threshold, subtree_capacity_bytes(arch, lv))
               for lv, tr in enumerate(traffic, start=1)]
    times = level_times(arch, costs)
    shape = structure(arch, workload)
    gpu = gpu_levels(arch)
    blocks = 1
    if gpu is not None:
        output_dims = workload.tensors[workload.output].dims
        for lm in mapping.levels[:gpu[0]]:
            for d, b in lm.temporal:
                blocks *= b if d in output_dims else 1
    return Explanation(arch, workload, mapping, ev, traffic, regimes, times, shape,
                       overall(times, ev.bottleneck, shape), stage_table(arch, workload, mapping),
                       ev.resident, ev.waves, blocks, focus_level(arch, level), threshold)
