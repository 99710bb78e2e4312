"""Einsums fused through a buffer level (`mapper/fusion/buffered.py`): the fused price checked
against a hand count from the slices' own access counts, the refusals (capacity, full
reduction, tiling mismatch), the lazy search of the groups against pricing every group, and
the grouping search against the enumeration of every grouping."""
from __future__ import annotations

import dataclasses
import math

import pytest

from mapper.cost import evaluate
from mapper.fusion.buffered import fused_dims, plan
from mapper.fusion.cover import all_covers, best_cover
from mapper.fusion.grouping import all_groupings, best_grouping
from mapper.fusion.group_price import GroupPrice, Refusal
from mapper.fusion.groups import Grouper
from mapper.fusion.kernels import OpSearches, shrunk, signature
from mapper.fusion.run import settled
from mapper.load import load_arch, opgraph_from_dict
from mapper.mapping import LevelMapping, Mapping, level_tiles
from mapper.search import SearchContext
from mapper.units import Where

# toy: DRAM / one 64 KiB GlobalBuffer (the fusion level) / 256 PEs (archs/toy.yaml, Timeloop's
# reference figures: 8-word blocks, 512 pJ per DRAM access, 16 pJ per GlobalBuffer access)
TWO_GEMMS = [{"name": "mm1", "einsum": "Y[m,n] += X[m,k] * W1[k,n]"},
             {"name": "mm2", "einsum": "Z[m,j] += Y[m,n] * W2[n,j]"}]
ATTENTION = [{"name": "qk", "einsum": "S[h,m,p] += Q[h,m,e] * K[h,p,e]"},
             {"name": "sc", "kind": "scale", "inputs": ["S[h,m,p]"], "output": "P[h,m,p]"},
             {"name": "av", "einsum": "O[h,m,f] += P[h,m,p] * V[h,p,f]"},
             {"name": "z", "einsum": "Z[m,g] += O[h,m,f] * W[h,f,g]"}]


def study(sizes, ops, arch="toy", evaluations=600_000, dtype="int8"):
    graph = opgraph_from_dict({"name": "t", "sizes": sizes, "dtype": dtype, "ops": ops}, Where("<test>"))
    arch = load_arch(arch)
    # an evaluation budget: what each search finds does not depend on the machine's load
    searches = OpSearches(arch, graph, SearchContext(time_limit=60.0, max_evaluations=evaluations), 1.0, 1.0)
    return graph, Grouper(arch, graph, searches, "energy")


