"""`mapper emit`: a mapping read as kernel parameters (block, warp tile, warps, stages, GROUP_M),
the Triton, CUTLASS and MLIR texts, and every change a backend makes said on one line.

The expected figures are read by hand off mappings/h100-gemm-4096-edp.yaml: SMEM's tile is
2 x 64 = 128 along m and n and 64 along k (RF's loops 64, 64, 64 under SMEM's 2 x 2 split),
4 warps, 2 stages; L2 splits the blocks 32 (m) x 4 (n) over the SMs while HBM loops n 8 times:
a wave covers 32 rows of 4 of the 32 block columns, n walked inside m: GROUP_M = 32."""
import pytest
import yaml

from mapper.cli import main
from mapper.cost import evaluate
from mapper.emit.common import BlockConfig, EmitError, gemm_view
from mapper.emit.cutlass import cutlass_shape, cutlass_text
from mapper.emit.from_config import mapping_of_config
from mapper.emit.mlir import tile_plan
from mapper.emit.triton import config_text, kernel_text, triton_config
from mapper.load import load_arch, load_workload
from mapper.load.mapping import load_mapping, mapping_from_dict
from mapper.units import Where
from presets_sync import H100_SYNC, H100_SYNC_EDP


def preset(arch=H100_SYNC, workload="gemm-4096", mapping=H100_SYNC_EDP):
    a, w = load_arch(arch), load_workload(workload)
    return a, w, load_mapping(mapping, a, w)


def from_levels(arch, workload, levels, padded=False):
    return mapping_from_dict({"mapping": levels, "padded": padded}, arch, workload, Where("test"))


def test_edp_mapping_reads_as_the_hand_derived_kernel():
    view = gemm_view(*preset())
    assert view.block == (128, 128, 64) and view.warp == (64, 64, 64)
    assert view.warps == (2, 2, 1) and view.num_warps == 4 and view.stages == 2
    assert view.wave == (32, 4, 1) and view.group_m == 32
    assert view.extents == (4096, 4096, 4096)
    assert not any("loop order" in c or "split-K" in c for c in view.changes)


def test_triton_config_of_the_edp_mapping():
    text = config_text(gemm_view(*preset()))
    assert text.splitlines()[-1] == ("triton.Config({'BLOCK_M': 128, 'BLOCK_N': 128, 'BLOCK_K': 64, "
                                     "'GROUP_M': 32}, num_stages=2, num_warps=4)")
    assert "# mapper: changed: warp tile" in text       # Triton lays its warps itself: said, not hidden


RAGGED = [  # the joint search's pick for gemm-3000x5000x1000 on h100: n tiles of 200
    {"level": "HBM", "loops": [{"dim": "n", "bound": 5}]},
    {"level": "L2", "loops": [{"dim": "k", "bound": 63}],
     "spatial": [{"dim": "m", "bound": 24, "axis": "x"}, {"dim": "n", "bound": 5, "axis": "x"}]},
    {"level": "SMEM", "spatial": [{"dim": "m", "bound": 4, "axis": "x"}], "stages": 2},
    {"level": "RF", "loops": [{"dim": "m", "bound": 32}, {"dim": "n", "bound": 200}, {"dim": "k", "bound": 16}]},
]


def test_ragged_mapping_padded_extents_and_power_of_two_blocks():
    arch, wl = load_arch(H100_SYNC), load_workload("gemm-3000x5000x1000")
    view = gemm_view(arch, wl, from_levels(arch, wl, RAGGED, padded=True))
    assert view.extents == (3072, 5000, 1008) and view.sizes == (3000, 5000, 1000)
    assert view.block == (128, 200, 16) and view.num_warps == 4
    config = triton_config(view)
    assert (config.block_m, config.block_n, config.block_k) == (128, 256, 16)
    lines = [c for c in config.changes if c.startswith("BLOCK_N")]
    assert len(lines) == 1 and "200" in lines[0] and "256" in lines[0]
    assert not any(c.startswith("BLOCK_M") or c.startswith("BLOCK_K") for c in config.changes)


