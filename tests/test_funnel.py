"""The mapspace size and funnel take bounded time and memory on deep hierarchies of many-dim
workloads, stay exact where counting is cheap, and say which counts are estimates."""
import itertools
import json
import math
import time

import pytest

from mapper.cli import main
from mapper.constraints import Constraints, LevelConstraints
from mapper.load import arch_from_dict, load_arch, load_constraints, load_workload
from mapper.mapspace import Mapspace, counting, order_tables
from mapper.report import funnel_text
from mapper.units import Where

from test_mapspace import gemm, small_arch

PE = {"instances": 168, "mesh": [14, 12]}
SIX_LEVELS = {
    "name": "six-level", "clock": "200 MHz",
    "levels": [
        {"name": "DRAM", "capacity": "unlimited", "bandwidth": "480 MB/s", "block_size": 4,
         "energy": {"read": 800, "write": 800, "update": 800}},
        {"name": "GlobalBuffer", "capacity": "108 KiB", "block_size": 4, "max_stages": 2,
         "energy": {"read": 32, "write": 24, "update": 32}},
        {"name": "PEBuffer", "capacity": "1 KiB", "max_stages": 2, "energy": {"read": 2, "write": 2, "update": 2},
         **PE},
        {"name": "WeightSpad", "capacity": "448 B", "keeps": ["W"], "energy": {"read": 1, "write": 1, "update": 1},
         **PE},
        {"name": "InputSpad", "capacity": "24 B", "keeps": ["I"], "energy": {"read": 1, "write": 1, "update": 1},
         **PE},
        {"name": "PsumSpad", "capacity": "48 B", "keeps": ["O"], "energy": {"read": 1, "write": 1, "update": 1},
         **PE}],
    "compute": {"name": "MAC", "energy": 1, "macs_per_cycle": 1, **PE}}


def six_level_space(mapspace=None):
    return Mapspace(arch_from_dict(SIX_LEVELS, Where("<test>")), load_workload("conv-resnet50-conv3"),
                    load_constraints(mapspace))


@pytest.mark.parametrize("mapspace", [None, "weight-stationary", "bypass-every"])
def test_six_level_seven_dim_funnel_is_bounded_and_marked_estimated(mapspace):
    """This took minutes and was killed at 15 GiB before the size was bounded."""
    start = time.perf_counter()
    space = six_level_space(mapspace)
    funnel = counting.funnel(space)
    assert time.perf_counter() - start < 5
    assert not funnel.exact and set(funnel.estimated) >= {"fanout", "capacity", "occupancy"}
    assert isinstance(funnel.size, int) and funnel.size >= funnel.after["constraints"] > 0
    assert funnel.after["fanout"] >= funnel.after["capacity"] > 0
    assert "~" in funnel_text(funnel)


def test_an_estimated_size_is_marked_close_and_deterministic():
    space = Mapspace(load_arch("eyeriss"), load_workload("conv-resnet50-conv3"), load_constraints("weight-stationary"))
    exact = counting.funnel(space)
    estimate = counting.funnel(space, max_terms=0)           # no exact sum allowed: every count estimated
    assert {"raw", "constraints", "divisibility"} <= set(estimate.estimated)
    assert not {"raw", "constraints", "divisibility"} & set(exact.estimated)
    assert estimate.size == counting.funnel(space, max_terms=0).size
    for step in ("constraints", "divisibility"):
        assert estimate.after[step] == pytest.approx(exact.after[step], rel=0.1)
    assert estimate.size == pytest.approx(exact.size, rel=0.1)
    text = funnel_text(estimate)
    assert "raw space           ~" in text and "too many per-dim loop patterns" in text
    marked = {line.split()[1] for line in funnel_text(exact).splitlines() if "~" in line and "after" in line}
    assert marked == {"fanout", "capacity", "occupancy"}   # the closed forms stay unmarked


def naive_size(space, tables, constrained):
    """Every combination of per-dim loop patterns, its rows times the order classes of each level
    listed by `orders_for`: the definition the closed form must meet."""
    per_dim = [list(zip(*counting._patterns(space, rows))) for rows in tables]
    counts = {}

    def orders(lv, mask):
        if (lv, mask) not in counts:
            dims = frozenset(d for d in range(space.n_dims) if mask >> d & 1)
            counts[lv, mask] = len(order_tables.orders_for(space, lv, dims, constrained))
        return counts[lv, mask]
    total = 0
    for combo in itertools.product(*per_dim):
        masks = [sum(1 << d for d, (pattern, _) in enumerate(combo) if pattern >> lv & 1)
                 for lv in range(space.n_levels)]
        total += (math.prod(int(w) for _, w in combo)
                  * math.prod(orders(lv, m) for lv, m in enumerate(masks)))
    return total * counting._choice_multiplicity(space, constrained)


CONV2D = {"name": "conv", "einsum": "O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]",
          "sizes": {"k": 4, "c": 2, "p": 4, "q": 2, "r": 3, "s": 2}, "dtype": 8}
ORDER_RULES = {
    "free": Constraints(),
    "stationary": Constraints(levels=(("Buf", LevelConstraints(stationary="weight")),)),
    "forbid": Constraints(levels=(("RF", LevelConstraints(forbid=(("k", "c", "p", "q", "r", "s"),))),)),
    "fixed": Constraints(levels=(("Buf", LevelConstraints(order=("k", "c", "p", "q", "r", "s"))),)),
}


@pytest.mark.parametrize("rule", ORDER_RULES)
@pytest.mark.parametrize("kind", ["conv2d", "gemm"])
def test_closed_form_meets_the_definition(kind, rule):
    from mapper.load import workload_from_dict
    if kind == "gemm":
        workload = gemm(8, 4, 6)
        constraints = {"free": Constraints(),
                       "stationary": Constraints(levels=(("RF", LevelConstraints(stationary="output")),)),
                       "forbid": Constraints(levels=(("Buf", LevelConstraints(forbid=(("m", "n", "k"),))),)),
                       "fixed": Constraints(levels=(("Buf", LevelConstraints(order=("k", "m", "n"))),))}[rule]
    else:
        workload, constraints = workload_from_dict(CONV2D, Where("<test>")), ORDER_RULES[rule]
    space = Mapspace(small_arch(capacity="unlimited"), workload, constraints)
    for tables, constrained in ((space.step_tables["raw"], False), (space.dim_tables, True)):
        count, exact = counting._closed_form_size(space, tables, constrained)
        assert exact and count == naive_size(space, tables, constrained)


def test_mapspace_command_on_a_deep_hierarchy(tmp_path, capsys):
    import yaml
    path = tmp_path / "six.yaml"
    path.write_text(yaml.safe_dump(SIX_LEVELS))
    start = time.perf_counter()
    assert main(["mapspace", str(path), "conv-resnet50-conv3", "--json"]) == 0
    assert time.perf_counter() - start < 10
    out = json.loads(capsys.readouterr().out)["mapspace"]
    assert out["exact"] is False and "fanout" in out["estimated"] and out["samples"] > 0
    assert main(["mapspace", str(path), "conv-resnet50-conv3"]) == 0
    text = capsys.readouterr().out
    assert "~" in text and "unmarked counts are exact" in text
