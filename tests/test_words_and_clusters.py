"""A word width per level (`word_bits`) and instances sharing one wide access (`cluster_size`),
on cases small enough to count by hand, in both cost paths, the mapspace and the joint search;
and their import from Timeloop's files (`datawidth` / `word-bits`, `cluster_size`)."""
from pathlib import Path

import pytest

from mapper.cli import main
from mapper.constraints import Constraints, LevelConstraints
from mapper.cost import evaluate, evaluate_many
from mapper.load import arch_from_dict, mapping_from_checked_dict, workload_from_dict
from mapper.mapping import to_table
from mapper.mapspace import Mapspace, pruning
from mapper.search.exhaustive import Exhaustive
from mapper.search.joint import Joint
from mapper.search.objective import parse_objective
from mapper.timeloop.design import build, read_parts
from mapper.units import Where

FORMAT = Path(__file__).parent / "data" / "timeloop_format"


def design_files(design: str) -> list[Path]:
    return sorted(p for p in (FORMAT / design).glob("*.yaml") if "ERT" not in p.name)   # ERT found beside

W = Where("<test>")


def _arch(buf: dict, rule: str = "timeloop"):
    return arch_from_dict({"name": "w", "clock": "1 GHz", "model": {"cycles": rule},
                           "levels": [{"name": "DRAM"}, {"name": "Buf", **buf}],
                           "compute": {"instances": 1}}, W)


def _gemm(bits: int = 8):
    return workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                               "sizes": {"m": 4, "n": 4, "k": 4}, "dtype": bits}, W)


def _buf_runs_everything(arch, workload):
    return mapping_from_checked_dict({"mapping": [
        {"level": "DRAM"},
        {"level": "Buf", "loops": [{"dim": "m", "bound": 4}, {"dim": "n", "bound": 4}, {"dim": "k", "bound": 4}]}]},
        arch, workload, W)


def _agree(arch, workload, mapping, ev):
    costs = evaluate_many(arch, workload, to_table([mapping], 3, 3))
    assert costs.energy_pj[0] == pytest.approx(ev.energy_pj, rel=1e-12)
    assert costs.cycles[0] == ev.cycles
    assert list(costs.level_footprint[:, 0]) == [lc.footprint_bytes for lc in ev.levels]
    assert list(costs.level_traffic[:, 0]) == [lc.traffic_bytes for lc in ev.levels]
    return costs


def test_level_word_counts_bytes_capacity_bandwidth_and_byte_energy():
    """gemm 4x4x4 in 8-bit words; Buf holds 32-bit words (word_bits: 32) and runs every loop.
    By hand (as tests/test_bandwidths.py): Buf keeps 16 + 16 + 16 = 48 words, reads A 64 + B 64
    + Z 48 = 176 words, writes fills 32 + updates 64 = 96 words. In Buf's 4-byte words: 192 B
    kept, 704 B read, 384 B written. Timeloop's cycle rule at Buf: reads 704 / 8 = 88, writes
    384 / 2 = 192, shared 1088 / 16 = 68 -> 192 cycles. Per-byte read energy 1 pJ: 704 pJ.
    DRAM keeps 8-bit words: reads A 16 + B 16 and Z's 16 updates = 48 B."""
    workload = _gemm()
    buf = {"word_bits": 32, "capacity": "192 B", "read_bandwidth": "8 B/cycle",
           "write_bandwidth": "2 B/cycle", "bandwidth": "16 B/cycle", "energy_per_byte": {"read": 1.0}}
    arch = _arch(buf)
    mapping = _buf_runs_everything(arch, workload)
    ev = evaluate(arch, workload, mapping)
    dram, level = ev.levels
    assert level.footprint_bytes == 192 and level.traffic_bytes == 704 + 384
    assert dram.traffic_bytes == 48
    assert level.cycles == 192 and ev.cycles == 192
    assert ev.energy_pj == pytest.approx(704)               # MACs cost 0 pJ (the default)
    costs = _agree(arch, workload, mapping, ev)
    assert costs.valid[0]
    # the counts are those of 8-bit words everywhere: a word width changes bytes, not accesses
    narrow = evaluate(_arch({k: v for k, v in buf.items() if k != "word_bits"}), workload, mapping)
    assert [(t.reads, t.fills, t.updates) for lc in narrow.levels for t in lc.tensors.values()] == \
        [(t.reads, t.fills, t.updates) for lc in ev.levels for t in lc.tensors.values()]
    # and a level word equal to every tensor's is the same as declaring the tensors that wide
    wide = _gemm(32)
    same = evaluate(_arch({**buf, "word_bits": 32}), wide, _buf_runs_everything(_arch(buf), wide))
    assert same.levels[1].footprint_bytes == level.footprint_bytes and same.levels[1].cycles == level.cycles


