"""Blackwell's CTA pair (tcgen05 cta_group::2, `mapper/cta_pair.py`): the paired b200 as one unit
of two SMs (every figure by hand), exact counts against two single CTAs by hand in both cost
paths, the search's result with and without pairs (a GEMM the pair speeds up, a decode GEMM it
does not), the mapspace and arch keys refused where they do not apply, and the pair in the
report, the JSON and the emitted CUTLASS and Triton forms."""
import json

import pytest

from mapper.bind import kernel_arch
from mapper.cli import main
from mapper.constraints import Constraints
from mapper.cost import evaluate, evaluate_many
from mapper.cta_pair import paired
from mapper.emit.common import gemm_view
from mapper.emit.cutlass import cutlass_shape, cutlass_text
from mapper.emit.triton import triton_config
from mapper.errors import SpecError
from mapper.load import load_arch, load_workload, mapping_from_checked_dict
from mapper.load.arch import arch_from_dict
from mapper.load.files import spec_data
from mapper.mapping import to_table
from mapper.mapspace import Mapspace
from mapper.report import cluster_ctas, kernel_shape_text, mma_shape
from mapper.units import Where

from test_cost_agreement import assert_same

B200, GEMM = load_arch("b200"), load_workload("gemm-4096")
PAIRS = Constraints(name="cta-pairs", cta_pairs=True)
PAIRED = kernel_arch(B200, PAIRS).for_workload(GEMM)


def test_the_paired_b200_is_one_unit_of_two_sms():
    """By hand from archs/b200.yaml: 148 SMs pair into 74 units, each with 2 x 228 KiB of shared
    memory at 2 x 128 B/cycle and 2 x 256 KiB of tensor memory; 2 x 4,096 bf16 MACs a cycle (fp8
    and fp4 doubled alike); tcgen05's m grain 128 up to 256 (cta_group::2), n and k as one SM's;
    clusters of at most 8 pairs (16 CTAs), a GPC's SMs paired by TPC; HBM and L2 unchanged."""
    arch = paired(B200)
    hbm, l2, smem, tmem = arch.levels
    assert (hbm, l2.capacity, l2.bandwidth) == (B200.levels[0], B200.levels[1].capacity, B200.levels[1].bandwidth)
    assert (smem.mesh, smem.capacity, smem.bandwidth) == ((74, 1), 2 * 228 * 1024, 256)
    assert (tmem.mesh, tmem.capacity) == ((74, 1), 2 * 256 * 1024)
    assert (arch.compute.mesh, arch.compute.macs_per_cycle, arch.compute.warps) == ((74, 1), 8192, 8)
    assert dict(arch.compute.native_shape) == {"m": 128, "n": 8, "k": 16}
    assert dict(arch.compute.max_shape) == {"m": 256, "n": 256}
    rates = {rate.family: rate.macs_per_cycle for rate in arch.compute.per_dtype[1:]}
    assert rates == {"fp8": 16384, "fp6": 16384, "fp4": 32768}
    assert dict(arch.compute.for_operands(("fp4",)).native_shape) == {"m": 128, "n": 8, "k": 64}
    assert (l2.clusters.max_ctas, l2.clusters.gpc_sms) == (8, (10, 10, 9, 9, 9, 9, 9, 9))
    assert (arch.gpu.sms, arch.gpu.smem_per_sm, arch.gpu.registers_per_sm) == (74, 2 * 228 * 1024, 2 * 65536)
    assert arch.paired and paired(arch) is arch
    assert arch.peak_macs_per_cycle == B200.peak_macs_per_cycle


def _mapping(arch, pair: bool):
    """gemm-4096 in 128 blocks of 128 x 128 (one CTA each), or in 64 pairs of 256 x 128: n 8 at
    HBM, k 64 at L2 (a 64-deep k tile), SMEM double-buffered with A and B, TMEM the accumulator."""
    m_side, m_tile = (16, 256) if pair else (32, 128)
    data = [{"level": "HBM", "loops": [{"dim": "n", "bound": 8}], "keep": ["Z", "A", "B"]},
            {"level": "L2", "loops": [{"dim": "k", "bound": 64}],
             "spatial": [{"dim": "m", "bound": m_side, "axis": "x"}, {"dim": "n", "bound": 4, "axis": "x"}],
             "keep": ["Z", "A", "B"]},
            {"level": "SMEM", "keep": ["A", "B"], "stages": 2},
            {"level": "TMEM", "loops": [{"dim": "m", "bound": m_tile}, {"dim": "n", "bound": 128},
                                        {"dim": "k", "bound": 64}], "keep": ["Z"]}]
    return mapping_from_checked_dict(data, arch, GEMM, Where("<test>"))


def _priced(arch, mapping):
    assert_same(arch, GEMM, mapping, evaluate_many(arch, GEMM, to_table([mapping], 3, 3)))
    return evaluate(arch, GEMM, mapping)


# By hand: a 64 (k) x 128 tile of A per CTA (m 128) and of B per CTA (n 128), fetched once per
# step of the loops above SMEM (n 8 at HBM, k 64 at L2): 8,192 words x 512 fetches.
TILE_WORDS, FETCHES = 64 * 128, 8 * 64
L2, SMEM, TMEM = 1, 2, 3


