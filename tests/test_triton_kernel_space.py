"""The `triton-kernel` mapspace (the mappings the emitted Triton matmul runs, which
scripts/gpu_check.py searches for its pick) and the two constraint keys it brought: a tile
side that must be a power of two, and a level's `capacity` lowered for a kind of kernel."""
import numpy as np

from mapper.constraints import Constraints, LevelConstraints, Range
from mapper.emit.common import gemm_view
from mapper.emit.triton import ACCUMULATOR_REGISTERS, triton_config
from mapper.load import load_arch, load_constraints, load_workload
from mapper.mapspace import Mapspace
from mapper.search import SearchContext, make_strategy, parse_objective


def test_power_of_two_range_by_hand():
    values = np.array([1, 2, 3, 4, 6, 8, 12, 16, 48, 64])
    assert list(values[Range(power_of_two=True).admits(values)]) == [1, 2, 4, 8, 16, 64]
    assert list(values[Range(low=4, high=32, power_of_two=True).admits(values)]) == [4, 8, 16]


def test_a_level_capacity_constraint_lowers_the_space_arch_only():
    arch, workload = load_arch("h100"), load_workload("gemm-4096")
    rf = arch.level_names.index("RF")
    capped = Constraints(levels=(("RF", LevelConstraints(capacity=64 * 1024)),))
    assert Mapspace(arch, workload, capped).arch.levels[rf].capacity == 64 * 1024
    assert Mapspace(arch, workload).arch.levels[rf].capacity == arch.levels[rf].capacity
    # above the level's own capacity it changes nothing
    loose = Constraints(levels=(("RF", LevelConstraints(capacity=1e12)),))
    assert Mapspace(arch, workload, loose).arch.levels[rf].capacity == arch.levels[rf].capacity


def test_the_triton_kernel_space_picks_what_the_kernel_runs():
    """h200 gemm-8192 under `triton-kernel`, proven: block sides powers of two, no split-K, the K
    loop above the L2, 4 shared-memory stages, k steps of 64 or more, the accumulator within 128 KiB of registers
    and emitted over enough warps that none spills."""
    arch, workload = load_arch("h200"), load_workload("gemm-8192")
    space = Mapspace(arch, workload, load_constraints("triton-kernel"))
    result = make_strategy("joint", {}).run(space, parse_objective("cycles", arch), SearchContext.for_command(60),
                                            lambda n: None)
    assert result.optimal
    levels = result.mapping.levels
    names = space.arch.level_names
    l2, smem, rf = (levels[names.index(n)] for n in ("L2", "SMEM", "RF"))
    assert not l2.temporal and all(dim != workload.dims.index("k") for dim, *_ in l2.spatial)
    assert smem.stages == 4 and not smem.temporal
    view = gemm_view(space.arch, space.workload, result.mapping)
    config = triton_config(view)
    for side in (config.block_m, config.block_n, config.block_k):
        assert side & (side - 1) == 0
    assert config.block_m * config.block_n * 4 <= 128 * 1024
    assert config.block_m * config.block_n // (32 * config.num_warps) <= ACCUMULATOR_REGISTERS
    assert [workload.tensors[t].is_output for t in rf.keep] == [True] and rf.stages == 1
