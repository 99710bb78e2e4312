"""A Triton config read back on a GPU preset (`emit/from_config.py`) as the launch runs it:
waves of GROUP_M rows of blocks by as many columns as the SMs take, the grid padded to whole
waves (not a divisor of the block count: 86 columns of blocks once gave waves of 16 SMs), and
each wave's blocks running their K loops side by side (the K loop above the L2, which streams
one k step of the wave's tiles). Checked by hand on LLaMA-7B's up projection at 2048 tokens."""
from mapper.cost import evaluate
from mapper.emit.common import BlockConfig
from mapper.emit.from_config import mapping_of_config
from mapper.load import load_arch, workload_from_dict
from mapper.units import Where

UP = {"name": "up", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": 2048, "n": 22016, "k": 4096},
      "dtypes": {"A": "bf16", "B": "bf16", "Z": "fp32"}}


def test_a_wave_is_group_m_rows_by_what_the_sms_take():
    arch, workload = load_arch("h200"), workload_from_dict(UP, Where("up"))
    mapping, changes = mapping_of_config(arch, workload, BlockConfig(128, 256, 64, 3, 8, 8))
    hbm, l2, smem, rf = mapping.levels
    m, n, k = (workload.dims.index(d) for d in "mnk")
    # 16 x 86 blocks of 128 x 256; 8 rows by 132 // 8 = 16 columns a wave: 86 columns padded to 96
    assert dict((d, b) for d, b, _ in l2.spatial) == {m: 8, n: 16}
    assert hbm.temporal == ((m, 2), (n, 6), (k, 64))
    assert any("16x86 blocks priced as 16x96" in line for line in changes)
    # the L2 holds one k step of the wave and streams the next: no loops of its own, 2 stages
    assert l2.temporal == () and l2.stages == 2
    # the block's whole accumulator in registers (two warpgroups priced as one), no operands
    assert dict(rf.temporal) == {m: 128, n: 256, k: 64}
    assert [workload.tensors[t].is_output for t in rf.keep] == [True]
    assert evaluate(arch, workload, mapping).compute_instances == 128       # 8 x 16 SMs busy


def test_without_group_m_a_wave_is_whole_rows_by_hand():
    """Without GROUP_M, row-major: the 86 columns of blocks fit one wave's 132 SMs whole, one row a
    wave, so 16 waves of 86 SMs. The compute by hand: 16 waves x 64 k steps x 1,024 cycles (a
    128x256x64 block step at 2,048 MACs a cycle)."""
    arch, workload = load_arch("h200"), workload_from_dict(UP, Where("up"))
    mapping, changes = mapping_of_config(arch, workload, BlockConfig(128, 256, 64, 3, 8, None))
    _, l2, _, _ = mapping.levels
    n = workload.dims.index("n")
    assert dict((d, b) for d, b, _ in l2.spatial) == {n: 86}
    assert not any("priced as" in line and "blocks" in line for line in changes)
    cost = evaluate(arch, workload, mapping)
    assert (cost.waves, cost.compute_instances) == (16, 86)
    assert cost.compute_cycles == 16 * 64 * (128 * 256 * 64 // 2048)
