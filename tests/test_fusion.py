"""Fusion (`mapper/fusion/`): what a fused intermediate saves, checked against hand counts, the
cost model's own kernels, a brute-force execution of the fused loop nest with clamped ragged
tails, and the enumeration of every grouping."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mapper.fusion.bound import chain_bound
from mapper.fusion.grouping import all_groupings, best_grouping, boundaries, unfused
from mapper.fusion.group_price import GroupPrice, Refusal
from mapper.fusion.groups import Grouper
from mapper.fusion.kernels import OpSearches
from mapper.load import arch_from_dict, load_arch, opgraph_from_dict
from mapper.mapping import level_tiles
from mapper.search import SearchContext
from mapper.units import Where

from brute_force import simulate
from test_brute_force_agreement import as_plain


def small_gpu(smem="4 KiB", dram_pj=1.0):
    """DRAM / per-SM buffer (2 SMs) / registers (2 per SM) over 4 units (as test_tails.py's);
    `dram_pj` scales DRAM's access energies."""
    level = {"block_size": 1, "max_stages": 2, "energy": {"read": 1.0, "write": 2.0, "update": 3.0}}
    dram = {**level, "energy": {k: v * dram_pj for k, v in level["energy"].items()}}
    return arch_from_dict({
        "name": "small-gpu", "clock": "1 GHz",
        "levels": [{"name": "DRAM", "instances": 1, "mesh": [1, 1], "latency": 10, **dram},
                   {"name": "SMEM", "instances": 2, "mesh": [2, 1], "capacity": smem, **level},
                   {"name": "RF", "instances": 4, "mesh": [4, 1], "capacity": "1 KiB", **level}],
        "compute": {"instances": 4, "mesh": [4, 1], "macs_per_cycle": 2, "energy": 1.0,
                    "native_shape": {"m": 2, "n": 2, "k": 2}},
        "gpu": {"sms": 2, "smem_per_sm": smem, "registers_per_sm": 4096}}, Where("<test>"))


def study(arch, sizes, ops, objective="energy", seconds=5.0):
    graph = opgraph_from_dict({"name": "t", "sizes": sizes, "dtype": "bf16", "ops": ops}, Where("<test>"))
    # an evaluation budget: every search's budget is counted in mappings priced, not on the
    # wall clock, so what each finds does not depend on the machine's load
    searches = OpSearches(arch, graph, SearchContext(time_limit=60.0, max_evaluations=4_000_000), seconds, seconds)
    return graph, Grouper(arch, graph, searches, objective)


MM = {"name": "mm", "einsum": "Z[m,n] += A[m,k] * B[k,n]"}


def gelu(src="Z", out="G"):
    return {"name": f"gelu-{out}", "kind": "gelu", "inputs": [f"{src}[m,n]"], "output": f"{out}[m,n]"}


def test_a_fused_elementwise_intermediate_saves_exactly_two_n_s_at_the_outer_level():
    """scale -> gelu: the intermediate (N = 64 x 48 bf16) no longer written nor read back."""
    scale = {"name": "scale", "kind": "scale", "inputs": ["X[m,n]"], "output": "S[m,n]"}
    graph, grouper = study(load_arch("toy"), {"m": 64, "n": 48}, [scale, gelu("S")])
    apart = grouper.price((0,)).level_bytes(0) + grouper.price((1,)).level_bytes(0)
    fused = grouper.price((0, 1))
    assert isinstance(fused, GroupPrice) and fused.fused == ("S",) and not fused.spilled
    n_s = 64 * 48 * 2
    assert apart - fused.level_bytes(0) == 2 * n_s
    assert fused.level_bytes(0) == 2 * n_s            # X read once, G written once: compulsory
    assert fused.energy_pj < grouper.price((0,)).energy_pj + grouper.price((1,)).energy_pj


@pytest.mark.parametrize("arch", [load_arch("toy"), small_gpu("16 KiB")], ids=["toy", "small-gpu"])
def test_a_fused_gemm_gelu_moves_the_outer_bytes_of_the_gemm_alone(arch):
    graph, grouper = study(arch, {"m": 32, "k": 16, "n": 24}, [MM, gelu()])
    fused = grouper.price((0, 1))
    assert isinstance(fused, GroupPrice) and not fused.spilled and fused.fused == ("Z",)
    gemm = fused.anchor.evaluation
    assert fused.level_bytes(0) == gemm.levels[0].traffic_bytes         # G written where Z was
    kernel = fused.kernels[0]
    assert kernel.tensor_bytes("Z", 0) == 0 and kernel.tensor_bytes("G", 0) == 32 * 24 * 2
    # against the same GEMM kernel unfused, the saving is Z's round trip, 2 N s
    gelu_alone = grouper.price((1,))
    assert fused.anchor.price.level_bytes(0) + gelu_alone.level_bytes(0) - fused.level_bytes(0) == 2 * 32 * 24 * 2


def _fused_epilogue_execution(m, n, k, tile_m, tile_n, clamp_consumer=True):
    """Run mm + bias + gelu as one kernel over output tiles of tile_m x tile_n (the tile at the
    fusion level, ragged at the edges): the producer fills a NaN-initialised tile buffer over
    its clamped extent, the epilogue reads it over its own (clamped alike unless told not to),
    loads its bias slice and writes G. Returns (G, bias words loaded, G words written, lanes
    read that the producer never wrote)."""
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal(n)
    g = np.full((m, n), np.nan)
    bias_words = g_words = unwritten = 0
    for i0 in range(0, m, tile_m):
        for j0 in range(0, n, tile_n):
            vm, vn = min(tile_m, m - i0), min(tile_n, n - j0)         # the producer's clamped extent
            tile = np.full((tile_m, tile_n), np.nan)                  # the intermediate: a tile buffer
            tile[:vm, :vn] = a[i0:i0 + vm] @ b[:, j0:j0 + vn]
            cm, cn = (vm, vn) if clamp_consumer else (tile_m, tile_n)
            seen = tile[:cm, :cn]
            unwritten += int(np.isnan(seen).sum())
            bias = c[j0:j0 + min(cn, n - j0)]
            bias_words += len(bias)
            y = seen[:, :len(bias)] + bias
            out = 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))
            g[i0:i0 + min(cm, m - i0), j0:j0 + min(cn, n - j0)] = out[:min(cm, m - i0), :min(cn, n - j0)]
            g_words += min(cm, m - i0) * min(cn, n - j0)
    y = a @ b + c
    reference = 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))
    return g, reference, bias_words, g_words, unwritten


