"""Frozen value types for the three inputs: workload, architecture and their facts.

Nothing here reads YAML (that is `load`); names are kept for the edges (reports, errors),
indices are what the cost model uses. Invariants are checked by the loader, so every instance
of these classes is consistent: sizes positive, meshes integral, keeps name real tensors.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import tiles
from .constraints import ROLES, role_tensor
from .dtypes import family

# An affine index expression: ((dim index, coefficient), ...), e.g. 2*p + r.
AxisExpr = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Tensor:
    name: str
    axes: tuple[AxisExpr, ...]
    is_output: bool
    bits: int
    dtype: str = ""          # canonical dtype or block format name (`dtypes.py`); "" when given in bits
    scales: str = ""         # a block scale's data tensor (`load/block_scaled.py`); "" for data

    @property
    def bytes_per_word(self) -> float:
        return self.bits / 8

    @cached_property
    def dims(self) -> frozenset[int]:
        """Dims that index this tensor (a loop over any other dim reuses its tile)."""
        return frozenset(d for axis in self.axes for d, c in axis if c)

    @cached_property
    def has_sliding_axis(self) -> bool:
        """True when an axis sums several dims (p+r): consecutive tiles may overlap."""
        return any(sum(1 for _, c in axis if c) > 1 for axis in self.axes)


@dataclass(frozen=True)
class Workload:
    name: str
    einsum: str
    dims: tuple[str, ...]
    sizes: tuple[int, ...]
    tensors: tuple[Tensor, ...]          # the output first, then the inputs in einsum order
    description: str = ""
    source: str = ""
    file: str = field(default="", compare=False)     # where it was read from, for error messages
    # dims of a block-scaled format's blocks (`k_in`): the MMA consumes whole blocks, so the
    # mapspace keeps each whole in the innermost level's temporal loop
    block_dims: tuple[int, ...] = ()
    # the compute unit's instruction takes the einsum's second operand as its first (swap-AB:
    # it computes the transposed product, so the dims that play m in the einsum play the
    # instruction's n: a decode GEMM's m of 1 pads to wgmma's n grain of 8, not its m of 64;
    # `mma.with_operands_for`)
    operands_swapped: bool = False

    @property
    def macs(self) -> int:
        return math.prod(self.sizes)

    @property
    def output(self) -> int:
        return next(i for i, t in enumerate(self.tensors) if t.is_output)

    def dim_index(self, name: str) -> int:
        return self.dims.index(name)

    @property
    def operands_as_written(self) -> tuple[Tensor, ...]:
        """The inputs the compute unit multiplies (a block format's scales are not operands),
        in the einsum's order."""
        return tuple(t for t in self.tensors if not t.is_output and not t.scales)

    @property
    def operands(self) -> tuple[Tensor, ...]:
        """The same in the order the unit's instruction takes them (`operands_swapped`)."""
        written = self.operands_as_written
        return written[::-1] if self.operands_swapped and len(written) == 2 else written

    def tensor_index(self, name: str) -> int:
        return [t.name for t in self.tensors].index(name)

    @cached_property
    def coefficients(self) -> np.ndarray:
        """coef[t, a, d]: coefficient of dim d in axis a of tensor t (axes padded with zeros)."""
        n_axes = max(len(t.axes) for t in self.tensors)
        coef = np.zeros((len(self.tensors), n_axes, len(self.dims)), dtype=np.int64)
        for ti, tensor in enumerate(self.tensors):
            for ai, axis in enumerate(tensor.axes):
                for d, c in axis:
                    coef[ti, ai, d] += c
        return coef

    @cached_property
    def relevance(self) -> np.ndarray:
        """rel[t, d]: dim d indexes tensor t."""
        return (self.coefficients != 0).any(axis=1)

    def tensor_words(self, t: int) -> int:
        """Words in the whole tensor (bounding box of every axis, like a tile of the full nest)."""
        return tiles.words(self.tensors[t], self.sizes)

    def touched_words(self, t: int) -> int:
        """Words of the tensor some iteration point reads or writes (at most `tensor_words`:
        a strided window may skip some): what every mapping must move at least once."""
        return tiles.touched_words(self.tensors[t], self.sizes)


@dataclass(frozen=True)
class Dsmem:
    """Distributed shared memory: a CTA reading or writing another CTA's shared memory in its
    cluster, per SM."""
    bandwidth: float                    # bytes per cycle per SM
    latency: float                      # cycles from a request to its first byte
    energy_per_byte: float              # pJ per byte moved between two SMs


@dataclass(frozen=True)
class BlockClusters:
    """Thread-block clusters on the fanout from a GPU's L2 to its SMs (Hopper and later): the
    CTAs of one cluster are co-scheduled on one GPC, and a tile all of them need is read once
    from L2 and multicast into each one's shared memory (TMA multicast). In a mapping, that
    fanout's spatial loops on mesh axis y are the cluster (its CTAs), those on axis x the
    clusters side by side; only the y loops share."""
    max_ctas: int                       # the largest cluster the part runs (16: non-portable)
    gpc_sms: tuple[int, ...]            # SMs per GPC: a cluster never spans two
    # distributed shared memory (the SM-to-SM network of a GPC), None: not modelled; what a
    # fused kernel pays to hold a tile over its cluster's shared memories (`fusion/mlp.py`)
    dsmem: "Dsmem | None" = None

    def schedulable(self, ctas):
        """How many clusters of `ctas` CTAs run at once (may be an array; 0 above `max_ctas`):
        each GPC holds as many whole clusters as its SMs allow."""
        ctas = np.asarray(ctas)
        fits = sum(np.asarray(sms) // np.maximum(ctas, 1) for sms in self.gpc_sms)
        return np.where(ctas <= self.max_ctas, fits, 0)


@dataclass(frozen=True)
class Level:
    """One storage level. Capacity and bandwidth are per instance (bytes, bytes per cycle)."""

    name: str
    capacity: float = math.inf
    bandwidth: float = math.inf       # shared by reads and writes
    read_bandwidth: float = math.inf  # reads alone (Timeloop's read_bandwidth)
    write_bandwidth: float = math.inf  # fills and updates alone (Timeloop's write_bandwidth)
    block_size: int = 1
    energy_read: float = 0.0          # pJ per access of block_size words
    energy_write: float = 0.0
    energy_update: float = 0.0
    byte_energy_read: float = 0.0     # pJ per byte moved
    byte_energy_write: float = 0.0
    byte_energy_update: float = 0.0
    leak: float = 0.0                 # pJ per cycle per instance
    keeps: frozenset[str] | None = None   # None: may keep any tensor
    # `keeps` as written where it names a role (`[output]`, `[input, output]`: the words of
    # `constraints.ROLES`): `Arch.for_workload` resolves them into `keeps` for each workload
    keep_roles: tuple[str, ...] = ()
    max_stages: int = 1
    mesh: tuple[int, int] = (1, 1)
    multicast: bool = True           # its fanout network sends one read to many children
    reduction: bool = True           # its fanout network adds children's partial sums
    latency: float = 0.0             # cycles from a fetch request to its first byte (0: not modelled)
    # bits of one word held here (Timeloop's `word-bits` / `datawidth`: e.g. a 16-bit partial-sum
    # scratchpad under 8-bit operands); None: each tensor's own element size
    word_bits: int | None = None
    # instances that share one access of cluster_size x block_size words (Timeloop's cluster_size):
    # each utilized cluster pays a whole cluster access, i.e. cluster_size x the per-instance
    # energies above (which are one instance's share), see `charged_instances`
    cluster_size: int = 1
    # mm^2 of one instance (`area`, `area_per_byte` x capacity or `area: auto`), None: not given
    # (counted as 0 in a sum, shown as not given); area_source names where the figure came from
    area: float | None = None
    area_source: str = ""
    energy_source: str = ""          # where the energies came from, when the component model gave them
    # thread-block clusters on this level's fanout (`block_clusters:`); None: none
    clusters: BlockClusters | None = None
    # one of the sub-levels a level is searched as where each tensor may sit at its own depth
    # among its loops (a mapspace's `tensor_depths`, `depths.py`): the level's name, shared by
    # its sub-levels, which hold their tiles in its one capacity; "" for a level of its own
    group: str = ""

    @property
    def instances(self) -> int:
        return self.mesh[0] * self.mesh[1]

    def shares(self, tensor: "Tensor") -> bool:
        """Whether children that need the same words of `tensor` may be served together (on
        some mesh axis: `shared_axes` says which)."""
        return any(self.shared_axes(tensor))

    def shared_axes(self, tensor: "Tensor") -> tuple[bool, bool]:
        """Whether children differing only along mesh axis x (resp. y) that need the same words
        of `tensor` are served together: both or neither, except under block clusters, whose
        CTAs (axis y) share an input by multicast while clusters (axis x) fetch their own."""
        if self.clusters is not None and not tensor.is_output:
            return self.multicast, True
        shared = self.reduction if tensor.is_output else self.multicast
        return shared, shared

    def for_workload(self, workload: "Workload") -> "Level":
        """This level with the roles its `keeps` names resolved to `workload`'s tensors (by the
        one rule, `constraints.role_tensor`); itself where it names none. Recomputed from the
        words each time, so the same architecture serves every op of a graph."""
        if not self.keep_roles:
            return self
        names = frozenset(workload.tensors[role_tensor(workload, word)].name if word in ROLES else word
                          for word in self.keep_roles)
        return dataclasses.replace(self, keeps=names)

    def may_keep(self, tensor_name: str) -> bool:
        return self.keeps is None or tensor_name in self.keeps

    def word_bytes(self, tensor: "Tensor") -> float:
        """Bytes one word of `tensor` takes here (capacity, traffic, per-byte energy)."""
        return tensor.bytes_per_word if self.word_bits is None else self.word_bits / 8

    def charged_instances(self, used):
        """Instances whose share of an access is charged when `used` instances work (may be an
        array): `used` itself, or with clusters whole cluster accesses, cluster_size x the
        min(used, instances // cluster_size) utilized clusters (Timeloop spreads the used
        instances over every cluster). Never below `used`, so per-instance energies times used
        instances stay a lower bound, as the search's bounds need."""
        if self.cluster_size == 1:
            return used
        return self.cluster_size * np.minimum(used, max(1, self.instances // self.cluster_size))


@dataclass(frozen=True)
class DtypeRate:
    """The compute unit on operands of one dtype family (`dtypes.family`): its MACs per cycle,
    native op shape and energy per MAC where they differ from the unit's own fields (None: the
    unit's, as for the first family, whose figures those fields are: a change to them, by a
    `--vary` or a test, applies to it)."""
    family: str
    macs_per_cycle: int | None = None
    native_shape: tuple[tuple[str, int], ...] | None = None
    energy_per_mac: float | None = None


@dataclass(frozen=True)
class Compute:
    name: str = "MAC"
    mesh: tuple[int, int] = (1, 1)
    macs_per_cycle: int = 1
    energy_per_mac: float = 0.0
    native_shape: tuple[tuple[str, int], ...] = ()
    # the largest instruction along a role, a multiple of its native size (wgmma's n: 8 up to
    # 256); a role not listed runs at its native size (`mma.instruction_shape`)
    max_shape: tuple[tuple[str, int], ...] = ()
    # what the units take of each tensor: one word per MAC (Timeloop's count), or whole
    # fragments once per instruction, "per_instruction" (`mma.unit_words`)
    operand_reads: str = "per_mac"
    warps: int = 1                    # the warps that issue one unit's instructions together (a warpgroup: 4)
    area: float | None = None         # mm^2 of one unit (all its macs_per_cycle MACs); None: not given
    area_source: str = ""
    energy_source: str = ""           # where energy_per_mac came from, when the component model gave it
    # per dtype family (`macs_per_cycle: {bf16: 512, fp8: 1024}`); the fields above are the
    # first family's, used for any family not listed. Empty once resolved for a workload.
    per_dtype: tuple[DtypeRate, ...] = ()
    dtype: str = ""                   # the family it was resolved for (`for_operands`), for reports
    # the unit may run as one of a CTA pair (Blackwell's tcgen05 cta_group::2: `cta_pair.py`)
    cta_pair: bool = False

    @property
    def instances(self) -> int:
        return self.mesh[0] * self.mesh[1]

    def for_operands(self, families: tuple[str, ...]) -> "Compute":
        """This unit as it runs operands of these dtype families: the rate, shape and energy of
        the slowest operand's family (a mixed-precision MMA runs at its wider operand's rate),
        a family not listed at the defaults. Itself when it has no per-dtype table."""
        if not self.per_dtype:
            return self
        table = {rate.family: rate for rate in self.per_dtype}
        default = self.per_dtype[0]
        rates = [table.get(f, default) for f in families] or [default]
        chosen = min(rates, key=lambda rate: rate.macs_per_cycle or self.macs_per_cycle)
        return dataclasses.replace(
            self, macs_per_cycle=chosen.macs_per_cycle or self.macs_per_cycle, per_dtype=(), dtype=chosen.family,
            native_shape=self.native_shape if chosen.native_shape is None else chosen.native_shape,
            energy_per_mac=self.energy_per_mac if chosen.energy_per_mac is None else chosen.energy_per_mac)


@dataclass(frozen=True)
class GpuFacts:
    sms: int
    smem_per_sm: float
    registers_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_sm: int


@dataclass(frozen=True)
class Technology:
    """An architecture's process facts (`technology:`): what `area: auto` and `energy: auto`
    read, and the published die area printed beside the modelled sum (the rest of the die is
    what the levels do not model: control, caches not listed, I/O)."""
    node_nm: float | None = None
    mac_dtype: str | None = None       # the compute unit's MAC type for `auto`
    dram: str | None = None            # the off-chip memory's kind for `energy_per_byte: auto` (hbm2, ...)
    die_area: float | None = None      # mm^2, published
    die_area_source: str = ""


@dataclass(frozen=True)
class Arch:
    name: str
    clock_hz: float
    levels: tuple[Level, ...]            # outermost first
    compute: Compute
    gpu: GpuFacts | None = None
    description: str = ""
    file: str = field(default="", compare=False)     # where it was read from, for error messages
    # Counting rules where Timeloop's differ from this project's (arch YAML `model:`):
    multicast: str = "pooled"      # or "per_fanout": identical tiles are found one fanout at a time
    leakage: str = "all"           # or "utilized": only instances the mapping uses leak
    cycle_rule: str = "stage_aware"   # or "timeloop": traffic always overlaps compute (cost/timing.py)
    tails: str = "padded"          # or "masked": a ragged tile's loads and stores move valid data only (tails.py)
    technology: Technology = Technology()
    # its per-SM levels and compute unit are CTA pairs, two SMs each (`cta_pair.paired`)
    paired: bool = False

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(level.name for level in self.levels)

    def fanout(self, i: int) -> tuple[int, int]:
        """The most a spatial split from level i to the next level (or the compute units) may
        take on each mesh axis (x, y): the meshes' ratio, or under block clusters all the
        children on x and the largest cluster on y (`fits_fanout` couples the two)."""
        below = self.levels[i + 1].mesh if i + 1 < len(self.levels) else self.compute.mesh
        above = self.levels[i].mesh
        if self.levels[i].clusters is not None:     # the loader allows them on a fanout along x only
            return below[0] // above[0], self.levels[i].clusters.max_ctas
        return below[0] // above[0], below[1] // above[1]

    def fanout_units(self, i: int) -> int:
        """The most children a split from level i keeps busy (x times y of `fanout`, but the
        children themselves under block clusters)."""
        if self.levels[i].clusters is not None:
            return self.fanout(i)[0]
        return math.prod(self.fanout(i))

    def sharing_units(self, i: int, tensor: Tensor) -> int:
        """The most children of level i's fanout one transfer of `tensor` serves: 1 where its
        network cannot share it, a block cluster's CTAs where only they do (the bounds' limit)."""
        shared = self.levels[i].shared_axes(tensor)
        if all(shared) or not any(shared):
            return self.fanout_units(i) if shared[0] else 1
        return min(self.fanout_units(i), math.prod(f for f, s in zip(self.fanout(i), shared) if s))

    def fits_fanout(self, i: int, units_x, units_y):
        """Where a split from level i of `units_x` by `units_y` (arrays or ints) fits its
        fanout: each axis within `fanout`, and under block clusters no more clusters (x) than
        the part runs at once with `units_y` CTAs each."""
        fx, fy = self.fanout(i)
        ok = (np.asarray(units_x) <= fx) & (np.asarray(units_y) <= fy)
        clusters = self.levels[i].clusters
        if clusters is not None:
            ok = ok & (np.asarray(units_x) <= clusters.schedulable(units_y))
        return ok

    def per_sm_levels(self) -> tuple[int, int] | None:
        """(shared-memory level, register level) of a GPU: the level with one instance per SM
        and the next one, or None when the architecture is no GPU."""
        if self.gpu is None:
            return None
        smem = [lv for lv, level in enumerate(self.levels) if level.instances == self.gpu.sms]
        if not smem or smem[0] + 1 >= len(self.levels):
            return None
        return smem[0], smem[0] + 1

    def for_workload(self, workload: Workload) -> "Arch":
        """This architecture with its compute unit resolved for `workload`'s operand dtypes
        (`Compute.for_operands`) and its levels' role keeps for its tensors (`Level.for_workload`);
        itself when the unit has one rate for every dtype and no level keeps by role. Every
        place an architecture meets a workload calls it, so that the cost model, the bounds and
        the native-shape roles read one rate."""
        arch = self
        if any(level.keep_roles for level in self.levels):
            arch = dataclasses.replace(arch, levels=tuple(level.for_workload(workload) for level in self.levels))
        if not self.compute.per_dtype:
            return arch
        families = tuple(family(t.dtype) for t in workload.operands if t.dtype)
        return dataclasses.replace(arch, compute=self.compute.for_operands(families))

    def with_capacities(self, caps) -> "Arch":
        """This arch with each level's capacity lowered to its entry of `caps` (None: kept)."""
        if all(cap is None for cap in caps):
            return self
        return dataclasses.replace(self, levels=tuple(
            level if cap is None else dataclasses.replace(level, capacity=min(level.capacity, cap))
            for level, cap in zip(self.levels, caps)))

    def without_clusters(self) -> "Arch":
        """This architecture with no level's `block_clusters` (a fanout's meshes alone): what a
        mapspace without `clusters: true` maps onto; itself where no level has them."""
        if all(level.clusters is None for level in self.levels):
            return self
        return dataclasses.replace(self, levels=tuple(dataclasses.replace(level, clusters=None)
                                                      for level in self.levels))

    @cached_property
    def capacity_groups(self) -> tuple[tuple[int, ...], ...]:
        """The sub-levels of each level searched with its tensors at their own depths
        (`Level.group`), as runs of level indices: their kept tiles share one capacity."""
        groups: dict[str, list[int]] = {}
        for lv, level in enumerate(self.levels):
            if level.group:
                groups.setdefault(level.group, []).append(lv)
        return tuple(tuple(members) for members in groups.values())

    def one_memory(self, lv: int) -> tuple[int, ...]:
        """The levels that are one memory with level lv: its level's sub-levels
        (`capacity_groups`), which share its capacity and its bandwidth, or lv alone."""
        return next((members for members in self.capacity_groups if lv in members), (lv,))

    @property
    def has_clusters(self) -> bool:
        """Whether some level's fanout runs thread-block clusters (`block_clusters`)."""
        return any(level.clusters is not None for level in self.levels)

    @property
    def peak_macs_per_cycle(self) -> int:
        return self.compute.instances * self.compute.macs_per_cycle

    @property
    def area(self) -> float:
        """mm^2 of every instance of every level and compute unit (a figure not given counts 0)."""
        levels = sum((lv.area or 0.0) * lv.instances for lv in self.levels)
        return levels + (self.compute.area or 0.0) * self.compute.instances
