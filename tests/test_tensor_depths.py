"""Each tensor at its own depth within a level (`tensor_depths`, `mapper/depths.py`): the
level searched as sub-levels in one capacity, priced as the loop-nest simulator counts them,
searched exactly (the joint search against exhaustive enumeration), bounded soundly, and
refused, naming the key, where it is not modelled."""
import dataclasses
import shutil
import subprocess

import numpy as np
import pytest
import yaml
from hypothesis import strategies as st

from mapper.bind import check_fits
from mapper.cli import main
from mapper.constraints import Constraints, LevelConstraints
from mapper.cost import evaluate, evaluate_many
from mapper.errors import InfeasibleError, SpecError
from mapper.load import arch_from_dict, load_arch, load_constraints, load_workload, workload_from_dict
from mapper.mapping import LevelMapping, Mapping, to_table
from mapper.mapspace import Mapspace, pruning
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.search.joint.parts import keep_vectors
from mapper.units import Where

from brute_force import simulate
from prefixes import check_prefix_bounds
from scaled import quick_and_full
from strategies import archs, workloads
from test_brute_force_agreement import as_plain
from test_cost_agreement import assert_same
from test_mapspace import gemm

DEPTHS = LevelConstraints(bypass=True, tensor_depths=True)


def small_arch(words: int):
    """DRAM (10 pJ a word), a buffer of `words` 1-byte words and a one-word register file (1 pJ
    a word each) and one MAC."""
    one = {"read": 1, "write": 1, "update": 1}
    return arch_from_dict({
        "name": "depths", "clock": "1 GHz",
        "levels": [{"name": "DRAM", "energy": {"read": 10, "write": 10, "update": 10}},
                   {"name": "Buffer", "capacity": f"{words} B", "energy": one},
                   {"name": "Reg", "capacity": "1 B", "energy": one}],
        "compute": {"name": "MAC", "energy": "1 pJ"}}, Where("depths.yaml"))


def test_a_split_level_is_its_sub_levels_in_one_memory():
    space = Mapspace(load_arch("pe-array"), load_workload("gemm-256"), load_constraints("tensor-depths"))
    names = space.arch.level_names
    assert names == ("DRAM", "GlobalBuffer.1", "GlobalBuffer.2", "GlobalBuffer.3", "RegisterFile")
    assert space.arch.capacity_groups == ((1, 2, 3),)
    buffer = load_arch("pe-array").levels[1]
    for lv in (1, 2, 3):
        level = space.arch.levels[lv]
        assert level.group == "GlobalBuffer" and level.capacity == buffer.capacity
        assert (level.energy_read, level.mesh) == (buffer.energy_read, buffer.mesh)
        # each keeps one of Z, A, B or nothing
        assert space.choices[lv].keeps == ((), (0,), (1,), (2,))
    # one fanout, from the last: no network between them
    assert [space.arch.fanout(lv) for lv in (1, 2)] == [(1, 1), (1, 1)] and space.arch.fanout(3) == (16, 16)
    # the memory leaks and takes area once, on its first sub-level
    arch = load_arch("pe-array")
    leaky = dataclasses.replace(arch, levels=(arch.levels[0], dataclasses.replace(arch.levels[1], leak=0.5, area=2.0),
                                              arch.levels[2]))
    split = Mapspace(leaky, load_workload("gemm-256"), load_constraints("tensor-depths")).arch
    assert [(level.leak, level.area) for level in split.levels[1:4]] == [(0.5, 2.0), (0.0, 0.0), (0.0, 0.0)]
    assert split.area == leaky.area
    # the canonical keep vectors of the buffer: 1 + 3 + 6 + 6 (none kept, one, an ordered two, all
    # three in order), times the register file's 8 keep sets
    assert keep_vectors(space) == 16 * 8


def _z_across_k():
    """A 2x2x4 GEMM and a mapping of it over a buffer split into three sub-levels: Z at the
    first, over a k loop of 2; A under it at the second; B at the third; the register file
    keeps nothing, its loops m2 n2 k2."""
    workload = gemm(2, 2, 4)
    z, a, b = (workload.tensor_index(name) for name in ("Z", "A", "B"))
    m, n, k = (workload.dim_index(name) for name in ("m", "n", "k"))
    mapping = Mapping((
        LevelMapping(keep=frozenset({z, a, b})),
        LevelMapping(temporal=((k, 2),), keep=frozenset({z})),
        LevelMapping(keep=frozenset({a})),
        LevelMapping(keep=frozenset({b})),
        LevelMapping(temporal=((m, 2), (n, 2), (k, 2))),
    ))
    return workload, mapping