def test_ragged_fused_epilogue_matches_a_clamped_brute_force_execution():
    """m = 5, n = 7 no multiple of the 2x2 fragment: masked tails. The fused kernel's outer
    bytes are the brute-force count: A and B as the anchor's loop nest loads them (the
    project's independent simulator, valid elements only), Z never, the bias slice per output
    tile clamped to the valid columns, G once; no lane the producer never wrote is read."""
    arch = small_gpu()
    bias = {"name": "bias", "kind": "bias", "inputs": ["Z[m,n]", "c[n]"], "output": "Y[m,n]"}
    graph, grouper = study(arch, {"m": 5, "k": 3, "n": 7}, [MM, bias, gelu("Y")])
    fused = grouper.price((0, 1, 2))
    assert isinstance(fused, GroupPrice) and not fused.spilled and set(fused.fused) == {"Z", "Y"}
    wl, mapping = graph.ops[0].workload, fused.anchor.mapping
    extents = [math.prod(b for lm in mapping.levels for d2, b in lm.temporal if d2 == d)
               * math.prod(b for lm in mapping.levels for d2, b, _ in lm.spatial if d2 == d) for d in range(3)]
    assert extents != list(wl.sizes)                  # the mapping runs ragged tiles
    problem, nest, fanout = as_plain(arch, wl, mapping)
    problem["dims"] = dict(zip(wl.dims, extents))
    truth = simulate(problem, nest, fanout, {d: s for d, s, e in zip(wl.dims, wl.sizes, extents) if e != s})
    dram = truth["levels"]["DRAM"]["valid"]
    tile = level_tiles(mapping, 3)[grouper.f]
    tile_m, tile_n = tile[wl.dim_index("m")], tile[wl.dim_index("n")]
    g, reference, bias_words, g_words, unwritten = _fused_epilogue_execution(5, 7, 3, tile_m, tile_n)
    assert unwritten == 0 and np.allclose(g, reference)
    brute = 2 * (sum(dram["A"].values()) + sum(dram["B"].values()) + bias_words + g_words)
    assert fused.level_bytes(0) == pytest.approx(brute, rel=1e-12)
    # the failure the NaN fill exists to catch: a consumer that does not clamp reads garbage lanes
    if 5 % tile_m or 7 % tile_n:
        assert _fused_epilogue_execution(5, 7, 3, tile_m, tile_n, clamp_consumer=False)[4] > 0


