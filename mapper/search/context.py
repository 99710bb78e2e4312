"""What bounds one search and watches it run: `SearchContext`, passed to every strategy's `run()`.

A context holds
- `time_limit`: the search's nominal seconds, of which each strategy gives its steps shares
  (greedy a third for the joint search's warm start, the dives a tenth, ...);
- `deadline`: for a command, the wall-clock end of its whole `--time-limit` (set before the
  specs are read, so that building the mapspace counts against it), kept a little short of it
  (`FINISH_RESERVE_S`) to price the best mapping, print it and exit within the limit;
- `max_evaluations`: an evaluation budget. Every budget is then measured on a clock that
  advances by `time_limit / max_evaluations` seconds per mapping priced, not on the wall clock,
  so every decision a strategy takes on its budget (and so its result) is independent of the
  machine's load; the time limit then means that many mappings;
- a work clock (`counting(rate)`): the same clock counting mappings priced, at a fixed `rate`
  per nominal second, with the wall-clock deadline kept only as a stop. Every decision is taken
  by counts; the deadline, when it fires, ends the searches with their best so far, and
  `stopped_by_clock` says so (the only way the load can then shape the result);
- the running tally (`_Tally`): the rows the cost model priced through `price()`, Ctrl-C
  (`interrupt()`), and the look-ahead of the deadline checks.

A search that runs sub-searches (the joint search's greedy start, its coarse shape; a fusion
search over many groups) gives each a `share()`: its own nominal seconds, the same deadline,
evaluation budget and tally, so one Ctrl-C, one budget and one count cover them all.

Against the deadline a check also looks ahead: the steps between two checks (a slice of the
tree priced and bounded, a local-search move) cannot be cut, and on a large space or a loaded
machine one takes a second or more. So a check says stop when the next step, as long as the
second longest of the last `STEP_WINDOW` stretches between checks, would end past the deadline,
and keeps saying so. Evaluation budgets and Ctrl-C are exact and do not look ahead.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Literal

from ..cost import Costs, evaluate_many
from ..errors import BudgetExhausted
from ..mapping import MappingTable

FINISH_RESERVE_S, FINISH_RESERVE_FRACTION = 0.5, 0.08
# raw rows of a mapspace's per-dim tables set up per second, at the least: on this project's
# 2-core machine under a load of 3, a prime dim of 999,983 on h100 (1,686,450 raw rows, 160,986
# once pruned) took 1.9 s from reading the specs to the first bound; half that rate is kept,
# so that a search refused for want of time would indeed not have fitted
SETUP_ROWS_PER_SECOND = 600_000
# a set-up this short always runs, even past the deadline: a search started late (a loaded
# machine's start-up) still returns a mapping (greedy's quick look), within the second past its
# limit a command may take
SETUP_GRACE_S = 0.5
STEP_WINDOW = 8                 # stretches between budget checks that predict the next one's length
NOMINAL_SECONDS = 60.0          # an evaluation budget's seconds when no time limit is given
# mappings priced (rows, partial ones included) per nominal second of a search's time limit on
# the work clock of `for_search`: a fixed rate, never a measured one (a measured rate would carry
# the machine's load into every decision). Measured on this project's 2-core machine: rows per
# CPU second of the one-core search on h100's GEMMs 4096^3 244,000, 16384^3 190,000,
# 3000x5000x1000 162,000; eyeriss's AlexNet conv3 92,000 (docs/SEARCH.md, "The search context")
SEARCH_MAPPINGS_PER_SECOND = 200_000


@dataclass(frozen=True)
class StopReason:
    """What ended (or would end) a search: its time limit on the wall clock, its evaluation
    budget, its time limit counted in work on a work clock (`evaluations`: that many mappings
    priced), or Ctrl-C."""
    kind: Literal["time_limit", "evaluation_budget", "work_budget", "ctrl_c"]
    evaluations: int | None = None

    def text(self) -> str:
        if self.kind == "ctrl_c":
            return "Ctrl-C"
        if self.kind == "evaluation_budget":
            return f"the evaluation budget ({self.evaluations:,} mappings)"
        if self.kind == "work_budget":
            return f"its time limit counted in work ({self.evaluations:,} mappings priced)"
        return "the time limit (wall clock)"


class _Tally:
    """The mutable part of a context, shared by its shares: rows priced, Ctrl-C, the look-ahead."""

    def __init__(self):
        self.priced = 0
        self.interrupted = False
        self.expired = False                # the deadline (or its look-ahead) was reached
        self.cut = False                    # ... and stopped a search (`stopped_by_clock`)
        self.last_check: float | None = None
        self.steps: list[float] = []        # the last STEP_WINDOW stretches between checks
        self.on_count = None                # called as each pricing is counted (`watch_count`)


@dataclass(frozen=True)
class SearchContext:
    time_limit: float | None = None
    max_evaluations: int | None = None
    deadline: float | None = None       # perf_counter seconds; None: only the budgets bind
    startup: float = 0.0                # seconds the process took to start (a measure of load)
    # under an evaluation budget, seconds of the budget clock per row priced: the root's time
    # limit over its budget, kept by every share (a share's seconds are on the same clock)
    per_evaluation: float | None = None
    # on a work clock: the joint search walks first and takes its other steps (polishing, the
    # local search, CP-SAT) from inside the walk at counted points, as a command's one search
    # proves its optimum soonest; else (an evaluation budget, fusion's many small searches) it
    # takes them in order before the walk
    walk_first: bool = False
    _tally: _Tally = field(default_factory=_Tally, repr=False, compare=False)

    def __post_init__(self):
        if self.max_evaluations and self.per_evaluation is None:
            object.__setattr__(self, "per_evaluation", (self.time_limit or NOMINAL_SECONDS) / self.max_evaluations)

    @classmethod
    def for_command(cls, time_limit: float | None, max_evaluations: int | None = None,
                    since: float = 0.0) -> "SearchContext":
        """The context of a command run with `--time-limit` (None: none given) and
        `--max-evaluations`; `since`: seconds of the limit already used (the interpreter's
        start-up). The deadline is set from now; an evaluation budget has none."""
        deadline = None
        if time_limit is not None and not max_evaluations:
            reserve = min(FINISH_RESERVE_S, FINISH_RESERVE_FRACTION * time_limit)
            deadline = time.perf_counter() + time_limit - since - reserve
        return cls(time_limit if time_limit is not None else NOMINAL_SECONDS, max_evaluations or None,
                   deadline, since)

    def counting(self, rate: float, walk_first: bool = False) -> "SearchContext":
        """This context on a work clock: every budget of its searches counted in mappings
        priced, `rate` of them per nominal second, the deadline kept only as a stop (the same
        tally); `walk_first`: how the joint search orders its steps (the field). An evaluation
        budget's context is already on one and is returned as it is."""
        if self.per_evaluation is not None:
            return self
        return replace(self, per_evaluation=1.0 / rate, walk_first=walk_first)

    @property
    def on_search_clock(self) -> bool:
        """On a search's work clock (`for_search`): counted, the joint search walking first."""
        return self.per_evaluation is not None and self.walk_first

    def for_search(self) -> "SearchContext":
        """The context of one search of a command (`mapper search`, a sweep's point,
        `explain`'s search, the Python API): on the work clock of SEARCH_MAPPINGS_PER_SECOND,
        walking first, so that every decision, and the result, is the same on a loaded machine
        or a quiet one unless the deadline stops it (`stopped_by_clock`)."""
        return self.counting(SEARCH_MAPPINGS_PER_SECOND, walk_first=True)

    def share(self, seconds: float | None) -> "SearchContext":
        """A sub-search's context: `seconds` of its own (None: none), everything else shared."""
        return replace(self, time_limit=seconds)

    # ------------------------------------------------------------------ the count

    def price(self, arch, workload, table: MappingTable) -> Costs:
        """The cost model's prices of `table`, counted."""
        tally = self._tally
        tally.priced += len(table)
        if tally.on_count is not None:
            tally.on_count()
        return evaluate_many(arch, workload, table)

    def watch_count(self, callback) -> None:
        """Call `callback()` each time rows are counted from now on (None: no longer): the
        forked workers exchange their best keys the moment a count passes an epoch's mark
        (`joint/synced.py`), not at the next look at them, which a local search pricing
        thousands of rows between looks put off for a second while the others waited."""
        self._tally.on_count = callback

    @property
    def priced(self) -> int:
        """Rows priced through this context and its shares."""
        return self._tally.priced

    # ------------------------------------------------------------------ the clock

    def clock(self) -> float:
        """Seconds on the budget clock: the wall clock, or rows priced under an evaluation budget."""
        if self.per_evaluation is None:
            return time.perf_counter()
        return self._tally.priced * self.per_evaluation

    def seconds_left(self) -> float:
        """Wall seconds to the deadline; infinite without one or on a counting clock (an
        evaluation budget, a work clock, a library call), so that decisions taken on it never
        depend on the machine's load there."""
        if self.deadline is None or self.per_evaluation is not None:
            return float("inf")
        return self.deadline - time.perf_counter()

    def budget(self, seconds: float | None, until=None) -> "Budget":
        """A budget of `seconds` on this context's clock from now (None: none), also spent once
        the search is stopped or `until()` answers True."""
        return Budget(self, None if seconds is None else self.clock() + seconds, until)

    # ------------------------------------------------------------------ stopping

    @property
    def interrupted(self) -> bool:
        return self._tally.interrupted

    def interrupt(self) -> None:
        """Ctrl-C: every strategy stops at its next budget check with its best so far."""
        self._tally.interrupted = True

    def stopped(self) -> bool:
        """Whether the search must end now: Ctrl-C, the evaluation budget spent, or the deadline
        reached (or about to be, by the look-ahead)."""
        tally = self._tally
        if tally.interrupted:
            return True
        if self.max_evaluations is not None:
            return tally.priced >= self.max_evaluations
        if self.deadline is None:
            return False
        if not tally.expired:
            now = time.perf_counter()
            if tally.last_check is not None:
                tally.steps = (tally.steps + [now - tally.last_check])[-STEP_WINDOW:]
            tally.last_check = now
            # the second longest: one long stretch is a step that bounds itself (CP-SAT takes
            # at most half of what is left) and would end the search a second early
            ahead = sorted(tally.steps)[-2] if len(tally.steps) > 1 else 0.0
            tally.expired = now + ahead > self.deadline
        tally.cut = tally.cut or tally.expired
        return tally.expired

    @property
    def stopped_by_clock(self) -> bool:
        """Whether the wall-clock deadline stopped a search of this context (or its shares):
        on a work clock, the one way the machine's load can have shaped the result."""
        return self._tally.cut

    def record_clock_stop(self) -> None:
        """The deadline stopped a search of this one elsewhere (a forked worker's)."""
        self._tally.cut = True

    def wall_stopped(self) -> bool:
        """`stopped()` by the wall-clock deadline or Ctrl-C, never by an evaluation budget: for
        checks that only keep a step within the time limit (slicing a batch, skipping a
        wind-down), so that under an evaluation budget what is priced stays as it was."""
        return self.interrupted or (self.max_evaluations is None and self.stopped())

    def require_setup(self, space) -> None:
        """Refuse up front a search whose mapspace (`space`) takes longer to set up than the
        time left: its per-dim tables are built whole before any step can check the clock, so
        a dim of a million ways to split would carry the search far past its time limit.
        `BudgetExhausted` says which dim and what time limit would do (on a work clock too: the
        deadline's stop, recorded); nothing under an evaluation budget or without a deadline (the
        cost is bounded by `limits.MAX_DIM_SPLITS`)."""
        if space.tables_built:
            return
        rows = space.raw_rows
        needed = sum(rows) / SETUP_ROWS_PER_SECOND
        # the wall clock's seconds left, on a work clock too: a refusal here is its stop
        left = float("inf") if self.deadline is None or self.max_evaluations else self.deadline - time.perf_counter()
        if needed <= max(left, 0.0) + SETUP_GRACE_S:
            return
        self._tally.cut = True
        d = max(range(len(rows)), key=rows.__getitem__)
        raise BudgetExhausted(
            f"the search's budget (its time limit) ends before the mapspace of {space.workload.name} on "
            f"{space.arch.name} is set up: dim {space.workload.dims[d]} alone has {rows[d]:,} ways to split "
            f"over the loop slots (about {needed:.1f} s to build, {SETUP_ROWS_PER_SECOND:,} a second); "
            f"give a time limit of {math.ceil(needed + 1)} s or more")

    def past_deadline(self) -> bool:
        """Ctrl-C, or the wall-clock deadline passed (recorded: `stopped_by_clock`); never an
        evaluation budget, and no look-ahead: for set-up steps that would carry a search past its
        time limit and that a search may skip or cut short (its bounds then weaker, still valid)."""
        if self.interrupted:
            return True
        if self.max_evaluations is not None or self.deadline is None or time.perf_counter() <= self.deadline:
            return False
        self._tally.cut = True
        return True

    def stop_reason(self) -> StopReason:
        """What ends the searches of this context."""
        if self.interrupted:
            return StopReason("ctrl_c")
        if self.max_evaluations is not None:
            return StopReason("evaluation_budget", self.max_evaluations)
        if self.per_evaluation is not None and not self._tally.cut and self.time_limit is not None:
            return StopReason("work_budget", round(self.time_limit / self.per_evaluation))
        return StopReason("time_limit")


class Budget:
    """A limit on one search step on its context's clock (`deadline` None: none): spent once
    the clock passes it, once the context is stopped (its time limit, its evaluation budget,
    Ctrl-C), or once `until()` answers True; each strategy winds down at its next check and
    returns its best so far."""

    def __init__(self, context: SearchContext, deadline: float | None, until=None):
        self.context, self.deadline, self.until = context, deadline, until

    def spent(self) -> bool:
        context = self.context
        return (context.stopped() or (self.deadline is not None and context.clock() > self.deadline)
                or (self.until is not None and self.until()))


def seconds_since_start() -> float:
    """Seconds since this process started (Linux: /proc), else 0."""
    try:
        with open("/proc/self/stat") as stat:
            started = int(stat.read().rsplit(")", 1)[1].split()[19])     # clock ticks after boot
        with open("/proc/uptime") as uptime:
            now = float(uptime.read().split()[0])
        return max(0.0, now - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