def test_level_word_decides_what_fits():
    """One byte short of Buf's 192 B in 32-bit words: the mapping no longer fits, in the loader,
    the vectorised path and the mapspace, although its 48 one-byte words would."""
    workload = _gemm()
    arch = _arch({"word_bits": 32, "capacity": "191 B"})
    with pytest.raises(Exception, match="above the level's capacity"):
        _buf_runs_everything(arch, workload)
    fits = _arch({"word_bits": 32, "capacity": "192 B"})
    table = to_table([_buf_runs_everything(fits, workload)], 3, 3)
    assert not evaluate_many(arch, workload, table).valid[0]
    assert not pruning.valid_mask(Mapspace(arch, workload, Constraints()), table)[0]
    assert pruning.valid_mask(Mapspace(fits, workload, Constraints()), table)[0]


def _cluster_case(used: int):
    """Regs: 16 instances in clusters of 4 (one access of a cluster: 4 pJ read, 2 pJ write;
    each instance's share 1 / 0.5 pJ). The mapping splits m over `used` of them; each used
    instance keeps one word of A, filled twice and read twice (k2 above it)."""
    arch = arch_from_dict({"name": "c", "clock": "1 GHz", "levels": [
        {"name": "DRAM"},
        {"name": "Regs", "instances": 16, "mesh": [16, 1], "keeps": ["A"], "cluster_size": 4,
         "energy": {"read": 1.0, "write": 0.5}}],
        "compute": {"instances": 16, "mesh": [16, 1], "energy": 0.0}}, W)
    workload = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": used, "n": 1, "k": 2}, "dtype": 8}, W)
    mapping = mapping_from_checked_dict({"mapping": [
        {"level": "DRAM", "loops": [{"dim": "k", "bound": 2}],
         "spatial": [{"dim": "m", "bound": used, "axis": "x"}] if used > 1 else []},
        {"level": "Regs"}]}, arch, workload, W)
    return arch, workload, mapping


@pytest.mark.parametrize("used,charged", [
    # Timeloop (NVlabs/timeloop src/model/buffer.cpp, ComputeScalarAccesses / FinalizeBufferEnergy):
    # utilized clusters = min(utilized instances, instances / cluster_size), each paying whole
    # cluster accesses: energy = per-instance vector accesses x cluster access energy x clusters.
    (8, 4),     # 8 instances in use, 16 / 4 = 4 clusters: 4 clusters x 4 shares = 16 shares
    (2, 2),     # 2 in use: 2 clusters (used instances spread over clusters) = 8 shares
    (1, 1),     # 1 in use: 1 cluster = 4 shares
])
def test_each_utilized_cluster_pays_a_whole_access(used, charged):
    arch, workload, mapping = _cluster_case(used)
    ev = evaluate(arch, workload, mapping)
    regs = ev.levels[1]
    a = regs.tensors["A"]
    assert regs.instances == used and (a.reads, a.fills) == (2, 2)
    per_instance = 2 * 1.0 + 2 * 0.5                 # one instance's share of its accesses
    assert a.energy_pj == pytest.approx(per_instance * 4 * charged)
    _agree(arch, workload, mapping, ev)
    # without clusters each used instance pays its own share only
    plain = arch_from_dict({"name": "c", "clock": "1 GHz", "levels": [
        {"name": "DRAM"}, {"name": "Regs", "instances": 16, "mesh": [16, 1], "keeps": ["A"],
                           "energy": {"read": 1.0, "write": 0.5}}],
        "compute": {"instances": 16, "mesh": [16, 1], "energy": 0.0}}, W)
    assert evaluate(plain, workload, mapping).levels[1].tensors["A"].energy_pj == pytest.approx(per_instance * used)