@pytest.mark.parametrize("smem, chosen", [("16 KiB", True), ("2 KiB", False)])
def test_spill_pressure_makes_fusion_lose_and_it_is_not_chosen(smem, chosen):
    """A residual add whose operand tile must sit beside the GEMM's tiles: with room (16 KiB)
    the fused kernel wins and is chosen; in a small buffer (2 KiB) it either spills (the round
    trip comes back) or shrinks the GEMM's tile, loses, and the grouping keeps two kernels and
    says why."""
    arch = small_gpu(smem, dram_pj=20.0)
    residual = {"name": "res", "kind": "add", "inputs": ["Z[m,n]", "R[m,n]"], "output": "H[m,n]"}
    graph, grouper = study(arch, {"m": 32, "k": 64, "n": 32}, [MM, residual])
    fused = grouper.price((0, 1))
    apart = grouper.price((0,)).energy_pj + grouper.price((1,)).energy_pj
    assert isinstance(fused, GroupPrice) and fused.spilled != chosen
    assert (fused.energy_pj < apart) == chosen
    best = best_grouping(grouper, 2)
    assert [g.ops for g in best.groups] == ([(0, 1)] if chosen else [(0,), (1,)])
    (boundary,) = boundaries(grouper, best)
    assert boundary.fused == chosen
    if not chosen:
        assert boundary.kind == "capacity/spill" and "spilled" in boundary.reason


def test_a_softmax_is_fused_only_with_its_row_whole_in_the_tile():
    arch = small_gpu("16 KiB")
    qk = {"name": "qk", "einsum": "S[g,i,j] += Q[g,i,d] * K[g,j,d]"}
    softmax = {"name": "sm", "kind": "softmax", "inputs": ["S[g,i,j]"], "output": "P[g,i,j]", "dim": "j"}
    graph, grouper = study(arch, {"g": 2, "i": 8, "j": 16, "d": 4}, [qk, softmax])
    fused = grouper.price((0, 1))
    assert isinstance(fused, GroupPrice) and not fused.spilled
    wl = graph.ops[0].workload
    assert level_tiles(fused.anchor.mapping, 4)[grouper.f][wl.dim_index("j")] >= 16
    graph, grouper = study(small_gpu("1 KiB"), {"g": 2, "i": 8, "j": 512, "d": 4}, [qk, softmax])
    refused = grouper.price((0, 1))
    assert isinstance(refused, Refusal) and refused.kind == "full reduction"


CHAIN = [MM, {"name": "bias", "kind": "bias", "inputs": ["Z[m,n]", "c[n]"], "output": "Y[m,n]"},
         gelu("Y", "G"), {"name": "mm2", "einsum": "O[m,k] += G[m,n] * W[n,k]"},
         {"name": "relu", "kind": "relu", "inputs": ["O[m,k]"], "output": "R[m,k]"}]