def test_gemv_block_raised_to_the_dot_minimum():
    arch, wl = load_arch(H100_SYNC), load_workload("gemv-4096")
    mapping, notes = mapping_of_config(arch, wl, BlockConfig(16, 64, 64, 3, 4))
    view = gemm_view(arch, wl, mapping)
    assert view.block[0] == 1 and any(n.startswith("BLOCK_M 16 covers all of m = 1") for n in notes)
    assert triton_config(view).block_m == 16   # and back: the kernel's 16 rows, 15 masked
    levels = [
        {"level": "HBM", "loops": []},
        {"level": "L2", "loops": [{"dim": "k", "bound": 64}], "spatial": [{"dim": "n", "bound": 64, "axis": "x"}]},
        {"level": "SMEM", "spatial": [{"dim": "n", "bound": 2, "axis": "x"}], "stages": 2},
        {"level": "RF", "loops": [{"dim": "n", "bound": 32}, {"dim": "k", "bound": 64}]},
    ]
    config = triton_config(gemm_view(arch, wl, from_levels(arch, wl, levels)))
    assert config.block_m == 16 and any(c.startswith("BLOCK_M") and "at least 16" in c for c in config.changes)


def test_k_loop_outside_block_loops_is_reported():
    arch, wl = load_arch(H100_SYNC), load_workload("gemm-4096")
    levels = [
        {"level": "HBM", "loops": [{"dim": "k", "bound": 2}, {"dim": "n", "bound": 8}]},
        {"level": "L2", "loops": [{"dim": "k", "bound": 32}],
         "spatial": [{"dim": "m", "bound": 32, "axis": "x"}, {"dim": "n", "bound": 4, "axis": "x"}]},
        {"level": "SMEM", "spatial": [{"dim": "m", "bound": 2, "axis": "x"}, {"dim": "n", "bound": 2, "axis": "x"}],
         "stages": 2},
        {"level": "RF", "loops": [{"dim": "m", "bound": 64}, {"dim": "n", "bound": 64}, {"dim": "k", "bound": 64}]},
    ]
    view = gemm_view(arch, wl, from_levels(arch, wl, levels))
    assert sum("loop order" in c for c in view.changes) == 1
    plan = tile_plan(arch, wl, from_levels(arch, wl, levels))
    assert any("HBM: the k loop" in c for c in plan.changes)


def test_waves_walking_m_inside_n_are_reported():
    arch, wl = load_arch(H100_SYNC), load_workload("gemm-4096")
    levels = [
        {"level": "HBM", "loops": [{"dim": "n", "bound": 8}, {"dim": "m", "bound": 2}]},
        {"level": "L2", "loops": [{"dim": "k", "bound": 64}],
         "spatial": [{"dim": "m", "bound": 16, "axis": "x"}, {"dim": "n", "bound": 4, "axis": "x"}]},
        {"level": "SMEM", "spatial": [{"dim": "m", "bound": 2, "axis": "x"}, {"dim": "n", "bound": 2, "axis": "x"}],
         "stages": 2},
        {"level": "RF", "loops": [{"dim": "m", "bound": 64}, {"dim": "n", "bound": 64}, {"dim": "k", "bound": 64}]},
    ]
    view = gemm_view(arch, wl, from_levels(arch, wl, levels))
    assert view.group_m == 16 and sum(c.startswith("wave order") for c in view.changes) == 1


def test_cutlass_sm90_and_sm80_shapes():
    shape = cutlass_shape(gemm_view(*preset()))
    assert shape.sm == 90 and shape.cta == (128, 128, 64) and shape.instruction == (64, 128, 16)
    assert shape.cluster == (1, 1, 1) and shape.stages == 2
    text = cutlass_text(gemm_view(*preset()), ["relu"])
    for arg in ("--operation=Gemm", "--m=4096", "--cta_m=128", "--cta_n=128", "--cta_k=64", "--stages=2",
                "--inst_m=64", "--inst_n=128", "--inst_k=16", "--cluster_m=1"):
        assert arg in text
    assert "cute::Shape<cute::_128, cute::_128, cute::_64>" in text and "StageCount<2>" in text

    arch, wl = load_arch("a100"), load_workload("gemm-4096")
    mapping, _ = mapping_of_config(arch, wl, BlockConfig(128, 256, 32, 3, 8))
    text = cutlass_text(gemm_view(arch, wl, mapping), ["bias", "gelu"])
    assert "GemmShape<128, 256, 32>" in text and "GemmShape<64, 64, 32>" in text and "GemmShape<16, 8, 16>" in text
    assert "--warps_m=2" in text and "--warps_n=4" in text and "LinearCombinationGELU" in text
    assert "bias is C" in text


