"""`mapper fuse` decides by work budgets, never by the clock (`mapper/fusion/run.py`): the same
study twice gives the same JSON byte for byte (times aside), a clock that runs fast short of the
deadline changes nothing, and a deadline that fires is a stop the result reports."""
from __future__ import annotations

import time

import pytest

from mapper.fusion.report import fuse_json
from mapper.fusion.run import fuse
from mapper.load import load_arch, opgraph_from_dict
from mapper.report import strict_json
from mapper.search import SearchContext
from mapper.units import Where

# two GEMMs with an elementwise op between them on toy (one 64 KiB GlobalBuffer, the fusion
# level): the einsums' own searches, a group fused through the buffer searched lazily, CP-SAT's
# choice of groups
CHAIN = {"name": "t", "dtype": "int8", "sizes": {"m": 64, "k": 16, "n": 64, "j": 16},
         "ops": [{"name": "mm1", "einsum": "Y[m,n] += X[m,k] * W1[k,n]"},
                 {"name": "scale", "kind": "scale", "inputs": ["Y[m,n]"], "output": "S[m,n]"},
                 {"name": "mm2", "einsum": "Z[m,j] += S[m,n] * W2[n,j]"}]}
NOMINAL_S = 1.0            # the time limit the budgets are derived from
WALL_S = 100_000.0         # the wall-clock stop: far beyond any run here unless a test moves the clock


def _study(wall_s: float = WALL_S):
    arch, graph = load_arch("toy"), opgraph_from_dict(CHAIN, Where("<test>"))
    return fuse(arch, graph, SearchContext.for_command(wall_s), NOMINAL_S)


def _json(result) -> str:
    out = fuse_json(result)
    out.pop("seconds")
    return strict_json(out)


class FastClock:
    """`time.perf_counter` advancing `step` seconds more at every call (a loaded machine, as
    every step of the search sees it), never past `cap` seconds ahead of the real clock."""

    def __init__(self, step: float, cap: float):
        self.real, self.step, self.cap, self.calls = time.perf_counter, step, cap, 0

    def __call__(self) -> float:
        self.calls += 1
        return self.real() + min(self.calls * self.step, self.cap)


def test_the_same_study_twice_gives_the_same_json_byte_for_byte():
    first, second = _study(), _study()
    assert not first.stopped_by_clock and not second.stopped_by_clock
    assert len(first.fused.groups) < len(first.graph.ops)          # something was fused: groups searched
    assert _json(first) == _json(second)


def test_a_clock_running_fast_short_of_the_deadline_changes_nothing(monkeypatch):
    quiet = _json(_study())
    clock = FastClock(step=0.5, cap=WALL_S / 2)
    monkeypatch.setattr(time, "perf_counter", clock)
    loaded = _study()
    assert clock.calls > 100                   # the clock was read, and ran well ahead
    assert not loaded.stopped_by_clock
    assert _json(loaded) == quiet


def test_a_deadline_that_fires_stops_the_searches_and_the_result_says_so(monkeypatch):
    """The clock jumps past the wall-clock stop at once: every search ends with its best so far
    (each op still has a mapping) and the result and its JSON say the clock stopped it."""
    monkeypatch.setattr(time, "perf_counter", FastClock(step=1_000.0, cap=10 * WALL_S))
    result = _study(wall_s=60.0)
    assert result.stopped_by_clock
    assert fuse_json(result)["stopped_by"] == "time_limit"
    assert len(result.unfused.groups) == len(result.graph.ops)


def test_a_larger_time_limit_is_a_larger_work_budget_not_a_longer_wait():
    """The time limit sets the budgets by a fixed rate: with a rate ten times smaller the
    searches price fewer mappings (counted on the context), and again the same each run."""
    arch, graph = load_arch("toy"), opgraph_from_dict(CHAIN, Where("<test>"))
    priced = []
    for rate in (2_000, 2_000, 20_000):
        context = SearchContext.for_command(WALL_S)
        fuse(arch, graph, context, NOMINAL_S, rate=rate)
        priced.append(context.priced)
    assert priced[0] == priced[1]
    assert priced[0] < priced[2]


@pytest.mark.parametrize("evaluations", [30_000])
def test_an_evaluation_budget_keeps_its_own_clock(evaluations):
    """`--max-evaluations` is already a counting clock: fuse keeps it (a hard cap on the
    mappings priced, give or take the last step) and stays reproducible."""
    arch, graph = load_arch("toy"), opgraph_from_dict(CHAIN, Where("<test>"))
    outs = []
    for _ in range(2):
        context = SearchContext.for_command(NOMINAL_S, evaluations)
        outs.append(_json(fuse(arch, graph, context, NOMINAL_S)))
        assert context.per_evaluation == pytest.approx(NOMINAL_S / evaluations)
    assert outs[0] == outs[1]