def test_a_pair_reads_bs_tile_from_l2_once_for_its_two_ctas():
    """Two CTAs side by side each fetch the B tile they share; a pair fetches it once, half into
    each CTA. A (each CTA's own rows) moves the same either way."""
    single = _priced(B200, _mapping(B200, pair=False))
    pair = _priced(PAIRED, _mapping(PAIRED, pair=True))
    assert (single.levels[SMEM].instances, pair.levels[SMEM].instances) == (128, 64)
    assert single.levels[L2].tensors["A"].reads == pair.levels[L2].tensors["A"].reads == TILE_WORDS * FETCHES * 128
    assert single.levels[L2].tensors["B"].reads == TILE_WORDS * FETCHES * 128
    assert pair.levels[L2].tensors["B"].reads == TILE_WORDS * FETCHES * 64
    # what each SM holds: half of the pair's A (256 x 64) and B (128 x 64) tiles, 2 stages, bf16
    per_sm = pair.levels[SMEM].footprint_bytes / 2
    assert per_sm == (256 * 64 + 128 * 64) * 2 * 2 / 2 == 49152
    assert single.levels[SMEM].footprint_bytes == (128 * 64 + 128 * 64) * 2 * 2 == 65536


def test_the_pairs_mma_reads_b_from_shared_memory_half_as_often_per_sm():
    """Per instruction (`operand_reads: per_instruction`): one SM's m128n128k16 takes A once per
    128 columns and B once per 128 rows; the pair's m256n128k16 B once per 256 rows. Each SM runs
    8 blocks (n 8 at HBM) of 128 x 128 x 4096 MACs: alone A and B 4,194,304 words each, per SM of
    a pair A 4,194,304 and B 2,097,152. The accumulator's updates and the compute time are the
    same per SM."""
    single = _priced(B200, _mapping(B200, pair=False))
    pair = _priced(PAIRED, _mapping(PAIRED, pair=True))
    macs = 8 * 128 * 128 * 4096
    assert mma_shape(PAIRED, GEMM, _mapping(PAIRED, pair=True)) == {"m": 256, "n": 128, "k": 16}
    assert (single.levels[SMEM].tensors["A"].reads, single.levels[SMEM].tensors["B"].reads) == (macs // 128,) * 2
    assert pair.levels[SMEM].tensors["A"].reads == 2 * macs // 128
    assert pair.levels[SMEM].tensors["B"].reads == 2 * macs // 256
    assert pair.levels[TMEM].tensors["Z"].updates == 2 * single.levels[TMEM].tensors["Z"].updates
    assert pair.compute_cycles == single.compute_cycles == macs / 4096
    assert pair.macs_executed == single.macs_executed == GEMM.macs


def test_the_search_with_pairs_is_proven_and_pairs_speed_up_a_gemm_that_shared_memory_binds():
    """gemm-2048 on b200: one SM's 128 x 128 blocks are bound by shared memory's 128 B/cycle (the
    MMA's fragments); the pair's m256 instruction reads B half as often per SM and L2 moves less
    (B once per pair), so it runs in fewer cycles at less energy."""
    single, pair = (_searched("gemm-2048", mapspace) for mapspace in ("default", "cta-pairs"))
    assert single["search"]["optimal"] and pair["search"]["optimal"]
    assert single["cost"]["bottleneck"] == "SMEM"
    assert pair["kernel"] == {"cluster": {"m": 2, "n": 1, "k": 1}, "mma": {"m": 256, "n": 128, "k": 16},
                              "swap_ab": False, "cta_pair": True}
    assert pair["cost"]["cycles"] < 0.8 * single["cost"]["cycles"]
    assert pair["cost"]["energy_pj"] < single["cost"]["energy_pj"]
    l2 = [run["cost"]["level_details"]["L2"]["traffic_bytes"] for run in (single, pair)]
    assert l2[1] < l2[0]


def test_pairs_do_not_pay_on_a_decode_gemm():
    """llama7b-decode-qkv (m = 1): HBM binds either way, and the pair's m grain of 128 pads the
    one row to 128 instead of 64: twice the MACs run, more energy, no fewer cycles."""
    single, pair = (_searched("llama7b-decode-qkv", mapspace) for mapspace in ("default", "cta-pairs"))
    assert single["cost"]["bottleneck"] == pair["cost"]["bottleneck"] == "HBM"
    assert pair["cost"]["cycles"] >= single["cost"]["cycles"]
    assert pair["cost"]["energy_pj"] > single["cost"]["energy_pj"]
    assert (single["kernel"]["mma"]["m"], pair["kernel"]["mma"]["m"]) == (64, 128)


def _searched(workload: str, mapspace: str) -> dict:
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["search", "b200", workload, "--mapspace", mapspace, "--json"]) == 0
    return json.loads(out.getvalue())