def test_the_sub_levels_hold_their_tiles_in_the_one_capacity():
    """Z above a k loop, A under it, B below: each tile fits 8 bytes, all three do not."""
    workload, mapping = _z_across_k()
    for words, fits in ((12, True), (11, False)):
        space = Mapspace(small_arch(words), workload, Constraints(levels=(("Buffer", DEPTHS),)))
        table = to_table([mapping], 3, 3)
        assert evaluate(space.arch, workload, mapping).fits() == fits
        assert bool(evaluate_many(space.arch, workload, table).valid[0]) == fits
        assert bool(pruning.valid_mask(space, table)[0]) == fits
        if not fits:        # a mapping file read (`evaluate`, a warm start) is refused so too
            with pytest.raises(SpecError, match=r"Buffer\.1, Buffer\.2, Buffer\.3 take 12 B together, above "
                                                r"Buffer's capacity of 11 B"):
                check_fits(mapping, space.arch, workload, Where("found.yaml"))


def test_an_output_held_across_k_with_an_input_under_it_is_counted_as_the_simulator_counts():
    """By hand, then against the loop-nest simulator: Z accumulates in the buffer across k's
    two steps (written to DRAM once, 4 words), A's tile is half of its k extent (4 words, not
    8) and is filled twice, once per k step (8 words from DRAM in all, as a whole tile would)."""
    workload, mapping = _z_across_k()
    space = Mapspace(small_arch(12), workload, Constraints(levels=(("Buffer", DEPTHS),)))
    ev = evaluate(space.arch, workload, mapping)
    levels = {level.name: level for level in ev.levels}
    assert levels["DRAM"].tensors["Z"].updates == 4 and levels["DRAM"].tensors["Z"].reads == 0
    assert levels["DRAM"].tensors["A"].reads == 8 and levels["Buffer.2"].tensors["A"].fills == 8
    assert levels["Buffer.2"].tensors["A"].tile_words == 4 and levels["Buffer.3"].tensors["B"].tile_words == 4
    assert levels["Buffer.1"].tensors["Z"].updates == 16           # every MAC's partial sum
    assert sum(level.footprint_bytes for level in ev.levels[1:4]) == 12
    truth = simulate(*as_plain(space.arch, workload, mapping))
    for level in ev.levels:
        for name, cost in level.tensors.items():
            want = truth["levels"][level.name]["tensors"][name]
            assert (cost.reads, cost.fills, cost.updates) == (want["reads"], want["fills"], want["updates"])


# AccelForge 1.0.467 on pe-array 729x343x1125 bf16, energy objective (scripts/accelforge_side.py
# gemm 729 343 1125, run 2026-12-04): its best mapping, each tensor at its own depth in the global
# buffer (Z above a k loop of 45, A under it, B under an n loop of 7; A in the registers too), and
# its energy in pJ per MAC
ACCELFORGE_729 = 2.997366148095203


def _gemm_729():
    return workload_from_dict({"name": "gemm-729x343x1125", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                               "sizes": {"m": 729, "n": 343, "k": 1125}, "dtype": "bf16"}, Where("gemm.yaml"))