@pytest.mark.parametrize("name", ["energy", pytest.param("edp", marks=pytest.mark.slow)])
def test_joint_equals_exhaustive_with_level_words_and_clusters(name):
    """A small space where the level word decides capacity and clusters change the energy: the
    joint search's bounds stay bounds (per-instance energies never exceed what clusters charge;
    footprints and traffic in each level's word)."""
    arch = arch_from_dict({"name": "wc", "clock": "1 GHz", "levels": [
        {"name": "DRAM", "energy": {"read": 20, "write": 20}},
        {"name": "Buf", "capacity": "96 B", "word_bits": 32, "bandwidth": "8 B/cycle",
         "energy": {"read": 2, "write": 2}, "energy_per_byte": {"read": 0.5}},
        {"name": "Regs", "instances": 4, "mesh": [4, 1], "capacity": "6 B", "word_bits": 16,
         "cluster_size": 2, "energy": {"read": 0.5, "write": 0.5}}],
        "compute": {"instances": 4, "mesh": [4, 1], "energy": 1.0}}, W)
    workload = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": 4, "n": 4, "k": 2}, "dtype": 8}, W)
    space = Mapspace(arch, workload, Constraints(levels=(("Buf", LevelConstraints(bypass=True)),
                                                         ("Regs", LevelConstraints(bypass=True)))))
    objective = parse_objective(name, arch)
    exact = Exhaustive().run(space, objective)
    joint = Joint().run(space, objective)
    assert joint.optimal and joint.score == exact.score and joint.mapping == exact.mapping
    ev = evaluate(arch, workload, exact.mapping)
    assert all(lc.footprint_bytes <= lc.capacity_bytes for lc in ev.levels)


def test_timeloop_word_bits_and_clusters_are_imported():
    eyeriss = build(read_parts(design_files("eyeriss_like"))).arch
    psum = eyeriss.levels[eyeriss.level_names.index("psum_spad")]
    # depth 16 x 16-bit words (the problem's words are 8-bit): 32 B; 2 words/cycle = 4 B/cycle
    assert (psum.word_bits, psum.capacity, psum.read_bandwidth) == (16, 32, 4)
    assert eyeriss.levels[eyeriss.level_names.index("weights_spad")].word_bits is None
    simba = build(read_parts(design_files("simba_like"))).arch
    accu = simba.levels[simba.level_names.index("PEAccuBuffer")]
    regs = simba.levels[simba.level_names.index("PEWeightRegs")]
    assert (accu.word_bits, accu.capacity) == (24, 128 * 3)
    # ERT: 0.259899 pJ per 512-bit cluster read; each of the 64 registers' share is 1/64 of it
    assert regs.cluster_size == 64 and regs.energy_read == pytest.approx(0.259899 / 64)


def test_simba_like_matches_timeloops_energy_with_clusters(capsys):
    """With Timeloop's rules, simba_like now reproduces Timeloop's total energy (239,146,163.92 pJ,
    ref_outputs/default_problem/timeloop-mapper.stats.txt): the last gap was cluster_size."""
    files = [str(FORMAT / "simba_like" / n) for n in ("arch.yaml", "problem.yaml", "map.yaml")]
    assert main(["evaluate", *files, "--timeloop-rules", "--json"]) == 0
    import json
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["energy_pj"] == pytest.approx(239_146_163.92, abs=0.01)
    assert cost["cycles"] == 225_792


@pytest.mark.parametrize("key,value,expected", [
    ("word_bits", 0, "word_bits: expected a positive integer"),
    ("word_bits", "wide", "word_bits: expected a positive integer"),
    ("cluster_size", 1.5, "cluster_size: expected a positive integer"),
])
def test_bad_word_or_cluster_is_one_line(tmp_path, capsys, key, value, expected):
    import yaml
    path = tmp_path / "arch.yaml"
    path.write_text(yaml.safe_dump({"name": "b", "clock": "1 GHz", "levels": [
        {"name": "DRAM"}, {"name": "Buf", key: value}], "compute": {"instances": 1}}))
    assert main(["evaluate", str(path), "gemm-256", "toy-gemm-256-os", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "levels[1]" in err and expected in err
