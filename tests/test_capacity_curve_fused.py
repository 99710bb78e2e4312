"""An op graph's capacity curve (`explain ARCH OPGRAPH --capacity`): the fused curve between the
fused bound and the unfused curve, never rising, meeting the bound once the graph's working set
fits; each point the fusion study's own figure (no second pricing path); a grouping priced
again at a larger capacity unchanged (what keeps the curve monotone); thresholds read off the
points; bad flags refused in one line. Counted budgets: the same result on any machine load."""
import functools
import json
import math

import pytest

import mapper
from mapper.cli import main
from mapper.explain.capacity_curve import arch_with_capacity
from mapper.fusion.capacity_curve import SOURCES, STUDY_SECONDS, fused_capacity_curve
from mapper.fusion.capacity_report import fused_curve_json, fused_curve_text
from mapper.fusion.replay import pins_of, repriced
from mapper.fusion.run import fuse
from mapper.load import load_arch, load_opgraph
from mapper.search import SearchContext

TWO_LEVEL = "tests/data/two-level-arch.yaml"
CHAINS = ["tests/data/chain-tiny-gemm-bias-relu.yaml", "tests/data/chain-tiny-layernorm-gemm-gelu.yaml",
          "tests/data/chain-tiny-attention.yaml"]
BUDGET = 3000             # mappings priced per point: deterministic, a few seconds per curve
SLACK = 1e-9


def _curve(chain, **kwargs):
    return fused_capacity_curve(load_arch(TWO_LEVEL), load_opgraph(chain), "Buffer",
                                max_evaluations=kwargs.pop("max_evaluations", BUDGET), **kwargs)


@functools.cache
def _default_curve(chain):
    """`_curve(chain)` once a process: on a counted budget it is the same curve each time, and
    two tests read attention's."""
    return _curve(chain)


@pytest.mark.parametrize("chain", CHAINS, ids=lambda c: c.rsplit("/", 1)[-1][11:-5])
def test_the_fused_curve_lies_between_the_bound_and_the_unfused_curve_never_rises_and_meets_the_bound(chain):
    curve = _default_curve(chain)
    bound = curve.bound.outer_bytes
    assert bound == sum(curve.graph.tensor(t).bytes for t in curve.graph.inputs + curve.graph.outputs)
    assert len(curve.points) >= 6 and not curve.infeasible
    # the default grid reaches the working set (every tensor of the graph once)
    assert curve.points[-1].capacity >= curve.working_set_bytes > curve.points[-2].capacity
    for p in curve.points:
        assert bound * (1 - SLACK) <= p.fused.outer_bytes <= p.unfused.outer_bytes * (1 + SLACK)
        assert p.source in SOURCES
    for earlier, later in zip(curve.points, curve.points[1:]):
        assert later.fused.outer_bytes <= earlier.fused.outer_bytes
        assert later.unfused.outer_bytes <= earlier.unfused.outer_bytes
    last = curve.points[-1]
    assert math.isclose(last.fused.outer_bytes, bound, rel_tol=SLACK) and last.regime == "compulsory"
    assert set(last.kept) == set(curve.graph.intermediates)        # every intermediate on chip
    # fusion gains somewhere: the unfused curve writes and reads back every intermediate
    assert last.unfused.outer_bytes > last.fused.outer_bytes


@pytest.mark.parametrize("chain", CHAINS[::2], ids=["gemm-bias-relu", "attention"])
def test_a_point_searched_is_the_fusion_study_run_directly_at_that_capacity(chain):
    arch, graph = load_arch(TWO_LEVEL), load_opgraph(chain)
    capacities = (64.0, 512.0)
    curve = fused_capacity_curve(arch, graph, "Buffer", capacities, max_evaluations=BUDGET)
    for p in curve.points:
        direct = fuse(arch_with_capacity(arch, 1, p.capacity), graph, SearchContext.for_command(STUDY_SECONDS, BUDGET),
                      STUDY_SECONDS, "bytes")
        assert p.fused.outer_bytes <= direct.fused.score               # never worse than the study
        if p.source == "search":
            assert p.fused.outer_bytes == direct.fused.score
            assert p.fused.energy_pj == sum(g.energy_pj for g in direct.fused.groups)
            assert p.groups == tuple(tuple(graph.ops[i].name for i in g.ops) for g in direct.fused.groups)
    assert curve.points[0].source == "search"          # nothing to carry to the first point


