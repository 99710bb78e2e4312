"""The MMA a mapping issues, in what a user reads off it: the report's kernel line and `--json`
`kernel`, the CUTLASS template (WGMMA 64 x N x 16 on h100, tcgen05.mma on b200: sm100) and the
Triton config (num_warps a warpgroup's 4, the instruction named), a Triton config read back into
the same mapping, and the MLIR form applied by iree-opt. The mapping is mappings/h100-gemm-4096-edp
(128 x 128 x 64 blocks, the warpgroup's whole tile: 2 x 1 wgmma m64n128k16 per k step of 16)."""
import pytest

from mapper.emit.common import gemm_view
from mapper.emit.cutlass import cutlass_shape, cutlass_text
from mapper.emit.from_config import mapping_of_config
from mapper.emit.mlir import mlir_text
from mapper.emit.triton import config_text, triton_config
from mapper.load import load_arch, load_workload, mapping_from_checked_dict
from mapper.load.mapping import load_mapping
from mapper.report import kernel_shape_text, mma_shape
from mapper.units import Where

from test_emit_mlir import apply, loops_around, needs_iree

H100, B200, GEMM = load_arch("h100"), load_arch("b200"), load_workload("gemm-4096")
EDP = load_mapping("h100-gemm-4096-edp", H100, GEMM)


def test_the_report_names_the_instruction_the_mapping_issues():
    assert mma_shape(H100, GEMM, EDP) == {"m": 64, "n": 128, "k": 16}
    assert kernel_shape_text(H100, GEMM, EDP).endswith("MMA shape m64n128k16")


def test_cutlass_on_h100_is_the_wgmma_of_the_mapping_on_one_warpgroup():
    view = gemm_view(H100, GEMM, EDP)
    shape = cutlass_shape(view)
    assert (shape.sm, shape.cta, shape.instruction, shape.warps) == (90, (128, 128, 64), (64, 128, 16), (1, 1, 1))
    assert not any(line.startswith("warps") for line in shape.changes)     # a warpgroup is the unit
    text = cutlass_text(view)
    assert "// instruction: WGMMA 64x128x16 per warpgroup" in text and "--inst_n=128" in text


def test_triton_on_h100_runs_one_warpgroup_and_names_the_instruction():
    view = gemm_view(H100, GEMM, EDP)
    config = triton_config(view)
    assert (config.block_m, config.block_n, config.block_k, config.num_warps) == (128, 128, 64, 4)
    assert all("warp tile" not in line for line in config.changes)     # nothing of the mapping dropped
    assert "# MMA: m64n128k16, issued by 4 warps together" in config_text(view)


def test_a_triton_config_reads_back_into_the_mapping_it_came_from():
    """The EDP mapping's config (128 x 128 x 64, 4 warps: one warpgroup, 2 stages) read back:
    the same blocks, the warpgroup's tile the whole block, the same instruction."""
    view = gemm_view(H100, GEMM, EDP)
    mapping, _ = mapping_of_config(H100, GEMM, triton_config(view))
    back = gemm_view(H100, GEMM, mapping)
    assert (back.block, back.warp, back.num_warps, back.instruction) == ((128, 128, 64), (128, 128, 64), 4, (64, 128, 16))


def test_cutlass_on_b200_is_a_tcgen05_kernel_for_sm100():
    """A 128 x 256 x 64 block on b200 (TMEM holding the 128 x 256 fp32 accumulator, 128 KiB):
    tcgen05.mma m128n256k16, CUTLASS 3's sm100 builder with that MMA tile."""
    data = [{"level": "HBM", "loops": [{"dim": "n", "bound": 16}, {"dim": "m", "bound": 32}], "keep": ["Z", "A", "B"]},
            {"level": "L2", "loops": [{"dim": "k", "bound": 64}], "keep": ["Z", "A", "B"]},
            {"level": "SMEM", "keep": ["A", "B"], "stages": 2},
            {"level": "TMEM", "loops": [{"dim": "m", "bound": 128}, {"dim": "n", "bound": 256}, {"dim": "k", "bound": 64}],
             "keep": ["Z"]}]
    mapping = mapping_from_checked_dict(data, B200, GEMM, Where("<test>"))
    assert mma_shape(B200, GEMM, mapping) == {"m": 128, "n": 256, "k": 16}
    shape = cutlass_shape(gemm_view(B200, GEMM, mapping))
    assert (shape.sm, shape.instruction) == (100, (128, 256, 16))
    text = cutlass_text(gemm_view(B200, GEMM, mapping))
    assert "cutlass::arch::Sm100" in text and "MmaTileShape = cute::Shape<cute::_128, cute::_256, cute::_64>" in text
    assert "tcgen05.mma 128x256x16" in text