def test_accelforges_mapping_at_tensor_depths_is_priced_as_accelforge_prices_it():
    """Its mapping, written over the sub-levels, priced here: AccelForge's energy less the one
    counting rule known to differ (it reads the buffer once per update of an output word, this
    model once per update but the first, as Timeloop: docs/RESULTS.md), to 1e-6."""
    workload = _gemm_729()
    space = Mapspace(load_arch("pe-array"), workload, load_constraints("tensor-depths"))
    z, a, b = (workload.tensor_index(name) for name in ("Z", "A", "B"))
    m, n, k = (workload.dim_index(name) for name in ("m", "n", "k"))
    mapping = Mapping((
        LevelMapping(temporal=((m, 9),), keep=frozenset({z, a, b})),
        LevelMapping(temporal=((k, 45),), keep=frozenset({z})),
        LevelMapping(temporal=((n, 7),), keep=frozenset({a})),
        LevelMapping(temporal=((m, 9),), spatial=((m, 3, 0), (k, 5, 0), (m, 3, 1), (k, 5, 1)), keep=frozenset({b})),
        LevelMapping(temporal=((n, 49),), keep=frozenset({a})),
    ))
    ev = evaluate(space.arch, workload, mapping)
    assert ev.fits()
    output_words, buffer_read_pj = 729 * 343, 16 / 8
    assert ev.energy_pj / ev.macs == pytest.approx(ACCELFORGE_729 - output_words * buffer_read_pj / ev.macs, rel=1e-6)
    # the same loops under one storage node: A's and B's tiles span k's 45 steps, and do not fit
    merged = LevelMapping(temporal=((k, 45), (n, 7), (m, 9)), spatial=mapping.levels[3].spatial,
                          keep=frozenset({z, a, b}))
    plain = Mapping((mapping.levels[0], merged, mapping.levels[4]))
    assert not evaluate(load_arch("pe-array"), workload, plain).fits()


@pytest.mark.slow
def test_on_729x343x1125_the_depths_prove_below_accelforge_and_the_plain_optimum():
    workload = _gemm_729()
    objective = parse_objective("energy", load_arch("pe-array"))
    results = {name: Joint().run(Mapspace(load_arch("pe-array"), workload, load_constraints(name)), objective)
               for name in ("bypass-every", "tensor-depths")}
    assert all(result.optimal for result in results.values())
    split = results["tensor-depths"].score / workload.macs
    assert split < ACCELFORGE_729 and split < results["bypass-every"].score / workload.macs


@quick_and_full(2, 40, st.data())
def test_joint_equals_exhaustive_with_a_level_at_tensor_depths(data):
    """The joint search (in parts, or walking the whole space where it keeps every keep
    option per level) proves what exhaustive enumeration finds, on random spaces with one
    middle level searched at tensor depths, with bypass or keeping all it may."""
    workload = data.draw(workloads(kinds=("gemm", "conv1d", "batched"), max_macs=16))
    arch = _no_latency_middle(data.draw(archs(min_levels=3, max_levels=3, capacity=True)))
    bypass = data.draw(st.booleans())
    constraints = Constraints(levels=(("L1", LevelConstraints(bypass=bypass, tensor_depths=True)),))
    space = Mapspace(arch, workload, constraints)
    objective = parse_objective(data.draw(st.sampled_from(["energy", "edp"])), arch)
    joint = Joint(parts_above=0 if data.draw(st.booleans()) else 10**9, parallel_above=0, workers=1)
    try:
        exact = Exhaustive().run(space, objective)
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            joint.run(space, objective)
        return
    result = joint.run(space, objective)
    assert result.optimal and result.score == exact.score


@quick_and_full(6, 30, st.data())
def test_bounds_with_a_level_at_tensor_depths_stay_below_its_mappings(data):
    """Every prefix's bound at or below the mapping under it: the bounds see each sub-level
    with the whole capacity (a relaxation), never more than the one memory holds."""
    workload = data.draw(workloads(kinds=("gemm", "conv1d", "batched"), max_macs=64))
    arch = _no_latency_middle(data.draw(archs(min_levels=3, max_levels=4, capacity=data.draw(st.booleans()))))
    space = Mapspace(arch, workload, Constraints(levels=(("every", LevelConstraints(bypass=True)),
                                                         ("L1", DEPTHS))))
    objective = parse_objective(data.draw(st.sampled_from(["edp", "energy", "cycles"])), arch)
    check_prefix_bounds(space, objective, data.draw(st.integers(0, 1000)), refined=True)


def _no_latency_middle(arch):
    """`arch` with level 1 free of a latency (what a split level takes; its bandwidths, which
    its sub-levels share, as drawn)."""
    return dataclasses.replace(arch, levels=(arch.levels[0], dataclasses.replace(arch.levels[1], latency=0.0),
                                             *arch.levels[2:]))


