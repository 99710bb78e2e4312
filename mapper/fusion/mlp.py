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

On a GPU with distributed shared memory (`block_clusters.dsmem`), a block may also run on a
thread-block cluster of c CTAs that hold it together (FlashFuser's way to fuse an FFN whose rows
do not fit one SM): each CTA holds 1/c of the X rows' depth (Bm x E/c) and streams its part of
W1, computes a partial H chunk over it, and the cluster all-reduces the chunk over the SM-to-SM
network (a reduce-scatter and an all-gather: 2 (c-1)/c of the chunk's fp32 bytes per CTA); each
CTA then adds the chunk times its Bn/c columns of W2 into its own accumulator. So what leaves the
chip does not change for a given (Bm, Bn, Bf), the cluster's shared memories hold c times the
rows, and it pays the all-reduce: its bytes over the network's bandwidth per SM, its energy, and
its latency once per chunk where the chunks are not double-buffered (one stage). A cluster takes
c SMs of one GPC: the SMs the part can fill with such clusters run the blocks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..opgraph import OpGraph
from ..spec import Arch
from .price import (KernelPrice, Traffic, block_slots, fits_at, flop_cycles, streamed_energy, streamed_kernel,
                    streamed_level_cycles, with_traffic)

ROWS = (16, 32, 64, 128, 256)
HIDDEN = (16, 32, 64, 128)
BK = 64                        # W1 slice depth streamed per stage
ACCUMULATOR_BYTES = 4
CLUSTERS = (1, 2, 4, 8, 16)    # CTAs holding one block (16: where the part runs non-portable clusters)
ALL_REDUCE = 2                 # a reduce-scatter then an all-gather: each moves (c-1)/c of the chunk


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
    smem_bytes: float              # per CTA at the fusion level: its X rows and staged W1 and W2 slices
    register_bytes: float          # per CTA: the H chunk and its accumulator (fp32)
    cluster: int = 1               # CTAs holding one block over distributed shared memory
    dsmem_bytes: float = 0.0       # moved between the cluster's SMs over the run (all-reduces)


def _cluster_link(arch: Arch, level: int):
    """The block clusters above the fusion level where it is a GPU's per-SM level and they give
    distributed shared memory (`BlockClusters.dsmem`); else None."""
    per_sm = arch.per_sm_levels()
    if per_sm is None or per_sm[0] != level:
        return None
    return next((lvl.clusters for lvl in arch.levels[:level]
                 if lvl.clusters is not None and lvl.clusters.dsmem is not None), None)


def _clustering(arch: Arch, level: int, cc):
    """Per grid point, (the SMs that clusters of `cc` CTAs fill at once, those clusters); without
    distributed shared memory every SM, one CTA each."""
    found = _cluster_link(arch, level)
    sms = arch.levels[level].instances
    if found is None:
        return np.full(cc.shape, float(sms)), np.full(cc.shape, float(sms))
    clusters = found.schedulable(cc).astype(float)
    return clusters * cc, clusters


def _padded(size, tile, grain):
    """Over the tiles of `size` by `tile` (the last one ragged), the sum of each tile's extent
    rounded up to whole `grain`s (ints or int arrays alike)."""
    def whole(extent):
        return -(-extent // grain) * grain
    return size // tile * whole(tile) + whole(size % tile)


def _executed_macs(arch: Arch, workload, rows, depth, hidden, cols, bm, bn, bf, part_depth, part_cols, col_tiles):
    """MACs the two GEMMs run, padding included: each MMA's tile along m, n and k rounded up to
    whole fragments of the unit's native shape, as `tails.fragment_macs` pads a kernel's: the
    first GEMM (rows by a hidden chunk, over each CTA's depth slice in BK steps) once per column
    tile, the second (rows by each CTA's columns, over the chunk). As written, rows playing m,
    as a fusion study searches every kernel (docs/SPECS.md "Swap-AB"): a decode's 16 rows run 64
    on a warpgroup MMA, fused or not. Without a native shape, the valid MACs."""
    grain = dict(arch.for_workload(workload).compute.native_shape)
    gm, gn, gk = (grain.get(role, 1) for role in ("m", "n", "k"))
    per_row = _padded(rows, bm, gm)
    per_depth = depth // part_depth * _padded(part_depth, BK, gk) + _padded(depth % part_depth, BK, gk)
    per_cta_cols = cols // bn * _padded(bn, part_cols, gn) + _padded(cols % bn, part_cols, gn)
    first = col_tiles * per_row * _padded(hidden, bf, gn) * per_depth
    second = per_row * per_cta_cols * _padded(hidden, bf, gk)
    return first + second


def mlp_price(arch: Arch, graph: OpGraph, found: MlpOps, level: int, objective: str):
    """(KernelPrice, tiling text, note, MlpChoice) of the best fitting point of the grid, or None."""
    a, b = graph.ops[found.first], graph.ops[found.second]
    x, w1, w2, y = (graph.tensor(t) for t in (found.x, found.w1, found.w2, b.output))
    rows, hidden = (graph.tensor(a.output).shape[k] for k in (0, 1))
    depth = x.elements // rows
    cols = y.elements // rows
    linked = _cluster_link(arch, level)
    sizes = [c for c in CLUSTERS if c == 1 or (linked is not None and c <= linked.max_ctas)]
    bm, bn, bf, st, cc = (g.ravel() for g in np.meshgrid(np.array(ROWS), np.array(sorted({*ROWS, cols})),
                                                          np.array(HIDDEN),
                                                          np.arange(1, arch.levels[level].max_stages + 1),
                                                          np.array(sizes), indexing="ij"))
    bn = np.minimum(bn, cols)
    sx, s1, s2, sy = (t.bits / 8 for t in (x, w1, w2, y))
    # per CTA: its share of the X rows' depth and of the block's columns (all of them alone)
    part_depth, part_cols = np.ceil(depth / cc), np.ceil(bn / cc)
    smem = bm * part_depth * sx + st * (np.minimum(BK, part_depth) * bf * s1 + bf * part_cols * s2)
    regs = (bm * bf + bm * part_cols) * ACCUMULATOR_BYTES
    row_tiles, col_tiles = np.ceil(rows / bm), np.ceil(cols / bn)
    fits = fits_at(arch, level, smem) & (bn >= cc)
    resident, per_sm, _ = block_slots(arch, level, smem, regs)
    sms_used, clusters = _clustering(arch, level, cc)
    fits &= resident & (clusters > 0)
    if not fits.any():
        return None
    slots = np.maximum(clusters, 1) * np.maximum(per_sm, 1)     # blocks at once: clusters x those per SM
    words_x = col_tiles * x.elements
    words_w1 = row_tiles * col_tiles * w1.elements
    words_w2 = row_tiles * w2.elements
    macs = _executed_macs(arch, a.workload, rows, depth, hidden, cols, bm, bn, bf,
                          part_depth.astype(int), part_cols.astype(int), col_tiles)
    flops = sum(graph.ops[i].flops_per_element for i in found.middle) * rows * hidden * col_tiles
    blocks = row_tiles * col_tiles
    waves = np.ceil(blocks / slots)
    # the SMs the clusters fill run every MAC; the last wave's idle slots count
    full = arch.levels[level].instances / np.maximum(sms_used, 1)
    compute = (macs / arch.peak_macs_per_cycle + flop_cycles(arch, flops)) * full * waves * slots / blocks
    outer_bytes = words_x * sx + words_w1 * s1 + words_w2 * s2 + y.elements * sy
    # the clusters' all-reduces of H's partial chunks: over every block, chunk and valid row
    moved = col_tiles * ALL_REDUCE * (cc - 1) * rows * hidden * ACCUMULATOR_BYTES
    link = linked.dsmem if linked is not None else None
    network = (moved / (np.maximum(sms_used, 1) * link.bandwidth)
               + (st == 1) * (cc > 1) * waves * np.ceil(hidden / bf) * ALL_REDUCE * link.latency
               if link is not None else np.zeros(bm.shape))
    # at the fusion level only the SMs that run blocks move bytes (one block cannot pull HBM's
    # bandwidth), and the all-reduces share them
    busy = np.minimum(blocks * cc, sms_used)
    times = streamed_level_cycles(arch, level, outer_bytes - y.elements * sy, y.elements * sy, busy)
    times[level] = times[level] + network
    cycles = compute
    for time in times:
        cycles = np.maximum(cycles, time)
    energy = streamed_energy(arch, level, [(words_x, sx), (words_w1, s1), (words_w2, s2)], [(y.elements, sy)],
                             macs, flops) + (moved * link.energy_per_byte if link is not None else 0.0)
    score = {"cycles": cycles, "bytes": outer_bytes}.get(objective, energy)
    best = int(np.flatnonzero(fits)[np.lexsort((cc[fits], cycles[fits], score[fits]))[0]])
    reads = [(found.x, float(words_x[best]), sx), (found.w1, float(words_w1[best]), s1),
             (found.w2, float(words_w2[best]), s2)]
    kernel: KernelPrice = streamed_kernel(arch, level, reads, [(b.output, y.elements, sy)], float(macs[best]),
                                          float(flops[best]), float(compute[best]), float(busy[best]))
    tiling = f"Bm{bm[best]} Bn{bn[best]} Bf{bf[best]} s{st[best]}"
    note = (f"{a.name} and {b.name} fused through {a.output_dims[1]}: {a.output} recomputed {col_tiles[best]:.0f}x, "
            f"{found.w1} read {words_w1[best] / w1.elements:.0f}x, {found.w2} {words_w2[best] / w2.elements:.0f}x; "
            f"best of {int(fits.sum())} fitting tilings of {len(bm)}, all priced")
    if cc[best] > 1:
        kernel = with_traffic(kernel, [Traffic(level, a.output, float(moved[best]), float(moved[best]) * link.energy_per_byte,
                                               float(network[best]))])
        tiling += f" cluster{cc[best]}"
        note += (f"; each block held by a cluster of {cc[best]} CTAs over distributed shared memory, its X rows "
                 f"split {cc[best]} ways, {a.output}'s partial chunks all-reduced between the SMs "
                 f"({moved[best]:,.0f} B)")
    choice = MlpChoice(int(bm[best]), int(bn[best]), int(bf[best]), int(st[best]), float(smem[best]),
                       float(regs[best]), int(cc[best]), float(moved[best]))
    return kernel, tiling, note, choice
