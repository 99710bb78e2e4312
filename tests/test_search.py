"""Every strategy: a valid result, deterministic, within its budget, never better than the
exhaustive optimum; joint equals exhaustive wherever exhaustive is feasible."""
import json
import time

import pytest
import yaml
from hypothesis import strategies as st

from mapper.cli import main
from mapper.constraints import Constraints, LevelConstraints
from mapper.cost import evaluate_many
from mapper.errors import InfeasibleError
from mapper.load import load_arch, load_workload, workload_from_dict
from mapper.mapping import to_table
from mapper.mapspace import Mapspace, counting, pruning
from mapper.search import Exhaustive, Greedy, Joint, RandomSearch, SearchContext, SpaceTooLargeError, parse_objective
from mapper.units import Where

from strategies import archs, workloads
from test_mapspace import gemm, small_arch
from scaled import quick_and_full

SPACES = {
    "gemm-spatial-2x2": (small_arch(capacity="64 B", rf="12 B"), gemm(8, 4, 4), Constraints()),
    "gemm-bypass": (small_arch(), gemm(4, 2, 2), Constraints(levels=(("Buf", LevelConstraints(bypass=True)),
                                                                    ("RF", LevelConstraints(bypass=True))))),
    "conv1d": (small_arch(capacity="64 B", fanout=(2, 1)),
               workload_from_dict({"name": "c", "einsum": "O[k,p] += I[c,p+r] * W[k,c,r]",
                                   "sizes": {"k": 4, "c": 2, "p": 4, "r": 3}, "dtype": 8}, Where("t")),
               Constraints(levels=(("RF", LevelConstraints(bypass=True)),))),
    "conv1d-strided": (small_arch(capacity="64 B", fanout=(2, 2)),
                       workload_from_dict({"name": "s", "einsum": "O[k,p] += I[2*p+r] * W[k,r]",
                                           "sizes": {"k": 4, "p": 4, "r": 3}, "dtype": 8}, Where("t")),
                       Constraints()),
    "gemm-imperfect": (small_arch(fanout=(2, 1)), gemm(3, 2, 5), Constraints(factors="imperfect", max_padding=0.5)),
}
OBJECTIVES = ["edp", "energy", "cycles", "bytes:Buf"]


def strategies():
    return [Exhaustive(), Joint(), Greedy(), RandomSearch(samples=3000, seed=3)]


@pytest.fixture(scope="module")
def optimum():
    cache = {}

    def get(name, objective):
        if (name, objective) not in cache:
            arch, workload, constraints = SPACES[name]
            space = Mapspace(arch, workload, constraints)
            cache[name, objective] = Exhaustive().run(space, parse_objective(objective, arch))
        return cache[name, objective]
    return get


# the default run takes each space once and each objective at least once; the slow run every pair
QUICK_PAIRS = {("gemm-spatial-2x2", "cycles"), ("gemm-bypass", "energy"), ("conv1d", "edp"),
               ("conv1d-strided", "bytes:Buf"), ("gemm-imperfect", "edp")}


@pytest.mark.parametrize("objective,name", [
    pytest.param(objective, name, marks=[] if (name, objective) in QUICK_PAIRS else [pytest.mark.slow])
    for objective in OBJECTIVES for name in SPACES])
def test_strategies_valid_and_never_beat_exhaustive(name, objective, optimum):
    arch, workload, constraints = SPACES[name]
    space = Mapspace(arch, workload, constraints)
    best = optimum(name, objective)
    for strategy in strategies():
        # exhaustive's own result is the fixture's (the same search, run once)
        result = best if strategy.name == "exhaustive" else strategy.run(space, parse_objective(objective, arch))
        table = to_table([result.mapping], len(workload.dims), len(workload.tensors))
        assert evaluate_many(arch, workload, table).valid[0] and pruning.valid_mask(space, table)[0]
        assert result.evaluation.fits()
        assert result.score >= best.score * (1 - 1e-12), strategy.name
        assert result.evaluated > 0
        if strategy.name == "joint":
            assert result.optimal and result.score == best.score and result.mapping == best.mapping
        if strategy.name in ("greedy", "random"):
            assert not result.optimal