@pytest.mark.parametrize("arch, level, fragment", [
    ("pe-array", "RegisterFile", "innermost level"),
    ("pe-array", "DRAM", "outermost level"),
    ("h100", "SMEM", "GPU"),
    ("pe-array", "GlobalBuffer", "latency"),      # given one below
])
def test_a_level_that_cannot_be_split_is_refused_naming_the_key(tmp_path, arch, level, fragment):
    spec = load_arch(arch)
    if fragment == "latency":
        spec = dataclasses.replace(spec, levels=(spec.levels[0], dataclasses.replace(spec.levels[1], latency=20.0),
                                                 *spec.levels[2:]))
    path = tmp_path / "depths.yaml"
    path.write_text(yaml.safe_dump({"name": "depths", "levels": {level: {"tensor_depths": True}}}))
    with pytest.raises(SpecError) as info:
        Mapspace(spec, load_workload("gemm-256"), load_constraints(path))
    assert str(path) in str(info.value) and f"levels.{level}.tensor_depths" in str(info.value)
    assert fragment in str(info.value)


def test_every_level_at_tensor_depths_splits_those_between_the_outermost_and_the_innermost():
    constraints = Constraints(levels=(("every", LevelConstraints(bypass=True, tensor_depths=True)),))
    space = Mapspace(load_arch("pe-array"), load_workload("gemm-256"), constraints)
    assert space.arch.level_names == ("DRAM", "GlobalBuffer.1", "GlobalBuffer.2", "GlobalBuffer.3", "RegisterFile")


def test_tensor_depths_with_loops_fixed_on_the_level_is_refused(tmp_path):
    path = tmp_path / "depths.yaml"
    path.write_text(yaml.safe_dump({"name": "depths", "levels": {"GlobalBuffer": {
        "tensor_depths": True, "order": ["m", "n", "k"]}}}))
    with pytest.raises(SpecError, match=r"levels\.GlobalBuffer\.tensor_depths: cannot be combined with order"):
        load_constraints(path)


def test_the_cli_reports_the_sub_levels_and_refuses_a_timeloop_export(capsys, tmp_path):
    assert main(["search", "pe-array", "gemm-256", "--mapspace", "tensor-depths", "--objective", "energy",
                 "--max-evaluations", "3000"]) == 0
    out = capsys.readouterr().out
    assert "[GlobalBuffer.1]" in out and "GlobalBuffer.3" in out
    assert main(["search", "pe-array", "gemm-256", "--mapspace", "tensor-depths", "--max-evaluations", "2000",
                 "--export-timeloop", str(tmp_path / "m.yaml")]) != 0
    assert "no Timeloop form" in capsys.readouterr().err


def test_emitted_mlir_tiles_each_sub_level_that_has_loops(capsys, tmp_path):
    out = tmp_path / "kernel.mlir"
    assert main(["emit", "pe-array", "gemm-256", "--mapspace", "tensor-depths", "--to", "mlir", "--time-limit", "1",
                 "-o", str(out)]) == 0
    text = out.read_text()
    assert "// tile GlobalBuffer." in text and "linalg.matmul" in text
    iree_opt = shutil.which("iree-opt")
    if iree_opt is not None:        # the transform script applies (`tests/test_emit_mlir.py` checks the nest)
        subprocess.run([iree_opt, "--transform-interpreter", str(out)], check=True, capture_output=True)


def test_the_search_starts_from_its_best_with_every_tensor_at_one_depth_within_half_its_budget():
    """The first incumbent of a split space is the joint search's own best on the space with
    each tensor at one depth (`depths.merged`), lifted into it (`depths.lifted`: a mapping
    of this space, priced the same), found within half the budget: the result is never worse."""
    from mapper.api import run_search
    from mapper.search.events import WarmStart
    result = run_search("pe-array", "gemm-256", "tensor-depths", objective="energy", max_evaluations=8_000)
    start = next(event for event in result.events if isinstance(event, WarmStart))
    assert start.source.startswith("each tensor at one depth")
    plain = run_search("pe-array", "gemm-256", "bypass-every", objective="energy", max_evaluations=4_000)
    assert result.score <= start.score <= plain.score * (1 + 1e-9)


@pytest.mark.parametrize("workload, found_by_dives", [("gemm-256", False), ("gemv-1024-int8", True)])
def test_the_search_at_one_depth_starts_only_where_quick_dives_find_nothing(workload, found_by_dives):
    """A split space's first incumbent comes from quick dives into its parts; only where they
    find no mapping whose sub-levels fit together (gemm-256's) does the search with each
    tensor at one depth run (`Joint._start_at_one_depth`)."""
    from mapper.api import run_search
    from mapper.search.events import Dives, WarmStart
    result = run_search("pe-array", workload, "tensor-depths", objective="energy", max_evaluations=8_000)
    first = next(event for event in result.events if isinstance(event, Dives))
    assert first.quick and (first.after < float("inf")) is found_by_dives
    assert any(isinstance(event, WarmStart) for event in result.events) is not found_by_dives


