"""Every fused kernel's price against a brute-force execution of its loop nest
(`fused_brute_force.py`, and `brute_force.simulate` for an anchor's own nest): the words each
tensor moves at each level boundary, the energy those words and the MACs/flops cost with the
arch's own figures, and what one block holds at the fusion level, all exactly, at small
shapes with ragged tails."""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import pytest

from mapper.fusion.buffered import buffered_price
from mapper.fusion.group_price import NORMALISE_FLOPS, GroupPrice
from mapper.fusion.groups import Grouper
from mapper.fusion.kernels import OpSearches
from mapper.fusion.attention import flash_price, match as flash_match
from mapper.fusion.mlp import BK, match as mlp_match, mlp_price
from mapper.load import arch_from_dict, opgraph_from_dict
from mapper.search import SearchContext
from mapper.units import Where

import fused_brute_force as brute
from brute_force import simulate
from test_brute_force_agreement import as_plain
from test_fusion import ATTENTION, MLP, MM, gelu, small_gpu, study


def gpu(smem, dram_pj=1.0):
    """`small_gpu` with no multicast from DRAM, as on a GPU (each SM fetches its own copy: what
    a slice loaded with every tile an SM loads or completes moves)."""
    arch = small_gpu(smem, dram_pj)
    return dataclasses.replace(arch, levels=(dataclasses.replace(arch.levels[0], multicast=False),) + arch.levels[1:])


def gpu_with_l2(smem, dram_pj=20.0):
    """DRAM / a 16 KiB L2 / per-SM buffer (2 SMs) / registers, no multicast above the SMs: a
    slice moving with A's tiles is re-read from DRAM only when A's L2 tile is."""
    level = {"block_size": 1, "max_stages": 2, "energy": {"read": 1.0, "write": 2.0, "update": 3.0}}
    return arch_from_dict({
        "name": "small-gpu-l2", "clock": "1 GHz",
        "levels": [{"name": "DRAM", "instances": 1, "latency": 10, "multicast": False, **level,
                    "energy": {k: v * dram_pj for k, v in level["energy"].items()}},
                   {"name": "L2", "instances": 1, "capacity": "16 KiB", "multicast": False, **level},
                   {"name": "SMEM", "instances": 2, "mesh": [2, 1], "capacity": smem, **level},
                   {"name": "RF", "instances": 4, "mesh": [4, 1], "capacity": "1 KiB", **level}],
        "compute": {"instances": 4, "mesh": [4, 1], "macs_per_cycle": 2, "energy": 1.0,
                    "native_shape": {"m": 2, "n": 2, "k": 2}},
        "gpu": {"sms": 2, "smem_per_sm": smem, "registers_per_sm": 4096}}, Where("<test>"))


def graph_of(sizes, ops, dtype="bf16"):
    return opgraph_from_dict({"name": "t", "sizes": sizes, "dtype": dtype, "ops": ops}, Where("<test>"))


def level_figures(arch):
    """Each level's energy figures as plain numbers (the brute force knows nothing of `mapper`)."""
    return [{"block_size": lv.block_size, "read": lv.energy_read, "write": lv.energy_write,
             "update": lv.energy_update, "byte_read": lv.byte_energy_read, "byte_write": lv.byte_energy_write,
             "byte_update": lv.byte_energy_update} for lv in arch.levels]


def assert_same_traffic(kernel, truth, names, bytes_of, f):
    """Per level at and above the fusion level, per tensor: the kernel's bytes are the counted
    words' (`names`: the brute force's tensor name -> the graph's)."""
    for lv in range(f + 1):
        for short, name in names.items():
            assert kernel.tensor_bytes(name, lv) == pytest.approx(truth.bytes(lv, short, bytes_of[short]), rel=1e-12), \
                (lv, name)
    assert {t.tensor for t in kernel.traffic} == set(names.values())
    assert all(t.level <= f for t in kernel.traffic)


def assert_streamed_kernel_is_executed(arch, kernel, choice, truth, names, bytes_of, f):
    """A streamed kernel (attention, the MLP pair) against its executed loop nest: traffic per
    level and tensor, energy, and the shared-memory and register bytes its choice holds."""
    assert_same_traffic(kernel, truth, names, bytes_of, f)
    want = brute.energy(truth, level_figures(arch), bytes_of, arch.compute.energy_per_mac)
    assert kernel.energy_pj == pytest.approx(want, rel=1e-12)
    assert choice.smem_bytes == truth.footprint[f] <= arch.levels[f].capacity
    assert choice.register_bytes == truth.footprint["registers"]


