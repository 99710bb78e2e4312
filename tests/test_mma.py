"""Tensor-core instructions whose operands come from a named level: an architecture level that
keeps by role (`keeps: [input, output]`, resolved per workload by the one role rule), and a
compute unit that reads whole fragments once per instruction (`operand_reads: per_instruction`,
`mapper/mma.py`). Exact counts by hand on h100 (wgmma: B read from shared memory, never held in
registers) and b200 (tcgen05: the accumulator in tensor memory, A and B from shared memory), the
literal simulator's instruction mode against both cost paths, and the joint search's bounds
against exhaustive enumeration where the units read per instruction."""
import itertools
import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import event, given, settings, strategies as st

from mapper import mma
from mapper.constraints import Constraints
from mapper.cost import evaluate, evaluate_many
from mapper.errors import SpecError
from mapper.load import load_arch, load_workload, mapping_from_checked_dict, workload_from_dict
from mapper.load.arch import arch_from_dict
from mapper.mapping import LevelMapping, Mapping, to_table
from mapper.mapspace import Mapspace, counting, sampling
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.units import Where

from brute_force import simulate
from strategies import archs, workloads
from test_brute_force_agreement import as_plain
from test_cost_agreement import assert_same

H100, B200 = load_arch("h100"), load_arch("b200")
# one thread block's worth: a 128 x 128 output tile, 64 deep, bf16 operands, an fp32 accumulator
SMALL = workload_from_dict({"name": "gemm-128x128x64", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                            "sizes": {"m": 128, "n": 128, "k": 64}, "dtype": "bf16", "dtypes": {"Z": "fp32"}},
                           Where("<test>"))
MACS = 128 * 128 * 64                   # 1,048,576, all on one unit


