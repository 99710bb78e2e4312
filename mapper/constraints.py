"""Mapspace constraints: what a preset in `constraints/` (given to `--mapspace`) may fix or bound.

Loaded from YAML by `load.load_constraints`; level keys are level names, or `innermost` /
`outermost`, resolved against an architecture by `Constraints.for_level`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ROLES = ("output", "input", "weight")   # output tensor, first input, second input of the einsum


def role_tensor(workload, role: str) -> int:
    """The index of the tensor that plays `role` (one of ROLES) in `workload`: the output, its
    first input, its second input (the first again where there is one), the inputs in the
    order the compute unit's instruction takes them (swapped under swap-AB: a register file
    that keeps wgmma's first operand keeps the einsum's second). The one rule by which a
    mapspace file's `keep:` and an architecture's `keeps:` name tensors by role."""
    inputs = [i for i, t in enumerate(workload.tensors) if not t.is_output]
    operands = [i for i in inputs if not workload.tensors[i].scales]
    if workload.operands_swapped and len(operands) == 2:       # the two exchange places
        inputs = [operands[1] if i == operands[0] else operands[0] if i == operands[1] else i for i in inputs]
    return {"output": workload.output, "input": inputs[0], "weight": inputs[min(1, len(inputs) - 1)]}[role]


SWAP_CHOICES = ("never", "auto", "always")      # a mapspace's `swap_operands`


@dataclass(frozen=True)
class Range:
    low: int = 1
    high: int | None = None               # None: unbounded
    multiple_of: int = 1
    power_of_two: bool = False            # a kernel's block sides (Triton's tl.arange)

    def admits(self, value):
        """Vectorised test on an int array."""
        ok = (value >= self.low) & (value % self.multiple_of == 0)
        if self.power_of_two:
            ok = ok & ((value & (value - 1)) == 0)
        return ok if self.high is None else ok & (value <= self.high)


@dataclass(frozen=True)
class LevelConstraints:
    temporal: tuple[tuple[str, Range], ...] = ()    # bounds on the level's temporal loop per dim
    spatial: tuple[tuple[str, Range], ...] = ()     # bounds on its spatial split (x * y) per dim
    tile: tuple[tuple[str, Range], ...] = ()        # bounds on the tile it holds, per dim
    order: tuple[str, ...] | None = None            # fixed loop order, outermost first
    innermost_order: tuple[str, ...] | None = None  # these dims' loops innermost, in this order (outermost
                                                    # first); the others free outside (Timeloop's partial
                                                    # permutation)
    stationary: str | None = None                   # a role (output/input/weight) or tensor name
    forbid: tuple[tuple[str, ...], ...] = ()        # loop orders (outermost first) not to use
    stages: tuple[int, ...] | None = None           # allowed buffering depths
    keep: tuple[str, ...] | None = None             # fixed set of kept tensors
    bypass: bool = False                            # enumerate keep/bypass choices
    spatial_x: tuple[tuple[str, Range], ...] = ()   # bounds on its spatial split along mesh x only
    spatial_y: tuple[tuple[str, Range], ...] = ()   # ... and along y (`spatial_y: {m: 1}`: m not on y)
    # bytes per instance the mapping's tiles may take, below the level's capacity: what a kind
    # of kernel can address (a Triton kernel's accumulators: the registers each thread keeps
    # after its addresses and indices); None: the level's capacity
    capacity: float | None = None
    # each tensor the level keeps at its own depth among the level's loops (AccelForge's
    # storage nodes: an output held across a k loop, an input under it, its tile the smaller
    # for it): the level searched as one sub-level per tensor, in one capacity (`depths.py`)
    tensor_depths: bool = False


@dataclass(frozen=True)
class Constraints:
    name: str = "default"
    description: str = ""
    # extents a dim may take (`tails.dim_extents`): "perfect" (its size), "imperfect" (padded,
    # or with a masked tail where the arch masks), "auto" (a masked tail where a dim must have one)
    factors: str = "auto"
    max_padding: float = 0.125       # largest padded extent as a fraction above the size
    align_to_native: bool = True     # innermost tiles are multiples of the compute's native shape
    min_utilization: float = 0.0     # fraction of compute units the spatial split must use
    min_occupancy: int = 1           # GPU: resident blocks per SM
    # thread-block clusters (a GPU's `block_clusters`) in the space: opt-in, since they widen a
    # search many times over (h100 gemm-8192 proven in ~140 s instead of ~9 s)
    clusters: bool = False
    # swap-AB (`mma.with_operands_for`): "never" (the einsum's operands as written), "auto"
    # (swapped where a warpgroup MMA pads its m and n to fewer MACs so) or "always"
    swap_operands: str = "never"
    # Blackwell's CTA pairs (tcgen05 cta_group::2, `cta_pair.py`): the kernel's unit two SMs, its
    # MMA twice as tall; opt-in, a kind of kernel of its own (CUTLASS's 2SM schedules)
    cta_pairs: bool = False
    levels: tuple[tuple[str, LevelConstraints], ...] = field(default_factory=tuple)
    file: str = field(default="", compare=False)     # where it was read from, for error messages

    @property
    def imperfect(self) -> bool:
        return self.factors == "imperfect"

    def for_level(self, names: tuple[str, ...], index: int) -> LevelConstraints:
        aliases = {names[index], "every"}
        if index == 0:
            aliases.add("outermost")
        if index == len(names) - 1:
            aliases.add("innermost")
        found = [lc for key, lc in self.levels if key in aliases and key != "every"]
        found += [lc for key, lc in self.levels if key == "every"]
        return found[0] if found else LevelConstraints()
