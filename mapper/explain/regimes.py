"""Regimes from the cost model's numbers: per level, what its time is made of; overall, what
bounds the kernel; and the einsum's structure (reuse that tiling can capture, or none).

A level's time is max(compute, overlapped transfer, overlapped latency) + exposed transfer +
exposed latency (docs/COST_MODEL.md). Its regime names the largest part above compute:
- compute-bound: its traffic hides under compute (time within 1% of compute);
- bandwidth-bound: transfer time (bytes / bandwidth) is most of the excess;
- latency-bound: latency not covered by the requests in flight is most of the excess.
Capacity regime at a boundary (see `traffic_bounds.py`): threshold when one instance of the level's
subtree holds enough for some tiling to move only compulsory traffic (`threshold_bytes`: at most
the working set; capacity no longer matters);
continuous when the capacity bound (square-root law) exceeds compulsory traffic (capacity a
weak lever: traffic falls as 1/sqrt(S), bandwidth a strong one); compulsory-bound otherwise.
Structure: an elementwise einsum (every tensor indexed by every dim) has only compulsory
traffic; an operand indexed by every dim (a GEMV's matrix) is used once per element, so the
intensity is at most MACs / its size whatever the capacity; either way, when the best possible
intensity (MACs per compulsory byte) is below the machine balance, the shape is memory-bound by
structure and fusion, not tiling, is the lever.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from .. import tiles
from ..spec import Arch, Workload
from .traffic_bounds import LevelTraffic, bilinear

COMPUTE_SLACK = 1.01


@dataclass(frozen=True)
class LevelTime:
    level: str
    cycles: float
    compute: float
    transfer_hidden: float       # (bytes overlapped) / bandwidth
    transfer_exposed: float
    latency_hidden: float        # Little's-law floor on the overlapped part
    latency_exposed: float

    @property
    def stalls(self) -> tuple[float, float]:
        """(bandwidth stall, latency stall): the cycles above compute, split by cause."""
        base = max(self.compute, self.transfer_hidden, self.latency_hidden)
        over = base - self.compute
        bandwidth = (over if self.transfer_hidden >= self.latency_hidden else 0.0) + self.transfer_exposed
        latency = (over if self.latency_hidden > self.transfer_hidden else 0.0) + self.latency_exposed
        return bandwidth, latency

    @property
    def regime(self) -> str:
        if self.cycles <= self.compute * COMPUTE_SLACK:
            return "compute-bound"
        bandwidth, latency = self.stalls
        return "bandwidth-bound" if bandwidth >= latency else "latency-bound"


def level_times(arch: Arch, costs, row: int = 0) -> list[LevelTime]:
    """Per level, its time and the parts of it, from `evaluate_many`'s arrays."""
    out = []
    compute = float(costs.compute_cycles[row])
    for lv, level in enumerate(arch.levels):
        moved, exposed = costs.level_moved[lv, row], costs.level_exposed[lv, row]
        out.append(LevelTime(level.name, float(costs.level_time[lv, row]), compute,
                             float((moved - exposed) / level.bandwidth), float(exposed / level.bandwidth),
                             float(costs.level_latency_hidden[lv, row]),
                             float(costs.level_latency_exposed[lv, row])))
    return out


@dataclass(frozen=True)
class Structure:
    """What the einsum's shape allows, whatever the mapping."""
    elementwise: bool            # every tensor indexed by every dim: no reuse at all
    once_used: tuple[str, ...]   # inputs indexed by every dim: each element used once
    best_intensity: float        # MACs per compulsory byte: the most any capacity can reach
    balance: float               # peak MACs per cycle / outermost bandwidth in bytes per cycle
    bilinear: bool

    @property
    def memory_bound(self) -> bool:
        """Memory-bound at every capacity: even compulsory traffic cannot keep compute busy."""
        return self.best_intensity < self.balance

    @property
    def label(self) -> str | None:
        if self.elementwise:
            return ("structurally memory-bound: elementwise, only compulsory traffic (each byte "
                    "used once); fusion with its producer or consumer, not tiling, is the lever")
        if self.once_used and self.memory_bound:
            return (f"structurally memory-bound: {', '.join(self.once_used)} is used once per "
                    f"element, so intensity stays at most {self.best_intensity:.3g} MACs/B at every "
                    f"capacity (machine balance {self.balance:.3g}); fusion or batching, not tiling, "
                    "is the lever")
        if self.memory_bound:
            return (f"structurally memory-bound: at most {self.best_intensity:.3g} MACs/B even with "
                    f"compulsory traffic only (machine balance {self.balance:.3g}); fusion, not "
                    "tiling, is the lever")
        return None


def structure(arch: Arch, workload: Workload) -> Structure:
    dims = {d for d, s in enumerate(workload.sizes) if s > 1}
    inputs = [t for t in workload.tensors if not t.is_output]
    once = tuple(t.name for t in inputs if dims and dims <= t.dims)
    elementwise = bool(dims) and all(dims <= t.dims for t in workload.tensors)
    compulsory_bytes = sum(workload.tensor_words(t) * tensor.bytes_per_word
                           for t, tensor in enumerate(workload.tensors))
    outer = arch.levels[0].bandwidth
    balance = arch.peak_macs_per_cycle / outer if outer != float("inf") else float("inf")
    return Structure(elementwise, once, workload.macs / compulsory_bytes, balance,
                     bilinear(workload) is not None)


def capacity_regime(traffic: LevelTraffic, threshold_bytes: float, capacity_bytes: float) -> str:
    if tiles.within(threshold_bytes, capacity_bytes):
        return "threshold"
    if traffic.capacity_bound > traffic.compulsory:
        return "continuous"
    return "compulsory-bound"


CAPACITY_TEXT = MappingProxyType({       # read-only: capacity regime -> its note in the report
    "threshold": "enough fits for compulsory-only traffic (the threshold): capacity no longer matters",
    "continuous": "square-root law: capacity is a weak lever (traffic ~ 1/sqrt(S)), bandwidth a strong one",
    "compulsory-bound": "the bound is compulsory traffic: more capacity does not lower it",
})


def overall(times: list[LevelTime], bottleneck: str, shape: Structure) -> str:
    if bottleneck == "compute":
        text = "compute-bound"
    else:
        slowest = next(t for t in times if t.level == bottleneck)
        text = f"{slowest.regime} at {bottleneck}"
    if shape.label:
        text += f"; {shape.label}"
    return text