def one_block(arch, innermost: str, keep_inner: list[str], n_tile: int = 128) -> Mapping:
    """SMALL on one SM: everything above the SM once, the whole block in shared memory, the
    innermost level looping over its m x n_tile x 64 tile (n_tile < 128: n walked above it)."""
    data = [{"level": "HBM", "keep": ["Z", "A", "B"]}, {"level": "L2", "keep": ["Z", "A", "B"]},
            {"level": "SMEM", "loops": [{"dim": "n", "bound": 128 // n_tile}] if n_tile < 128 else [],
             "keep": ["Z", "A", "B"]},
            {"level": innermost, "loops": [{"dim": "m", "bound": 128}, {"dim": "n", "bound": n_tile},
                                           {"dim": "k", "bound": 64}], "keep": keep_inner}]
    return mapping_from_checked_dict(data, arch, SMALL, Where("<test>"))


def priced(arch, mapping):
    """The scalar evaluation, checked against the vectorised one count for count."""
    costs = evaluate_many(arch, SMALL, to_table([mapping], 3, 3))
    assert_same(arch.for_workload(SMALL), SMALL, mapping, costs)
    return evaluate(arch, SMALL, mapping), costs


def test_h100_registers_keep_a_and_the_accumulator_by_role():
    """h100's RF says `keeps: [input, output]`: for a GEMM that is A and Z, for a convolution
    its input I and output O (the first input and the output, whatever their names)."""
    assert H100.for_workload(SMALL).levels[-1].keeps == {"A", "Z"}
    conv = load_workload("conv-resnet50-conv3")
    assert H100.for_workload(conv).levels[-1].keeps == {"I", "O"}
    # recomputed from the words each time: resolving for one op does not leak into the next
    assert H100.for_workload(SMALL).for_workload(conv).levels[-1].keeps == {"I", "O"}
    assert B200.for_workload(SMALL).levels[-1].keeps == {"Z"}


def test_wgmma_reads_b_from_shared_memory_and_never_charges_it_to_registers():
    """By hand, one warpgroup running the 128 x 128 x 64 block as wgmma m64n128k16 (the tile's
    n is 128, a multiple of 8 up to 256): 2 instructions along m x 4 along k = 8 instructions.
    - B: each instruction reads its 16 x 128 fragment from SMEM: 8 x 2,048 = 16,384 words
      (MACs / 64: m's 64 rows share each B word). RF holds none of it: no reads, fills,
      updates, and none of RF's bytes.
    - A: filled into RF once (128 x 64 = 8,192 words), and each instruction reads its 64 x 16
      fragment there: 8 x 1,024 = 8,192 (MACs / 128, n's 128).
    - Z: each instruction updates its 64 x 128 accumulator: 8 x 8,192 = 65,536 (MACs / 16),
      of which 128 x 128 = 16,384 are first writes: 49,152 read-modify-write reads."""
    mapping = one_block(H100, "RF", ["Z", "A"])
    ev, costs = priced(H100, mapping)
    assert mma.mapping_instruction(H100, SMALL, mapping) == {"m": 64, "n": 128, "k": 16}
    smem, rf = ev.levels[2], ev.levels[3]
    assert "B" not in rf.tensors
    assert (costs.reads[0, 3, 2], costs.fills[0, 3, 2], costs.updates[0, 3, 2]) == (0, 0, 0)
    assert costs.footprint_bytes[0, 3] == 128 * 128 * 4 + 128 * 64 * 2      # Z (fp32) and A (bf16) only
    assert smem.tensors["B"].reads == 16_384 == MACS // 64
    a, z = rf.tensors["A"], rf.tensors["Z"]
    assert (a.fills, a.reads) == (8_192, 8_192)
    assert (z.updates, z.reads) == (65_536, 49_152)
    assert smem.tensors["A"].reads == 8_192        # A's fills into RF, nothing per instruction


def test_the_wgmma_n_is_the_largest_multiple_of_8_up_to_256_that_divides_the_tile():
    """n tile -> instruction n: 128 -> 128, 384 -> 192 (256 does not divide it), 512 -> 256,
    200 -> 200 (8 x 25), 136 -> 136; m and k stay at their native 64 and 16."""
    arch = H100.for_workload(SMALL)
    for tile, n in ((128, 128), (384, 192), (512, 256), (200, 200), (136, 136), (8, 8)):
        assert mma.instruction_shape(arch, SMALL, [64, tile, 16]) == {"m": 64, "n": n, "k": 16}


def test_the_n_of_the_instruction_sets_how_often_a_is_read():
    """With a 32-wide n tile (n walked 4 times in SMEM) the instruction is m64n32k16: A's
    fragment is read once per 32 MACs of a row, 4 x as often as at n128 (MACs / 32 = 32,768);
    B's reads do not depend on n (MACs / 64 = 16,384)."""
    ev, _ = priced(H100, one_block(H100, "RF", ["Z", "A"], n_tile=32))
    assert ev.levels[3].tensors["A"].reads == MACS // 32 == 32_768
    assert ev.levels[2].tensors["B"].reads == MACS // 64


def test_wgmma_ss_reads_both_operands_from_shared_memory():
    """The SS form (`--mapspace wgmma-ss`: RF keeps Z alone): A's fragments come from SMEM too,
    once per instruction (MACs / 128 = 8,192 words), and RF holds the accumulator alone."""
    ev, costs = priced(H100, one_block(H100, "RF", ["Z"]))
    assert set(ev.levels[3].tensors) == {"Z"}
    assert costs.footprint_bytes[0, 3] == 128 * 128 * 4
    assert ev.levels[2].tensors["A"].reads == MACS // 128
    assert ev.levels[2].tensors["B"].reads == MACS // 64


def test_tcgen05_keeps_the_accumulator_in_tensor_memory_and_reads_a_and_b_from_shared_memory():
    """b200 has no register level: TMEM, the innermost, keeps Z alone (`keeps: [output]`). One
    SM running the block as tcgen05 m128n128k16 (m up to 128, n to 256): 4 instructions along k.
    TMEM's bytes are the accumulator's 128 x 128 x 4 B = 65,536; SMEM serves A MACs / 128 =
    8,192 words and B MACs / 128 = 8,192 (each instruction its 128 x 16 and 16 x 128 fragments);
    Z is updated MACs / 16 = 65,536 times in TMEM."""
    assert [level.name for level in B200.levels] == ["HBM", "L2", "SMEM", "TMEM"]
    mapping = one_block(B200, "TMEM", ["Z"])
    ev, costs = priced(B200, mapping)
    assert mma.mapping_instruction(B200, SMALL, mapping) == {"m": 128, "n": 128, "k": 16}
    assert set(ev.levels[3].tensors) == {"Z"}
    assert costs.footprint_bytes[0, 3] == 65_536
    assert ev.levels[3].tensors["Z"].updates == MACS // 16
    assert ev.levels[2].tensors["A"].reads == ev.levels[2].tensors["B"].reads == MACS // 128 == 8_192


def test_a_per_mac_unit_keeps_timeloops_count():
    """The same h100 mapping with `operand_reads: per_mac`: B's reads at SMEM are one per MAC
    (64 x more): the instruction rule is the only difference."""
    per_mac = replace(H100, compute=replace(H100.compute, operand_reads="per_mac"))
    ev, _ = priced(per_mac, one_block(per_mac, "RF", ["Z", "A"]))
    assert ev.levels[2].tensors["B"].reads == MACS


def _arch_yaml(keeps, operand_reads="per_instruction", max_shape=None):
    compute = {"native_shape": {"m": 2, "n": 2, "k": 2}, "operand_reads": operand_reads}
    if max_shape is not None:
        compute["max_shape"] = max_shape
    return {"name": "tiny-mma", "clock": "1 GHz",
            "levels": [{"name": "DRAM"}, {"name": "Buf", "max_stages": 2}, {"name": "Reg", "keeps": keeps}],
            "compute": compute}


def test_bad_max_shape_and_operand_reads_and_role_keeps_are_refused_at_their_key():
    with pytest.raises(SpecError, match=r"compute\.max_shape\.n.*multiple of the native shape's n \(2\), got 5"):
        arch_from_dict(_arch_yaml(["output"], max_shape={"n": 5}), Where("a.yaml"))
    with pytest.raises(SpecError, match=r"compute\.operand_reads.*per_mac or per_instruction"):
        arch_from_dict(_arch_yaml(["output"], operand_reads="per_fragment"), Where("a.yaml"))
    arch = arch_from_dict(_arch_yaml(["outptu"]), Where("a.yaml"))
    with pytest.raises(SpecError, match=r"levels\[2\]\.keeps.*no tensor 'outptu'.*roles: output, input, weight"):
        Mapspace(arch, SMALL)


def _splits(size: int, grain: int):
    """(outer, middle, inner) factorisations of size whose inner factor is a multiple of grain."""
    return [(size // (b * c), b, c) for c in range(grain, size + 1, grain) if size % c == 0
            for b in range(1, size // c + 1) if (size // c) % b == 0]


GEMM_TINY = workload_from_dict({"name": "gemm-4x8x4", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                "sizes": {"m": 4, "n": 8, "k": 4}, "dtype": "bf16"}, Where("<test>"))


@pytest.mark.parametrize("keeps", [["input", "output"], ["output"], ["weight"]])
def test_the_cost_model_matches_the_literal_simulator_running_whole_instructions(keeps):
    """Every tiling of gemm 4 x 8 x 4 over DRAM / Buf / Reg with the register tile whole
    fragments (m2 n2 k2; n up to 4), in random loop orders, Reg keeping by role: the simulator
    groups the unit's iteration points into instructions and takes each distinct word an
    instruction names once; both cost paths agree with it at every level."""
    arch = arch_from_dict(_arch_yaml(keeps, max_shape={"n": 4}), Where("<test>")).for_workload(GEMM_TINY)
    rng = random.Random(40)
    kept = arch.levels[2].keeps
    checked = 0
    for split in itertools.product(*(_splits(s, 2) for s in GEMM_TINY.sizes)):
        levels = []
        for lv in range(3):
            order = rng.sample(range(3), 3)
            temporal = tuple((d, split[d][lv]) for d in order if split[d][lv] > 1)
            keep = frozenset(range(3)) if lv < 2 else frozenset(
                t for t, tensor in enumerate(GEMM_TINY.tensors) if tensor.name in kept)
            levels.append(LevelMapping(temporal, (), keep, 1))
        mapping = Mapping(tuple(levels))
        tile = [split[d][2] for d in range(3)]
        shape = mma.instruction_shape(arch, GEMM_TINY, tile)
        # the simulator's instructions, chosen by hand: n the largest of 4, 2 that divides the tile
        assert shape == {"m": 2, "n": 4 if tile[1] % 4 == 0 else 2, "k": 2}
        problem, nest, _ = as_plain(arch, GEMM_TINY, mapping)
        truth = simulate(problem, nest, instructions=[(("m",), 2), (("n",), shape["n"]), (("k",), 2)])
        ev = evaluate(arch, GEMM_TINY, mapping)
        assert_same(arch, GEMM_TINY, mapping, evaluate_many(arch, GEMM_TINY, to_table([mapping], 3, 3)))
        for level in ev.levels:
            for name, cost in level.tensors.items():
                want = truth["levels"][level.name]["tensors"][name]
                assert (cost.reads, cost.fills, cost.updates) == (want["reads"], want["fills"], want["updates"]), \
                    (level.name, name, mapping)
        checked += 1
    assert checked == 3 * 6 * 3       # the splits: m 3 (inner 2: 2 ways, inner 4: 1), n 6 (3 + 2 + 1), k 3


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_joint_equals_exhaustive_where_the_units_read_per_instruction(data):
    """The search's bounds charge the units' words at the most an instruction can share
    (`mma.least_words_per_mac`): the joint search still finds and proves exhaustive's best."""
    workload = data.draw(workloads(kinds=("gemm", "batched"), max_macs=24))
    drawn = data.draw(archs(min_levels=3, max_levels=3, native=True))
    native = dict(drawn.compute.native_shape)
    if native.get("n", 1) < 2:
        native["n"] = 2
    compute = replace(drawn.compute, native_shape=tuple(native.items()), operand_reads="per_instruction",
                      max_shape=(("n", 2 * native["n"]),), per_dtype=())
    role = data.draw(st.sampled_from([("output",), ("input", "output"), ("weight",)]))
    levels = drawn.levels[:-1] + (replace(drawn.levels[-1], keeps=frozenset(), keep_roles=role),)
    arch = replace(drawn, compute=compute, levels=levels)
    space = Mapspace(arch, workload, Constraints(levels=(), factors="imperfect", max_padding=0.5))
    if counting.funnel(space).after["divisibility"] > 200_000:
        return
    objective = parse_objective(data.draw(st.sampled_from(["edp", "energy", "cycles"])), arch)
    try:
        exact = Exhaustive().run(space, objective)
    except Exception as exc:        # no mapping fits: both must say so
        with pytest.raises(type(exc)):
            Joint().run(space, objective)
        return
    result = Joint().run(space, objective)
    assert result.optimal and result.score == exact.score
    event("compared with exhaustive")


GEMV_TINY = workload_from_dict({"name": "gemv-1x8x4", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                "sizes": {"m": 1, "n": 8, "k": 4}, "dtype": "bf16"}, Where("<test>"))


def test_a_role_smaller_than_its_grain_is_bounded_with_its_padding():
    """m = 1 under an m2 grain (a decode GEMM under wgmma's m64): every instruction runs m2,
    so A (indexed by m) is drawn at least 2 / 4 (n's largest) = 0.5 times per MAC, B once per
    MAC (no m to share it over) and Z once (2 / k's 2), where the bound once took 1/4, 1/2 and
    1/2. Every mapping of the space draws at least that (reads at the level serving the units:
    A and B from Buf, Z's updates at Reg), the bound is met by some mapping, and the joint
    search proves exhaustive's best."""
    arch = arch_from_dict(_arch_yaml(["output"], max_shape={"n": 4}), Where("<test>"))
    least = [mma.least_words_per_mac(arch.for_workload(GEMV_TINY), GEMV_TINY, t) for t in range(3)]
    assert least == [1.0, 0.5, 1.0]                     # Z, A, B (the output first)
    space = Mapspace(arch, GEMV_TINY, Constraints())
    factors = sampling.factors_at(space, np.arange(int(np.prod([len(t) for t in space.dim_tables]))))
    table = sampling.expand(space, factors)
    costs = evaluate_many(space.arch, GEMV_TINY, table)
    drawn = [costs.level_updates[2, 0], costs.level_reads[1, 1], costs.level_reads[1, 2]]
    valid = costs.valid
    assert valid.any()
    for t, words in enumerate(drawn):
        assert (words[valid] >= least[t] * GEMV_TINY.macs).all(), t
        assert words[valid].min() == least[t] * GEMV_TINY.macs, t
    objective = parse_objective("energy", arch)
    result, exact = Joint().run(space, objective), Exhaustive().run(space, objective)
    assert result.optimal and result.score == exact.score
