"""`mapper search` decides by counted work (`SearchContext.for_search`): the same search gives
the same JSON (seconds aside) beside a busy process or alone, on one worker or two, whether it
proves its optimum or its budget stops it; only the wall-clock deadline's stop may differ, and
the result says so."""
import json
import subprocess
import sys
import time
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from mapper.cli import main
from mapper.constraints import Constraints
from mapper.load import load_arch, load_constraints, load_workload
from mapper.mapspace import Mapspace
from mapper.report import search_json
from mapper.search import Joint, SearchContext, parse_objective
from mapper.search import context as search_context
from mapper.search.joint import synced
from mapper.search.joint.walk import Walk
from test_mapspace import gemm


@contextmanager
def busy_core():
    """A process that keeps a core busy while inside."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def _search(space: Mapspace, joint: Joint, time_limit: float = 60.0, rate: float | None = None):
    """The joint search's JSON, seconds left out, on a search's work clock (`rate`: mappings
    priced per nominal second; default the command's)."""
    context = SearchContext.for_command(time_limit)
    context = context.for_search() if rate is None else context.counting(rate, walk_first=True)
    result = joint.run(space, parse_objective("edp", space.arch), context)
    out = search_json(result, space.arch, space.workload)
    for key in ("seconds", "seconds_to_best"):
        out["search"].pop(key)
    return out


def _small():
    return Mapspace(load_arch("toy"), gemm(16, 8, 8), Constraints())


# a small case proven by two workers (forked however small its space), and a large one whose
# counted budget (300 nominal seconds at 100 rows each, a worker) stops it long before it is
# proven; each with its workers exchanging their best keys every so many rows (a wait each time):
# tens of exchanges
PROVEN = (500, _small, Joint(parallel_above=0))
STOPPED = (2_000, lambda: Mapspace(load_arch("h100"), load_workload("gemm-4096"), load_constraints(None)),
           Joint(), 300.0, 100.0)


@pytest.mark.parametrize("case", [PROVEN, STOPPED], ids=["proven", "stopped-by-its-count"])
def test_the_same_search_beside_a_busy_process_gives_the_same_json(case, monkeypatch):
    rows, make, *rest = case
    monkeypatch.setattr(synced, "SYNC_ROWS", rows)
    quiet = _search(make(), *rest)
    with busy_core():
        loaded = _search(make(), *rest)
    assert quiet == loaded
    search = quiet["search"]
    assert search["stopped_by"] is None
    assert any(event["event"] == "in_parallel" and event["counted"] for event in search["events"])
    if case is PROVEN:
        assert search["optimal"] and search["complete"]
    else:
        assert not search["complete"] and search["gap"] > 0
        assert any(event["event"] == "stopped_early" and event["by"]["kind"] == "work_budget"
                   for event in search["events"])


@pytest.mark.parametrize("held", [0, 1], ids=["worker-0-held", "worker-1-held"])
def test_a_worker_held_back_changes_nothing(held, monkeypatch):
    # a busy neighbour slows a worker by chance; here one starts its walk 0.4 s after the
    # other, every time. Whoever reaches a unit first, and whatever key the other holds by
    # then, must shape nothing: with units taken first come, or keys read as they stand, this
    # case's count priced differed (a walk of a few epochs that improves on its incumbent)
    monkeypatch.setattr(synced, "SYNC_ROWS", 500)
    make = lambda: Mapspace(load_arch("toy"), gemm(64, 64, 64), Constraints())    # noqa: E731
    quiet = _search(make(), Joint(parallel_above=0))
    walk_parts = Walk.walk_parts

    def held_back(walk, parts):
        if walk.setup.worker == held:
            time.sleep(0.4)
        return walk_parts(walk, parts)
    monkeypatch.setattr(Walk, "walk_parts", held_back)
    assert _search(make(), Joint(parallel_above=0)) == quiet


def test_one_worker_and_two_return_the_same_mapping():
    one = _search(_small(), Joint(workers=1))
    two = _search(_small(), Joint(workers=2, parallel_above=0))
    assert one["search"]["optimal"] and two["search"]["optimal"]
    assert one["search"]["score"] == two["search"]["score"] and one["mapping"] == two["mapping"]
    one, two = one["search"], two["search"]
    assert not any(event["event"] == "in_parallel" for event in one["events"])
    assert any(event["event"] == "in_parallel" for event in two["events"])


@pytest.mark.parametrize("epochs, started", [(10**6, False), (4, True)], ids=["walk-ends-first", "joined"])
def test_the_others_start_late_and_change_no_optimum(epochs, started, monkeypatch):
    # worker 0 walks alone for `JOIN_EPOCHS` epochs (here of 500 mappings) before the others
    # start (`synced.SyncedKey.start`): a walk that ends sooner is its own, a longer one is
    # shared; either way the result is one core's
    monkeypatch.setattr(synced, "SYNC_ROWS", 500)
    monkeypatch.setattr(synced, "JOIN_EPOCHS", epochs)
    make = lambda: Mapspace(load_arch("toy"), gemm(64, 64, 64), Constraints())    # noqa: E731
    one = _search(make(), Joint(workers=1))
    two = _search(make(), Joint(parallel_above=0))
    [event] = [event for event in two["search"]["events"] if event["event"] == "in_parallel"]
    assert event["started"] is started and event["alone"] == epochs * 500
    assert two["search"]["optimal"] and one["search"]["optimal"]
    assert two["mapping"] == one["mapping"] and two["search"]["score"] == one["search"]["score"]


class _Tally(SimpleNamespace):
    """What `SyncedKey` reads of a search's context: its count, and the watch it sets on it."""

    def watch_count(self, watch):
        self.watch = watch

    def past_deadline(self):
        return False


def test_a_late_worker_starts_from_worker_0s_key_of_the_joining_epoch():
    shared = synced.SyncedKey((9.0, 1.0), workers=2, rows=10, join_epochs=2)
    zero, other = _Tally(priced=100, interrupted=False), _Tally(priced=100, interrupted=False)
    mine, theirs = shared.for_worker(0, zero), shared.for_worker(1, other)
    mine.lower_to((5.0, 1.0))
    zero.priced = 119           # one epoch past the fork: still alone
    mine.read()
    assert not shared.started[0]
    mine.lower_to((4.0, 2.0))
    zero.priced = 120           # two: the others start, from this key
    mine.read()
    assert shared.started[0] == 2
    mine.lower_to((3.0, 0.0))   # found after: not theirs until the next epoch's exchange
    assert theirs.start() and theirs.read() == (4.0, 2.0)
    assert theirs.epoch == 2 and theirs.base == other.priced - 20     # its epochs follow on from 2


def test_a_late_worker_never_starts_where_worker_0_ends_first():
    shared = synced.SyncedKey((9.0,), workers=2, rows=10, join_epochs=2)
    zero, other = _Tally(priced=0, interrupted=False), _Tally(priced=0, interrupted=False)
    mine, theirs = shared.for_worker(0, zero), shared.for_worker(1, other)
    zero.priced = 15
    mine.read()
    mine.finish()
    assert not theirs.start()


def test_the_command_says_when_the_clock_stopped_it(monkeypatch, capsys):
    # a rate no machine reaches: the counted budget outlasts the deadline, which stops it
    monkeypatch.setattr(search_context, "SEARCH_MAPPINGS_PER_SECOND", 1e12)
    assert main(["search", "h100", "gemm-16384", "--time-limit", "1.5", "--json"]) in (0, 3)
    search = json.loads(capsys.readouterr().out)["search"]
    assert search["stopped_by"] == "clock" and not search["complete"]
    assert main(["search", "h100", "gemm-16384", "--time-limit", "1.5"]) in (0, 3)
    assert "the wall clock stopped it" in capsys.readouterr().out


def test_an_evaluation_budget_leaves_the_clock_out_of_the_json(capsys):
    assert main(["search", "toy", "gemm-256", "--max-evaluations", "2000", "--json"]) == 0
    search = json.loads(capsys.readouterr().out)["search"]
    assert "stopped_by" not in search and "seconds" not in search
