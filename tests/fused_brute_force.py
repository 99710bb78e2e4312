"""Brute-force executors of fused loop nests: the ground truth for fusion's kernel prices.

Like `brute_force.py` (whose `simulate` runs one mapped einsum), this module imports nothing
from `mapper`: it walks a fused kernel's loops at small shapes, one tile at a time, and counts
every word that crosses a level boundary. No reuse formula is used: a tile's words are the
clamped box it covers in that step (a ragged tail moves only its valid elements, in producer
and consumer alike), and a count is a sum over the steps.

Counts are `Counts`: {(level, tensor): {"reads", "fills", "updates"}} summed over every
instance, with `macs`, `flops` and `footprint` ({level: peak bytes held by one instance}).
A word loaded from the outermost level (0) into level `f` is read at every level above `f` and
filled into every level below 0 on its way (a pass-through level stages it); a word of a result
is updated at every level above `f` on its way out.

    flash_attention(heads, rows, keys, d, d_v, bi, bj, stages, flops_per_score, bytes_of, f)
    mlp_pair(rows, depth, hidden, cols, bm, bn, bf, bk, stages, flops_per_hidden, bytes_of, f)
    loops_above(nest, f) -> an anchor's loops above the fusion level, with their strides
    tile_visits(loops, tile, sizes, dims) -> the tiles those loops load or complete, in order
    slice_loads(tiles, dims_of_operand, sizes) -> words of an operand loaded with each tile
    energy(counts, levels, bytes_of, energy_per_op) -> pJ (the arch's per-access energies)
"""
from __future__ import annotations

import itertools
from collections import defaultdict

ACCUMULATOR_BYTES = 4            # fp32 scores, accumulators and row state in registers


class Counts:
    def __init__(self):
        self.words = defaultdict(lambda: {"reads": 0, "fills": 0, "updates": 0})
        self.macs = 0
        self.flops = 0
        self.footprint: dict = {}

    def load(self, tensor: str, words: int, f: int) -> None:
        """`words` of an input brought from level 0 down into level f (and read there once by
        the compute below it)."""
        for lv in range(f + 1):
            self.words[lv, tensor]["reads"] += words
            if lv > 0:
                self.words[lv, tensor]["fills"] += words

    def store(self, tensor: str, words: int, f: int) -> None:
        """`words` of a result written from level f out to level 0."""
        for lv in range(f):
            self.words[lv, tensor]["updates"] += words

    def hold(self, level: int, nbytes: float) -> None:
        self.footprint[level] = max(self.footprint.get(level, 0), nbytes)

    def bytes(self, level: int, tensor: str, word_bytes: float) -> float:
        c = self.words.get((level, tensor))
        return 0 if c is None else (c["reads"] + c["fills"] + c["updates"]) * word_bytes


def _tiles(size: int, step: int):
    """(start, valid extent) of each tile of a dim, the last one clamped."""
    return [(start, min(step, size - start)) for start in range(0, size, step)]


def flash_attention(heads, rows, keys, d, d_v, bi, bj, stages, flops_per_score, bytes_of, f) -> Counts:
    """FlashAttention's loop nest: one block per (head, Bi query rows) holding its Q tile at
    level f; it walks the keys in Bj tiles, loading a K and a V tile into a ring of `stages`
    buffers, computes the score tile in registers, updates each row's running max and sum and
    rescales its fp32 O accumulator (d_v + 2 flops per row per key tile), and writes O once.
    `bytes_of`: bytes per word of Q, K, V, O."""
    c = Counts()
    for _head in range(heads):
        for _i0, vi in _tiles(rows, bi):
            c.load("Q", vi * d, f)
            for _j0, vj in _tiles(keys, bj):
                c.load("K", vj * d, f)
                c.load("V", vj * d_v, f)
                c.macs += vi * vj * d + vi * vj * d_v
                c.flops += vi * vj * flops_per_score + vi * (d_v + 2)
            c.store("O", vi * d_v, f)
    # the buffers a block allocates at level f (its tile shapes), and its registers
    c.hold(f, bi * d * bytes_of["Q"] + stages * bj * (d * bytes_of["K"] + d_v * bytes_of["V"]))
    c.hold("registers", (bi * bj + bi * d_v + 2 * bi) * ACCUMULATOR_BYTES)
    return c