@needs_iree
def test_the_h100_wgmma_mapping_applies_in_mlir(tmp_path):
    """By hand from mappings/h100-gemm-4096-edp.yaml: HBM loops n 8 times (tiles of 512), L2
    splits 32 x 4 blocks of 128 x 128 (one warpgroup each: SMEM splits nothing), the K loop steps
    by 64, and RF runs wgmma m64n128k16 in its order m, n, k: m by 64, k by 16 (n is the
    instruction's whole 128); the epilogue inside the block loops, not K's."""
    text, plan = mlir_text(H100, GEMM, EDP, ["bias"])
    ir = apply(tmp_path, text)
    [contraction] = loops_around(ir, "mapper.contraction")
    assert contraction == [("for", (512,)), ("forall", (128, 128)), ("for", (64,)), ("for", (64,)), ("for", (16,))]
    assert loops_around(ir, "mapper.epilogue") == [contraction[:2]]
    assert ir.count("mapper.contraction") == 1 and not plan.changes


def test_cutlass_and_triton_carry_a_cluster_with_the_wgmma():
    """The EDP mapping with its 32 x 4 CTAs as clusters of 2 along m (B multicast to both): CUTLASS's
    ClusterShape 2x1x1 beside the WGMMA 64x128x16; Triton's program spans the cluster (num_ctas=2,
    BLOCK_M 256) and its MMA comment stays the warpgroup's instruction."""
    data = [{"level": "HBM", "loops": [{"dim": "n", "bound": 8}], "keep": ["Z", "A", "B"]},
            {"level": "L2", "loops": [{"dim": "k", "bound": 64}],
             "spatial": [{"dim": "m", "bound": 16, "axis": "x"}, {"dim": "n", "bound": 4, "axis": "x"},
                         {"dim": "m", "bound": 2, "axis": "y"}], "keep": ["Z", "A", "B"]},
            {"level": "SMEM", "keep": ["Z", "A", "B"], "stages": 2},
            {"level": "RF", "loops": [{"dim": "m", "bound": 128}, {"dim": "n", "bound": 128}, {"dim": "k", "bound": 64}],
             "keep": ["Z", "A"]}]
    mapping = mapping_from_checked_dict(data, H100, GEMM, Where("<test>"))
    view = gemm_view(H100, GEMM, mapping)
    text = cutlass_text(view)
    assert "ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>" in text
    assert "// instruction: WGMMA 64x128x16 per warpgroup" in text
    config = triton_config(view)
    assert "num_ctas=2)" in config.kwargs_text() and config.block_m == 256
    assert "# MMA: m64n128k16" in config_text(view)


def test_two_warps_on_h100_read_as_one_warpgroup():
    """A Triton config of 2 warps on h100: wgmma needs a warpgroup of 4, so it is priced as one
    warpgroup, with a line saying so, and emits as 4 warps."""
    from mapper.emit.common import BlockConfig
    mapping, changes = mapping_of_config(H100, GEMM, BlockConfig(64, 64, 64, 2, 2))
    assert any(line.startswith("num_warps 2: Warpgroup is issued by 4 warps") for line in changes)
    assert triton_config(gemm_view(H100, GEMM, mapping)).num_warps == 4


@pytest.mark.parametrize("arch", ["h100", "h200", "b200"])
def test_every_gpu_preset_with_an_instruction_reads_per_instruction(arch):
    """h100, h200, b200 model their MMA's operand reads per instruction; a100 keeps mma.sync
    and Timeloop's per-MAC count."""
    assert load_arch(arch).compute.operand_reads == "per_instruction"
    assert load_arch("a100").compute.operand_reads == "per_mac"
