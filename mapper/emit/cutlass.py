"""CUTLASS from a mapping: the threadblock (CTA) tile, warp tile, instruction shape, cluster
shape and stages, as `cutlass_profiler --operation=Gemm` arguments and as a template block
(CUTLASS 3's CollectiveBuilder on sm90, CUTLASS 2's `device::Gemm` shapes before it).

The instruction: the one the mapping runs where the architecture models it (`mma.instruction_shape`:
on h100 / h200 a warpgroup's WGMMA 64 x N x 16, N from the warpgroup's tile; on b200 tcgen05.mma
M x N x 16, sm100), else on sm90 a WGMMA 64 x N x K (N the CTA tile's n, at most 256; K = 256
bits of the operand type) and on sm80 the mapping's native shape (`mma.sync` m16n8k16). CUTLASS's own rules (the CTA tile a multiple of the
instruction, the warp tile dividing the CTA tile with the warp's k the CTA's, at least two
stages) are applied with a line each where the mapping differs.
"""
from __future__ import annotations

from types import MappingProxyType

from dataclasses import dataclass

from ..cta_pair import PAIR
from .common import GemmView, epilogue_names

SM_OF_ARCH = (("h100", 90), ("h200", 90), ("b200", 100), ("a100", 80))     # preset name prefix -> compute capability
TYPE_OF_BITS = MappingProxyType({8: "s8", 16: "bf16", 32: "f32", 64: "f64"})
CXX_OF_BITS = MappingProxyType({8: "int8_t", 16: "cutlass::bfloat16_t", 32: "float", 64: "double"})
WGMMA_M, WGMMA_MAX_N, WARPGROUP = 64, 256, 4
PORTABLE_CLUSTER = 8        # CTAs per cluster every sm90+ part runs (CUDA's portable cluster size)


@dataclass(frozen=True)
class CutlassShape:
    sm: int
    cta: tuple[int, int, int]
    warps: tuple[int, int, int]
    warp: tuple[int, int, int]
    instruction: tuple[int, int, int]
    cluster: tuple[int, int, int]
    stages: int
    changes: tuple[str, ...] = ()


def compute_capability(arch_name: str) -> int:
    return next((sm for prefix, sm in SM_OF_ARCH if arch_name.lower().startswith(prefix)), 80)


