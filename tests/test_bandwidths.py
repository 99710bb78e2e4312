"""Separate read / write / shared bandwidths per level, under both cycle rules (cost/timing.py),
on a case small enough to count by hand; and their import from Timeloop files."""
import math

import pytest

from mapper.cost import evaluate, evaluate_many
from mapper.load import arch_from_dict, mapping_from_checked_dict, workload_from_dict
from mapper.mapping import to_table
from mapper.units import Where

W = Where("<test>")


def _case(rule: str, stages: int):
    """gemm 4x4x4, 8-bit, one MAC; Buf keeps A, B, Z and runs every loop; DRAM holds the rest.
    By hand: 64 compute cycles. Buf reads A 64 + B 64 + Z 48 (the first read of each output
    skipped) = 176 B; writes fills A 16 + B 16, updates Z 64 = 96 B. DRAM reads A 16 + B 16 =
    32 B, takes Z's 16 updates."""
    arch = arch_from_dict({
        "name": "bw", "clock": "1 GHz", "model": {"cycles": rule},
        "levels": [{"name": "DRAM", "read_bandwidth": "0.5 B/cycle"},
                   {"name": "Buf", "max_stages": 2, "bandwidth": "3 B/cycle",
                    "read_bandwidth": "2 B/cycle", "write_bandwidth": "1 B/cycle"}],
        "compute": {"instances": 1}}, W)
    workload = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": 4, "n": 4, "k": 4}, "dtype": 8}, W)
    mapping = mapping_from_checked_dict({"mapping": [
        {"level": "DRAM"},
        {"level": "Buf", "stages": stages,
         "loops": [{"dim": "m", "bound": 4}, {"dim": "n", "bound": 4}, {"dim": "k", "bound": 4}]}]},
        arch, workload, W)
    return arch, workload, mapping


# (rule, Buf stages) -> (DRAM cycles, Buf cycles), worked out by hand:
EXPECTED = {
    # Timeloop: every limit is max(compute, ceil(bytes / bandwidth)), buffering ignored.
    # DRAM: reads 32 / 0.5 = 64. Buf: reads 176 / 2 = 88, writes 96 / 1 = 96, shared 272 / 3 -> 91.
    ("timeloop", 1): (64, 96),
    ("timeloop", 2): (64, 96),
    # stage-aware, Buf single-buffered: DRAM's reads stall Buf: max(64, 0) + 32 / 0.5 = 128;
    # Buf writes: its fills (32) are exposed: max(64, 64 / 1) + 32 / 1 = 96; reads 88; shared
    # max(64, 240 / 3) + 32 / 3 = 90.67.
    ("stage_aware", 1): (128, 96),
    # double-buffered: nothing exposed: DRAM max(64, 32 / 0.5) = 64; Buf writes max(64, 96) = 96.
    ("stage_aware", 2): (64, 96),
}


@pytest.mark.parametrize("rule,stages", sorted(EXPECTED))
def test_hand_counted_cycles_both_paths(rule, stages):
    arch, workload, mapping = _case(rule, stages)
    ev = evaluate(arch, workload, mapping)
    buf = ev.levels[1].tensors
    assert (buf["A"].reads, buf["B"].reads, buf["Z"].reads) == (64, 64, 48)
    assert (buf["A"].fills + buf["B"].fills, buf["Z"].updates) == (32, 64)
    assert tuple(lc.cycles for lc in ev.levels) == EXPECTED[rule, stages]
    assert ev.cycles == max(EXPECTED[rule, stages])
    costs = evaluate_many(arch, workload, to_table([mapping], 3, 3))
    assert tuple(costs.level_cycles[0]) == EXPECTED[rule, stages]
    assert costs.cycles[0] == ev.cycles


def test_only_a_shared_bandwidth_keeps_the_old_rule():
    """Read and write bandwidths default to unlimited: a level with only `bandwidth` is timed as
    before (shared channel, stage-aware)."""
    arch, workload, mapping = _case("stage_aware", 1)
    import dataclasses
    levels = tuple(dataclasses.replace(lv, read_bandwidth=math.inf, write_bandwidth=math.inf)
                   for lv in arch.levels)
    ev = evaluate(dataclasses.replace(arch, levels=levels), workload, mapping)
    # DRAM unlimited: compute; Buf shared 3 B/cycle: max(64, 240 / 3) + 32 / 3
    assert ev.levels[0].cycles == 64
    assert ev.levels[1].cycles == pytest.approx(80 + 32 / 3)