def test_the_grouping_programme_equals_enumerating_every_grouping():
    arch = load_arch("toy")
    graph, first = study(arch, {"m": 16, "k": 8, "n": 8}, CHAIN)
    for objective in ("energy", "bytes", "cycles"):
        grouper = Grouper(arch, graph, first.searches, objective)
        best = best_grouping(grouper, len(CHAIN))
        every = all_groupings(grouper, len(CHAIN))
        assert len(every) > 4
        assert best.score == pytest.approx(min(g.score for g in every), rel=1e-12)
        assert best.score <= unfused(grouper, len(CHAIN)).score
        assert best.score == pytest.approx(sum(g.score(objective) for g in best.groups), rel=1e-12)
        assert any(len(g.ops) > 1 for g in best.groups)      # it does fuse something
        bound = chain_bound(arch, graph, grouper.f).outer_bytes
        assert all(sum(grp.level_bytes(0) for grp in g.groups) >= bound for g in every)


ATTENTION = [{"name": "qk", "einsum": "S[g,i,j] += Q[g,i,d] * K[g,j,d]"},
             {"name": "scale", "kind": "scale", "inputs": ["S[g,i,j]"], "output": "Ss[g,i,j]"},
             {"name": "sm", "kind": "softmax", "inputs": ["Ss[g,i,j]"], "output": "P[g,i,j]", "dim": "j"},
             {"name": "pv", "einsum": "O[g,i,d] += P[g,i,j] * V[g,j,d]"}]


def test_attention_fuses_through_its_softmax_with_an_online_softmax():
    """QK^T -> scale -> softmax -> PV: the softmax row (j = 2048) does not fit an 8 KiB buffer, so
    tile-level fusion of QK^T and the softmax is refused, yet the whole chain fuses as a
    FlashAttention kernel: Q read once, K and V once per i tile, O written once, the scores
    never leaving the chip; its tiling is the best of the grid, found here by a plain loop."""
    from mapper.fusion.attention import TILES
    arch = small_gpu("8 KiB", dram_pj=20.0)
    sizes = {"g": 2, "i": 16, "j": 2048, "d": 8}
    graph, grouper = study(arch, sizes, ATTENTION, objective="bytes", seconds=1.0)
    refused = grouper.price((0, 1, 2))          # no row fits: the plain epilogue is refused
    assert isinstance(refused, Refusal) and refused.kind == "full reduction"
    flash = grouper.price((0, 1, 2, 3))
    assert isinstance(flash, GroupPrice) and set(flash.fused) == {"S", "Ss", "P"}
    bi = int(flash.tiling.split()[0][2:])
    g, i, j, d = 2, 16, 2048, 8
    assert flash.level_bytes(0) == 2 * (g * i * d + 2 * g * math.ceil(i / bi) * j * d + g * i * d)
    best = None
    for block_i in TILES:                     # the grid by hand: fits in SMEM and in the registers
        for block_j in TILES:
            for stages in (1, 2):
                smem = block_i * d * 2 + stages * block_j * 2 * d * 2
                regs = (block_i * block_j + block_i * d + 2 * block_i) * 4     # fp32, 4096 registers per SM
                if smem <= 8192 and regs <= 4096 * 4:
                    outer = 2 * (2 * g * i * d + 2 * g * math.ceil(i / block_i) * j * d)
                    best = outer if best is None else min(best, outer)
    assert flash.level_bytes(0) == best


@pytest.mark.slow
def test_the_grouping_chooses_the_flash_kernel_over_unfused_attention():
    arch = small_gpu("8 KiB", dram_pj=20.0)
    graph, grouper = study(arch, {"g": 2, "i": 16, "j": 2048, "d": 8}, ATTENTION, objective="bytes", seconds=1.0)
    whole = best_grouping(grouper, 4)
    assert [grp.ops for grp in whole.groups] == [(0, 1, 2, 3)]
    assert whole.score < unfused(grouper, 4).score