def _fill_energy(level, words: int, word_bytes: float) -> float:
    """Fills priced by hand from the level's figures: per access of block_size words, rounded
    up, plus per byte."""
    return -(-words // level.block_size) * level.energy_write + words * word_bytes * level.byte_energy_write


def test_the_fused_price_is_the_slices_times_the_iterations_less_the_intermediates_accesses():
    """Two GEMMs through Y, X's rows sliced so Y's slice fits half the GlobalBuffer: the fused
    kernel's energy is, from each slice's own evaluation, (its energy x iterations) less Y's
    accesses at DRAM (mm1's writes, mm2's reads) and mm2's fills of Y into the GlobalBuffer,
    priced here from the access counts; at DRAM it moves X, W1, W2 and Z only."""
    sizes = {"m": 512, "k": 16, "n": 128, "j": 16}
    graph, grouper = study(sizes, TWO_GEMMS)
    fused = grouper.price((0, 1))
    assert isinstance(fused, GroupPrice) and fused.fused == ("Y",) and len(fused.members) == 2
    arch, f = grouper.arch, grouper.f
    tile_m = fused.members[0].sizes[graph.ops[0].workload.dim_index("m")]
    n = 512 // tile_m
    assert fused.iterations == n and tile_m * 128 <= arch.levels[f].capacity / 2
    assert 512 * 128 > arch.levels[f].capacity / 2            # Y whole would not leave room: sliced
    expected, dram = 0.0, 0.0
    for member in fused.members:
        op = graph.ops[member.op]
        wl = dataclasses.replace(op.workload, sizes=member.sizes)
        ev = evaluate(arch, wl, member.mapping)               # the slice, priced again by the cost model
        expected += n * ev.energy_pj
        for lv in range(f):
            cost = ev.levels[lv].tensors.get("Y")
            if cost is not None:
                expected -= n * cost.energy_pj                   # Y's writes out / reads back at DRAM
            dram += n * sum(c.bytes_moved for t, c in ev.levels[lv].tensors.items() if t != "Y")
        if member.op == 1:
            fills = ev.levels[f].tensors["Y"].fills
            expected -= n * _fill_energy(arch.levels[f], fills, 1.0)
    assert fused.energy_pj == pytest.approx(expected, rel=1e-9)
    kernel = fused.kernels[0]
    assert kernel.tensor_bytes("Y", 0) == 0
    assert kernel.level_bytes(0) == pytest.approx(dram, rel=1e-12)
    # the removed accesses are exactly Y's round trip when each op is priced on the slice alone
    apart = sum(n * m.price.energy_pj for m in fused.members)
    assert apart - fused.energy_pj > 0


def test_reading_the_same_weights_each_iteration_is_charged():
    """W1 and W2 are not indexed by the fused loop over m: each slice reads them again, so the
    fused kernel reads them once per iteration at DRAM (no fewer)."""
    graph, grouper = study({"m": 512, "k": 16, "n": 128, "j": 16}, TWO_GEMMS)
    fused = grouper.price((0, 1))
    n = fused.iterations
    assert n > 1 and dict(grouper._plan((0, 1)).refetched) == {"W1": n, "W2": n}
    assert fused.kernels[0].tensor_bytes("W1", 0) >= n * 16 * 128
    assert fused.kernels[0].tensor_bytes("W2", 0) >= n * 128 * 16


def test_refusals_name_capacity_full_reduction_and_tiling_mismatch():
    """Y's smallest slice over the one fused loop (n) is a whole column of 65,536 rows, over
    half the 64 KiB GlobalBuffer: capacity. Reducing over every dim of Y: no fused loop, Y must
    be held whole: full reduction. A group whose ops share no tensor-joined dim besides a
    reduced one, too big whole: the reasons say which op reduces over which dim."""
    consumer_reduces_m = [TWO_GEMMS[0], {"name": "mm2", "einsum": "Z[n,j] += Y[m,n] * W2[m,j]"}]
    graph, grouper = study({"m": 65536, "k": 4, "n": 8, "j": 4}, consumer_reduces_m)
    refused = grouper.price((0, 1))
    assert isinstance(refused, Refusal) and refused.kind == "capacity"
    assert "mm2 reduces over m" in refused.reason and "65,536 B" in refused.reason
    dims, _ = fused_dims(graph, (0, 1))
    assert [d.names for d in dims] == [((0, "n"), (1, "n"))]
    all_reduced = [TWO_GEMMS[0], {"name": "mm2", "einsum": "Z[j] += Y[m,n] * W2[m,n,j]"}]
    graph, grouper = study({"m": 256, "k": 4, "n": 256, "j": 4}, all_reduced)
    refused = grouper.price((0, 1))
    assert isinstance(refused, Refusal) and refused.kind == "full reduction"
    # the same chain small enough to hold Y whole (one iteration) is fused
    graph, grouper = study({"m": 64, "k": 4, "n": 64, "j": 4}, all_reduced)
    fused = grouper.price((0, 1))
    assert isinstance(fused, GroupPrice) and fused.iterations == 1 and fused.kernels[0].tensor_bytes("Y", 0) == 0
    # a row reduction's row is never a fused loop
    softmax = [{"name": "mm", "einsum": "S[m,p] += A[m,e] * B[p,e]"},
               {"name": "sm", "kind": "softmax", "inputs": ["S[m,p]"], "output": "P[m,p]", "dim": "p"},
               {"name": "pv", "einsum": "O[m,f] += P[m,p] * V[p,f]"}]
    graph, _ = study({"m": 64, "p": 64, "e": 4, "f": 4}, softmax)
    dims, refused = fused_dims(graph, (0, 1, 2))
    assert [d.name_in(0) for d in dims] == ["m"] and ("full reduction", "pv reduces over p: its output needs "
                                                      "every slice") in refused
    dims, refused = fused_dims(graph, (0, 1))
    assert [d.name_in(0) for d in dims] == ["m"]
    assert ("full reduction", "sm's row p must lie whole in the slice") in refused
    # a dim of one op that another does not share (K's rows, qk's keys) is no fused loop
    projection = [{"name": "k", "einsum": "K[p,e] += X[p,d] * WK[d,e]"}, ATTENTION[0]]
    graph, _ = study({"p": 32, "d": 8, "e": 8, "h": 2, "m": 32}, [projection[0],
                     {"name": "qk", "einsum": "S[m,p] += Q[m,e] * K[p,e]"}])
    dims, refused = fused_dims(graph, (0, 1))
    assert [d.name_in(1) for d in dims] == ["p"] and any(kind == "tiling mismatch" for kind, _ in refused)


def test_no_fusion_through_a_per_sm_level():
    """On a GPU the fusion level is per SM: refused, the explicit kernels keep these groups."""
    graph, grouper = study({"m": 64, "k": 16, "n": 64, "j": 16}, TWO_GEMMS, arch="h100", dtype="bf16")
    with pytest.raises(Exception, match="not one buffer"):
        plan(grouper.arch, graph, (0, 1), grouper.f)


def test_identical_einsums_are_searched_once_and_the_slice_search_starts_from_the_free_mapping():
    two = [{"name": "a", "einsum": "A[m,n] += X[m,k] * W1[k,n]"}, {"name": "b", "einsum": "B[m,n] += X[m,k] * W2[k,n]"}]
    graph, grouper = study({"m": 64, "k": 32, "n": 64}, two)
    a, b = grouper.searches.free(0), grouper.searches.free(1)
    assert signature(graph.ops[0].workload) == signature(graph.ops[1].workload)
    assert b.reused_from == 0 and b.mapping == a.mapping and b.price.energy_pj == a.price.energy_pj
    assert {t.tensor for t in b.price.traffic} == {"B", "X", "W2"}
    wl = graph.ops[0].workload
    m, n, k = (wl.dim_index(d) for d in "mnk")
    by_hand = Mapping((LevelMapping(temporal=((m, 2),), keep=frozenset({0, 1, 2})),
                       LevelMapping(temporal=((m, 32), (n, 64), (k, 32)), keep=frozenset({0, 1, 2})),
                       LevelMapping(keep=frozenset({0, 1, 2}))))
    quarter = [0, 0, 0]
    quarter[m], quarter[n], quarter[k] = 16, 64, 32
    small = shrunk(by_hand, wl, dataclasses.replace(wl, sizes=tuple(quarter)))
    assert small is not None and level_tiles(small, 3)[0] == quarter      # m's ratio 4: 2 at DRAM, 2 below
    assert dict(small.levels[0].temporal)[m] == 1 and dict(small.levels[1].temporal)[m] == 16
    quarter[m] = 48                                                       # not a divisor: no seed
    assert shrunk(by_hand, wl, dataclasses.replace(wl, sizes=tuple(quarter))) is None


def test_a_mapping_carried_by_role_keeps_each_roles_split():
    """Carried to itself a mapping is the same mapping (the same cost); carried to a GEMM whose
    rows, columns and reduction have other sizes, each dim's factors multiply to its size and
    each role's spatial split is the source's."""
    from mapper.cost import evaluate as price
    from mapper.fusion.seeds import carried
    two = [{"name": "a", "einsum": "A[m,n] += X[m,k] * W1[k,n]"},
           {"name": "b", "einsum": "B[m,j] += A[m,n] * W2[n,j]"}]
    graph, grouper = study({"m": 64, "k": 32, "n": 128, "j": 256}, two)   # every role as large or larger
    a, b = graph.ops[0].workload, graph.ops[1].workload
    found = grouper.searches.free(0).mapping
    same = carried(found, a, a)
    assert same is not None and price(grouper.arch, a, same).energy_pj == price(grouper.arch, a, found).energy_pj
    other = carried(found, a, b)
    assert other is not None
    tiles = level_tiles(other, len(b.dims))[0]
    assert tiles == list(b.sizes)
    spatial = lambda mapping, wl, dim: math.prod(bound for lm in mapping.levels for d, bound, _ in lm.spatial
                                                 if d == wl.dim_index(dim))
    assert spatial(other, b, "m") == spatial(found, a, "m")      # rows: m in both
    assert spatial(other, b, "n") == spatial(found, a, "k")      # the reduction
    assert spatial(other, b, "j") == spatial(found, a, "n")      # the columns


def test_the_grouping_search_equals_enumeration_with_groups_fused_through_the_buffer():
    """QK -> scale -> AV -> Z on toy: the dynamic programme equals every grouping enumerated,
    CP-SAT every partition, and at least one group of two einsums is legal; the lazy search
    (`settled`) returns only searched groups and is no better than pricing every group."""
    sizes = {"h": 2, "m": 32, "p": 32, "e": 4, "f": 4, "g": 8}
    graph, grouper = study(sizes, ATTENTION, evaluations=400_000)
    best = best_grouping(grouper, 4)
    every = all_groupings(grouper, 4)
    assert best.score == pytest.approx(min(g.score for g in every), rel=1e-12)
    assert any(isinstance(grouper.price(ops), GroupPrice) for ops in [(0, 1, 2), (2, 3), (0, 1, 2, 3)])
    cover, proven = best_cover(grouper, 4)
    assert proven and cover.score == pytest.approx(min(g.score for g in all_covers(grouper, 4)), rel=1e-6)
    lazy = Grouper(grouper.arch, graph, grouper.searches, "energy")
    choice = settled(lazy, 4)
    chosen, runs = choice.best, choice.runs
    assert not choice.estimated_only and choice.estimate_gap == 0.0     # no budget: every estimate searched
    assert not any(g.estimated for g in chosen.groups + runs.groups)
    assert chosen.score >= min(best.score, cover.score) * (1 - 1e-9)
    for g in chosen.groups:
        if g.members:
            assert g.ops in lazy.searched
    assert math.isfinite(chosen.score)


def test_an_elementwise_op_in_the_group_reads_its_input_where_the_einsum_completes_it():
    """mm1 -> scale -> mm2: Y is an einsum's output read by one elementwise op alone, so it is
    read where mm1 completes it, one level below the GlobalBuffer, and never written there: the
    kernel is the slices x iterations less Y's accesses above that level (mm1's and scale's) and
    scale's fills of Y there, and less S's (the scaled tensor's) DRAM round trip and mm2's fills
    of S into the GlobalBuffer; hand-counted from each slice's own evaluation."""
    chain = [TWO_GEMMS[0], {"name": "scale", "kind": "scale", "inputs": ["Y[m,n]"], "output": "S[m,n]"},
             {"name": "mm2", "einsum": "Z[m,j] += S[m,n] * W2[n,j]"}]
    graph, grouper = study({"m": 64, "k": 8, "n": 32, "j": 8}, chain)
    fused = grouper.price((0, 1, 2))
    assert isinstance(fused, GroupPrice), fused
    arch, f = grouper.arch, grouper.f
    assert any("Y read by its elementwise consumer" in note for note in fused.notes)
    below = f + 1
    n = fused.iterations
    expected = 0.0
    for member in fused.members:
        wl = dataclasses.replace(graph.ops[member.op].workload, sizes=member.sizes)
        ev = evaluate(arch, wl, member.mapping)
        expected += n * (ev.energy_pj + graph.ops[member.op].flops * wl.macs / graph.ops[member.op].workload.macs
                         * arch.compute.energy_per_mac)
        for tensor, level in (("Y", below), ("S", f)):
            if member.op in (graph.producer(tensor), *graph.consumers(tensor)):
                expected -= n * sum(ev.levels[lv].tensors[tensor].energy_pj for lv in range(level)
                                    if tensor in ev.levels[lv].tensors)
                if member.op in graph.consumers(tensor):
                    fills = ev.levels[level].tensors[tensor].fills * ev.levels[level].instances
                    expected -= n * _fill_energy(arch.levels[level], fills, 1.0)
    assert fused.energy_pj == pytest.approx(expected, rel=1e-9)
    kernel = fused.kernels[0]
    assert kernel.tensor_bytes("Y", 0) == kernel.tensor_bytes("S", 0) == 0
    assert kernel.tensor_bytes("Y", f) == 0              # never written to nor read from the GlobalBuffer
    assert kernel.tensor_bytes("S", f) > 0               # S is, and mm2 reads it there


def test_mapper_fuse_reports_the_buffered_group_and_its_refusals(tmp_path, capsys):
    """`mapper fuse` on toy: the text names the fused loops, iterations and slice mappings, the
    JSON carries each slice (its sizes, price and mapping), and every boundary left unfused has
    one of the reasons' kinds."""
    import json

    import yaml

    from mapper.cli import main
    path = tmp_path / "attention.yaml"
    # one head of 16x16 (a sliced group within a third of the budget two heads of 32 need)
    path.write_text(yaml.safe_dump({"name": "attention-small", "sizes": {"h": 1, "m": 16, "p": 16, "e": 4, "f": 4,
                                                                        "g": 8},
                                    "dtype": "int8", "ops": ATTENTION}))
    args = ["fuse", "toy", str(path), "--max-evaluations", "100000"]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    sliced = [g for g in out["fused"]["groups"] if g["slices"]]
    assert sliced, out["fused"]["groups"]
    for group in sliced:
        assert {s["op"] for s in group["slices"]} == set(group["ops"]) and group["tile"].startswith("slice")
        assert all(s["mapping"] and s["energy_pj"] > 0 for s in group["slices"])
    kinds = {b["kind"] for b in out["boundaries"] if not b["fused"]}
    assert kinds <= {"capacity", "tiling mismatch", "full reduction", "no gain", "compute-bound", "not searched",
                     "other grouping", "order", "read by another kernel", "dependency", "capacity/spill"}
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "fused through GlobalBuffer" in text and "slice mapping of" in text
