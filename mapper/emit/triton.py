"""Triton from a mapping: a `triton.Config`, an `@triton.autotune` config list, or a complete
matmul kernel with masked loads and stores (ragged tails) and a fused elementwise epilogue.

Triton takes five numbers: BLOCK_M/N/K (the thread-block tile, the mapping's SMEM tile),
num_stages (SMEM's stages) and num_warps (SMEM's spatial split), and GROUP_M for the grouped
launch order. What it cannot take is said on one line each (`TritonConfig.changes`): blocks
must be powers of two (`tl.arange`) of at least 16 (`tl.dot`), the warps a power of two, and
Triton lays its warps over the block itself (the mapping's warp tile is dropped).
Nothing here imports triton: the text is emitted, the tests run it.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from .common import GELU_CUBIC, GELU_SCALE, BlockConfig, GemmView, epilogue_names, power_of_two_at_least
from .triton_forms import HOPPER, tma_refusal

MIN_DOT = 16          # tl.dot's smallest block side
MAX_WARPS = 32        # 1,024 threads per block
# fp32 accumulator registers a thread holds (the block's output tile over its threads): at 128
# Triton's kernels ran at full speed on an H200, at 256 (128x256 or 256x128 over 4 warps) they
# spilled and ran 2.5 to 12x slower than over 8, 4.9x at the median of 104 pairs
# (docs/gpu/h200-2026-12-04); a thread names at most 255 registers in all
ACCUMULATOR_REGISTERS = 128


@dataclass(frozen=True)
class TritonConfig(BlockConfig):
    """The block config written for a mapping, with what Triton could not take as it says."""
    changes: tuple[str, ...] = ()

    def kwargs_text(self) -> str:
        meta = {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k}
        if self.group_m:
            meta["GROUP_M"] = self.group_m
        inner = ", ".join(f"'{k}': {v}" for k, v in meta.items())
        ctas = f", num_ctas={self.num_ctas}" if self.num_ctas > 1 else ""
        return f"triton.Config({{{inner}}}, num_stages={self.num_stages}, num_warps={self.num_warps}{ctas})"

    def as_dict(self) -> dict:
        out = {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
               "num_stages": self.num_stages, "num_warps": self.num_warps}
        if self.group_m:
            out["GROUP_M"] = self.group_m
        if self.num_ctas > 1:
            out["num_ctas"] = self.num_ctas
        return out


def triton_config(view: GemmView) -> TritonConfig:
    """The config of `view`, with a line for everything Triton cannot take as the mapping says."""
    changes = list(view.changes)
    blocks = []
    # a Triton program spans its cluster's CTAs (num_ctas): its block is the cluster's tile
    cluster = (view.cluster[0], view.cluster[1], 1)
    if view.cluster[2] > 1:
        changes.append(f"num_ctas: the mapping's cluster splits k ({view.dim_names[2]}) over {view.cluster[2]} "
                       "CTAs; a Triton program's CTAs split its block along m and n only: not emitted")
    if cluster != (1, 1, 1):
        changes.append(f"num_ctas: one program spans the mapping's {cluster[0]}x{cluster[1]} cluster of CTAs "
                       f"(num_ctas={cluster[0] * cluster[1]}), its block the cluster's tile")
    for role, name, size, ctas in zip("MNK", view.dim_names, view.block, cluster):
        size = size * ctas
        block = max(MIN_DOT, power_of_two_at_least(size))
        if block != size:
            why = "a power of two (tl.arange)" if size >= MIN_DOT else f"at least {MIN_DOT} (tl.dot)"
            changes.append(f"BLOCK_{role}: the mapping's {name} tile {size} is not {why}: emitted {block}, "
                           "the extra lanes masked")
        blocks.append(block)
    warps = min(MAX_WARPS, power_of_two_at_least(view.num_warps))
    if warps != view.num_warps:
        changes.append(f"num_warps: {view.num_warps} warps is no power of two of at most {MAX_WARPS} (1,024 "
                       f"threads): emitted {warps}")
    # a CTA's share of the program's block (num_ctas CTAs hold the cluster's tile) over its warps
    cta_m, cta_n = blocks[0] // cluster[0], blocks[1] // cluster[1]
    held = accumulator_warps(cta_m, cta_n)
    if held > warps:
        changes.append(f"num_warps: a CTA's {cta_m}x{cta_n} fp32 accumulator over {warps} warps is "
                       f"{accumulator_registers(cta_m, cta_n, warps)} registers a thread, over the "
                       f"{ACCUMULATOR_REGISTERS} that run without spilling: emitted {held} warps")
        warps = held
    if view.unit_warps > 1 and view.warps == (1, 1, 1):
        pass        # one unit of several warps (a wgmma warpgroup) on the whole tile: nothing dropped
    elif view.num_warps > 1 or view.warps[2] > 1:
        split = "x".join(str(w) for w in view.warps)
        changes.append(f"warp tile: the mapping's {view.warp[0]}x{view.warp[1]}x{view.warp[2]} per warp "
                       f"({split} warps over m x n x k) is Triton's own choice of warp layout, not a parameter")
    group_m = view.group_m and view.group_m // cluster[0]       # rows of programs, not of CTAs
    return TritonConfig(*blocks, num_stages=view.stages, num_warps=warps, group_m=group_m if group_m != 1 else None,
                        changes=tuple(changes), num_ctas=cluster[0] * cluster[1])


def accumulator_registers(block_m: int, block_n: int, warps: int) -> int:
    """The registers each thread of `warps` warps holds of a block_m x block_n fp32 accumulator."""
    return -(-block_m * block_n // (32 * warps))


def accumulator_warps(block_m: int, block_n: int) -> int:
    """The fewest warps (a power of two) whose threads hold a block_m x block_n fp32 accumulator
    in at most ACCUMULATOR_REGISTERS registers each."""
    return min(MAX_WARPS, power_of_two_at_least(-(-block_m * block_n // (32 * ACCUMULATOR_REGISTERS))))


def config_text(view: GemmView) -> str:
    config = triton_config(view)
    return _comments(view, config.changes) + config.kwargs_text() + "\n"


def autotune_text(views: list[GemmView], predicted: list[str]) -> str:
    """An `@triton.autotune` config list of the mappings `views`, best first; `predicted`: a
    comment per config (the model's figures)."""
    lines = [f"# the {len(views)} best mappings of {views[0].workload} on {views[0].arch}, best first "
             "(emitted by `mapper emit --to triton --top`)", "import triton", "", "CONFIGS = ["]
    seen = set()
    for rank, (view, note) in enumerate(zip(views, predicted), 1):
        config = triton_config(view)
        text = config.kwargs_text()
        duplicate = "  (the same config as a better mapping)" if text in seen else ""
        seen.add(text)
        lines.append(f"    {text},  # {rank}: {note}{duplicate}")
    lines += ["]", "", "# use: @triton.autotune(configs=CONFIGS, key=['M', 'N', 'K']) above @triton.jit", ""]
    return "\n".join(lines)


def _comments(view: GemmView, changes) -> str:
    head = (f"# {view.workload} on {view.arch}: block tile {'x'.join(map(str, view.block))}, warp tile "
            f"{'x'.join(map(str, view.warp))}, {view.num_warps} warps, {view.stages} stages "
            f"(m, n, k = {', '.join(view.dim_names)})\n")
    if view.issued and view.instruction:
        # Triton chooses the instruction itself: the model's, for the record
        pair = " over a CTA pair (tcgen05 cta_group::2), in each CTA" if view.cta_pair else ","
        head += (f"# MMA: m{view.instruction[0]}n{view.instruction[1]}k{view.instruction[2]}{pair} issued by "
                 f"{view.unit_warps} warps together (the model's; Triton picks its own from the block and num_warps)\n")
    return head + "".join(f"# mapper: changed: {line}\n" for line in changes)


def epilogue_lines(epilogue) -> list[str]:
    """Triton statements applying the epilogue to `acc` (fp32) inside the kernel."""
    out = []
    for step in epilogue_names(epilogue):
        if step == "bias":
            out.append("acc = acc + tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]")
        elif step == "relu":
            out.append("acc = tl.maximum(acc, 0.0)")
        elif step == "silu":
            out.append("acc = acc * tl.sigmoid(acc)")
        elif step == "gelu":
            out.append(f"acc = acc * tl.sigmoid({GELU_SCALE!r} * (acc + {GELU_CUBIC!r} * acc * acc * acc))")
    return out


def kernel_text(views: list[GemmView], epilogue=(), notes: list[str] | None = None) -> str:
    """A complete Python module: CONFIGS (the first the mapping's, the rest `--top`'s), the
    jit kernel in its two forms (pointer loads; TMA descriptor loads, `triton_forms`) with the
    epilogue fused, and `matmul(a, b, bias=None, out=None, config=None, tma=None)`."""
    configs = [triton_config(view) for view in views]
    view = views[0]
    notes = notes or [""] * len(views)
    config_lines = "\n".join(f"    {c.kwargs_text()},  # {n}" if n else f"    {c.kwargs_text()},"
                             for c, n in zip(configs, notes))
    steps = epilogue_names(epilogue)
    epilogue_code = "\n".join("    " + line for line in epilogue_lines(steps)) or "    pass"
    text = (KERNEL.replace("@CONFIGS@", config_lines).replace("@EPILOGUE@", epilogue_code)
            .replace("@STEPS@", repr(steps)).replace("@WORKLOAD@", view.workload)
            .replace("@CLUSTER@", repr(view.cluster)).replace("@MMA@", repr(view.instruction))
            .replace("@HOPPER@", repr(HOPPER)).replace("@TMA_REFUSAL@", inspect.getsource(tma_refusal)))
    return _comments(view, configs[0].changes) + text


KERNEL = '''"""Matmul for @WORKLOAD@ emitted by mapper: C = epilogue(A @ B), A (M x K), B (K x N),
optionally batched (a leading batch axis on A, B and C). Tails are masked: any M, N, K.
Two forms of one kernel: `matmul_kernel` loads through pointers (any strides, any GPU: the
Ampere form); `matmul_kernel_tma` loads the operand tiles through TMA tensor descriptors (the
Hopper form: sm90 and later, where this Triton has tensor descriptors and TMA can address the
operands). `matmul` picks the second where it can run (`tma_allowed`)."""
import triton
import triton.language as tl

try:        # host-side TMA descriptors: Triton 3.4 and later
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:
    TensorDescriptor = None

CONFIGS = [
@CONFIGS@
]
EPILOGUE = @STEPS@
# the mapping's kernel (`mapper search --json`'s `kernel` key): its thread-block cluster, CTAs
# along (m, n, k), launched as num_ctas; its MMA shape (m, n, k), None without one
CLUSTER = @CLUSTER@
MMA = @MMA@
HOPPER = @HOPPER@        # the compute capability of TMA, wgmma and clusters


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                  stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                  stride_cb, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    pid_m, pid_n = _block_of(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + batch * stride_ab + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - step * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    _epilogue_store(acc, c_ptr, bias_ptr, batch, offs_m, offs_n, M, N, stride_cb, stride_cm, stride_cn)


@triton.jit
def matmul_kernel_tma(a_desc, b_desc, c_ptr, bias_ptr, M, N, K, stride_cb, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, BATCHED: tl.constexpr):
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    pid_m, pid_n = _block_of(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # TMA brings each tile whole: rows and columns past the tensor's edge (M, N, the K tail)
    # arrive as zeros, so the loads need no masks
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        if BATCHED:
            a = a_desc.load([batch, pid_m * BLOCK_M, step * BLOCK_K]).reshape(BLOCK_M, BLOCK_K)
            b = b_desc.load([batch, step * BLOCK_K, pid_n * BLOCK_N]).reshape(BLOCK_K, BLOCK_N)
        else:
            a = a_desc.load([pid_m * BLOCK_M, step * BLOCK_K])
            b = b_desc.load([step * BLOCK_K, pid_n * BLOCK_N])
        acc += tl.dot(a, b)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    _epilogue_store(acc, c_ptr, bias_ptr, batch, offs_m, offs_n, M, N, stride_cb, stride_cm, stride_cn)


@triton.jit
def _block_of(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row, column) of program `pid`'s block in the grouped launch order: GROUP_M rows of
    blocks walk n together (GROUP_M = 1: row-major)."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (pid % in_group) % rows, (pid % in_group) // rows


@triton.jit
def _epilogue_store(acc, c_ptr, bias_ptr, batch, offs_m, offs_n, M, N, stride_cb, stride_cm, stride_cn):
    # the fused epilogue, on the accumulator before the one store
@EPILOGUE@
    c_ptrs = c_ptr + batch * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _meta(config):
    meta = {"BLOCK_M": config.kwargs["BLOCK_M"], "BLOCK_N": config.kwargs["BLOCK_N"],
            "BLOCK_K": config.kwargs["BLOCK_K"], "GROUP_M": config.kwargs.get("GROUP_M", 1)}
    return meta


def _strides(x):
    return (x.stride(0) if x.dim() == 3 else 0,) + tuple(x.stride()[-2:])


@TMA_REFUSAL@

def tma_allowed(a, b):
    """Whether the TMA form can run: a CUDA device of compute capability HOPPER or later, a Triton
    with tensor descriptors, operands of one rank that TMA can address (`tma_refusal`)."""
    if TensorDescriptor is None or not a.is_cuda or a.dim() != b.dim():
        return False
    import torch
    if torch.cuda.get_device_capability(a.device) < HOPPER:
        return False
    return not any(tma_refusal(x.shape, x.stride(), x.element_size(), x.data_ptr()) for x in (a, b))


def _descriptor(x, rows, cols):
    """A TMA descriptor of `x` loading (rows x cols) tiles (one batch entry's, when batched)."""
    block = [rows, cols] if x.dim() == 2 else [1, rows, cols]
    return TensorDescriptor(x, list(x.shape), list(x.stride()), block)


def launch(a, b, out, bias, config, tma):
    """One launch of the kernel in its form (`tma`: through TMA descriptors); what Triton's launch
    returns: on a GPU the compiled kernel (its .asm["ptx"] says which MMA it issues)."""
    meta = _meta(config)
    grid = (triton.cdiv(a.shape[-2], meta["BLOCK_M"]) * triton.cdiv(b.shape[-1], meta["BLOCK_N"]),
            a.shape[0] if a.dim() == 3 else 1)
    sizes = (a.shape[-2], b.shape[-1], a.shape[-1])
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages, "num_ctas": config.num_ctas}
    bias = out if bias is None else bias
    if not tma:
        return matmul_kernel[grid](a, b, out, bias, *sizes, *_strides(a), *_strides(b), *_strides(out), **meta,
                                   **options)
    if TensorDescriptor is None or a.dim() != b.dim():
        raise ValueError("tma=True needs triton.tools.tensor_descriptor and operands of one rank")
    return matmul_kernel_tma[grid](_descriptor(a, meta["BLOCK_M"], meta["BLOCK_K"]),
                                   _descriptor(b, meta["BLOCK_K"], meta["BLOCK_N"]), out, bias, *sizes,
                                   *_strides(out), **meta, BATCHED=a.dim() == 3, **options)


def matmul(a, b, bias=None, out=None, config=None, tma=None):
    """epilogue(a @ b) into `out` (allocated when None): a (.., M, K), b (.., K, N) torch tensors,
    any strides; `bias` (N,) when the epilogue adds one; `config` a triton.Config (CONFIGS[0]),
    its num_ctas the CTAs of a cluster (sm90+); `tma`: load through TMA descriptors (the Hopper
    form), None where `tma_allowed`."""
    config = config or CONFIGS[0]
    M, K = a.shape[-2:]
    N = b.shape[-1]
    batch = a.shape[0] if a.dim() == 3 else 1
    if out is None:
        import torch
        out = torch.empty(((batch,) if a.dim() == 3 else ()) + (M, N), dtype=torch.float32, device=a.device)
    if "bias" in EPILOGUE and bias is None:
        raise ValueError("the epilogue adds a bias: pass bias=")
    launch(a, b, out, bias, config, tma_allowed(a, b) if tma is None else tma)
    return out
'''