def mlp_pair(rows, depth, hidden, cols, bm, bn, bf, bk, stages, flops_per_hidden, bytes_of, f, cluster=1,
             grains=(1, 1, 1)) -> Counts:
    """Two GEMMs through their hidden dim: one block per (Bm rows, Bn output columns) holding
    its X rows whole at level f; it walks the hidden dim in Bf chunks, streaming W1 in Bk x Bf
    slices to compute the H chunk (in registers, where the elementwise ops run), then adds the
    chunk times W2's Bf x Bn slice into its fp32 accumulator, and writes its Y tile once.
    `bytes_of`: bytes per word of X, W1, W2, Y.

    With `cluster` CTAs per block, CTA r holds the X rows' depth slice r (of ceil(depth / c)) and
    streams W1's rows of that slice, computing a partial H chunk; each chunk's partials are
    summed over the cluster (each CTA sends its chunk's c - 1 other slices to their owners, then
    gathers the c - 1 summed slices back: `dsmem` counts the bytes sent), and
    CTA r adds the chunk times its slice of W2's columns into its accumulator.

    MACs run: each MMA's m (rows), n and k rounded up to whole `grains` (the unit's fragment)."""
    c = Counts()
    c.dsmem = 0
    gm, gn, gk = grains

    def up(extent, grain):
        return -(-extent // grain) * grain
    depth_part, cols_part = -(-depth // cluster), -(-bn // cluster)
    for _m0, vm in _tiles(rows, bm):
        for _n0, vn in _tiles(cols, bn):
            for _r0, vr in _tiles(depth, depth_part):      # each CTA its slice of X's depth
                c.load("X", vm * vr, f)
            for _f0, vf in _tiles(hidden, bf):
                for _r0, vr in _tiles(depth, depth_part):
                    for _k0, vk in _tiles(vr, bk):
                        c.load("W1", vk * vf, f)
                        c.macs += up(vm, gm) * up(vf, gn) * up(vk, gk)
                if cluster > 1:       # reduce-scatter, then all-gather: each CTA sends c - 1 of c slices twice
                    c.dsmem += 2 * cluster * (cluster - 1) * (vm * vf / cluster) * ACCUMULATOR_BYTES
                c.flops += vm * vf * flops_per_hidden
                c.load("W2", vf * vn, f)
                for _c0, share in _tiles(vn, cols_part):    # each CTA its slice of the block's columns
                    c.macs += up(vm, gm) * up(share, gn) * up(vf, gk)
            c.store("Y", vm * vn, f)
    c.hold(f, bm * depth_part * bytes_of["X"]
           + stages * (min(bk, depth_part) * bf * bytes_of["W1"] + bf * cols_part * bytes_of["W2"]))
    c.hold("registers", (bm * bf + bm * cols_part) * ACCUMULATOR_BYTES)
    return c


def loops_above(nest, f: int):
    """The loops of the levels above `f` of a plain nest (`brute_force.simulate`'s format),
    outermost first, as (dim, bound, stride, spatial): a loop's stride is the product of the
    bounds of the later loops of its dim (a level's temporal loops, then its spatial ones)."""
    raw = [(lv, dim, bound, kind == "spatial") for lv, spec in enumerate(nest) for kind in ("temporal", "spatial")
           for dim, bound, *_ in spec.get(kind, ())]
    out = []
    for position, (lv, dim, bound, spatial) in enumerate(raw):
        stride = 1
        for _later_lv, later_dim, later_bound, _ in raw[position + 1:]:
            if later_dim == dim:
                stride *= later_bound
        if lv < f:
            out.append((dim, bound, stride, spatial))
    return out


def tile_visits(loops, tile: dict, sizes: dict, dims):
    """The tiles over `dims` that each instance of a level visits (an instance: one setting of
    the spatial loops above it), instance by instance, each in the order of its time steps
    (the temporal loops above), one visit per run of steps that keep the tile: an input's tile
    is loaded at each visit, an output's tile completes at the end of each. Each is
    {dim: (start, valid extent)}, clamped to `sizes` (a tile wholly past the end is no tile: no
    kernel launches it)."""
    space = [loop for loop in loops if loop[3]]
    time = [loop for loop in loops if not loop[3]]
    visits = []
    for where in itertools.product(*[range(bound) for _dim, bound, _stride, _ in space]):
        previous = None
        for step in itertools.product(*[range(bound) for _dim, bound, _stride, _ in time]):
            base = dict.fromkeys(dims, 0)
            for (dim, _bound, stride, _), index in list(zip(space, where)) + list(zip(time, step)):
                if dim in base:
                    base[dim] += index * stride
            key = tuple(base[d] for d in dims)
            if key != previous:
                visits.append(key)
                previous = key
    return [{d: (start, min(tile[d], sizes[d] - start)) for d, start in zip(dims, key)}
            for key in visits if all(start < sizes[d] for d, start in zip(dims, key))]


def slice_loads(tiles, dims, sizes: dict) -> int:
    """Words of an operand indexed by `dims` loaded once with each of `tiles`: its slice of
    the tile, clamped (a dim the tiles do not cover is read whole)."""
    total = 0
    for t in tiles:
        words = 1
        for d in dims:
            words *= t[d][1] if d in t else sizes[d]
        total += words
    return total


def energy(counts: Counts, levels, bytes_of: dict, energy_per_op: float) -> float:
    """pJ of the counted words with each level's figures (`levels[lv]`: block_size and
    {"read", "write", "update"} energies per access, and per byte), a fill being a write; each
    level's count is one instance's (level 0, or a level whose words one instance moves), in
    vectors of block_size words rounded up; plus every MAC and flop at `energy_per_op`."""
    total = (counts.macs + counts.flops) * energy_per_op
    for (lv, tensor), c in counts.words.items():
        level = levels[lv]
        for key, kind in (("reads", "read"), ("fills", "write"), ("updates", "update")):
            words = c[key]
            total += -(-words // level["block_size"]) * level[kind] + words * bytes_of[tensor] * level["byte_" + kind]
    return total