def test_a_mapping_over_sub_levels_is_evaluated_and_starts_a_search_again(capsys, tmp_path):
    """`search --json`'s mapping, written to a file, names the sub-levels: `evaluate` prices it
    on them (the same energy), and a search under tensor_depths starts from it."""
    import json
    assert main(["search", "pe-array", "gemm-256", "--mapspace", "tensor-depths", "--objective", "energy",
                 "--max-evaluations", "3000", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    path = tmp_path / "found.yaml"
    path.write_text(yaml.safe_dump({"mapping": found["mapping"]}))
    assert main(["evaluate", "pe-array", "gemm-256", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"]["energy_pj"] == found["cost"]["energy_pj"]
    assert main(["search", "pe-array", "gemm-256", "--mapspace", "tensor-depths", "--objective", "energy",
                 "--max-evaluations", "3000", "--warm-start", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"]["energy_pj"] <= found["cost"]["energy_pj"]


@pytest.mark.parametrize("arch", ["toy", "pe-array"])
def test_a_mapping_with_every_tensor_at_one_depth_prices_the_same_over_the_sub_levels(arch):
    """Every mapping of the plain space, lifted over the sub-levels (`depths.lifted`: its kept
    tensors at the first ones with no loops between, its loops under the last of them), is
    the same loop nest: the same energy and cycles, in both paths of the cost model, on toy's
    buffer (64 B a cycle: the sub-levels' bytes through its one port) and pe-array's."""
    from mapper.depths import lifted
    from mapper.mapping import from_table
    from mapper.mapspace import sampling
    workload = load_workload("gemm-256")
    every = ("every", LevelConstraints(bypass=True))
    plain = Mapspace(load_arch(arch), workload, Constraints(levels=(every,)))
    split = Mapspace(load_arch(arch), workload, Constraints(levels=(("GlobalBuffer", DEPTHS), every)))
    sample = sampling.sample(plain, 200, np.random.default_rng(5))
    mappings = [from_table(sample, row) for row in range(len(sample))]
    raised = [lifted(mapping, split.arch) for mapping in mappings]
    before = evaluate_many(plain.arch, workload, sample)
    table = to_table(raised, len(workload.dims), len(workload.tensors))
    after = evaluate_many(split.arch, workload, table)
    assert pruning.valid_mask(split, table).all()
    np.testing.assert_allclose(after.energy_pj, before.energy_pj, rtol=1e-12)
    np.testing.assert_array_equal(after.cycles, before.cycles)
    for row in range(0, len(raised), 7):
        one = evaluate(split.arch, workload, raised[row])
        assert one.energy_pj == pytest.approx(before.energy_pj[row], rel=1e-12) and one.cycles == before.cycles[row]


@quick_and_full(4, 60, st.data())
def test_scalar_and_vectorised_agree_over_sub_levels(data):
    """Both paths of the cost model on mappings of random spaces with a level at tensor depths
    (its bandwidths, drawn, shared by its sub-levels): every count, level time, the energy and
    the cycles (`test_cost_agreement.assert_same`), and the capacity each checks."""
    from mapper.mapping import from_table
    from mapper.mapspace import sampling
    workload = data.draw(workloads(kinds=("gemm", "conv1d", "batched"), max_macs=64))
    arch = _no_latency_middle(data.draw(archs(min_levels=3, max_levels=4, capacity=data.draw(st.booleans()))))
    space = Mapspace(arch, workload, Constraints(levels=(("every", LevelConstraints(bypass=True)), ("L1", DEPTHS))))
    sample = sampling.sample(space, 20, np.random.default_rng(data.draw(st.integers(0, 1000))))
    if not len(sample):         # small capacities can leave no valid mapping among the draws
        return
    costs = evaluate_many(space.arch, space.workload, sample)
    for row in range(len(sample)):
        mapping = from_table(sample, row)
        assert_same(space.arch, space.workload, mapping, costs, row)
        assert evaluate(space.arch, space.workload, mapping).fits() == bool(costs.valid[row])
