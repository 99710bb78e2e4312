"""Latency, occupancy and waves in the time model (docs/COST_MODEL.md, "Latency").

The worked example is the one of the double-buffering argument: an H100 shared-memory tile of
~128 KB loaded from HBM at 3.35 TB/s (~38 ns of transfer) behind ~400 ns of latency and
computed in ~1 us takes ~1.4 us with one stage and ~1 us with two, the two-stage tile having
half the reuse capacity (sqrt(2) more HBM traffic, hidden under compute).
"""
import dataclasses
import math

import pytest

from mapper.cost import evaluate
from mapper.errors import SpecError
from mapper.load import load_arch, mapping_from_checked_dict, workload_from_dict
from mapper.units import Where, parse_latency
from presets_sync import H100_SYNC, H100_SYNC_K256

SEED_ONE_STAGE_US, SEED_TWO_STAGES_US = 1.4, 1.0


def test_latency_units():
    where = Where("a.yaml", "levels[0].latency")
    assert parse_latency("400 ns", where, 1.83e9) == pytest.approx(732.0)
    assert parse_latency("0.4 us", where, 1e9) == pytest.approx(400.0)
    assert parse_latency("250 cycles", where, 1e9) == 250.0
    assert parse_latency(30, where, 1e9) == 30.0
    with pytest.raises(SpecError, match=r"a.yaml: levels\[0\].latency: .*unknown unit 'parsec'"):
        parse_latency("3 parsec", where, 1e9)
    with pytest.raises(SpecError, match="latency >= 0"):
        parse_latency(-1, where, 1e9)


def test_gpu_presets_declare_latencies():
    for name in ("h100", "h200", "a100"):
        arch = load_arch(name)
        hbm, l2, smem = (lv.latency for lv in arch.levels[:3])
        assert hbm > l2 > smem > 0, name
    assert load_arch("h100").levels[0].latency == pytest.approx(400e-9 * 1.83e9)


