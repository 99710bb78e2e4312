"""What every kernel backend reads off a mapping of a GEMM on a GPU: the thread-block tile,
the warp tile, the warps per block, the stages, the waves' shape and the swizzle they imply.

The reading, for a GPU preset (levels HBM, L2, SMEM, RF; `Arch.per_sm_levels`):
- the block tile (BLOCK_M/N/K) is the SMEM level's tile, the warp tile the RF level's tile, by
  tensor-core role (`mapper.roles`: which dims play m, n and k);
- the warps per block are the SMEM level's spatial split (one warp per tensor core) times its
  temporal loops over m and n (more warps than tensor cores take turns on them), the blocks
  of a wave the spatial split of the levels above it (the SMs), the stages the SMEM level's;
- the temporal loops above SMEM over m and n walk the waves; their order says whether the
  waves walk n inside m (Triton's GROUP_M swizzle) or m inside n.
The extents are the padded ones (masked tails, `mapper/tails.py`): the kernel masks the rest.

A backend that cannot express part of a mapping says so: every change is one line in
`GemmView.changes` (common to all backends) or in the backend's own list; nothing is altered
without a line. Invariants: block = warps x warp tile per role (m, n); extents = waves x
wave loops x block per role.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .. import mma
from ..cta_pair import PAIR
from ..errors import MapperError
from ..mapping import Mapping, level_tiles
from ..roles import RolesError, arch_roles, tensor_core_roles
from ..spec import Arch, Workload

ROLES = ("m", "n", "k")
EPILOGUES = ("bias", "gelu", "silu", "relu")
# GELU's tanh form written with a sigmoid: 0.5 (1 + tanh(z)) = sigmoid(2 z), so every backend
# needs only exp; 2 sqrt(2 / pi) = 1.5957691216057308
GELU_SCALE, GELU_CUBIC = 1.5957691216057308, 0.044715


class EmitError(MapperError):
    """A mapping or workload a backend cannot emit at all (not a GEMM, not a GPU, ...)."""


def source(spec) -> str:
    """How an emit error names an architecture or workload: the file it was read from (the
    user's input, what the message is about), else its name."""
    return spec.file or spec.name


@dataclass(frozen=True)
class BlockConfig:
    """A GEMM kernel's block config, as Triton's autotuner names it (read back into a mapping
    by `from_config`, written from one by `triton`)."""
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    group_m: int | None = None
    warps_m: int | None = None      # how the block's warps split m (read back only; else as square as may be)
    num_ctas: int = 1               # the CTAs of a thread-block cluster one program spans (sm90+)


@dataclass(frozen=True)
class GemmView:
    """A GEMM mapping read as a kernel's parameters. Per role (m, n, k) tuples; `dims` the
    workload dims playing them; `batch` the batch-like dims (outer grid axes)."""
    arch: str
    workload: str
    dims: tuple[int, int, int]
    dim_names: tuple[str, str, str]
    batch: tuple[int, ...]
    sizes: tuple[int, int, int]          # the dims' sizes
    extents: tuple[int, int, int]        # padded extents (the mapping's bounds multiplied)
    block: tuple[int, int, int]          # SMEM tile
    warp: tuple[int, int, int]           # RF tile
    warps: tuple[int, int, int]          # SMEM spatial split
    wave: tuple[int, int, int]           # spatial split above SMEM (blocks side by side)
    stages: int
    group_m: int | None
    # the MMA by role (the instruction the mapping runs where the arch models one, else the
    # native op shape), None without one; `issued`: the former (`mma.instruction_shape`)
    instruction: tuple[int, int, int] | None
    operands: tuple[int, int]            # tensor index of the m x k operand, of the k x n one
    output: int
    bits: tuple[int, int, int]           # of the m x k operand, the k x n operand, the output
    changes: tuple[str, ...] = ()
    # per role, the CTAs of one thread-block cluster (the spatial y split of a level with
    # `block_clusters`, part of `wave`): (1, 1, 1) without clusters
    cluster: tuple[int, int, int] = (1, 1, 1)
    issued: bool = False
    unit_warps: int = 1                  # warps per compute unit (a wgmma warpgroup: 4)
    swapped: bool = False                # swap-AB: the kernel computes the einsum's transposed product
    # a CTA pair's kernel (tcgen05 cta_group::2, `cta_pair.py`): the view is per CTA, each half of
    # the pair's tile along m (`instruction` is the pair's MMA, twice a CTA's rows)
    cta_pair: bool = False

    @property
    def num_warps(self) -> int:
        return math.prod(self.warps) * self.unit_warps

    @property
    def blocks(self) -> tuple[int, int]:
        """Thread blocks along m and n (the grid, batch aside)."""
        return tuple(-(-s // b) for s, b in zip(self.sizes[:2], self.block[:2]))


def gemm_dims(arch: Arch, workload: Workload):
    """(dims playing m, n, k; batch dims) of a GEMM-like einsum; `EmitError` when a role is
    played by several dims (an implicit-GEMM convolution) or by none."""
    try:
        roles = arch_roles(arch, workload) or tensor_core_roles(workload, {"m": 16, "n": 8, "k": 16})
    except RolesError as exc:
        raise EmitError(f"{source(workload)}: no GEMM roles ({exc.reason})") from None
    dims = []
    for name in ROLES:
        played = roles.of(name) if name in roles.names else ()
        if len(played) != 1:
            who = "·".join(workload.dims[d] for d in played) or "no dim"
            raise EmitError(f"{source(workload)}: {who} plays the GEMM's {name}; the kernel backends emit a "
                            f"(batched) matmul with one dim per role: emit it with --to mlir")
        dims.append(played[0])
    if any(t.has_sliding_axis for t in workload.tensors):
        raise EmitError(f"{source(workload)}: a sliding window is no matmul operand; emit it with --to mlir")
    inputs = [t for t, tensor in enumerate(workload.tensors) if not tensor.is_output]
    if _operand_order(workload, dims, inputs) is None:
        # roles read by name (a one-operand `Z[m,n] += A[m,n,k]`) need not be a matmul's
        raise EmitError(f"{source(workload)}: no two operands, one indexed by {workload.dims[dims[0]]} and one by "
                        f"{workload.dims[dims[1]]}; the kernel backends emit a (batched) matmul: emit it with --to mlir")
    return tuple(dims), tuple(roles.batch)


def gemm_view(arch: Arch, workload: Workload, mapping: Mapping) -> GemmView:
    """The kernel parameters of `mapping` (of a GEMM on a GPU architecture)."""
    levels = arch.per_sm_levels()
    if levels is None:
        raise EmitError(f"{source(arch)}: architecture {arch.name} is no GPU (no `gpu:` section with a per-SM level): "
                        "thread blocks and warps need one; emit it with --to mlir")
    smem, rf = levels
    dims, batch = gemm_dims(arch, workload)
    tiles = level_tiles(mapping, len(workload.dims))
    by_role = lambda values: tuple(values[d] for d in dims)      # noqa: E731
    warps, wave = _spatial(mapping, dims, smem)
    inputs = [t for t, tensor in enumerate(workload.tensors) if not tensor.is_output]
    operands = _operand_order(workload, dims, inputs)
    changes = list(_order_changes(mapping, workload, dims, smem))
    if wave[2] > 1:
        changes.append(f"split-K: the mapping splits k ({workload.dims[dims[2]]}) over {wave[2]} blocks; the "
                       "kernel has no split-K, so each block runs its whole K")
    view = GemmView(
        arch=arch.name, workload=workload.name, dims=dims, dim_names=by_role(workload.dims), batch=batch,
        sizes=by_role(workload.sizes), extents=by_role(tiles[0]), block=by_role(tiles[smem]),
        warp=by_role(tiles[rf]), warps=warps, wave=wave, stages=mapping.levels[smem].stages,
        group_m=None, instruction=_instruction(arch, workload, dims, mapping), operands=operands,
        output=workload.output, bits=tuple(workload.tensors[t].bits for t in (*operands, workload.output)),
        cluster=_cluster(arch, mapping, dims, smem), issued=bool(mma.mapping_instruction(arch, workload, mapping)),
        unit_warps=arch.compute.warps, swapped=workload.operands_swapped)
    if arch.paired:
        view = _per_cta(view)
    group_m, group_change = _group_m(mapping, view, smem)
    if group_change:
        changes.append(group_change)
    return replace(view, group_m=group_m, changes=tuple(changes))


def _per_cta(view: GemmView) -> GemmView:
    """A CTA pair's view as its CTAs run it: each holds half the pair's rows (its block and
    accumulator tiles halved along m), twice as many CTAs along m in the grid and the cluster,
    and half the pair's warps."""
    def halved(tile):
        return (-(-tile[0] // PAIR),) + tuple(tile[1:])

    def doubled(count):
        return (count[0] * PAIR,) + tuple(count[1:])
    return replace(view, block=halved(view.block), warp=halved(view.warp), wave=doubled(view.wave),
                   cluster=doubled(view.cluster), unit_warps=view.unit_warps // PAIR, cta_pair=True)


def _spatial(mapping: Mapping, dims, smem: int):
    """(warps per role: SMEM's spatial split; wave per role: the splits above SMEM)."""
    warps, wave = [1, 1, 1], [1, 1, 1]
    for lv, level in enumerate(mapping.levels[:smem + 1]):
        for d, bound, _ in level.spatial:
            if d in dims:
                (warps if lv == smem else wave)[dims.index(d)] *= bound
    for d, bound in mapping.levels[smem].temporal:
        if d in dims[:2]:
            warps[dims.index(d)] *= bound
    return tuple(warps), tuple(wave)


def _cluster(arch: Arch, mapping: Mapping, dims, smem: int) -> tuple[int, int, int]:
    """Per role, the CTAs of a thread-block cluster: the mesh-y splits above SMEM of a level
    whose fanout has block clusters."""
    cluster = [1, 1, 1]
    for lv, level in enumerate(mapping.levels[:smem]):
        if arch.levels[lv].clusters is not None:
            for d, bound, axis in level.spatial:
                if axis == 1 and d in dims:
                    cluster[dims.index(d)] *= bound
    return tuple(cluster)


def _operand_order(workload: Workload, dims, inputs) -> tuple[int, int] | None:
    """(the operand indexed by m and k, the one indexed by k and n); None when the inputs are
    not two such operands (`gemm_dims` refuses the workload then)."""
    m, n, _ = dims
    first = next((t for t in inputs if m in workload.tensors[t].dims), None)
    second = next((t for t in inputs if n in workload.tensors[t].dims and t != first), None)
    if first is None or second is None or len(inputs) != 2:
        return None
    return first, second


def _instruction(arch: Arch, workload: Workload, dims, mapping: Mapping) -> tuple[int, int, int] | None:
    """The MMA by role: the instruction the mapping runs where the architecture models it
    (`mma.instruction_shape`: wgmma's N from the warpgroup's tile), else the native op shape."""
    native = {name: size for name, size in arch.compute.native_shape if size > 1}
    if not native:
        return None
    roles = arch_roles(arch, workload)
    runs = mma.mapping_instruction(arch, workload, mapping)
    return tuple(next(runs.get(name, size) for name, size in zip(roles.names, roles.sizes) if roles.of(name) == (d,))
                 for d in dims)


def outer_loops(mapping: Mapping, smem: int) -> list[tuple[int, int, int]]:
    """(level, dim, bound) of the temporal loops above SMEM, outermost first."""
    return [(lv, d, b) for lv, level in enumerate(mapping.levels[:smem]) for d, b in level.temporal if b > 1]


def _order_changes(mapping: Mapping, workload: Workload, dims, smem: int):
    """A line when a k loop above the blocks is outside an m or n loop there: the partial sums
    would leave the block; a kernel keeps a block's whole K in its accumulator."""
    loops = outer_loops(mapping, smem)
    for i, (lv, d, b) in enumerate(loops):
        later = [workload.dims[e] for _, e, _ in loops[i + 1:] if e in dims[:2]]
        if d == dims[2] and later:
            yield (f"loop order: the k loop ({workload.dims[d]}, bound {b}) at level {lv} is outside the "
                   f"{'/'.join(later)} loop(s) over blocks, which would move partial sums out of the block; "
                   "the kernel runs each block's whole K with its accumulator in registers (k innermost)")
            return


def _group_m(mapping: Mapping, view: GemmView, smem: int) -> tuple[int | None, str | None]:
    """GROUP_M: the rows of blocks a wave covers when the waves walk n inside m (a swizzle
    Triton's grouped launch order gives); None when the plain row-major order is the mapping's.
    Second: a line when the mapping's order is one the grouped order cannot give."""
    m, n, _ = view.dims
    order = [d for _, d, _ in outer_loops(mapping, smem) if d in (m, n)]
    n_before_m = n in order and m in order and order.index(n) < order.index(m)
    rows, cols = view.wave[:2]
    pid_n = view.extents[1] // view.block[1]
    if n_before_m and rows < view.extents[0] // view.block[0]:
        return (rows if rows > 1 else None), (
            f"wave order: the waves walk m inside n ({view.dim_names[1]} loop outside {view.dim_names[0]}); "
            f"the kernel's grouped launch order walks n inside m (GROUP_M={rows})")
    if rows > 1 and cols < pid_n:
        return rows, None
    return None, None


def epilogue_names(epilogue) -> tuple[str, ...]:
    """The epilogue's steps, checked (`EmitError` naming the unknown one)."""
    out = tuple(epilogue or ())
    for name in out:
        if name not in EPILOGUES:
            raise EmitError(f"--epilogue {name!r}: expected one of {', '.join(EPILOGUES)}")
    return out


def power_of_two_at_least(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()