def test_the_report_and_the_kernels_name_the_pair():
    mapping = _mapping(PAIRED, pair=True)
    assert cluster_ctas(PAIRED, GEMM, mapping) == {"m": 2, "n": 1, "k": 1}
    assert "over a CTA pair (tcgen05 cta_group::2" in kernel_shape_text(PAIRED, GEMM, mapping)
    view = gemm_view(PAIRED, GEMM, mapping)
    assert (view.block, view.cluster, view.unit_warps, view.cta_pair) == ((128, 128, 64), (2, 1, 1), 4, True)
    shape = cutlass_shape(view)
    assert (shape.cta, shape.instruction, shape.cluster) == ((128, 128, 64), (256, 128, 16), (2, 1, 1))
    text = cutlass_text(view)
    assert "KernelTmaWarpSpecialized2SmSm100" in text and "cta_group::2" in text
    assert "MmaTileShape = cute::Shape<cute::_256, cute::_128, cute::_64>" in text
    config = triton_config(view)
    assert (config.block_m, config.block_n, config.num_ctas, config.num_warps) == (256, 128, 2, 4)


def test_a_mapspace_asking_for_pairs_on_a_part_without_them_is_refused():
    with pytest.raises(SpecError, match="cta_pairs: architecture h100 has no CTA pairs"):
        Mapspace(load_arch("h100"), GEMM, PAIRS)
    assert Mapspace(B200, GEMM, PAIRS).arch.paired
    assert not Mapspace(B200, GEMM).arch.paired


@pytest.mark.parametrize("change, message", [
    (lambda d: d["compute"].update(cta_pair="yes"), "compute.cta_pair: expected true or false"),
    (lambda d: d.pop("gpu"), "compute.cta_pair: CTA pairs need a GPU"),
])
def test_a_bad_cta_pair_key_names_the_key(change, message):
    data, _ = spec_data("archs", "b200")
    change(data)
    with pytest.raises(SpecError, match=message.replace(".", r"\.")):
        arch_from_dict(data, Where("b200.yaml"))


def test_a_search_on_pairs_reads_back_into_evaluate_on_pairs(tmp_path, capsys):
    """`search --json`'s output is a mapping file; its `kernel.cta_pair` makes `evaluate` price
    it on the paired arch, to the same figures; on an arch without pairs it is refused there."""
    assert main(["search", "b200", "gemm-512", "--mapspace", "cta-pairs", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    path = tmp_path / "pair.json"
    path.write_text(json.dumps(found))
    assert main(["evaluate", "b200", "gemm-512", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"] == found["cost"]
    assert main(["evaluate", "h100", "gemm-512", str(path)]) == 2
    assert "kernel.cta_pair: architecture h100 has no CTA pairs" in capsys.readouterr().err
    found["kernel"]["cta_pair"] = "yes"
    path.write_text(json.dumps(found))
    assert main(["evaluate", "b200", "gemm-512", str(path)]) == 2
    assert "kernel.cta_pair: expected true or false" in capsys.readouterr().err


def test_a_fusion_study_runs_on_pairs_where_its_mapspace_asks_and_refuses_what_it_cannot_apply():
    """`mapper fuse --mapspace` applies a mapspace's levels and its CTA pairs; a key the study
    cannot apply (each op searched on its own kind's mapspace) is refused, naming it, not ignored."""
    from mapper.fusion.run import fusion_space
    from mapper.load import load_constraints, load_opgraph
    graph = load_opgraph("chain-mlp-gelu")
    arch, extra = fusion_space(B200, graph, load_constraints("cta-pairs"))
    assert arch.paired and extra == ()
    assert not fusion_space(B200, graph, load_constraints("default"))[0].paired
    for mapspace, key in (("swap-ab", "swap_operands"), ("clusters", "clusters"), ("imperfect", "factors")):
        with pytest.raises(SpecError, match=f"{key}: a fusion study applies a mapspace's levels and cta_pairs only"):
            fusion_space(load_arch("h100"), graph, load_constraints(mapspace))


def test_a_bad_cta_pairs_key_in_a_mapspace_names_it():
    from mapper.load.constraints import constraints_from_dict
    with pytest.raises(SpecError, match=r"m\.yaml: cta_pairs: expected true or false"):
        constraints_from_dict({"name": "x", "cta_pairs": "yes"}, Where("m.yaml"))


def test_swap_ab_is_decided_on_the_pair():
    """A 64 x 128 GEMM on b200's CTA pairs with swap-AB on `auto`: the pair's MMA is 256 rows
    tall, so 64 rows pad to 256 and the swapped product (128 rows) wastes less; one CTA's MMA
    (128 rows tall) would pad 64 to 128 and 128 columns not at all, and not swap. The space
    decides on the arch it runs (a Mapspace given the plain arch pairs it first)."""
    from mapper.constraints import Constraints
    from mapper.load import workload_from_dict
    from mapper.mma import with_operands_for
    workload = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": 64, "n": 128, "k": 256}, "dtype": "bf16"}, Where("<test>"))
    b200 = load_arch("b200")
    assert not with_operands_for(b200, workload, "auto").operands_swapped
    assert with_operands_for(paired(b200), workload, "auto").operands_swapped
    space = Mapspace(b200, workload, Constraints(cta_pairs=True, swap_operands="auto"))
    assert space.arch.paired and space.workload.operands_swapped