def _seed_example():
    """h100 with the operand path below shared memory made ideal (unlimited bandwidth), so that
    the example isolates the HBM -> shared-memory stage it is about; one SM does the work (the
    example's 38 ns is the whole HBM bandwidth serving one tile). Its arithmetic counts the MACs
    alone: the compute unit has no native shape here, which would pad the 56-row register tile
    to four m16 fragments (`tails.fragment_macs`)."""
    h100 = load_arch(H100_SYNC)
    levels = list(h100.levels)
    levels[2] = dataclasses.replace(levels[2], bandwidth=math.inf)
    arch = dataclasses.replace(h100, levels=tuple(levels),
                               compute=dataclasses.replace(h100.compute, native_shape=()))
    workload = workload_from_dict({"name": "seed", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": 560, "n": 560, "k": 4608}, "dtype": "bf16",
                                   "dtypes": {"Z": "fp32"}}, Where("seed"))

    def mapping(tile, stages):
        blocks = 560 // tile
        return mapping_from_checked_dict({"mapping": [
            {"level": "HBM", "loops": [{"dim": "m", "bound": blocks}, {"dim": "n", "bound": blocks},
                                       {"dim": "k", "bound": 16}], "keep": ["Z", "A", "B"]},
            {"level": "L2", "keep": []},
            {"level": "SMEM", "loops": [{"dim": "k", "bound": 18}], "keep": ["A", "B"], "stages": stages,
             "spatial": [{"dim": "m", "bound": 2, "axis": "x"}, {"dim": "n", "bound": 2, "axis": "x"}]},
            {"level": "RF", "loops": [{"dim": "m", "bound": tile // 2}, {"dim": "n", "bound": tile // 2},
                                      {"dim": "k", "bound": 16}], "keep": ["Z", "A", "B"], "stages": 2},
        ]}, arch, workload, Where("seed-mapping"))
    return arch, workload, mapping


def test_seed_worked_example_within_ten_percent():
    arch, workload, mapping = _seed_example()
    big_tile_macs = 112 * 112 * 288          # 2 x 288 x 224 bf16 words = 129,024 B, the ~128 KB tile
    tiles = workload.macs / big_tile_macs
    one = evaluate(arch, workload, mapping(112, 1))       # 129 KB x 1 stage
    two = evaluate(arch, workload, mapping(80, 2))        # 92 KB x 2 stages: half the reuse tile
    us = lambda ev: ev.cycles / arch.clock_hz * 1e6 / tiles
    # the pieces: ~38 ns of transfer, ~400 ns latency, ~1 us of compute per tile
    transfer_ns = 2 * 288 * 224 / (3.35e12) * 1e9
    assert transfer_ns == pytest.approx(38, rel=0.05)
    assert one.compute_cycles / arch.clock_hz * 1e6 / tiles == pytest.approx(1.0, rel=0.1)
    assert us(one) == pytest.approx(SEED_ONE_STAGE_US, rel=0.10)
    assert us(two) == pytest.approx(SEED_TWO_STAGES_US, rel=0.10)
    assert one.bottleneck == "HBM" and one.resident == 1
    # halving the reuse tile raises HBM traffic by ~sqrt(2) (112 / 80 = 1.4) ...
    ratio = two.levels[0].traffic_bytes / one.levels[0].traffic_bytes
    assert ratio == pytest.approx(math.sqrt(2), rel=0.02)
    # ... and the load term (38 -> 54 ns per big tile) still hides under compute: the HBM
    # level's overlapped time is the compute time, plus one exposed fill per block
    hbm = two.levels[0]
    assert hbm.latency_hidden < two.compute_cycles
    assert hbm.cycles == pytest.approx(two.compute_cycles + hbm.latency_exposed)


def test_without_latency_the_time_is_todays():
    """The same mappings with no latency anywhere give the previous model's numbers: a
    one-stage tile pays its transfer on top of compute, a two-stage one hides it."""
    arch, workload, mapping = _seed_example()
    plain = dataclasses.replace(arch, levels=tuple(dataclasses.replace(lv, latency=0.0) for lv in arch.levels))
    one = evaluate(plain, workload, mapping(112, 1))
    smem = one.levels[2]
    loaded = sum(smem.tensors[t].fills * 2 for t in ("A", "B"))         # bf16 words into shared memory
    assert one.cycles == pytest.approx(one.compute_cycles + loaded / plain.levels[0].bandwidth)
    assert evaluate(plain, workload, mapping(80, 2)).cycles == evaluate(plain, workload, mapping(80, 2)).compute_cycles


def test_occupancy_hides_unbuffered_latency():
    """Two resident blocks per SM share one stage's latency (Little's law): the smaller tile
    with two blocks resident exposes half the latency of the same fetch count with one."""
    arch, workload, mapping = _seed_example()
    small_one_stage = evaluate(arch, workload, mapping(80, 1))      # 92 KB: two blocks fit
    assert small_one_stage.resident == 2
    rounds = 7 * 7 * 16                                             # blocks x k steps per block
    assert small_one_stage.levels[0].latency_exposed == pytest.approx(arch.levels[0].latency * rounds / 2)


def test_occupancy_makes_the_best_slab_smaller_than_the_largest_that_fits():
    """h100, gemm-4096, the `sync-128x128` template (one-stage shared memory): the joint search
    proves a 128-deep k slab (64 KiB, 3 blocks resident per SM) optimal for cycles, although a
    256-deep slab (128 KiB) fits: with one block resident nothing hides its loads' latency.
    Without latency the two tie: the non-monotonicity is the occupancy-latency coupling."""
    from mapper.load import load_constraints, load_mapping, load_workload
    from mapper.mapspace import Mapspace
    from mapper.search import Joint, parse_objective
    arch, wl = load_arch(H100_SYNC), load_workload("gemm-4096")
    result = Joint().run(Mapspace(arch, wl, load_constraints("sync-128x128")), parse_objective("cycles", arch))
    assert result.optimal
    smem = result.evaluation.levels[2]
    assert smem.tensors["A"].tile_words == 128 * 128 and result.evaluation.resident == 3
    larger = evaluate(arch, wl, load_mapping(H100_SYNC_K256, arch, wl))
    assert larger.levels[2].footprint_bytes == 128 * 1024 <= arch.levels[2].capacity
    assert larger.resident == 1 and larger.cycles > result.evaluation.cycles
    assert larger.levels[1].traffic_bytes == result.evaluation.levels[1].traffic_bytes   # same bytes
    plain = dataclasses.replace(arch, levels=tuple(dataclasses.replace(lv, latency=0.0) for lv in arch.levels))
    best_plain = evaluate(plain, wl, result.mapping)
    assert evaluate(plain, wl, load_mapping(H100_SYNC_K256, arch, wl)).cycles == best_plain.cycles