FLASH_CASES = [  # (sizes, shared memory, objective): ragged query and key tiles, tight and roomy buffers
    ({"g": 2, "i": 20, "j": 50, "d": 8}, "8 KiB", "energy"),
    ({"g": 2, "i": 20, "j": 50, "d": 8}, "8 KiB", "cycles"),
    ({"g": 1, "i": 40, "j": 70, "d": 16}, "4 KiB", "bytes"),
    ({"g": 3, "i": 16, "j": 33, "d": 4}, "16 KiB", "energy"),
]


@pytest.mark.parametrize("sizes, smem, objective", FLASH_CASES)
def test_flash_attention_matches_its_loop_nest_executed(sizes, smem, objective):
    arch = small_gpu(smem, dram_pj=20.0)
    graph = graph_of(sizes, ATTENTION)
    found = flash_match(graph, (0, 1, 2, 3))
    f = 1
    kernel, choice = flash_price(arch, graph, found, f, objective)
    per_score = sum(graph.ops[i].flops_per_element for i in (1, 2))
    bytes_of = {name: graph.tensor(name).bits / 8 for name in "QKVO"}
    truth = brute.flash_attention(sizes["g"], sizes["i"], sizes["j"], sizes["d"], sizes["d"], choice.block_i,
                                  choice.block_j, choice.stages, per_score, bytes_of, f)
    assert_streamed_kernel_is_executed(arch, kernel, choice, truth, {n: n for n in "QKVO"}, bytes_of, f)


MLP_CASES = [  # (sizes, shared memory, objective): ragged rows, hidden chunks and W1 slices
    ({"m": 20, "e": 16, "f": 72, "n": 24}, "16 KiB", "bytes"),
    ({"m": 20, "e": 80, "f": 40, "n": 24}, "16 KiB", "energy"),
    ({"m": 40, "e": 24, "f": 100, "n": 8}, "8 KiB", "cycles"),
]


@pytest.mark.parametrize("sizes, smem, objective", MLP_CASES)
def test_the_mlp_pair_matches_its_loop_nest_executed(sizes, smem, objective):
    arch = small_gpu(smem, dram_pj=20.0)
    graph = graph_of(sizes, MLP)
    found = mlp_match(graph, (0, 1, 2))
    f = 1
    kernel, _tiling, _note, choice = mlp_price(arch, graph, found, f, objective)
    per_hidden = graph.ops[1].flops_per_element
    names = {"X": "X", "W1": "W1", "W2": "W2", "Y": "Y"}
    bytes_of = {name: graph.tensor(name).bits / 8 for name in names}
    truth = brute.mlp_pair(sizes["m"], sizes["e"], sizes["f"], sizes["n"], choice.block_m, choice.block_n,
                           choice.block_f, BK, choice.stages, per_hidden, bytes_of, f)
    assert_streamed_kernel_is_executed(arch, kernel, choice, truth, names, bytes_of, f)


