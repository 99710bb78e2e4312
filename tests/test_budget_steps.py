"""The steps a search cannot cut keep within the command's wall-clock deadline: CP-SAT gives up
before building its model when too little is left, the walk sizes its chunks from measured
seconds per row (but keeps them fixed under an evaluation budget, so results stay
reproducible), the coarse start leaves its answer where it is once time is up, and a joint
search that starts past its deadline still returns the greedy mapping. Also: the quick look of
a hurried greedy level, generated in one call, is the same rows as run after run; the funnel is
counted once per space."""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest
from mapper.load import load_arch, load_constraints, load_workload
from mapper.mapspace import Mapspace, counting
from mapper.search import Greedy, Joint, JointTuning, SearchContext, parse_objective
from mapper.search.bounds import LinkBounds
from mapper.search.greedy import QUICK_LOOK_WINDOWS, _Descent
from mapper.search.joint.coarse import coarse_incumbent
from mapper.search.joint.walk import Walk, WalkSetup
from mapper.search.result import Incumbent
from mapper.search.tree import LevelTree, Nodes

TUNING = JointTuning()


def space_of(arch: str, workload: str) -> Mapspace:
    return Mapspace(load_arch(arch), load_workload(workload), load_constraints(None))


def test_cpsat_with_almost_no_time_left_returns_no_proposals_at_once():
    from mapper.search.joint.cpsat import propose
    space = space_of("h100", "gemm-16384")      # its model alone takes ~0.2 s to build, unloaded
    context = SearchContext.for_command(0.05)   # a command deadline ~0.05 s away
    started = time.perf_counter()
    factors = propose(space, context, 2.0)
    assert time.perf_counter() - started < 0.1
    assert factors is not None and factors.shape[-1] == 0


def test_cpsat_without_a_deadline_still_proposes():
    from mapper.search.joint.cpsat import propose
    factors = propose(space_of("tpu", "conv-alexnet-conv3"), SearchContext(), 2.0)
    assert factors is not None and factors.shape[-1] > 0


def _walk(space: Mapspace, context: SearchContext, time_limit: float | None) -> Walk:
    objective = parse_objective("edp", space.arch)
    setup = WalkSetup(space, objective, LevelTree(space), LinkBounds(space), context, context.budget(time_limit),
                      TUNING, 64_000, False)
    return Walk(setup, Incumbent(space, objective, context))


def test_chunks_follow_the_measured_rate_against_a_wall_deadline():
    space = space_of("tpu", "conv-alexnet-conv3")
    walk = _walk(space, SearchContext.for_command(0.5), 30.0)      # the deadline is near
    # nothing timed yet: a quarter of the ~0.46 s left at a pessimistic rate
    assert 1 <= walk.chunk_rows(2) <= TUNING.chunk_share * 0.5 / TUNING.assumed_row_seconds < TUNING.first_chunk
    walk.timed(Nodes(2, np.zeros((1, 0)), None, None, None), time.perf_counter() - 1e-4, walk.polish_seconds, 1)
    assert abs(walk.chunk_rows(2) - TUNING.chunk_seconds / 1e-4) <= 0.2 * TUNING.chunk_seconds / 1e-4
    # an untimed depth: the slowest rate measured anywhere
    assert walk.chunk_rows(3) == walk.chunk_rows(2)
    walk.timed(Nodes(3, np.zeros((1, 0)), None, None, None), time.perf_counter(), walk.polish_seconds, 10**9)
    assert walk.chunk_rows(3) == 64_000                      # cheap rows: never above `chunk`
    walk = _walk(space, SearchContext.for_command(100.0), None)   # far from it: a quarter of what is left
    assert walk.chunk_rows(2) == TUNING.first_chunk          # nothing timed yet
    walk.timed(Nodes(2, np.zeros((1, 0)), None, None, None), time.perf_counter() - 1e-3, walk.polish_seconds, 1)
    assert 0.8 * TUNING.chunk_share * 99 / 1e-3 < walk.chunk_rows(2) <= TUNING.chunk_share * 100 / 1e-3