def _round_up(value: int, grain: int) -> int:
    return -(-value // grain) * grain


def cutlass_shape(view: GemmView) -> CutlassShape:
    sm = compute_capability(view.arch)
    changes = list(view.changes)
    k_inst = max(8, 256 // view.bits[0])
    if sm >= 90 and view.issued:
        instruction = view.instruction      # the WGMMA / tcgen05.mma the mapping runs (`mma.instruction_shape`)
    elif sm >= 90:
        instruction = (WGMMA_M, min(WGMMA_MAX_N, _round_up(view.block[1], 8)), k_inst)
    else:
        instruction = view.instruction or (16, 8, k_inst)
    # a CTA of a pair runs half the pair's MMA rows (cta_group::2)
    per_cta = (instruction[0] // PAIR,) + tuple(instruction[1:]) if view.cta_pair else instruction
    cta = tuple(_round_up(b, i) for b, i in zip(view.block, per_cta))
    for role, name, was, now, inst in zip("mnk", view.dim_names, view.block, cta, per_cta):
        if was != now:
            changes.append(f"CTA tile {role}: the mapping's {name} tile {was} is no multiple of the instruction's "
                           f"{inst}: emitted {now} (masked)")
    warps, warp = view.warps, view.warp
    if sm >= 100:           # one thread issues tcgen05.mma for the CTA; no warp tiling
        warps, warp = (1, 1, 1), cta
    elif sm >= 90 and view.unit_warps == WARPGROUP:     # the mapping's units are warpgroups already
        groups = max(1, view.num_warps // WARPGROUP)
        warps, warp = (groups, 1, 1), (cta[0] // groups, cta[1], cta[2])
        if view.warps[1:] != (1, 1):
            changes.append(f"warps: the mapping's {'x'.join(map(str, view.warps))} warpgroups over m x n x k become "
                           f"{groups} consumer warpgroup(s) over m, as CUTLASS's cooperative kernels split the tile")
    elif sm >= 90:
        groups = max(1, view.num_warps // WARPGROUP)
        warps, warp = (groups, 1, 1), (cta[0] // groups, cta[1], cta[2])
        changes.append(f"warps: on sm90 each warpgroup of 4 warps issues {instruction[0]}x{instruction[1]}x"
                       f"{instruction[2]} WGMMAs; the mapping's {view.num_warps} warps "
                       f"({'x'.join(map(str, view.warps))}) become {groups} consumer warpgroup(s) over m")
    elif warp[2] != cta[2] or any(c % w for c, w in zip(cta, warp)) or any(w % i for w, i in zip(warp, instruction)):
        fixed = tuple(max(i, _round_up(w, i)) for w, i in zip(warp[:2], instruction[:2])) + (cta[2],)
        warps = (max(1, cta[0] // fixed[0]), max(1, cta[1] // fixed[1]), 1)
        changes.append(f"warp tile: the mapping's {'x'.join(map(str, warp))} does not fit CUTLASS's rules (a "
                       f"multiple of the instruction, dividing the CTA tile, k = the CTA's k): emitted "
                       f"{'x'.join(map(str, fixed))}")
        warp = fixed
    stages = view.stages
    if stages < 2:
        changes.append(f"stages: the mapping has {stages}; CUTLASS's pipelined mainloops take at least 2: emitted 2")
        stages = 2
    if view.group_m:
        changes.append(f"swizzle: the mapping's waves cover {view.group_m} rows of blocks (GROUP_M); CUTLASS's "
                       "rasterisation is set at run time (not emitted)")
    cluster = view.cluster
    if cluster[2] > 1:
        changes.append(f"cluster: the mapping's cluster splits k ({view.dim_names[2]}) over {cluster[2]} CTAs; "
                       "CUTLASS's clusters multicast along m and n only: emitted cluster k 1")
        cluster = (cluster[0], cluster[1], 1)
    if sm < 90 and cluster != (1, 1, 1):
        changes.append(f"cluster: sm{sm} has no thread-block clusters: emitted 1x1x1")
        cluster = (1, 1, 1)
    if cluster[0] * cluster[1] > PORTABLE_CLUSTER:
        changes.append(f"cluster: {cluster[0] * cluster[1]} CTAs is above the portable {PORTABLE_CLUSTER}: the kernel "
                       "must set cudaFuncAttributeNonPortableClusterSizeAllowed")
    return CutlassShape(sm, cta, warps, warp, instruction, cluster, stages, tuple(changes))


def cluster_line(view: GemmView, cluster: tuple[int, int, int]) -> str:
    """What the cluster shape shares: the CTAs along m read one B tile, those along n one A
    tile, each loaded once from L2 and multicast (TMA multicast)."""
    if cluster[:2] == (1, 1):
        return "// cluster 1x1x1: the mapping shares nothing across SMs (no multicast below L2)"
    pairs = cluster[0] // 2 if view.cta_pair else cluster[0]
    shared = [f"{operand} multicast to the {count} {unit} along {role}" for operand, count, unit, role
              in (("B", pairs, "CTA pairs" if view.cta_pair else "CTAs", view.dim_names[0]),
                  ("A", cluster[1], "CTAs", view.dim_names[1])) if count > 1]
    if view.cta_pair:
        shared.insert(0, "each CTA pair along m holds B's tile half in each CTA, both halves read by the pair's MMA "
                         "(cta_group::2)")
    return (f"// cluster {'x'.join(map(str, cluster))}: each tile read once from L2 per cluster, "
            f"{'; '.join(shared)}" + (" (TMA multicast)" if len(shared) > view.cta_pair else ""))


def profiler_args(view: GemmView, shape: CutlassShape) -> str:
    a, b, c = (TYPE_OF_BITS.get(bits, "f32") for bits in view.bits)
    m, n, k = view.sizes
    parts = ["cutlass_profiler", "--operation=Gemm", f"--m={m}", f"--n={n}", f"--k={k}",
             f"--A={a}:row", f"--B={b}:column", f"--C={c}:row", "--op_class=tensorop", "--accum=f32",
             f"--cta_m={shape.cta[0]}", f"--cta_n={shape.cta[1]}", f"--cta_k={shape.cta[2]}",
             f"--cluster_m={shape.cluster[0]}", f"--cluster_n={shape.cluster[1]}", f"--cluster_k={shape.cluster[2]}",
             f"--stages={shape.stages}",
             f"--warps_m={shape.warps[0]}", f"--warps_n={shape.warps[1]}", f"--warps_k={shape.warps[2]}",
             f"--inst_m={shape.instruction[0]}", f"--inst_n={shape.instruction[1]}", f"--inst_k={shape.instruction[2]}",
             f"--min_cc={shape.sm}"]
    if view.batch:
        parts.insert(5, "--batch_count=BATCH")
    return " \\\n    ".join(parts)


def _shape3(kind: str, values) -> str:
    return f"{kind}<{', '.join(str(v) for v in values)}>"


FUNCTOR_OF_ACTIVATION = MappingProxyType({None: "LinearCombination", "relu": "LinearCombinationRelu",
                         "gelu": "LinearCombinationGELU", "silu": "LinearCombinationSilu"})


def epilogue_functor(epilogue) -> tuple[str, list[str]]:
    """(CUTLASS 2's epilogue functor, lines on what else the epilogue needs): one activation
    after alpha * acc + beta * C; a bias is C with a zero row stride and beta = 1."""
    steps = epilogue_names(epilogue)
    activations = [s for s in steps if s != "bias"]
    notes = []
    if len(activations) > 1:
        notes.append(f"epilogue: CUTLASS's functors apply one activation; {', '.join(activations[1:])} dropped")
    if "bias" in steps:
        notes.append("epilogue: the bias is C, an N-vector broadcast with row stride 0 and beta = 1")
        if activations and steps.index("bias") > steps.index(activations[0]):
            notes.append("epilogue: CUTLASS adds C before the activation; the bias moved before it")
    return FUNCTOR_OF_ACTIVATION[activations[0] if activations else None], notes


def template_text(view: GemmView, shape: CutlassShape, epilogue=()) -> str:
    a, b, c = (CXX_OF_BITS.get(bits, "float") for bits in view.bits)
    functor, _ = epilogue_functor(epilogue)
    cute = lambda values: "cute::Shape<" + ", ".join(f"cute::_{v}" for v in values) + ">"    # noqa: E731
    if shape.sm >= 100:
        sms = PAIR if view.cta_pair else 1
        group = ("cta_group::2: the MMA over a CTA pair, each CTA holding half of A's rows, of B's columns and of "
                 "the accumulator") if view.cta_pair else "cta_group::1"
        return "\n".join([
            f"// CUTLASS 3 (sm{shape.sm}): CollectiveBuilder parameters",
            f"using MmaTileShape = {cute(shape.instruction[:2] + (shape.cta[2],))};",
            f"using ClusterShape = {cute(shape.cluster)};",
            f"// instruction: tcgen05.mma {'x'.join(map(str, shape.instruction))} ({group}), the "
            "accumulator in tensor memory, A and B from shared memory",
            "using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<",
            "    cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp,",
            f"    {a}, cutlass::layout::RowMajor, 8, {b}, cutlass::layout::ColumnMajor, 8, float,",
            "    MmaTileShape, ClusterShape,",
            f"    cutlass::gemm::collective::StageCount<{shape.stages}>,",
            f"    cutlass::gemm::KernelTmaWarpSpecialized{sms}SmSm100>::CollectiveOp;",
            f"// output element: {c}; epilogue: cutlass::epilogue::thread::{functor} (fusion: EVT)", ""])
    if shape.sm >= 90:
        schedule = ("KernelTmaWarpSpecializedCooperative" if shape.warps[0] > 1 else "KernelTmaWarpSpecialized")
        return "\n".join([
            "// CUTLASS 3 (sm90): CollectiveBuilder parameters",
            f"using TileShape    = {cute(shape.cta)};",
            f"using ClusterShape = {cute(shape.cluster)};",
            f"// instruction: WGMMA {'x'.join(map(str, shape.instruction))} per warpgroup",
            "using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<",
            "    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,",
            f"    {a}, cutlass::layout::RowMajor, 8, {b}, cutlass::layout::ColumnMajor, 8, float,",
            "    TileShape, ClusterShape,",
            f"    cutlass::gemm::collective::StageCount<{shape.stages}>,",
            f"    cutlass::gemm::{schedule}>::CollectiveOp;",
            f"// output element: {c}; epilogue: cutlass::epilogue::thread::{functor} (fusion: EVT)", ""])
    return "\n".join([
        f"// CUTLASS 2 (sm{shape.sm}): cutlass::gemm::device::Gemm shapes",
        f"using ThreadblockShape = {_shape3('cutlass::gemm::GemmShape', shape.cta)};",
        f"using WarpShape        = {_shape3('cutlass::gemm::GemmShape', shape.warp)};",
        f"using InstructionShape = {_shape3('cutlass::gemm::GemmShape', shape.instruction)};",
        f"constexpr int NumStages = {shape.stages};",
        f"using Gemm = cutlass::gemm::device::Gemm<{a}, cutlass::layout::RowMajor, {b}, cutlass::layout::ColumnMajor,",
        f"    {c}, cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm{shape.sm},",
        "    ThreadblockShape, WarpShape, InstructionShape,",
        f"    cutlass::epilogue::thread::{functor}<{c}, 128 / cutlass::sizeof_bits<{c}>::value, float, float>,",
        "    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, NumStages>;", ""])


def cutlass_text(view: GemmView, epilogue=()) -> str:
    shape = cutlass_shape(view)
    shape = CutlassShape(**{**shape.__dict__, "changes": shape.changes + tuple(epilogue_functor(epilogue)[1])})
    head = [f"// {view.workload} on {view.arch} (sm{shape.sm}): CTA {'x'.join(map(str, shape.cta))}, warp "
            f"{'x'.join(map(str, shape.warp))}, instruction {'x'.join(map(str, shape.instruction))}, cluster "
            f"{'x'.join(map(str, shape.cluster))}, {shape.stages} stages"]
    if view.swapped:
        head.append(f"// swap-AB: the kernel's M is {view.dim_names[0]} and its N {view.dim_names[1]}: it computes the "
                    "transposed product (A and B exchanged and transposed, C transposed)")
    head += [f"// mapper: changed: {line}" for line in shape.changes]
    head.append(cluster_line(view, shape.cluster))
    return "\n".join(head) + "\n\n" + "/* profiler:\n" + profiler_args(view, shape) + "\n*/\n\n" + template_text(view, shape, epilogue)
