"""What a group of ops costs (`GroupPrice`) or why it cannot be one kernel (`Refusal`), and
the rule every fused group shares (`Fusing`): an intermediate produced and read inside the
group stays at the fusion level."""
from __future__ import annotations

from dataclasses import dataclass

from ..opgraph import OpGraph
from ..spec import Arch
from .kernels import Mapped, OpSearches
from .price import KernelPrice, without

NOT_SEARCHED = "not searched"     # a lazily priced group never searched: neither legal nor refused
STATS_BYTES_PER_ROW = 8.0        # a norm's stats pre-pass: 2 fp32 words per row
NORMALISE_FLOPS = 2.0            # a norm applied with known stats: (x - mean) * rstd, then * gamma (+ beta)


@dataclass(frozen=True)
class Refusal:
    kind: str         # full reduction, tiling mismatch, capacity/spill, two einsums, ...
    reason: str


@dataclass(frozen=True)
class GroupPrice:
    """One group's kernels (a fused kernel, and a norm's stats pre-pass where it keeps one)."""
    ops: tuple[int, ...]
    kernels: tuple[KernelPrice, ...]
    anchor: Mapped | None = None
    fused: tuple[str, ...] = ()          # intermediates that no longer leave the fusion level
    notes: tuple[str, ...] = ()
    spilled: bool = False
    tiling: str = ""                     # a kernel modelled outside the cost model (attention)
    members: tuple[Mapped, ...] = ()     # fused through a buffer level: each op's slice mapping
    iterations: int = 1                  # ... run once per iteration of the fused loops
    estimated: bool = False              # priced from the ops' own mappings, not yet searched
    working_bytes: float = 0.0           # around an einsum: what one instance holds at the fusion level

    @property
    def energy_pj(self) -> float:
        return sum(k.energy_pj for k in self.kernels)

    @property
    def cycles(self) -> float:
        return sum(k.cycles for k in self.kernels)

    def level_bytes(self, level: int) -> float:
        return sum(k.level_bytes(level) for k in self.kernels)

    def score(self, objective: str) -> float:
        if objective == "cycles":
            return self.cycles
        if objective == "bytes":
            return self.level_bytes(0)
        return self.energy_pj


@dataclass(frozen=True)
class Fusing:
    """What pricing a group reads: the arch, the op graph, the ops' own searches (whose fusion
    level it fuses at) and the objective."""
    arch: Arch
    graph: OpGraph
    searches: OpSearches
    objective: str = "energy"

    @property
    def level(self) -> int:
        return self.searches.level

    def escapes(self, tensor: str, ops) -> bool:
        """Whether `tensor` must still be written out: a result, or read by an op outside."""
        return tensor in self.graph.outputs or any(j not in ops for j in self.graph.consumers(tensor))

    def fuse_intermediates(self, kernel: KernelPrice, ops, skip=()) -> KernelPrice:
        """Each intermediate produced and read inside the group stays at the fusion level: its
        write out (unless it escapes) and its in-group reads back are removed (`skip`: those
        the prologue accounting handles)."""
        for t in self.graph.internal(ops):
            if t in skip:
                continue
            producer = self.graph.producer(t)
            if not self.escapes(t, ops):
                kernel = without(kernel, t, producer, self.level)
            for j in self.graph.consumers(t):
                if j in ops:
                    kernel = without(kernel, t, j, self.level, fills_at=self.level)
        return kernel
