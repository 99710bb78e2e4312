"""The search context every strategy runs under (time limit, evaluation budget, clock, rows
priced, Ctrl-C), its shares, the typed strategy registry, and search records as data."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from mapper.cli import main
from mapper.errors import BudgetExhausted, InfeasibleError, SpecError
from mapper.load import load_arch, load_constraints, load_workload
from mapper.mapspace import Mapspace, counting, sampling
from mapper.search import Greedy, Joint, SearchContext, make_strategy, parse_objective, strategy_options
from mapper.search.events import WarmStart
from mapper.search.result import Incumbent

from test_mapspace import gemm


def _space(arch="toy", workload=None):
    arch = load_arch(arch)
    return Mapspace(arch, workload or gemm(16, 8, 8), load_constraints(None))


def _table(space, rows: int):
    """A table of `rows` mappings of the space (one, repeated)."""
    return sampling.sample(space, 10, np.random.default_rng(0)).take(np.zeros(rows, np.int64))


def test_rows_priced_are_counted_by_the_context_and_its_shares():
    space = _space()
    context = SearchContext()
    share = context.share(1.0)
    Incumbent(space, parse_objective("edp", space.arch), share).offer(_table(space, 50))
    assert context.priced == share.priced == 50
    assert share.time_limit == 1.0 and context.time_limit is None


def test_an_evaluation_budget_is_a_clock_its_shares_keep():
    context = SearchContext(time_limit=30.0, max_evaluations=300)
    share = context.share(10.0)                 # a third of the time: a third of the budget
    assert share.per_evaluation == context.per_evaluation == 0.1
    budget = share.budget(share.time_limit)
    space = _space()
    incumbent = Incumbent(space, parse_objective("edp", space.arch), context)
    incumbent.offer(_table(space, 99))
    assert not budget.spent() and not context.stopped()
    incumbent.offer(_table(space, 2))           # 101 rows: past the share's 100
    assert budget.spent() and not context.stopped()
    incumbent.offer(_table(space, 199))         # 300 rows: the whole budget
    assert context.stopped() and share.stopped()
    assert context.stop_reason().text() == "the evaluation budget (300 mappings)"


def test_ctrl_c_stops_the_context_and_every_share():
    context = SearchContext(time_limit=60.0)
    share = context.share(5.0)
    assert not share.stopped()
    context.interrupt()
    assert share.stopped() and share.interrupted and share.stop_reason().kind == "ctrl_c"


def test_a_command_deadline_leaves_its_finish_reserve():
    context = SearchContext.for_command(10.0, since=1.0)
    left = context.seconds_left()
    assert 10.0 - 1.0 - 0.5 - 0.1 < left <= 10.0 - 1.0 - 0.5      # the limit, less start-up and reserve
    assert SearchContext.for_command(10.0, max_evaluations=100).seconds_left() == float("inf")
    assert SearchContext.for_command(None, max_evaluations=100).time_limit == 60.0


def test_no_mapping_found_is_a_spent_budget_or_an_infeasible_space():
    space = _space()
    incumbent = Incumbent(space, parse_objective("edp", space.arch), SearchContext())
    with pytest.raises(BudgetExhausted, match="within its budget"):
        incumbent.result("joint", counting.funnel(space), optimal=False, complete=False)
    with pytest.raises(InfeasibleError) as raised:
        incumbent.result("joint", counting.funnel(space), optimal=False, complete=True)
    assert not isinstance(raised.value, BudgetExhausted)


def test_the_registry_refuses_an_option_a_strategy_does_not_take():
    assert "seed" in strategy_options("joint") and "seed" not in strategy_options("greedy")
    with pytest.raises(SpecError, match="samples: the joint strategy does not take this option .random does."):
        make_strategy("joint", {"samples": 10})
    with pytest.raises(SpecError, match="expected one of joint, greedy, exhaustive, random"):
        make_strategy("annealing")
    assert make_strategy("joint", {"seed": 3}) == Joint(seed=3)


def test_the_command_line_refuses_an_option_the_strategy_ignores(capsys):
    assert main(["search", "toy", "gemm-256", "--strategy", "greedy", "--seed", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("mapper: error: command line: --seed: the greedy strategy does not take this option "
                   "(joint and random do)")
    assert main(["search", "toy", "gemm-256", "--strategy", "exhaustive", "--samples", "9"]) == 2
    assert "--samples: the exhaustive strategy" in capsys.readouterr().err


def test_the_joint_seed_varies_the_path_never_a_finished_result():
    space = _space()
    objective = parse_objective("energy", space.arch)
    results = [Joint(seed=seed, parts_above=0).run(space, objective) for seed in (0, 1)]
    assert all(r.optimal and r.mapping == results[0].mapping for r in results)
    space = _space("toy", load_workload("gemm-256"))
    stopped = [Joint(seed=seed).run(space, objective, SearchContext(max_evaluations=3_000)) for seed in (0, 1)]
    assert [r.settings["seed"] for r in stopped] == [0, 1]


@pytest.mark.slow
def test_the_joint_seed_varies_the_path_of_a_search_stopped_early():
    # CP-SAT's seed (and the dives' draws) set what it proposes on the way (200,000 mappings
    # priced twice: seconds, so the slow run only)
    space = _space("toy", load_workload("gemm-256"))
    objective = parse_objective("energy", space.arch)
    stopped = [Joint(seed=seed).run(space, objective, SearchContext(max_evaluations=200_000)) for seed in (0, 1)]
    assert stopped[0].notes != stopped[1].notes
    assert [r.settings["seed"] for r in stopped] == [0, 1]


def test_a_result_records_its_events_and_settings_as_data(capsys):
    space = _space()
    result = Joint().run(space, parse_objective("edp", space.arch))
    warm = [e for e in result.events if isinstance(e, WarmStart)]
    assert len(warm) == 1 and result.notes[0] == f"warm start (greedy): {warm[0].score:.6g}"
    assert result.settings["tuning"]["polish_every"] == 5.0 and result.settings["incumbents"] == 0
    assert main(["search", "toy", "gemm-256", "--max-evaluations", "3000", "--json"]) == 0
    search = json.loads(capsys.readouterr().out)["search"]
    kinds = [e["event"] for e in search["events"]]
    assert kinds[0] == "warm_start" and kinds[-1] == "stopped_early"
    assert search["events"][-1]["by"] == {"kind": "evaluation_budget", "evaluations": 3000}
    assert search["settings"]["tuning"]["split_depth"] == 2
    assert len(search["notes"]) == len(search["events"])


def test_greedy_records_the_level_its_budget_hurried():
    space = _space("eyeriss", load_workload("conv-resnet50-conv3"))
    started = time.perf_counter()
    result = Greedy().run(space, parse_objective("edp", space.arch), SearchContext(time_limit=0.01))
    assert time.perf_counter() - started < 30
    hurried = [e for e in result.events if e.kind == "hurried"]
    assert hurried and hurried[0].level in space.arch.level_names and not result.complete


def test_the_events_of_a_search_on_two_cores_keep_their_kinds_in_json():
    from mapper.search.events import FromWorker
    space = _space()
    result = Joint(parallel_above=0, workers=2).run(space, parse_objective("edp", space.arch))
    from_worker = [e for e in result.events if isinstance(e, FromWorker)]
    assert from_worker and all(e.text().startswith(f"worker {e.worker}: ") for e in from_worker)
    for event in result.events:
        shown = event.as_json()
        assert shown["event"] == event.kind and isinstance(shown["event"], str)
    assert from_worker[0].as_json()["record"]["event"] == from_worker[0].record.kind

