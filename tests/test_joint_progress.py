"""The joint search's progress on several cores: the workers' counts of mappings priced reach
the parent through shared memory (`workers._ProgressTicker`), the parent reports the total with
the best score any worker holds and the space's lower bound, and the command line's bar on a
terminal shows them (best, gap, mappings priced), as on one core."""
import io
import multiprocessing
import sys
import time

from mapper.cli import main
from mapper.constraints import Constraints
from mapper.load import load_arch
from mapper.mapping import from_table
from mapper.mapspace import Mapspace, sampling
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.search.joint import strategy as joint_strategy
from mapper.search.joint import workers as joint_workers

import numpy as np

from presets_sync import H100_SYNC
from test_mapspace import gemm


def test_a_workers_count_reaches_the_parent_through_shared_memory():
    class Parent:
        evaluated = 5
    seen = []
    ticker = joint_workers._ProgressTicker(seen.append, Parent(), 2)
    assert ticker.writer(0) is None                  # the parent's own count is its incumbent's
    child = multiprocessing.get_context("fork").Process(target=ticker.writer(1), args=(7,))
    child.start()
    child.join()
    assert ticker.total() == 5 + 7
    ticker.start()
    time.sleep(3 * ticker.PERIOD)
    ticker.stop()
    assert len(seen) >= 2 and set(seen) == {12}      # the thread's reports and the last one
    assert joint_workers._ProgressTicker(None, Parent(), 2).writer(1) is None   # no bar: no writes


def test_two_cores_report_count_best_and_lower_bound(monkeypatch):
    monkeypatch.setattr(joint_workers._ProgressTicker, "PERIOD", 0.01)
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(16, 8, 8), Constraints())
    goal = parse_objective("edp", arch)
    exact = Exhaustive().run(space, goal)
    reports = []

    def progress(evaluated, best=None, lower=None):
        reports.append((evaluated, best, lower))
    poor = from_table(sampling.sample(space, 1, np.random.default_rng(0)), 0)
    result = Joint(parts_above=0, parallel_above=0, workers=2, warm_start=False, cpsat_seconds=0,
                   local_search=False, dives=0, incumbents=(poor,)).run(space, goal, progress=progress)
    assert any("cores" in note for note in result.notes)         # it did run on two
    assert result.optimal and result.score == exact.score
    counts = [r[0] for r in reports]
    assert counts == sorted(counts) and counts[-1] == result.evaluated
    bests = [r[1] for r in reports]
    assert all(b is not None for b in bests) and bests == sorted(bests, reverse=True)
    assert bests[-1] == result.score
    lowers = {r[2] for r in reports}
    assert len(lowers) == 1 and 0 < lowers.pop() <= exact.score      # a true lower bound


def test_a_one_argument_callback_is_called_as_before():
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(16, 8, 8), Constraints())
    seen = []
    Joint(parts_above=0, parallel_above=0, workers=2).run(space, parse_objective("edp", arch),
                                                           progress=lambda evaluated: seen.append(evaluated))
    assert seen and all(isinstance(v, int) for v in seen)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_command_line_bar_shows_best_gap_and_count_on_two_cores(monkeypatch, capsys):
    monkeypatch.setattr(joint_workers._ProgressTicker, "PERIOD", 0.05)
    monkeypatch.setattr(joint_strategy, "default_workers", lambda context=None: 2)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    # a search that lasts past the bar's one-second delay (on the wgmma preset gemm-4096 is
    # proven in under one)
    assert main(["search", H100_SYNC, "gemm-16384", "--time-limit", "2.5", "--json"]) in (0, 3)
    assert '"in_parallel"' in capsys.readouterr().out       # the search did fork
    text = terminal.getvalue()
    assert "mappings" in text and "best " in text and "gap <= " in text, text[-500:]