def test_bad_bandwidth_and_rule_are_one_line_errors():
    from mapper.errors import SpecError
    with pytest.raises(SpecError, match=r"levels\[0\]\.read_bandwidth"):
        arch_from_dict({"name": "x", "clock": "1 GHz", "levels": [{"name": "D", "read_bandwidth": "fast"}],
                        "compute": {}}, W)
    with pytest.raises(SpecError, match=r"model\.cycles"):
        arch_from_dict({"name": "x", "clock": "1 GHz", "levels": [{"name": "D"}], "compute": {},
                        "model": {"cycles": "sometimes"}}, W)


FORMAT = __import__("pathlib").Path(__file__).parent / "data" / "timeloop_format"


def _eyeriss(tmp_path, glb_attributes):
    """eyeriss_like's Timeloop files, shared_glb's bandwidth attributes replaced."""
    text = (FORMAT / "eyeriss_like" / "arch.yaml").read_text()
    old = "read_bandwidth: 16, write_bandwidth: 16"
    assert old in text
    (tmp_path / "arch.yaml").write_text(text.replace(old, glb_attributes))
    for name in ("problem.yaml", "map.yaml", "ERT.yaml"):
        (tmp_path / name).write_text((FORMAT / "eyeriss_like" / name).read_text())
    from mapper.timeloop import build, read_parts
    return build(read_parts([tmp_path / n for n in ("arch.yaml", "problem.yaml", "map.yaml")]))


def test_timeloop_bandwidths_are_imported_in_the_problems_words(tmp_path):
    imported = _eyeriss(tmp_path, "read_bandwidth: 16, write_bandwidth: 16")
    glb = imported.arch.levels[imported.arch.level_names.index("shared_glb")]
    assert (glb.read_bandwidth, glb.write_bandwidth, glb.bandwidth) == (16, 16, math.inf)   # 8-bit words
    spad = imported.arch.levels[imported.arch.level_names.index("ifmap_spad")]
    assert (spad.read_bandwidth, spad.write_bandwidth) == (2, 2)
    assert imported.arch.cycle_rule == "timeloop"      # Timeloop's bandwidths come with its rule
    assert evaluate(imported.arch, imported.workload, imported.mapping).cycles == 86_016   # unthrottled
    shared = _eyeriss(tmp_path, "shared_bandwidth: 3").arch
    assert shared.levels[shared.level_names.index("shared_glb")].bandwidth == 3
    old = _eyeriss(tmp_path, "bandwidth: 6").arch      # deprecated: half each way, as Timeloop reads it
    glb = old.levels[old.level_names.index("shared_glb")]
    assert (glb.read_bandwidth, glb.write_bandwidth) == (3, 3)


@pytest.mark.parametrize("attributes,limit", [("read_bandwidth: 8, write_bandwidth: 16", "read"),
                                              ("read_bandwidth: 16, write_bandwidth: 4", "write"),
                                              ("shared_bandwidth: 12", "shared")])
def test_throttled_timeloop_mapping_takes_its_traffic_over_bandwidth(tmp_path, attributes, limit):
    """Timeloop's rule on its own mapping with a narrower shared_glb: the level needs
    ceil(words / bandwidth) cycles, from the per-level counts (which the bandwidth leaves alone)."""
    imported = _eyeriss(tmp_path, attributes)
    ev = evaluate(imported.arch, imported.workload, imported.mapping)
    glb = next(lc for lc in ev.levels if lc.name == "shared_glb")
    reads = sum(tc.reads for tc in glb.tensors.values())
    writes = sum(tc.fills + tc.updates for tc in glb.tensors.values())
    words, per_cycle = {"read": (reads, 8), "write": (writes, 4), "shared": (reads + writes, 12)}[limit]
    assert glb.cycles == math.ceil(words / per_cycle) > 86_016
    assert ev.cycles == glb.cycles
    costs = evaluate_many(imported.arch, imported.workload,
                          to_table([imported.mapping], len(imported.workload.dims), len(imported.workload.tensors)))
    assert costs.cycles[0] == ev.cycles