MLP = [{"name": "up", "einsum": "U[m,f] += X[m,e] * W1[e,f]"},
       {"name": "act", "kind": "gelu", "inputs": ["U[m,f]"], "output": "H[m,f]"},
       {"name": "down", "einsum": "Y[m,n] += H[m,f] * W2[f,n]"}]


def test_two_gemms_fuse_through_the_hidden_dim_priced_with_their_recomputation():
    """GEMM -> GELU -> GEMM: the fused kernel's outer bytes are X once per column tile, W1 once
    per block, W2 once per row tile and Y once (hand count for the tiling it reports); with few
    rows and few output columns it wins and is chosen."""
    mlp = MLP
    arch = small_gpu("16 KiB", dram_pj=20.0)
    graph, grouper = study(arch, {"m": 16, "e": 16, "f": 256, "n": 16}, mlp, objective="bytes", seconds=2.0)
    fused = grouper.price((0, 1, 2))
    assert isinstance(fused, GroupPrice) and set(fused.fused) == {"U", "H"}
    tiles = dict((part[:2], int(part[2:])) for part in fused.tiling.split()[:3])
    rows_t, cols_t = math.ceil(16 / tiles["Bm"]), math.ceil(16 / tiles["Bn"])
    assert fused.level_bytes(0) == 2 * (cols_t * 16 * 16 + rows_t * cols_t * 16 * 256 + rows_t * 256 * 16 + 16 * 16)
    best = best_grouping(grouper, 3)
    assert [g.ops for g in best.groups] == [(0, 1, 2)]
    assert best.score < unfused(grouper, 3).score


@pytest.mark.slow
def test_two_gemms_with_many_rows_stay_apart():
    """Many rows: the fused kernel would re-read W1 once per row tile, more than H's round trip."""
    graph, grouper = study(small_gpu("16 KiB", dram_pj=20.0), {"m": 512, "e": 64, "f": 256, "n": 64}, MLP,
                           objective="bytes", seconds=2.0)
    fused = grouper.price((0, 1, 2))
    assert fused.score("bytes") > grouper.price((0,)).score("bytes") + grouper.price((2,)).score("bytes")
    assert all(len(g.ops) < 3 for g in best_grouping(grouper, 3).groups)


def test_an_elementwise_prologue_reads_its_input_where_the_gemm_read_a():
    """scale -> GEMM: the GEMM reads X where it read A (same element size: the same bytes), so
    the fused kernel moves the GEMM's outer bytes and saves the scale kernel's whole traffic."""
    scale = {"name": "scale", "kind": "scale", "inputs": ["X[m,k]"], "output": "A[m,k]"}
    graph, grouper = study(load_arch("toy"), {"m": 32, "k": 16, "n": 24}, [scale, MM])
    fused, gemm, alone = grouper.price((0, 1)), grouper.price((1,)), grouper.price((0,))
    assert isinstance(fused, GroupPrice) and fused.fused == ("A",) and len(fused.kernels) == 1
    kernel = fused.kernels[0]
    assert kernel.tensor_bytes("A", 0) == 0 and kernel.tensor_bytes("X", 0) == gemm.kernels[0].tensor_bytes("A", 0)
    assert fused.level_bytes(0) == gemm.level_bytes(0)
    assert alone.level_bytes(0) == 2 * 32 * 16 * 2            # the scale kernel: X read, A written


