"""Two einsums fused through their shared dim (producer-consumer fusion, an MLP with its hidden
dim tiled): H[m,f] = X[m,e] W1[e,f], elementwise ops on H, then Y[m,n] = H[m,f] W2[f,n], as one
kernel in which H never leaves the chip. An explicit model, priced honestly:

each block owns Bm rows and Bn output columns; it holds its X rows whole (Bm x E) at the fusion
level, and walks the hidden dim in chunks of Bf: it computes the Bm x Bf chunk of H (streaming
W1 in slices of BK x Bf, `stages` deep), applies the elementwise ops in registers, and adds the
chunk times W2's Bf x Bn slice into its fp32 Bm x Bn accumulator (in registers). So
- outermost level: X read once per column tile (n/Bn times), W1 once per block (m/Bm x n/Bn
  times), W2 once per row tile (m/Bm times), Y written once;
- the recomputation: H's MACs and the elementwise FLOPs run once per column tile;
- fits: the fusion level holds the X rows and the staged W1 and W2 slices; the registers hold the
  H chunk and the accumulator (fp32); blocks per SM follow on a GPU.
Every (Bm, Bn, Bf, stages) of the grid is priced and the best kept (exhaustive over it). With
many rows (a prefill), re-reading W1 per row tile costs far more than H's round trip saves, and
the grouping leaves the GEMMs apart ("no gain"); with few rows (decode) it can win.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..opgraph import OpGraph
from ..spec import Arch
from .price import KernelPrice, block_slots, fits_at, flop_cycles, streamed_energy, streamed_kernel

ROWS = (16, 32, 64, 128, 256)
HIDDEN = (16, 32, 64, 128)
BK = 64                        # W1 slice depth streamed per stage
ACCUMULATOR_BYTES = 4


@dataclass(frozen=True)
class MlpOps:
    first: int
    middle: tuple[int, ...]
    second: int
    x: str
    w1: str
    w2: str


def match(graph: OpGraph, ops: tuple[int, ...]) -> MlpOps | None:
    """The ops as a 2-D GEMM -> elementwise chain -> 2-D GEMM reducing over the first's
    output column dim, or None."""
    einsums = [i for i in ops if graph.ops[i].family == "einsum"]
    if len(einsums) != 2:
        return None
    first, second = einsums
    middle = tuple(i for i in ops if i not in einsums)
    a, b = graph.ops[first], graph.ops[second]
    if len(a.output_dims) != 2 or len(b.output_dims) != 2 or len(a.inputs) != 2 or len(b.inputs) != 2:
        return None
    t = a.output
    for i in middle:
        op = graph.ops[i]
        if op.family != "elementwise" or op.inputs != (t,) or graph.consumers(t) != (i,):
            return None
        t = op.output
    if b.inputs[0] != t or graph.consumers(t) != (second,) or graph.consumers(a.output) != ((middle or (second,))[0],):
        return None
    row, hidden = a.output_dims
    if b.input_dims[0][1] in b.output_dims or b.input_dims[0][0] not in b.output_dims:
        return None                 # the second must reduce over the hidden dim and keep the rows
    x = next((n for n, dims in zip(a.inputs, a.input_dims) if row in dims and hidden not in dims), None)
    w1 = next((n for n, dims in zip(a.inputs, a.input_dims) if hidden in dims and row not in dims), None)
    if x is None or w1 is None:
        return None
    return MlpOps(first, middle, second, x, w1, b.inputs[1])


@dataclass(frozen=True)
class MlpChoice:
    """The best tiling of the grid and what one block holds."""
    block_m: int
    block_n: int
    block_f: int
    stages: int
    smem_bytes: float              # at the fusion level: the X rows and the staged W1 and W2 slices
    register_bytes: float          # the H chunk and the accumulator (fp32)


def mlp_price(arch: Arch, graph: OpGraph, found: MlpOps, level: int, objective: str):
    """(KernelPrice, tiling text, note, MlpChoice) of the best fitting point of the grid, or None."""
    a, b = graph.ops[found.first], graph.ops[found.second]
    x, w1, w2, y = (graph.tensor(t) for t in (found.x, found.w1, found.w2, b.output))
    rows, hidden = (graph.tensor(a.output).shape[k] for k in (0, 1))
    depth = x.elements // rows
    cols = y.elements // rows
    bm, bn, bf, st = (g.ravel() for g in np.meshgrid(np.array(ROWS), np.array(sorted({*ROWS, cols})),
                                                      np.array(HIDDEN),
                                                      np.arange(1, arch.levels[level].max_stages + 1), indexing="ij"))
    bn = np.minimum(bn, cols)
    sx, s1, s2, sy = (t.bits / 8 for t in (x, w1, w2, y))
    smem = bm * depth * sx + st * (min(BK, depth) * bf * s1 + bf * bn * s2)
    regs = (bm * bf + bm * bn) * ACCUMULATOR_BYTES
    row_tiles, col_tiles = np.ceil(rows / bm), np.ceil(cols / bn)
    fits = fits_at(arch, level, smem * np.ones(bm.shape))
    resident, _, slots = block_slots(arch, level, smem * np.ones(bm.shape), regs)
    fits &= resident
    if not fits.any():
        return None
    words_x = col_tiles * x.elements
    words_w1 = row_tiles * col_tiles * w1.elements
    words_w2 = row_tiles * w2.elements
    macs = rows * depth * hidden * col_tiles + rows * hidden * cols
    flops = sum(graph.ops[i].flops_per_element for i in found.middle) * rows * hidden * col_tiles
    blocks = row_tiles * col_tiles
    compute = (macs / arch.peak_macs_per_cycle + flop_cycles(arch, flops)) * np.ceil(blocks / slots) * slots / blocks
    outer_bytes = words_x * sx + words_w1 * s1 + words_w2 * s2 + y.elements * sy
    cycles = np.maximum(compute, outer_bytes / arch.levels[0].bandwidth)
    energy = streamed_energy(arch, level, [(words_x, sx), (words_w1, s1), (words_w2, s2)], [(y.elements, sy)],
                             macs, flops)
    score = {"cycles": cycles, "bytes": outer_bytes}.get(objective, energy)
    best = int(np.flatnonzero(fits)[np.lexsort((cycles[fits], score[fits]))[0]])
    reads = [(found.x, float(words_x[best]), sx), (found.w1, float(words_w1[best]), s1),
             (found.w2, float(words_w2[best]), s2)]
    kernel: KernelPrice = streamed_kernel(arch, level, reads, [(b.output, y.elements, sy)], float(macs[best]),
                                          float(flops[best]), float(compute[best]))
    tiling = f"Bm{bm[best]} Bn{bn[best]} Bf{bf[best]} s{st[best]}"
    note = (f"{a.name} and {b.name} fused through {a.output_dims[1]}: {a.output} recomputed {col_tiles[best]:.0f}x, "
            f"{found.w1} read {words_w1[best] / w1.elements:.0f}x, {found.w2} {words_w2[best] / w2.elements:.0f}x; "
            f"best of {int(fits.sum())} fitting tilings of {len(bm)}, all priced")
    choice = MlpChoice(int(bm[best]), int(bn[best]), int(bf[best]), int(st[best]), float(smem[best]),
                       float(regs[best]))
    return kernel, tiling, note, choice
