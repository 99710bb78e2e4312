"""A Triton config read back into a mapping (`mapper evaluate --from-triton CONFIG`) and emitted
again gives the same config: the same block tile, stages, warps and GROUP_M (and, for the EDP
mapping, the same warp tile); the priced mapping is the one `mapping_of_config` builds. On a
warpgroup MMA (h100's wgmma) the warps are the fewest whole warpgroups that hold the block's
accumulator: more are priced as one (they share the SM's tensor cores) and emitted as that."""
import json

import pytest
import yaml

from mapper.cli import main
from mapper.cost import evaluate
from mapper.emit.common import gemm_view
from mapper.emit.common import BlockConfig
from mapper.emit.from_config import mapping_of_config
from mapper.emit.triton import triton_config
from mapper.load import load_arch, load_workload
from mapper.load.mapping import load_mapping, mapping_from_dict
from mapper.units import Where


def evaluate_config(capsys, tmp_path, arch, workload, data, name="c.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    assert main(["evaluate", arch, workload, "--from-triton", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("workload, config", [
    ("gemm-4096", {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "num_warps": 8, "GROUP_M": 8}),
    ("gemm-3000x5000x1000", {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4}),
    ("gemv-4096", {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 2, "num_warps": 4}),
    ("llama7b-prefill-up", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4, "num_warps": 4,
                            "GROUP_M": 8}),
])
def test_config_reads_back_and_emits_the_same(capsys, tmp_path, workload, config):
    out = evaluate_config(capsys, tmp_path, "h100", workload, config)
    arch, wl = load_arch("h100"), load_workload(workload)
    mapping = mapping_from_dict({"mapping": out["mapping"], "padded": out.get("padded", False)}, arch, wl, Where("json"))
    again = triton_config(gemm_view(arch, wl, mapping)).as_dict()
    assert again == config
    built, _ = mapping_of_config(arch, wl, BlockConfig(config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"],
                                                       config["num_stages"], config["num_warps"], config.get("GROUP_M")))
    assert mapping == built
    assert out["cost"]["cycles"] == pytest.approx(evaluate(arch, wl, built).cycles)


def test_group_m_over_whole_rows_is_the_row_major_order():
    """GROUP_M = 8 over 16 columns of 256 (gemm-4096): a wave is 8 whole rows either way, so the
    mapping is the row-major one and emits without GROUP_M."""
    arch, wl = load_arch("h100"), load_workload("gemm-4096")
    grouped, _ = mapping_of_config(arch, wl, BlockConfig(128, 256, 64, 3, 8, 8))
    plain, _ = mapping_of_config(arch, wl, BlockConfig(128, 256, 64, 3, 8))
    assert grouped == plain
    view = gemm_view(arch, wl, grouped)
    assert view.wave[:2] == (8, 16) and view.group_m is None


def test_edp_mapping_emitted_then_read_back_has_the_same_tiles(capsys, tmp_path):
    arch, wl = load_arch("h100"), load_workload("gemm-4096")
    view = gemm_view(arch, wl, load_mapping("h100-gemm-4096-edp", arch, wl))
    emitted = tmp_path / "config.py"
    assert main(["emit", "h100", "gemm-4096", "h100-gemm-4096-edp", "--to", "triton", "-o", str(emitted)]) == 0
    capsys.readouterr()
    out = evaluate_config(capsys, tmp_path, "h100", "gemm-4096", emitted.read_text(), "again.py")
    back = gemm_view(arch, wl, mapping_from_dict({"mapping": out["mapping"]}, arch, wl, Where("json")))
    assert (back.block, back.warp, back.warps, back.stages, back.group_m) == \
        (view.block, view.warp, view.warps, view.stages, view.group_m)
    assert back.wave == view.wave          # 32 x 4 blocks per wave, as the search chose