@pytest.mark.parametrize("chain", CHAINS, ids=lambda c: c.rsplit("/", 1)[-1][11:-5])
def test_a_grouping_priced_again_at_a_larger_capacity_moves_the_same_bytes(chain):
    # what makes the curve monotone by construction: the same kernels, the same traffic
    arch, graph = load_arch(TWO_LEVEL), load_opgraph(chain)
    small = arch_with_capacity(arch, 1, 256.0)
    study = fuse(small, graph, SearchContext.for_command(None, BUDGET), 20.0, "bytes")
    pins = pins_of(study.fused, study.grouper)
    op_sets = [g.ops for g in study.fused.groups]
    for capacity in (256.0, 1024.0, 65536.0):
        again, _ = repriced(arch_with_capacity(arch, 1, capacity), graph, pins, op_sets, "bytes")
        assert again.score == study.fused.score
        assert [g.energy_pj for g in again.groups] == pytest.approx([g.energy_pj for g in study.fused.groups])
    # at a smaller capacity its tiles no longer fit: refused, not priced
    assert repriced(arch_with_capacity(arch, 1, 16.0), graph, pins, op_sets, "bytes") is None or \
        len(study.fused.groups) == len(graph.ops)


def test_the_curve_never_rises_when_each_study_is_cut_short():
    # one mapping priced per study: the curve keeps the previous capacity's kernels instead
    curve = _curve(CHAINS[2], max_evaluations=1)
    fused = [p.fused.outer_bytes for p in curve.points]
    unfused = [p.unfused.outer_bytes for p in curve.points]
    assert all(b <= a for a, b in zip(fused, fused[1:])) and all(b <= a for a, b in zip(unfused, unfused[1:]))
    assert all(f <= u for f, u in zip(fused, unfused))


def test_thresholds_follow_from_the_points():
    curve = _default_curve(CHAINS[2])
    points = curve.points
    by_name = {t.what: t for t in curve.thresholds}
    assert by_name["fused bound"].size_bytes == curve.bound.outer_bytes
    for t in curve.thresholds:
        if t.capacity is None or t.what == "fused bound":
            continue
        i = [p.capacity for p in points].index(t.capacity)
        floor = 0.0 if t.what in curve.graph.intermediates else t.size_bytes
        assert all(math.isclose(p.tensor_bytes[t.what], floor, abs_tol=1e-9) for p in points[i:])
        if t.what in curve.graph.intermediates:        # on chip exactly where the grouping keeps it
            assert all(t.what in p.kept for p in points[i:])
        if i:
            assert points[i - 1].tensor_bytes[t.what] > floor
    for g in curve.group_thresholds:
        if g.chosen_from is not None:
            first = next(p for p in points if g.ops in p.groups)
            assert first.capacity == g.chosen_from and g.legal_from <= g.chosen_from
    # attention's three ops fuse into one kernel only once their slices fit the buffer
    whole = next(g for g in curve.group_thresholds if g.ops == ("qk", "softmax", "pv"))
    assert points[0].capacity < whole.legal_from <= whole.chosen_from
    regimes = [p.regime for p in points]
    assert regimes[0] == "continuous" and regimes[-1] == "compulsory" and "threshold" in regimes