# joint on one core, where what it prices is compared too: this space is below the joint
# search's threshold for several cores, where Joint() is that same walk (several cores return
# one mapping: test_parallel)
@pytest.mark.parametrize("strategy", [s for s in strategies() if s.name != "joint"]
                         + [Joint(workers=1, name="joint-one-core")], ids=lambda s: s.name)
def test_deterministic(strategy):
    arch, workload, constraints = SPACES["gemm-bypass"]
    space = Mapspace(arch, workload, constraints)
    # on the work clock every command and `run_search` search on: a bare SearchContext() is the
    # wall clock, where CP-SAT's cap and the walk's polishes are wall seconds (docs/SEARCH.md)
    a = strategy.run(space, parse_objective("edp", arch), SearchContext().for_search())
    b = strategy.run(space, parse_objective("edp", arch), SearchContext().for_search())
    assert a.mapping == b.mapping and a.score == b.score
    # what is priced too, except on several cores, where each worker's walk is pruned by what
    # the others have found so far (`parallel.py`)
    if not (isinstance(strategy, Joint) and strategy.workers != 1):
        assert a.evaluated == b.evaluated


@pytest.mark.parametrize("strategy", [Joint(), RandomSearch(samples=10**9), Exhaustive(limit=10**13)],
                         ids=lambda s: s.name)
def test_time_budget_is_honoured(strategy):
    space = Mapspace(load_arch("h100"), load_workload("gemm-4096"))
    start = time.perf_counter()
    result = strategy.run(space, parse_objective("energy", space.arch), SearchContext(0.5))
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5 + 8.0          # the limit plus set-up (funnel, warm start) and one batch
    assert not result.complete
    if strategy.name == "joint":
        assert result.lower_bound is not None and result.lower_bound <= result.score


def test_exhaustive_refuses_a_huge_space():
    space = Mapspace(load_arch("h100"), load_workload("gemm-4096"))
    with pytest.raises(SpaceTooLargeError, match="refuses .* mappings \\(limit"):
        Exhaustive().run(space, parse_objective("edp", space.arch))


@quick_and_full(2, 25, st.data())
def test_joint_equals_exhaustive_on_random_small_spaces(data):
    workload = data.draw(workloads(max_macs=48))
    arch = data.draw(archs(max_levels=3, native=True))      # native shapes: roles by name or inferred
    space = Mapspace(arch, workload, Constraints(levels=(("innermost", LevelConstraints(bypass=True)),)))
    objective = parse_objective(data.draw(st.sampled_from(["edp", "energy", "cycles"])), arch)
    if counting.funnel(space).after["divisibility"] > 300_000:
        return
    try:
        exact = Exhaustive().run(space, objective)
    except InfeasibleError:         # no innermost tile meets the fragments: both must say so
        with pytest.raises(InfeasibleError):
            Joint().run(space, objective)
        return
    joint = Joint().run(space, objective)
    assert joint.optimal and joint.score == exact.score and joint.mapping == exact.mapping


def test_cli_search_json_feeds_back(tmp_path, capsys):
    assert main(["search", "toy", "gemm-256", "--mapspace", "fixed-example", "--strategy", "greedy",
                 "--objective", "energy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    search = out["search"]
    assert search["strategy"] == "greedy" and search["evaluated"] > 0 and search["optimal"] is False
    assert search["mapspace"]["size"] > search["mapspace"]["after"]["capacity"] > 0
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump({"mapping": out["mapping"]}))
    assert main(["evaluate", "toy", "gemm-256", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["cost"]["energy_pj"] == out["cost"]["energy_pj"] == search["score"]


def test_cli_compare_explains(capsys):
    assert main(["compare", "toy", "gemm-256", "--mapspace", "fixed-example", "--time-limit", "60"]) == 0
    out = capsys.readouterr().out
    assert "greedy loses" in out and "joint mapping" in out and "proven optimal" in out
    assert "because" in out


def test_bad_objective_is_one_line(capsys):
    assert main(["search", "toy", "gemm-256", "--objective", "bytes:Nowhere"]) == 2
    assert "Nowhere" in capsys.readouterr().err