def test_a_norm_prologue_without_its_row_keeps_a_stats_pre_pass():
    """layernorm over k -> GEMM in a buffer too small for whole k rows: a stats pre-pass kernel
    (X read once, 8 bytes per row written) and the GEMM reading X where it read Y plus its rows'
    stats with every tile it loads; the report's note says so."""
    norm = {"name": "norm", "kind": "layernorm", "inputs": ["X[m,k]", "g[k]"], "output": "A[m,k]", "dim": "k"}
    arch = small_gpu("2 KiB", dram_pj=20.0)
    graph, grouper = study(arch, {"m": 32, "k": 256, "n": 32}, [norm, MM])
    fused = grouper.price((0, 1))
    assert isinstance(fused, GroupPrice) and len(fused.kernels) == 2, fused
    pre, main = fused.kernels
    assert pre.tensor_bytes("X", 0) == 32 * 256 * 2 and pre.tensor_bytes("stats", 0) == 32 * 8
    assert pre.tensor_bytes("A", 0) == 0 and main.tensor_bytes("A", 0) == 0
    reads = main.tensor_bytes("X", 0)
    # each tile of A read from DRAM (tile_m x tile_k bf16 words of X) brings its tile_m rows'
    # 8 B of stats, and each one an SM fills into its SMEM its own copy
    held = fused.anchor.evaluation.levels[grouper.f]
    fills = held.tensors["A"].fills * held.instances / held.tensors["A"].tile_words
    tile_m, _, tile_k = level_tiles(fused.anchor.mapping, 3)[grouper.f]
    assert reads >= 32 * 256 * 2 and main.tensor_bytes("stats", 0) == 8 * reads / (2 * tile_k)
    assert main.tensor_bytes("stats", grouper.f) == fills * tile_m * 8
    assert any("stats pre-pass" in note for note in fused.notes)
    assert any("whole row" in note for note in fused.notes)


SWIGLU = [{"name": "gate", "einsum": "Gt[m,n] += A[m,k] * B[k,n]"},
          {"name": "up", "einsum": "U[m,n] += A[m,k] * C[k,n]"},
          {"name": "silu", "kind": "silu", "inputs": ["Gt[m,n]"], "output": "Sg[m,n]"},
          {"name": "product", "kind": "mul", "inputs": ["Sg[m,n]", "U[m,n]"], "output": "M[m,n]"},
          {"name": "relu", "kind": "relu", "inputs": ["M[m,n]"], "output": "R[m,n]"}]


def test_cpsat_over_connected_groups_equals_every_partition_and_beats_runs():
    """On a DAG (SwiGLU's gate and up both read A, their epilogues meet in the product), CP-SAT
    over every legal connected group equals the enumeration of every partition whose kernels
    can run in some order, and is no worse than the runs of the listed order (here gate, up,
    silu: gate + silu is no run)."""
    from mapper.fusion.cover import all_covers, best_cover
    arch = small_gpu("16 KiB", dram_pj=20.0)
    graph, grouper = study(arch, {"m": 32, "k": 16, "n": 24}, SWIGLU, objective="bytes", seconds=1.0)
    cover, proven = best_cover(grouper, 5)
    every = all_covers(grouper, 5)
    assert proven and len(every) > 5
    assert cover.score == pytest.approx(min(g.score for g in every), rel=1e-6)
    runs = best_grouping(grouper, 5)
    assert cover.score <= runs.score * (1 + 1e-6)
    assert cover.score < runs.score           # a group the order cannot form pays here


@pytest.mark.parametrize("arch_name, mapping_name", [("toy", "toy-gemm-256-os")])
def test_a_kernel_price_reproduces_the_cost_model(arch_name, mapping_name):
    """`price.from_evaluation` keeps the evaluation's energy, per-level bytes and cycles; its fill
    entries split a level's traffic without changing it."""
    from mapper.cost import evaluate
    from mapper.fusion.price import from_evaluation
    from mapper.load import load_mapping, load_workload
    arch, wl = load_arch(arch_name), load_workload("gemm-256")
    ev = evaluate(arch, wl, load_mapping(mapping_name, arch, wl))
    price = from_evaluation(arch, ev, {t.name: t.bytes_per_word for t in wl.tensors})
    assert price.energy_pj == pytest.approx(ev.energy_pj, rel=1e-12)
    assert price.cycles == pytest.approx(ev.cycles, rel=1e-12)
    for lv, level in enumerate(ev.levels):
        assert price.level_bytes(lv) == pytest.approx(level.traffic_bytes, rel=1e-12)
    assert any(t.fill for t in price.traffic)