def test_the_command_prints_the_table_json_and_plot(capsys, tmp_path):
    args = ["explain", TWO_LEVEL, CHAINS[0], "--capacity", "Buffer", "--capacities", "64..4KiB:x4",
            "--max-evaluations", str(BUDGET)]
    assert main(args + ["--json", "--plot", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["capacity_bytes"] for p in out["points"]] == [64, 256, 1024, 4096]
    assert out["fused_bound_bytes"] == 1688 and out["fusion_level"] == "Buffer" and out["outer"] == "DRAM"
    assert all(p["fused"]["outer_bytes"] <= p["unfused"]["outer_bytes"] for p in out["points"])
    met = next(t["capacity_bytes"] for t in out["thresholds"] if t["what"] == "fused bound")
    assert met is not None and out["points"][-1]["fused"]["outer_bytes"] == 1688
    assert (tmp_path / out["plots"][0].rsplit("/", 1)[-1]).stat().st_size > 10_000
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "fused DRAM B" in text and "fused bound: 1,688 B" in text and "stays on chip" in text


def test_the_python_api_gives_the_same_curve():
    curve = mapper.run_fused_capacity_curve(TWO_LEVEL, CHAINS[0], "Buffer", (64.0, 1024.0), max_evaluations=BUDGET)
    direct = _curve(CHAINS[0], capacities=(64.0, 1024.0))
    assert [p.fused for p in curve.points] == [p.fused for p in direct.points]


@pytest.mark.parametrize("argv,flag,words", [
    (["--capacity", "Nowhere"], "--capacity", "no level 'Nowhere'"),
    (["--capacity", "DRAM"], "--capacity", "outermost"),
    (["--capacity", "Buffer", "--objective", "energy"], "--objective", "bytes"),
    (["--capacities", "1KiB..1MiB:x2"], "--capacities", "needs --capacity"),
    (["--capacity", "Buffer", "--capacities", "0..8MiB:x2"], "--capacities", "> 0"),
])
def test_bad_flags_on_an_op_graph_are_one_line_naming_the_flag(capsys, argv, flag, words):
    assert main(["explain", TWO_LEVEL, CHAINS[0], *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mapper: error: {flag}") and words in lines[0], lines
    assert captured.out == ""


def test_a_models_curve_is_the_count_weighted_sum_of_its_layers_and_chains_curves():
    from mapper.sweep.capacity_model import model_capacity_curve
    curve = model_capacity_curve(load_arch(TWO_LEVEL), "tests/data/sweep-tiny-chain-model.yaml", "Buffer",
                                 max_evaluations=BUDGET)
    assert len(curve.points) >= 3 and len(curve.chain_curves) == 2
    chained = {"proj", "down"}
    for p in curve.points:
        layer = {name: {q.capacity: q for q in c.points}[p.capacity].outer_bytes for name, _, c in curve.layer_curves}
        chain = {name: {q.capacity: q for q in c.points}[p.capacity] for name, _, c in curve.chain_curves}
        counts = {name: k for name, k, _ in curve.layer_curves + curve.chain_curves}
        assert p.layers_bytes == sum(counts[n] * b for n, b in layer.items())
        alone = sum(counts[n] * b for n, b in layer.items() if n not in chained)
        assert p.fused_bytes == alone + sum(counts[n] * q.fused.outer_bytes for n, q in chain.items())
        assert p.unfused_bytes == alone + sum(counts[n] * q.unfused.outer_bytes for n, q in chain.items())
        assert p.fused_bytes <= p.unfused_bytes
    for earlier, later in zip(curve.points, curve.points[1:]):
        assert later.fused_bytes <= earlier.fused_bytes and later.layers_bytes <= earlier.layers_bytes


def test_the_command_takes_a_model(capsys):
    assert main(["explain", TWO_LEVEL, "tests/data/sweep-tiny-chain-model.yaml", "--capacity", "Buffer",
                 "--capacities", "16,128", "--max-evaluations", str(BUDGET), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "tiny-chain-model" and [p["capacity_bytes"] for p in out["points"]] == [16, 128]
    assert main(["explain", TWO_LEVEL, "tests/data/sweep-tiny-chain-model.yaml", "--capacity", "DRAM"]) == 2
    assert capsys.readouterr().err.startswith("mapper: error: --capacity")


def test_a_point_the_wall_clock_stopped_says_so():
    """A study the time limit cut short is not the deterministic answer: the point, its text and
    its JSON say so, with the groups it left priced by estimate."""
    curve = fused_capacity_curve(load_arch(TWO_LEVEL), load_opgraph(CHAINS[2]), "Buffer", (64.0,), time_limit=0.05)
    (point,) = curve.points
    assert point.stopped_by_clock and point.estimated_only
    text = fused_curve_text(curve)
    assert "64 B: its study was stopped by the time limit" in text
    assert "+".join(point.estimated_only[0]) in text
    data = fused_curve_json(curve)["points"][0]
    assert data["stopped_by"] == "time_limit" and data["estimated_only"] == [list(g) for g in point.estimated_only]
    settled = _curve(CHAINS[2], capacities=(64.0,)).points[0]       # a counted budget: never stopped
    assert not settled.stopped_by_clock
