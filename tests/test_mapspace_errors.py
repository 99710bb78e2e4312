"""Mapspace presets load strictly; an empty space says which step emptied it and why."""
import dataclasses

import pytest
import yaml

from mapper.cli import main
from mapper.constraints import Constraints, LevelConstraints
from mapper.errors import InfeasibleError, SpecError
from mapper.load import load_arch, load_constraints, load_workload, preset_names, workload_from_dict
from mapper.units import Where
from mapper.mapspace import Mapspace, counting, infeasible, order_tables

from presets_sync import H100_SYNC


# every preset binds in the default run; their funnels (sampled, seconds on the GPU presets)
# in the slow run
@pytest.mark.parametrize("funnel", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["binds", "funnel"])
def test_every_mapspace_preset_loads_and_binds(funnel):
    for name in preset_names("constraints"):
        constraints = load_constraints(name)
        target = ("h100", "gemm-4096") if name in ("gpu", "gpu-sync", "wgmma-ss", "triton-kernel") else ("toy", "gemm-256")
        if name == "sync-128x128":            # an mma.sync template: 2 x 2 warps per block
            target = (H100_SYNC, "gemm-4096")
        if name.startswith("timeloop-"):      # written for those designs' level names
            target = (name, f"{name}-problem")
        if name == "tpu-v4i-roles":           # AccelForge's tpu_v4i keeps, by role
            target = ("tpu-v4i", "gemm-256")
        if name == "cta-pairs":               # Blackwell's tcgen05 cta_group::2
            target = ("b200", "gemm-4096")
        if name == "tensor-depths":           # the global buffer of issue 38's accelerator, without limits
            target = ("pe-array", "gemm-256")
        space = Mapspace(load_arch(target[0]), load_workload(target[1]), constraints)
        assert counting.size(space) > 0
        if funnel:
            assert counting.funnel(space, samples=2000).after["divisibility"] > 0


@pytest.mark.parametrize("data, fragments", [
    ({"name": "x", "factors": "sloppy"}, ["factors", "perfect"]),
    ({"name": "x", "min_utilization": 2}, ["min_utilization", "between 0 and 1"]),
    ({"name": "x", "levels": {"RF": {"temporal": {"k": {"min": 8, "max": 4}}}}}, ["levels.RF.temporal.k.max", "below min"]),
    ({"name": "x", "levels": {"RF": {"colour": "red"}}}, ["levels.RF.colour", "unknown key"]),
    ({"name": "x", "levels": {"RF": {"stages": []}}}, ["levels.RF.stages"]),
    ({"name": "x", "levels": {"RF": {"tile": {"m": {"power_of_two": "yes"}}}}},
     ["levels.RF.tile.m.power_of_two", "true or false"]),
    ({"name": "x", "levels": {"RF": {"capacity": "lots"}}}, ["levels.RF.capacity"]),
    ({"name": "x", "levels": {"RF": {"capacity": "unlimited"}}}, ["levels.RF.capacity"]),
])
def test_bad_presets(tmp_path, data, fragments):
    path = tmp_path / "ms.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as info:
        load_constraints(path)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_unknown_dim_in_constraints_is_named():
    c = Constraints(levels=(("RegisterFile", LevelConstraints(order=("m", "n", "q"))),))
    with pytest.raises(SpecError, match="no dim 'q'"):
        counting.funnel(Mapspace(load_arch("toy"), load_workload("gemm-256"), c), samples=100)


def test_capacity_explanation_names_level_and_sizes():
    arch = load_arch("toy")
    tiny = dataclasses.replace(arch.levels[2], capacity=2)
    arch = dataclasses.replace(arch, levels=arch.levels[:2] + (tiny,))
    with pytest.raises(InfeasibleError) as info:
        infeasible.require_nonempty(Mapspace(arch, load_workload("gemm-256")), 
            counting.funnel(Mapspace(arch, load_workload("gemm-256")), samples=2000))
    message = str(info.value)
    assert "capacity" in message and "RegisterFile" in message and "3 B" in message and "2 B" in message
    assert "bypass" in message
    # with bypass allowed the same architecture has mappings
    bypass = Constraints(levels=(("RegisterFile", LevelConstraints(bypass=True)),))
    infeasible.require_nonempty(Mapspace(arch, load_workload("gemm-256"), bypass))


def test_divisibility_explanation_suggests_padding(tmp_path):
    wl = tmp_path / "odd.yaml"
    wl.write_text(yaml.safe_dump({"name": "odd", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                  "sizes": {"m": 100, "n": 64, "k": 100}, "dtype": "bf16"}))
    space = Mapspace(load_arch("h100"), load_workload(wl), Constraints(factors="perfect"))
    with pytest.raises(InfeasibleError, match="divisibility.*k \\(size 100, native 16\\).*factors: auto"):
        infeasible.require_nonempty(space, counting.funnel(space, samples=1000))
    # by default a GPU masks the ragged tail: k runs to 112, m to 128 (wgmma's m is 64)
    masked = Mapspace(load_arch("h100"), load_workload(wl))
    assert masked.extents == [(112,), (128,), (64,)]      # dims k, m, n (the file's sizes, sorted)
    assert counting.funnel(masked, samples=1000).after["divisibility"] > 0


def test_min_utilization_explanation():
    # 2 x 2 x 2 = 8 MACs can busy at most 8 of the toy's 256 units
    tiny = workload_from_dict({"name": "tiny", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                               "sizes": {"m": 2, "n": 2, "k": 2}, "dtype": "int8"}, Where("t"))
    space = Mapspace(load_arch("toy"), tiny, Constraints(min_utilization=0.5))
    with pytest.raises(InfeasibleError, match="fanout step .*at least 50% of the 256 compute units"):
        infeasible.require_nonempty(space)
    assert counting.funnel(Mapspace(load_arch("toy"), load_workload("gemv-4096"),
                    Constraints(min_utilization=1.0)), samples=2000).after["fanout"] > 0


def test_forbidden_orders_are_removed():
    free = Mapspace(load_arch("toy"), load_workload("gemm-256"))
    banned = Mapspace(load_arch("toy"), load_workload("gemm-256"), Constraints(
        levels=(("DRAM", LevelConstraints(forbid=(("m", "n", "k"),))),)))
    all_dims = frozenset({0, 1, 2})
    assert len(order_tables.orders_for(banned, 0, all_dims)) == len(order_tables.orders_for(free, 0, all_dims)) - 1


def test_cli_mapspace_json(capsys):
    assert main(["mapspace", "toy", "gemm-256", "--mapspace", "fixed-example", "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["mapspace"]["size"] > out["mapspace"]["after"]["capacity"] > 0
