"""Attention as one fused kernel with an online softmax (FlashAttention, Dao et al. 2022): the
group QK^T -> elementwise (scale, mask) -> softmax over the keys -> PV, which plain tile-level
fusion cannot cross (the softmax needs its whole row), made fusable by the algorithm.

The kernel (an explicit model, priced with the architecture's own energies and bandwidths):
each block owns Bi query rows of one head (g, i tile) with the head dim d whole, and walks the
keys in tiles of Bj: it loads a K and a V tile (Bj x d, `stages` deep at the fusion level),
computes the Bi x Bj score tile, which never leaves the registers, updates the running max and
sum of each row (2 fp32 words per row) and rescales its fp32 O accumulator (Bi x d).
- outermost-level traffic: Q read once, K and V read once per i tile, O written once (an L2
  between them is not credited with K/V reuse: an upper estimate of the fused kernel's bytes);
- fusion level: Q tile and the K/V tiles filled and read once each; the score tile, the
  accumulator and the row state in registers;
- FLOPs: the two products' MACs; the scale/mask ops per score; the softmax's per score; and the
  online rescaling, (d + 2) per row per key tile;
- fits: the fusion level holds Q's tile and `stages` K/V tiles; on a GPU the registers hold the
  score tile, the accumulator and the row state, and blocks per SM follow from both;
- cycles: the slowest of the outermost level's bytes over its bandwidth and the compute, with
  the last wave's idle SMs counted.
Every (Bi, Bj, stages) of the grid is priced (numpy over the grid) and the best kept, so the
result is proven over that space; `TILES` is the space.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..opgraph import OpGraph
from ..spec import Arch
from .price import (KernelPrice, block_slots, fits_at, flop_cycles, streamed_energy, streamed_kernel,
                    streamed_level_cycles)

TILES = (16, 32, 64, 128, 256)
ACCUMULATOR_BYTES = 4               # fp32 scores, accumulator and row state


@dataclass(frozen=True)
class AttentionOps:
    qk: int
    middle: tuple[int, ...]          # elementwise ops on the scores (scale, mask)
    softmax: int
    pv: int


@dataclass(frozen=True)
class FlashChoice:
    """The best tiling and how many were priced (all of the grid: proven over it)."""
    block_i: int
    block_j: int
    stages: int
    blocks_per_sm: int
    priced: int
    feasible: int
    smem_bytes: float = 0.0          # held at the fusion level by one block: Q's tile, the K/V stages
    register_bytes: float = 0.0      # the score tile, the accumulator and the row state


def match(graph: OpGraph, ops: tuple[int, ...]) -> AttentionOps | None:
    """The ops as QK^T -> elementwise -> softmax over the keys -> PV, or None."""
    einsums = [i for i in ops if graph.ops[i].family == "einsum"]
    softmaxes = [i for i in ops if graph.ops[i].kind == "softmax"]
    if len(einsums) != 2 or len(softmaxes) != 1:
        return None
    qk, pv = einsums
    sm = softmaxes[0]
    middle = tuple(i for i in ops if i not in (qk, pv, sm))
    chain, t = [], graph.ops[qk].output
    for i in middle + (sm,):
        op = graph.ops[i]
        if op.family == "einsum" or op.inputs[0] != t or len(graph.consumers(t)) != 1:
            return None
        chain.append(i)
        t = op.output
    if chain[-1] != sm or len(graph.consumers(t)) != 1 or graph.consumers(t)[0] != pv:
        return None
    s_op, p_op = graph.ops[qk], graph.ops[pv]
    if len(s_op.inputs) != 2 or t != p_op.inputs[0] or len(s_op.output_dims) != 3:
        return None
    key = s_op.output_dims[graph.ops[sm].output_dims.index(graph.ops[sm].reduced_dim)]
    if key != s_op.output_dims[-1] or key in s_op.input_dims[0]:
        return None                  # the softmax must run over the keys (S's last dim, not Q's)
    return AttentionOps(qk, tuple(middle), sm, pv)


def flash_price(arch: Arch, graph: OpGraph, found: AttentionOps, level: int,
                objective: str) -> tuple[KernelPrice, FlashChoice] | None:
    s_op, p_op = graph.ops[found.qk], graph.ops[found.pv]
    q, k = (graph.tensor(t) for t in s_op.inputs)
    v, o = graph.tensor(p_op.inputs[1]), graph.tensor(p_op.output)
    heads, rows, d = q.shape
    keys, d_v = k.shape[1], v.shape[2]
    bi, bj, st = (a.ravel() for a in np.meshgrid(np.array(TILES), np.array(TILES),
                                                  np.arange(1, arch.levels[level].max_stages + 1), indexing="ij"))
    qb, kb, vb, ob = (t.bits / 8 for t in (q, k, v, o))
    i_tiles = np.ceil(rows / bi)
    smem = bi * d * qb + st * bj * (d * kb + d_v * vb)
    regs = (bi * bj + bi * d_v + 2 * bi) * ACCUMULATOR_BYTES
    fits = fits_at(arch, level, smem * np.ones(bi.shape))
    blocks = heads * i_tiles
    resident, per_sm, slots = block_slots(arch, level, smem * np.ones(bi.shape), regs)
    fits &= resident
    waves = np.ceil(blocks / slots)
    macs = heads * rows * keys * (d + d_v)
    scores = heads * rows * keys
    flops = scores * (sum(graph.ops[i].flops_per_element for i in found.middle) + graph.ops[found.softmax].flops_per_element)
    flops = flops + heads * rows * np.ceil(keys / bj) * (d_v + 2)
    words = {"Q": heads * rows * d + 0 * bi, "K": heads * i_tiles * keys * d, "V": heads * i_tiles * keys * d_v}
    outer_bytes = words["Q"] * qb + words["K"] * kb + words["V"] * vb + heads * rows * d_v * ob
    energy = streamed_energy(arch, level, [(words["Q"], qb), (words["K"], kb), (words["V"], vb)],
                             [(heads * rows * d_v, ob)], macs, flops)
    compute = (macs / arch.peak_macs_per_cycle + flop_cycles(arch, flops)) * waves * slots / blocks
    # each level's time as the kernel is priced, at the fusion level only the SMs running blocks
    busy = np.minimum(blocks, arch.levels[level].instances)
    out_bytes = heads * rows * d_v * ob
    cycles = compute
    for time in streamed_level_cycles(arch, level, outer_bytes - out_bytes, out_bytes, busy):
        cycles = np.maximum(cycles, time)
    score = {"cycles": cycles, "bytes": outer_bytes}.get(objective, energy)
    if not fits.any():
        return None
    best = int(np.flatnonzero(fits)[np.lexsort((cycles[fits], score[fits]))[0]])
    choice = FlashChoice(int(bi[best]), int(bj[best]), int(st[best]), int(per_sm[best]), len(bi), int(fits.sum()),
                         float(smem[best]), float(regs[best]))
    reads = [(s_op.inputs[0], float(words["Q"][best]), qb), (s_op.inputs[1], float(words["K"][best]), kb),
             (p_op.inputs[1], float(words["V"][best]), vb)]
    kernel = streamed_kernel(arch, level, reads, [(p_op.output, heads * rows * d_v, ob)], macs,
                             float(flops[best]), float(compute[best]), float(busy[best]))
    return kernel, choice