def test_the_mlp_pair_runs_whole_fragments_of_its_mma():
    """On a unit whose MMA is m16 n8 k16 (read per instruction, as a warpgroup's): 20 rows pad
    to 32, 72 hidden and 24 columns to whole fragments, as written (rows play m, as every kernel
    of a fusion study). The MACs run, and so the energy, against the nest executed."""
    arch = small_gpu("16 KiB", dram_pj=20.0)
    compute = dataclasses.replace(arch.compute, native_shape=(("m", 16), ("n", 8), ("k", 16)),
                                  operand_reads="per_instruction")
    arch = dataclasses.replace(arch, compute=compute)
    sizes = {"m": 20, "e": 80, "f": 72, "n": 24}
    graph = graph_of(sizes, MLP)
    kernel, _, _, choice = mlp_price(arch, graph, mlp_match(graph, (0, 1, 2)), 1, "energy")
    names = {"X": "X", "W1": "W1", "W2": "W2", "Y": "Y"}
    bytes_of = {name: graph.tensor(name).bits / 8 for name in names}
    truth = brute.mlp_pair(20, 80, 72, 24, choice.block_m, choice.block_n, choice.block_f, BK, choice.stages,
                           graph.ops[1].flops_per_element, bytes_of, 1, grains=(16, 8, 16))
    assert truth.macs > 20 * 80 * 72 * -(-24 // choice.block_n) + 20 * 72 * 24      # padding runs too
    assert_streamed_kernel_is_executed(arch, kernel, choice, truth, names, bytes_of, 1)


def clustered_gpu(smem, dsmem=True):
    """`small_gpu` whose 2 SMs form one GPC running clusters of 2 CTAs, with distributed shared
    memory (8 B/cycle per SM, 20 cycles, 0.5 pJ/B) or without."""
    arch = small_gpu(smem, dram_pj=20.0)
    figures = {"bandwidth": "8 B/cycle", "latency": 20, "energy_per_byte": "0.5 pJ"} if dsmem else None
    clusters = {"max_ctas": 2, "gpc_sms": [2], **({"dsmem": figures} if figures else {})}
    from mapper.load.arch import _clusters
    dram = dataclasses.replace(arch.levels[0], clusters=_clusters(clusters, Where("<test>"), arch.clock_hz))
    return dataclasses.replace(arch, levels=(dram,) + arch.levels[1:])


MLP_SIZES = {"m": 16, "e": 128, "f": 64, "n": 16}     # X's 16 rows of 128: 4 KiB, 6.5 KiB with W1 and W2 staged


@pytest.mark.parametrize("objective", ["energy", "cycles", "bytes"])
def test_an_mlp_pair_too_deep_for_one_sm_fits_a_cluster_over_distributed_shared_memory(objective):
    """6 KiB of shared memory per SM: no block of the grid fits one SM (16 X rows of 128 alone
    take 4 KiB, the smallest W1 and W2 stages 2.5 KiB more), so without distributed shared
    memory the pair is refused; a cluster of 2 holds each block, half of X's depth in each SM,
    and all-reduces each H chunk between them. Everything against the loop nest executed: the
    words per level, the bytes between the SMs, the energy (theirs at 0.5 pJ/B), what each CTA
    holds."""
    graph = graph_of(MLP_SIZES, MLP)
    found = mlp_match(graph, (0, 1, 2))
    f = 1
    assert mlp_price(clustered_gpu("6 KiB", dsmem=False), graph, found, f, objective) is None
    arch = clustered_gpu("6 KiB")
    kernel, tiling, note, choice = mlp_price(arch, graph, found, f, objective)
    assert choice.cluster == 2 and tiling.endswith(" cluster2") and "cluster of 2 CTAs" in note
    names = {"X": "X", "W1": "W1", "W2": "W2", "Y": "Y"}
    bytes_of = {name: graph.tensor(name).bits / 8 for name in names}
    truth = brute.mlp_pair(16, 128, 64, 16, choice.block_m, choice.block_n, choice.block_f, BK, choice.stages,
                           graph.ops[1].flops_per_element, bytes_of, f, cluster=2)
    intermediate = graph.ops[0].output
    assert choice.dsmem_bytes == truth.dsmem == kernel.tensor_bytes(intermediate, f) > 0
    # by hand: every chunk of 16 rows x Bf, all-reduced over 2 CTAs: 2 x (2 - 1) x 16 x 64 x 4 B per column tile
    assert truth.dsmem == 2 * 1 * 16 * 64 * 4 * -(-16 // choice.block_n)
    without_link = dataclasses.replace(kernel, traffic=tuple(t for t in kernel.traffic if t.tensor != intermediate))
    assert_same_traffic(without_link, truth, names, bytes_of, f)
    want = brute.energy(truth, level_figures(arch), bytes_of, arch.compute.energy_per_mac) + 0.5 * truth.dsmem
    assert kernel.energy_pj == pytest.approx(want, rel=1e-12)
    assert choice.smem_bytes == truth.footprint[f] <= arch.levels[f].capacity
    assert choice.register_bytes == truth.footprint["registers"]


def test_distributed_shared_memory_is_priced_by_its_bandwidth_and_latency():
    """The same pair on 6 KiB: the all-reduce's bytes take the SMs' 8 B/cycle each, and one
    stage (no double-buffered chunk) waits its 20-cycle latency twice per chunk."""
    graph = graph_of(MLP_SIZES, MLP)
    kernel, _, _, choice = mlp_price(clustered_gpu("6 KiB"), graph, mlp_match(graph, (0, 1, 2)), 1, "cycles")
    [link] = [t for t in kernel.traffic if t.tensor == graph.ops[0].output]
    assert choice.stages == 1           # two stages do not fit 6 KiB: nothing hides the all-reduce's wait
    blocks = -(-16 // choice.block_m) * -(-16 // choice.block_n)
    assert blocks == 1                  # one wave of one cluster: each chunk waits twice
    assert link.cycles == choice.dsmem_bytes / (2 * 8) + -(-64 // choice.block_f) * 2 * 20


# ---------------------------------------------------------------------------------------------
# groups around an einsum: the anchor's own nest executed, and the tiles it loads and completes


def own_counts(arch, graph, i, mapping):
    """Op i's own loop nest (`mapping`) executed by `brute_force.simulate`: {(level, tensor):
    {reads, fills, updates}} over every instance; at the levels a GPU loads and stores masked
    (above the per-SM one) only the valid words of ragged tiles move; also the MACs run."""
    wl = graph.ops[i].workload
    problem, nest, fanout = as_plain(arch, wl, mapping)
    extents = [math.prod(b for lm in mapping.levels for d2, b in lm.temporal if d2 == d)
               * math.prod(b for lm in mapping.levels for d2, b, _ in lm.spatial if d2 == d)
               for d in range(len(wl.dims))]
    problem["dims"] = dict(zip(wl.dims, extents))
    valid = {d: s for d, s, e in zip(wl.dims, wl.sizes, extents) if e != s}
    truth = simulate(problem, nest, fanout, valid)
    masked = arch.per_sm_levels()[0] if arch.tails == "masked" and arch.per_sm_levels() else 0
    out = {}
    for lv, level in enumerate(arch.levels):
        found = truth["levels"][level.name]
        for t, c in found["tensors"].items():
            out[lv, t] = dict(found["valid"][t]) if lv < masked else \
                {k: v * found["instances"] for k, v in c.items()}
    return out, truth["macs"], nest


def fused_anchor_counts(arch, graph, grouper, fused, f):
    """The epilogue group's loop nest executed: the anchor's nest as it runs (its output never
    leaving level f), each epilogue op's own inner loops below f on the tile there (its reads
    of the intermediate and of its operands from f stay, their fills into f go), and each
    epilogue operand's slice moving with the output tiles the anchor completes at every level
    down to f (clamped). Returns (counts, MACs run, the anchor's nest)."""
    ops, a = fused.ops, fused.anchor.op
    inside = {graph.ops[i].output for i in ops if any(j in ops for j in graph.consumers(graph.ops[i].output))}
    counts = defaultdict(lambda: {"reads": 0, "fills": 0, "updates": 0})
    mine, macs, nest = own_counts(arch, graph, a, fused.anchor.mapping)
    for (lv, t), c in mine.items():
        if not (t == graph.ops[a].output and lv < f):
            for k in c:
                counts[lv, t][k] += c[k]
    wl = graph.ops[a].workload
    sizes = dict(zip(wl.dims, wl.sizes))
    out_dims = graph.ops[a].output_dims
    for j in ops:
        if j == a:
            continue
        theirs, _, _ = own_counts(arch, graph, j, grouper.searches.free(j).mapping)
        operands = [t for t in graph.ops[j].inputs if t not in inside]
        for (lv, t), c in theirs.items():
            if t == graph.ops[j].output and t in inside and lv < f:
                continue
            if t in graph.ops[j].inputs:
                if lv < f:
                    continue
                c = {**c, "fills": 0} if lv == f else c
            for k in c:
                counts[lv, t][k] += c[k]
        # an operand's slice moves with each output tile: filled into every level holding the
        # output as the tile there completes, read from the level above (each SM its own copy)
        assert all(graph.ops[a].output in nest[lv]["keep"] for lv in range(f + 1))
        for lv in range(1, f + 1):
            here = {d: math.prod(b for dim, b in fused_loops(nest, lv, below=True) if dim == d) for d in wl.dims}
            completed = brute.tile_visits(brute.loops_above(nest, lv), here, sizes, out_dims)
            for t in operands:
                words = brute.slice_loads(completed, graph.ops[j].dims_of(t), sizes)
                counts[lv, t]["fills"] += words
                counts[lv - 1, t]["reads"] += words
    return counts, macs, nest


def fused_loops(nest, f, below):
    """(dim, bound) of every loop at the levels at or below `f` (below=True) or above it."""
    return [(dim, bound) for lv, spec in enumerate(nest) if (lv >= f) == below
            for dim, bound, *_ in list(spec.get("temporal", ())) + list(spec.get("spatial", ()))]


def word_bytes(graph, **more):
    return {**{t.name: t.bits / 8 for t in graph.tensors}, **more}


def assert_counts_priced(arch, bytes_of, kernel, counts):
    """The kernel's bytes per level and tensor are the executed counts', at every level."""
    tensors = {t for _, t in counts} | {t.tensor for t in kernel.traffic}
    for lv in range(len(arch.levels)):
        for t in tensors:
            c = counts.get((lv, t), {"reads": 0, "fills": 0, "updates": 0})
            want = sum(c.values()) * bytes_of[t]
            assert kernel.tensor_bytes(t, lv) == pytest.approx(want, rel=1e-12, abs=1e-9), (arch.levels[lv].name, t)


def executed_energy(arch, bytes_of, counts, compute_pj):
    """pJ of the executed counts with the arch's figures (every level here has one-word
    vectors, so an instance's count and the sum over instances price alike)."""
    assert all(lv.block_size == 1 for lv in arch.levels)
    box = brute.Counts()
    box.words.update(counts)
    return brute.energy(box, level_figures(arch), bytes_of, 0.0) + compute_pj


BIAS = {"name": "bias", "kind": "bias", "inputs": ["Z[m,n]", "c[n]"], "output": "Y[m,n]"}
RESIDUAL = {"name": "res", "kind": "add", "inputs": ["Z[m,n]", "R[m,n]"], "output": "Y[m,n]"}
EPILOGUE_CASES = [  # (sizes, ops, shared memory, an L2): ragged tiles, a vector and a tile operand
    ({"m": 5, "k": 3, "n": 7}, [MM, BIAS, gelu("Y")], "4 KiB", False),
    ({"m": 16, "k": 8, "n": 24}, [MM, RESIDUAL], "4 KiB", False),
    ({"m": 12, "k": 6, "n": 10}, [MM, BIAS], "2 KiB", False),
    ({"g": 2, "i": 8, "j": 16, "d": 4}, ATTENTION[:3], "16 KiB", False),  # a softmax, its row held whole
    ({"m": 64, "k": 8, "n": 20}, [MM, BIAS, gelu("Y")], "1 KiB", True),
    ({"m": 24, "k": 8, "n": 32}, [MM, RESIDUAL], "2 KiB", True),
]


@pytest.mark.parametrize("sizes, ops, smem, l2", EPILOGUE_CASES)
def test_a_fused_epilogue_matches_its_loop_nest_executed(sizes, ops, smem, l2):
    arch = gpu_with_l2(smem, dram_pj=1.0) if l2 else gpu(smem)
    graph, grouper = study(arch, sizes, ops, seconds=1.0)
    fused = grouper.price(tuple(range(len(ops))))
    assert isinstance(fused, GroupPrice) and not fused.spilled
    f = grouper.f
    counts, macs, nest = fused_anchor_counts(arch, graph, grouper, fused, f)
    (kernel,) = fused.kernels
    assert_counts_priced(arch, word_bytes(graph), kernel, counts)
    flops = sum(graph.ops[j].flops for j in fused.ops)
    others = sum(own_counts(arch, graph, j, grouper.searches.free(j).mapping)[1] for j in fused.ops[1:])
    compute = (macs + others + flops) * arch.compute.energy_per_mac
    assert kernel.energy_pj == pytest.approx(executed_energy(arch, word_bytes(graph), counts, compute), rel=1e-12)
    held = anchor_tiles_bytes(arch, graph, fused, nest, f) + epilogue_slices_bytes(graph, fused, nest, f)
    assert fused.working_bytes == pytest.approx(held, rel=1e-12) and held <= arch.levels[f].capacity


def anchor_tiles_bytes(arch, graph, fused, nest, f):
    """Bytes of the anchor's tiles kept at level f (the boxes its loops at and below f cover,
    padded tiles whole), times the level's stages."""
    wl = graph.ops[fused.anchor.op].workload
    extent = {d: math.prod(b for dim, b in fused_loops(nest, f, below=True) if dim == d) for d in wl.dims}
    total = 0.0
    for t in wl.tensors:
        if t.name in nest[f]["keep"]:
            box = math.prod(sum(c * (extent[wl.dims[d]] - 1) for d, c in axis) + 1 for axis in t.axes)
            total += box * t.bytes_per_word
    return total * fused.anchor.mapping.levels[f].stages


def epilogue_slices_bytes(graph, fused, nest, f):
    """The largest slice of each epilogue operand loaded with an output tile (clamped)."""
    a = fused.anchor.op
    wl = graph.ops[a].workload
    sizes = dict(zip(wl.dims, wl.sizes))
    tile = {d: math.prod(b for dim, b in fused_loops(nest, f, below=True) if dim == d) for d in wl.dims}
    completed = brute.tile_visits(brute.loops_above(nest, f), tile, sizes, graph.ops[a].output_dims)
    produced = {graph.ops[i].output for i in fused.ops}
    total = 0.0
    for j in fused.ops:
        for t in graph.ops[j].inputs if j != a else ():
            if t not in produced:
                dims = graph.ops[j].dims_of(t)
                total += max(math.prod(v[d][1] for d in dims) for v in completed) * graph.tensor(t).bits / 8
    return total


def fused_prologue_counts(arch, graph, grouper, fused, f, stats: bool):
    """The prologue group's loop nest executed: the anchor's nest as it runs, loading X where
    it loaded A (the prologue applied on the way in: A never written out) and, with every A
    tile it loads into f, the slice of each other operand of the prologue (a norm's gamma; a
    norm streamed without its row: the 2 fp32 stats words of each row of the tile), from
    level 0 into f; below f the prologue's own inner loops on the tile (its fills into f go,
    the slices' loads replace them; a streamed norm's inner loops run in its pre-pass). Returns (counts, A tiles loaded, the anchor's nest)."""
    a = fused.anchor.op
    (p,) = [i for i in fused.ops if i != a]
    A = graph.ops[p].output
    X = graph.ops[p].inputs[0]
    counts = defaultdict(lambda: {"reads": 0, "fills": 0, "updates": 0})
    mine, macs, nest = own_counts(arch, graph, a, fused.anchor.mapping)
    for (lv, t), c in mine.items():
        name = X if t == A and lv < f else t
        for k in c:
            counts[lv, name][k] += c[k]
    wl = graph.ops[a].workload
    sizes = dict(zip(wl.dims, wl.sizes))
    tile = {d: math.prod(b for dim, b in fused_loops(nest, f, below=True) if dim == d) for d in wl.dims}
    a_dims = graph.ops[a].dims_of(A)
    loaded = brute.tile_visits(brute.loops_above(nest, f), tile, sizes, a_dims)
    # the prologue's dims named as the anchor names them (its output's axes are A's)
    as_anchor = dict(zip(graph.ops[p].output_dims, a_dims))
    extras = [t for t in graph.ops[p].inputs[1:]]
    theirs, _, _ = own_counts(arch, graph, p, grouper.searches.free(p).mapping)
    for (lv, t), c in theirs.items() if not stats else ():    # streamed: the pre-pass runs them
        if lv < f and t in (A, X, *extras):
            continue
        if lv == f and t in (X, *extras):
            c = {**c, "fills": 0}
        for k in c:
            counts[lv, t][k] += c[k]
    slices = [(t, [as_anchor[d] for d in graph.ops[p].dims_of(t)], 1) for t in extras]
    if stats:
        row = as_anchor[graph.ops[p].reduced_dim]
        slices = [(t, dims, 1) for t, dims, _ in slices] + [("stats", [d for d in a_dims if d != row], 2)]
    # a slice moves with each tile of A: filled into every level with it, read from the level
    # above (each instance its own copy: no multicast above the SMs)
    assert all(A in nest[lv]["keep"] for lv in range(f + 1))
    for lv in range(1, f + 1):
        here = {d: math.prod(b for dim, b in fused_loops(nest, lv, below=True) if dim == d) for d in wl.dims}
        visits = brute.tile_visits(brute.loops_above(nest, lv), here, sizes, a_dims)
        for t, dims, per in slices:
            words = per * brute.slice_loads(visits, dims, sizes)
            counts[lv, t]["fills"] += words
            counts[lv - 1, t]["reads"] += words
    return counts, loaded, nest


SHIFT = {"name": "shift", "kind": "bias", "inputs": ["X[m,k]", "s[k]"], "output": "A[m,k]"}
NORM = {"name": "norm", "kind": "layernorm", "inputs": ["X[m,k]", "g[k]"], "output": "A[m,k]", "dim": "k"}
PROLOGUE_CASES = [  # (sizes, prologue, shared memory, a norm streamed with its stats pre-pass, an L2)
    ({"m": 32, "k": 16, "n": 24}, SHIFT, "4 KiB", False, False),
    ({"m": 32, "k": 32, "n": 16}, NORM, "16 KiB", False, False),
    ({"m": 16, "k": 256, "n": 16}, NORM, "2 KiB", True, False),
    ({"m": 32, "k": 32, "n": 16}, NORM, "4 KiB", False, True),
    ({"m": 16, "k": 256, "n": 16}, NORM, "2 KiB", True, True),
]


@pytest.mark.parametrize("sizes, prologue, smem, stats, l2", PROLOGUE_CASES)
def test_a_fused_prologue_matches_its_loop_nest_executed(sizes, prologue, smem, stats, l2):
    arch = gpu_with_l2(smem) if l2 else gpu(smem, dram_pj=20.0)
    graph, grouper = study(arch, sizes, [prologue, MM], seconds=1.0)
    fused = grouper.price((0, 1))
    assert isinstance(fused, GroupPrice) and not fused.spilled
    assert len(fused.kernels) == (2 if stats else 1)
    f = grouper.f
    counts, loaded, nest = fused_prologue_counts(arch, graph, grouper, fused, f, stats)
    kernel = fused.kernels[-1]
    bytes_of = word_bytes(graph, stats=4.0)
    assert_counts_priced(arch, bytes_of, kernel, counts)
    # the prologue's math on every element of every tile loaded (a streamed norm: normalising
    # with known stats, 2 flops), besides its own inner loops once (held whole) and the anchor
    p = graph.ops[0]
    per_element = NORMALISE_FLOPS if stats else p.flops / graph.tensor("A").elements
    applied = per_element * sum(math.prod(v[1] for v in tile.values()) for tile in loaded)
    own = 0 if stats else own_counts(arch, graph, 0, grouper.searches.free(0).mapping)[1]
    anchor_macs = own_counts(arch, graph, 1, fused.anchor.mapping)[1]
    compute = (anchor_macs + own + applied) * arch.compute.energy_per_mac
    assert kernel.energy_pj == pytest.approx(executed_energy(arch, bytes_of, counts, compute), rel=1e-12)
    a_dims = graph.ops[1].dims_of("A")
    row = "k" if p.family == "reduction" else None
    slices = [(["k"], 1, 2.0)] + ([([d for d in a_dims if d != row], 2, 4.0)] if stats else [])
    held = anchor_tiles_bytes(arch, graph, fused, nest, f) + sum(
        per * nbytes * max(math.prod(tile[d][1] for d in dims) for tile in loaded) for dims, per, nbytes in slices)
    assert fused.working_bytes == pytest.approx(held, rel=1e-12) and held <= arch.levels[f].capacity
    if stats:      # the pre-pass: X read as the norm's own nest reads it, 2 fp32 words per row out
        own, _, _ = own_counts(arch, graph, 0, grouper.searches.free(0).mapping)
        pre = fused.kernels[0]
        assert pre.tensor_bytes("X", 0) == sum(own[0, "X"].values()) * 2
        assert pre.tensor_bytes("stats", 0) == sizes["m"] * 2 * 4
        assert {t.tensor for t in pre.traffic if t.level < f} == {"X", "stats"}


# ---------------------------------------------------------------------------------------------
# einsums fused through an accelerator's buffer: the fused loops over the slices, each op's nest
# on its slice inside them


def small_accelerator():
    """DRAM / one 512 B buffer / 4 PEs with 4-word vectors above the PEs (so a count's
    rounding shows)."""
    level = {"block_size": 4, "max_stages": 1, "energy": {"read": 4.0, "write": 6.0, "update": 7.0}}
    return arch_from_dict({
        "name": "small-accelerator", "clock": "1 GHz",
        "levels": [{"name": "DRAM", "instances": 1, **{**level, "energy": {"read": 50.0, "write": 60.0, "update": 70.0}}},
                   {"name": "Buffer", "instances": 1, "capacity": "512 B", **level},
                   {"name": "RF", "instances": 4, "mesh": [4, 1], "capacity": "64 B", "block_size": 1,
                    "energy": {"read": 0.5, "write": 0.5, "update": 0.5}}],
        "compute": {"instances": 4, "mesh": [4, 1], "macs_per_cycle": 1, "energy": 1.0}}, Where("<test>"))


def sliced_counts(arch, graph, member):
    """Op `member.op`'s nest on its slice executed: {(level, tensor): per-instance counts},
    the instances of each level and the MACs."""
    wl = dataclasses.replace(graph.ops[member.op].workload, sizes=member.sizes)
    truth = simulate(*as_plain(arch, wl, member.mapping))
    return {(lv, t): (c, truth["levels"][level.name]["instances"]) for lv, level in enumerate(arch.levels)
            for t, c in truth["levels"][level.name]["tensors"].items()}, truth["macs"]


TWO_GEMMS = [{"name": "mm1", "einsum": "Y[m,n] += X[m,k] * W1[k,n]"},
             {"name": "mm2", "einsum": "Z[m,j] += Y[m,n] * W2[n,j]"}]
BUFFERED_CASES = [  # two GEMMs through Y (odd slices: counts no multiple of the vector); with a
    # ReLU between them (read where mm1 completes Y)
    ({"m": 32, "k": 4, "n": 16, "j": 4}, TWO_GEMMS),
    ({"m": 45, "k": 3, "n": 6, "j": 3}, TWO_GEMMS),
    ({"m": 32, "k": 4, "n": 12, "j": 4}, [{"name": "mm1", "einsum": "Y[m,n] += X[m,k] * W1[k,n]"},
                                          {"name": "relu", "kind": "relu", "inputs": ["Y[m,n]"], "output": "R[m,n]"},
                                          {"name": "mm2", "einsum": "Z[m,j] += R[m,n] * W2[n,j]"}]),
]


@pytest.mark.parametrize("sizes, ops", BUFFERED_CASES)
def test_a_group_fused_through_a_buffer_matches_its_loop_nest_executed(sizes, ops):
    """The fused loops run every op's nest on its slice, once per iteration; an intermediate
    never goes above the level it is held at (its producer's writes out and its consumers'
    reads and fills there are no traffic); every other count is the slice nests' (energy: each
    instance's count of each kind in 4-word vectors, rounded up)."""
    arch = small_accelerator()
    graph = opgraph_from_dict({"name": "t", "sizes": sizes, "dtype": "int8", "ops": ops}, Where("<test>"))
    searches = OpSearches(arch, graph, SearchContext(time_limit=60.0, max_evaluations=200_000), 1.0, 1.0)
    grouper = Grouper(arch, graph, searches, "energy")
    group = tuple(range(len(ops)))
    fused = grouper.price(group)
    assert isinstance(fused, GroupPrice) and fused.members and fused.iterations > 1
    f = grouper.f
    found = buffered_price(arch, graph, searches, group, lambda t: False, grouper.slice_plan(group))
    held_at = {t: f + 1 if t in found.epilogues else f for t in fused.fused}
    producer = {graph.ops[i].output: i for i in group}
    figures = level_figures(arch)
    want_bytes, want_energy, macs = defaultdict(float), 0.0, 0
    for member in fused.members:
        counts, member_macs = sliced_counts(arch, graph, member)
        macs += fused.iterations * member_macs
        for (lv, t), (c, instances) in counts.items():
            at = held_at.get(t)
            if at is not None and lv < at:
                continue                             # the intermediate never goes above its level
            if at is not None and lv == at and producer[t] != member.op:
                c = {**c, "fills": 0}                # nor is it filled there again for its reader
            level = figures[lv]
            want_bytes[lv, t] += fused.iterations * instances * sum(c.values()) * graph.tensor(t).bits / 8
            want_energy += fused.iterations * instances * sum(
                -(-c[key] // level["block_size"]) * level[kind] for key, kind in
                (("reads", "read"), ("fills", "write"), ("updates", "update")))
    (kernel,) = fused.kernels
    for (lv, t), b in want_bytes.items():
        assert kernel.tensor_bytes(t, lv) == pytest.approx(b, rel=1e-12, abs=1e-9), (lv, t)
    assert {(t.level, t.tensor) for t in kernel.traffic if t.bytes} <= set(want_bytes)
    assert sum(t.energy_pj for t in kernel.traffic) == pytest.approx(want_energy, rel=1e-12)
    leak = sum(lc.leak_pj for m in fused.members for lc in m.evaluation.levels) * fused.iterations
    flops = sum(graph.ops[i].flops for i in group)
    assert kernel.compute_energy_pj - leak == pytest.approx((macs + flops) * arch.compute.energy_per_mac, rel=1e-12)
    for member in fused.members:              # each slice's tiles beside the live intermediates fit
        wl = dataclasses.replace(graph.ops[member.op].workload, sizes=member.sizes)
        nest = as_plain(arch, wl, member.mapping)[1]
        extent = {d: math.prod(b for dim, b in fused_loops(nest, f, below=True) if dim == d) for d in wl.dims}
        held = sum(math.prod(sum(c * (extent[wl.dims[d]] - 1) for d, c in axis) + 1 for axis in t.axes)
                   * t.bytes_per_word for t in wl.tensors if t.name in nest[f]["keep"])
        assert member.evaluation.levels[f].footprint_bytes == held
        assert held + grouper.slice_plan(group).live[member.op] <= arch.levels[f].capacity


@pytest.mark.parametrize("busy", [None, 1.0])
def test_a_streamed_kernels_grid_ranks_by_the_times_its_price_reports(busy):
    """What the MLP and attention models rank their grids by (`streamed_level_cycles`) is each
    level's time in the kernel they report (`streamed_kernel`), one SM busy or all."""
    from mapper.fusion.price import streamed_kernel, streamed_level_cycles
    arch = gpu_with_l2("8 KiB")
    arch = dataclasses.replace(arch, levels=tuple(dataclasses.replace(lv, bandwidth=bw)
                                                  for lv, bw in zip(arch.levels, (8.0, 32.0, 16.0, 64.0))))
    reads, writes, f = [("X", 1000.0, 2.0), ("W", 300.0, 1.0)], [("Y", 500.0, 4.0)], 2
    kernel = streamed_kernel(arch, f, reads, writes, 0.0, 0.0, 0.0, busy)
    times = streamed_level_cycles(arch, f, 1000 * 2.0 + 300 * 1.0, 500 * 4.0, busy)
    assert [kernel.level_cycles(lv) for lv in range(f + 1)] == pytest.approx(times, rel=1e-12)
    smem = arch.levels[f]
    # by hand: X and W read and filled at SMEM (2 x 2,300 B) over 16 B/cycle per busy SM; DRAM
    # reads them once and takes Y's 2,000 B, at 8 B/cycle
    assert times[f] == pytest.approx(2 * 2300 / (16.0 * (busy or smem.instances)))
    assert times[0] == pytest.approx((2300 + 2000) / 8.0)