def test_cutlass_reports_a_warp_tile_it_cannot_take():
    arch, wl = load_arch("a100"), load_workload("gemm-4096")
    levels = [
        {"level": "HBM", "loops": [{"dim": "m", "bound": 2}, {"dim": "n", "bound": 8}]},
        {"level": "L2", "loops": [{"dim": "k", "bound": 64}],
         "spatial": [{"dim": "m", "bound": 16, "axis": "x"}, {"dim": "n", "bound": 4, "axis": "x"}]},
        {"level": "SMEM", "loops": [{"dim": "k", "bound": 2}],
         "spatial": [{"dim": "m", "bound": 2, "axis": "x"}, {"dim": "n", "bound": 2, "axis": "x"}], "stages": 2},
        {"level": "RF", "loops": [{"dim": "m", "bound": 64}, {"dim": "n", "bound": 64}, {"dim": "k", "bound": 32}]},
    ]
    shape = cutlass_shape(gemm_view(arch, wl, from_levels(arch, wl, levels)))
    assert shape.warp == (64, 64, 64) and sum(c.startswith("warp tile") for c in shape.changes) == 1


def test_not_a_gemm_and_not_a_gpu_are_one_line_errors(capsys):
    with pytest.raises(EmitError, match="--to mlir"):
        arch, wl = load_arch("h100"), load_workload("conv-resnet50-conv3")
        gemm_view(arch, wl, None)
    assert main(["emit", "toy", "gemm-256", "toy-gemm-256-os", "--to", "triton"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no GPU" in err
    assert main(["emit", "h100", "gemm-4096", "h100-gemm-4096-edp", "--to", "triton", "--epilogue", "tanh"]) == 2
    assert "--epilogue 'tanh'" in capsys.readouterr().err


def test_kernel_text_is_python_with_the_epilogue_fused():
    view = gemm_view(*preset())
    text = kernel_text([view], ["bias", "gelu"])
    compile(text, "kernel.py", "exec")
    body = text[text.index("def matmul_kernel"):text.index("def _meta")]
    assert body.index("tl.load(bias_ptr") > body.index("acc += tl.dot") and body.index("tl.sigmoid") < body.index("tl.store")


def test_cli_emits_each_backend(tmp_path, capsys):
    for backend in ("triton", "cutlass", "mlir"):
        out = tmp_path / f"k.{backend}"
        assert main(["emit", "h100", "gemm-4096", "h100-gemm-4096-edp", "--to", backend, "-o", str(out),
                     "--epilogue", "bias", "--epilogue", "relu"]) == 0
        assert out.read_text().startswith(("# mapping: h100-gemm-4096-edp", "// mapping: h100-gemm-4096-edp"))


def test_cli_without_mapping_emits_the_search_best(capsys):
    assert main(["emit", "h100", "gemm-256", "--to", "triton", "--time-limit", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# mapping: the joint search's best for edp") and "triton.Config(" in out


def test_top_k_is_distinct_configs_ranked_by_the_model(capsys):
    assert main(["emit", "h100", "gemm-4096", "h100-gemm-4096-edp", "--to", "triton", "--top", "4"]) == 0
    out = capsys.readouterr().out
    configs = [line.strip() for line in out.splitlines() if line.strip().startswith("triton.Config(")]
    assert len(configs) == 4 and len(set(c.split("  #")[0] for c in configs)) == 4
    assert configs[0].startswith("triton.Config({'BLOCK_M': 128, 'BLOCK_N': 128, 'BLOCK_K': 64, 'GROUP_M': 32}")
    # ranks 2..4 in the model's order: EDP re-priced one mapping at a time never decreases
    arch, wl = load_arch("h100"), load_workload("gemm-4096")
    edps = []
    for line in configs[1:]:
        meta = eval(line[line.index("{"):line.index("}") + 1])
        stages = int(line.split("num_stages=")[1].split(",")[0])
        warps = int(line.split("num_warps=")[1].split(")")[0])
        config = BlockConfig(meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"], stages, warps, meta.get("GROUP_M"))
        edps.append(evaluate(arch, wl, mapping_of_config(arch, wl, config)[0]).edp)
    assert edps == sorted(edps)


def test_mapping_yaml_of_a_config_loads_back(tmp_path):
    """mapping_of_config's mapping passes the loader's own checks (factors, fanout, fit)."""
    arch, wl = load_arch("h100"), load_workload("gemm-3000x5000x1000")
    mapping, _ = mapping_of_config(arch, wl, BlockConfig(128, 256, 32, 3, 8, 8))
    from mapper.mapping import mapping_to_dict
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"mapping": mapping_to_dict(mapping, arch, wl), "padded": True}))
    assert load_mapping(str(path), arch, wl) == mapping