@pytest.mark.parametrize("data, expected", [
    ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 3}, "num_warps"),
    ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": -32, "num_stages": 3, "num_warps": 4}, "BLOCK_K"),
    ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4, "BLOCK_Q": 1}, "BLOCK_Q"),
    ("triton.Config({'BLOCK_M': x}, num_stages=2, num_warps=4)", "triton.Config"),
])
def test_bad_config_is_a_one_line_error(capsys, tmp_path, data, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    assert main(["evaluate", "h100", "gemm-4096", "--from-triton", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and expected in err


def test_config_that_does_not_fit_is_a_one_line_error(capsys, tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 256, "num_stages": 4, "num_warps": 4}))
    assert main(["evaluate", "h100", "gemm-4096", "--from-triton", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "capacity" in err


def test_a_spilling_accumulator_is_a_one_line_error(capsys, tmp_path):
    """128x256 over 4 warps is 256 fp32 accumulator registers a thread: Triton spills them (4.9x
    slower than over 8 warps at the median on an H200), which the model cannot price; the error
    says how many warps would hold it."""
    path = tmp_path / "spills.yaml"
    path.write_text(yaml.safe_dump({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 3, "num_warps": 4}))
    assert main(["evaluate", "h100", "gemm-4096", "--from-triton", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "spills.yaml: num_warps" in err and "256 registers a thread" in err
    assert "at least 8 warps" in err


def test_extra_warpgroups_are_priced_as_one_and_emitted_as_the_fewest(capsys, tmp_path):
    """128x128 over 8 warps (two warpgroups) on h100: the same mapping and price as over 4, said in
    a change line; emitted again with 4 (128 accumulator registers a thread)."""
    config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "num_warps": 8, "GROUP_M": 8}
    arch, wl = load_arch("h100"), load_workload("gemm-4096")
    eight, changes = mapping_of_config(arch, wl, BlockConfig(128, 128, 64, 3, 8, 8))
    four, _ = mapping_of_config(arch, wl, BlockConfig(128, 128, 64, 3, 4, 8))
    assert eight == four and any("priced as one" in line for line in changes)
    out = evaluate_config(capsys, tmp_path, "h100", "gemm-4096", config)
    mapping = mapping_from_dict({"mapping": out["mapping"], "padded": out.get("padded", False)}, arch, wl, Where("json"))
    assert triton_config(gemm_view(arch, wl, mapping)).as_dict() == {**config, "num_warps": 4}


def test_a_cluster_config_reads_back_with_multicast(capsys, tmp_path):
    """num_ctas 2 on a 256x128 block (h100): read back as a 2x1 cluster of 128x128 CTAs (the
    squarest), which share B's tile: the L2 serves B half the reads of the same CTAs without a
    cluster (TMA multicast), A's the same; emitted again, the same config."""
    arch, wl = load_arch("h100"), load_workload("gemm-4096")
    clustered, changes = mapping_of_config(arch, wl, BlockConfig(256, 128, 64, 3, 4, 8, None, 2))
    alone, _ = mapping_of_config(arch, wl, BlockConfig(128, 128, 64, 3, 4, 8, None, 1))
    assert any("2x1 cluster" in line for line in changes)
    reads = [{t: c.reads for t, c in evaluate(arch, wl, mp).levels[1].tensors.items()} for mp in (clustered, alone)]
    assert reads[0]["B"] * 2 == reads[1]["B"] and reads[0]["A"] == reads[1]["A"]
    config = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "num_warps": 4, "GROUP_M": 8,
              "num_ctas": 2}
    out = evaluate_config(capsys, tmp_path, "h100", "gemm-4096", config)
    mapping = mapping_from_dict({"mapping": out["mapping"], "padded": out.get("padded", False)}, arch, wl, Where("json"))
    assert mapping == clustered
    assert triton_config(gemm_view(arch, wl, mapping)).as_dict() == config


@pytest.mark.parametrize("arch, ctas, fragment", [("a100", 2, "no thread-block clusters"), ("h100", 32, "at most 16")])
def test_a_cluster_the_arch_cannot_run_is_a_one_line_error(capsys, tmp_path, arch, ctas, fragment):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "num_warps": 4,
                                    "num_ctas": ctas}))
    assert main(["evaluate", arch, "gemm-4096", "--from-triton", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "c.yaml: num_ctas" in err and fragment in err