def test_chunks_stay_fixed_under_an_evaluation_budget_and_without_a_limit():
    space = space_of("tpu", "conv-alexnet-conv3")
    slow = Nodes(2, np.zeros((1, 0)), None, None, None)
    for context, limit in [(SearchContext.for_command(30.0, max_evaluations=10_000), 30.0), (SearchContext(), None)]:
        walk = _walk(space, context, limit)
        walk.timed(slow, time.perf_counter() - 1e-3, walk.polish_seconds, 1)     # however slow the rows were
        assert walk.chunk_rows(2) == 64_000


def test_the_quick_look_in_one_call_is_the_runs_one_after_another():
    space = space_of("tpu", "conv-resnet50-conv3")
    objective = parse_objective("edp", space.arch)
    context = SearchContext()
    descent = _Descent(Greedy(slice=2_000), space, objective, context, context.budget(None))
    root = descent.tree.roots().take(np.array([0]))
    total = int(descent.tree.factor_children(root)[0])
    assert total > 4 * descent.greedy.slice
    look = descent._quick_look(root, total, True)
    width = descent.greedy.slice // QUICK_LOOK_WINDOWS
    starts = np.unique(np.linspace(0, total - width, QUICK_LOOK_WINDOWS).astype(np.int64))
    runs = Nodes.concat([descent.tree.children(root, int(s), int(s) + width, first_order_only=True) for s in starts])
    for field in ("groups", "orders", "stages", "keeps"):
        assert np.array_equal(getattr(look, field), getattr(runs, field)), field


def test_the_funnel_is_counted_once_and_handed_out_as_copies():
    space = space_of("eyeriss", "conv-resnet50-conv3")
    first = counting.funnel(space)
    first.after["fanout"] = -1                 # a caller's change does not reach the next one
    second = counting.funnel(space)
    assert second.after["fanout"] != -1 and second == counting.funnel(space)
    assert counting.funnel(space, seed=1) is not None    # other arguments: counted on their own


def test_a_funnel_cut_short_by_the_stop_is_not_kept():
    small = replace(load_workload("gemm-256"), sizes=(16, 16, 16))   # few enough to count exactly
    space = Mapspace(load_arch("toy"), small, load_constraints(None))
    cut = counting.funnel(space, stop=lambda: True)    # out of time: the coupled steps are estimated
    full = counting.funnel(space)
    assert "fanout" in cut.estimated and "fanout" not in full.estimated


@pytest.mark.parametrize("strategy", ["random", "exhaustive", "greedy", "joint"])
def test_a_search_counts_the_funnel_under_its_own_contexts_stop(strategy):
    """The stop comes from the search's context, not from the space: a context already
    stopped leaves the coupled steps estimated, and a fresh one on the same space counts them."""
    from mapper.search import make_strategy
    small = replace(load_workload("gemm-256"), sizes=(16, 16, 16))
    space = Mapspace(load_arch("toy"), small, load_constraints(None))
    objective = parse_objective("energy", space.arch)
    stopped = SearchContext()
    stopped.interrupt()
    cut = make_strategy(strategy, {}).run(space, objective, stopped).funnel
    full = make_strategy(strategy, {}).run(space, objective, SearchContext(max_evaluations=200)).funnel
    assert "fanout" in cut.estimated and full.exact


def test_the_coarse_answer_is_not_carried_once_time_is_up():
    space = space_of("h100", "gemm-4096")
    objective = parse_objective("edp", space.arch)
    table, event = coarse_incumbent(space, objective, Greedy(), SearchContext(), carry=lambda: False)
    assert table is None and event.outcome == "out of time" and "not carried (out of time)" in event.text()
    table, event = coarse_incumbent(space, objective, Greedy(), SearchContext(), carry=lambda: True)
    assert table is not None and event.outcome == "carried" and event.best is not None


def test_a_joint_search_started_past_its_deadline_returns_the_greedy_mapping():
    space = space_of("tpu", "conv-resnet50-conv3")
    objective = parse_objective("edp", space.arch)
    # a one-second search whose command's deadline already passed (the start-up took it all)
    context = SearchContext(time_limit=1.0, deadline=time.perf_counter())
    time.sleep(0.01)
    started = time.perf_counter()
    result = Joint().run(space, objective, context)
    greedy = Greedy().run(space, objective, SearchContext(time_limit=0.001, deadline=time.perf_counter()))
    assert time.perf_counter() - started < 5.0
    assert result.notes[0].startswith("warm start (greedy)")
    assert not any("random draws" in note for note in result.notes)
    assert result.score <= greedy.score and result.optimal is False
