"""Timeloop's priority objective `delay,energy`: the fewest cycles, then the least energy among
them, by every strategy, with the joint search's pruning on (cycles, energy) bound pairs."""
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from mapper.cli import main
from mapper.constraints import Constraints, LevelConstraints
from mapper.cost import evaluate_many
from mapper.errors import SpecError
from mapper.load import load_arch
from mapper.mapspace import Mapspace, counting, pruning, sampling
from mapper.search import Exhaustive, Joint, SearchContext, make_strategy, parse_objective
from mapper.search.objective import beaten

from strategies import archs, workloads
from test_mapspace import gemm, small_arch
from scaled import quick_and_full


def test_spellings_and_name():
    arch = load_arch("toy")
    for text in ("delay,energy", "delay, energy", "cycles,energy"):
        objective = parse_objective(text, arch)
        assert objective.kind == "delay_energy" and objective.name == "delay,energy" and objective.lexicographic
    with pytest.raises(SpecError, match="delay,energy"):
        parse_objective("energy,delay", arch)


def test_beaten_compares_cycles_then_energy():
    objective = parse_objective("delay,energy", load_arch("toy"))
    key = (100.0, 50.0, 100.0)                   # the incumbent: 100 cycles, 50 pJ
    bounds = np.array([[101, 1],                 # more cycles: beaten whatever the energy
                       [100, 51],                # same cycles, more energy: beaten
                       [100, 50],                # ties on both: kept (its content may rank first)
                       [99, 1000],               # fewer cycles: kept whatever the energy
                       [100 * (1 - 1e-15), 51]], float)   # cycles within rounding of a tie: beaten
    assert beaten(objective, bounds, key).tolist() == [True, True, False, False, True]
    assert not beaten(objective, bounds, None).any()
    edp = parse_objective("edp", load_arch("toy"))
    assert beaten(edp, np.array([1.0, 2.0, 3.0]), (2.0,)).tolist() == [False, False, True]


def _lexicographic_best(space, objective):
    """Brute force: every valid mapping of the space priced, the smallest (cycles, energy)."""
    best = None
    for table in sampling.all_tables(space, 50_000):
        costs = evaluate_many(space.arch, space.workload, table)
        ok = np.flatnonzero(costs.valid & pruning.valid_mask(space, table))
        for c, e in zip(costs.cycles[ok], costs.energy_pj[ok]):
            if best is None or (c, e) < best:
                best = (c, e)
    return best


@pytest.mark.parametrize("capacity,rf", [("64 B", "12 B"), ("unlimited", "unlimited")])
def test_every_strategy_minimises_cycles_then_energy(capacity, rf):
    space = Mapspace(small_arch(capacity=capacity, rf=rf), gemm(8, 4, 4), Constraints())
    objective = parse_objective("delay,energy", space.arch)
    want = _lexicographic_best(space, objective)
    exact = Exhaustive().run(space, objective)
    joint = Joint().run(space, objective)
    assert (exact.evaluation.cycles, exact.evaluation.energy_pj) == pytest.approx(want, rel=1e-12)
    assert joint.optimal and joint.mapping == exact.mapping and joint.score == exact.score
    # many mappings share the fewest cycles here: the energy decides among them
    cycles_only = Exhaustive().run(space, parse_objective("cycles", space.arch))
    assert cycles_only.score == exact.score
    for name in ("random", "greedy"):
        options = {"samples": 20_000} if name == "random" else {}
        found = make_strategy(name, options).run(space, objective, SearchContext(5))
        ev = found.evaluation
        assert found.score == ev.cycles and (ev.cycles, ev.energy_pj) >= (want[0], want[1] * (1 - 1e-12))


@quick_and_full(2, 12, st.data())
def test_joint_equals_exhaustive_under_delay_energy(data):
    workload = data.draw(workloads(kinds=("gemm", "conv1d"), max_macs=24))
    arch = data.draw(archs(min_levels=3, max_levels=3))
    space = Mapspace(arch, workload, Constraints(levels=tuple((level.name, LevelConstraints(bypass=True))
                                                             for level in arch.levels[1:])))
    if counting.funnel(space).after["divisibility"] > 100_000:
        return
    objective = parse_objective("delay,energy", arch)
    exact = Exhaustive().run(space, objective)
    joint = Joint().run(space, objective)
    assert joint.optimal and joint.score == exact.score and joint.mapping == exact.mapping


# Timeloop's mapper settings, in the form of the ISPASS 2020 tutorial's mapper.yaml
# (timeloop-accelergy-exercises, workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/
# timeloop+accelergy/mapper.yaml: optimization-metrics [delay, energy]); the other values here
# only need to be Timeloop's keys.
MAPPER = """mapper:
  algorithm: random-pruned
  optimization-metrics: [ delay, energy ]
  live-status: False
  num-threads: 8
  timeout: 15000
  victory-condition: 500
"""
FORMAT = Path(__file__).parent / "data" / "timeloop_format"


def _search(args, capsys):
    code = main(["search", *args, "--strategy", "random", "--samples", "300", "--time-limit", "20", "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_timeloop_mapper_metrics_set_the_objective(tmp_path, capsys):
    mapper = tmp_path / "mapper.yaml"
    mapper.write_text(MAPPER)
    design = FORMAT / "simple_weight_stationary"
    specs = [str(design / "arch.yaml"), str(design / "problem.yaml"), "--mapspace", str(design / "constraints.yaml")]
    code, out, err = _search(specs + ["--timeloop-mapper", str(mapper)], capsys)
    assert code == 0 and out["search"]["objective"] == "delay,energy"
    assert "objective delay,energy from Timeloop's optimization-metrics" in err
    assert "mapper settings not read" in err and "victory-condition" in err
    code, out, _ = _search(specs + ["--timeloop-mapper", str(mapper), "--objective", "energy"], capsys)
    assert code == 0 and out["search"]["objective"] == "energy"          # an explicit --objective wins
    # beside this project's own specs too
    code, out, _ = _search(["toy", "gemm-256", "--timeloop-mapper", str(mapper)], capsys)
    assert code == 0 and out["search"]["objective"] == "delay,energy"


def test_unsupported_timeloop_metrics_are_one_line(tmp_path, capsys):
    mapper = tmp_path / "mapper.yaml"
    mapper.write_text(MAPPER.replace("[ delay, energy ]", "[ energy, delay ]"))
    code, _, err = _search(["toy", "gemm-256", "--timeloop-mapper", str(mapper)], capsys)
    err = err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert str(mapper) in err and "optimization-metrics" in err and "[delay, energy]" in err


def test_timeloop_mapper_metric_in_exercise_05s_spelling_is_honoured(tmp_path, capsys):
    """`optimization_metric: [energy]` (singular, underscore) sets the objective, not a note."""
    mapper = tmp_path / "mapper.yaml"
    mapper.write_text("mapper:\n  algorithm: linear-pruned\n  optimization_metric: [ energy ]\n")
    code, out, err = _search(["toy", "gemm-256", "--timeloop-mapper", str(mapper)], capsys)
    assert code == 0 and out["search"]["objective"] == "energy", err
    assert "objective energy from Timeloop's optimization-metrics" in err
    assert "optimization_metric" not in err.split("not read")[-1]
    mapper.write_text("mapper:\n  optimization_metric: [ energy ]\n  optimization-metrics: [ edp ]\n")
    code, _, err = _search(["toy", "gemm-256", "--timeloop-mapper", str(mapper)], capsys)
    assert code == 2 and "optimization_metric: given twice" in err
