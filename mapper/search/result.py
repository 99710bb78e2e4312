"""The outcome of a search and the incumbent every strategy keeps while it runs."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..cost import Costs, Evaluation, evaluate, evaluate_many
from ..mapping import Mapping, MappingTable, from_table
from ..mapspace import Funnel, Mapspace
from .objective import Objective, best_row, key_of


@dataclass
class SearchResult:
    strategy: str
    objective: Objective
    mapping: Mapping
    evaluation: Evaluation
    score: float
    evaluated: int             # mappings priced by the cost model
    seconds: float
    optimal: bool              # proven: the whole space was covered, or bounds closed the gap
    complete: bool             # the strategy finished (not stopped by its budget)
    funnel: Funnel
    lower_bound: float | None = None
    seconds_to_best: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def gap(self) -> float | None:
        if self.lower_bound is None or self.score == 0:
            return None
        return max(0.0, (self.score - self.lower_bound) / self.score)


class Incumbent:
    """The best mapping seen so far, compared by the objective then the fixed tie-break."""

    def __init__(self, space: Mapspace, objective: Objective):
        self.space, self.objective = space, objective
        self.key: tuple | None = None
        self.table: MappingTable | None = None
        self.evaluated = 0
        self.started = time.perf_counter()
        self.found_at = 0.0
        self.shared = None          # the best key of the walk's other workers (`parallel.py`)

    @property
    def score(self) -> float:
        return float("inf") if self.key is None else self.key[0]

    @property
    def bar(self) -> tuple | None:
        """The key a bound is pruned against: this incumbent's, or a better one another worker
        of the same walk holds (everything under a bound beaten by it is no better either)."""
        other = None if self.shared is None else self.shared.read()
        if other is None or (self.key is not None and self.key <= other):
            return self.key
        return other

    def outdone(self) -> bool:
        """Another worker of the walk holds a better mapping than this one."""
        return self.bar != self.key

    def adopt(self) -> None:
        """Take the best mapping another worker of the walk holds, where it beats this one."""
        from .objective import table_of_key
        if self.table is not None and self.outdone():
            self.offer(table_of_key(self.bar, self.table))
            self.evaluated -= 1         # priced there

    def merge(self, table: MappingTable | None, found_at: float, evaluated: int) -> None:
        """Take in what another worker of the walk found (its best mapping, when it found at
        said time), and count what it priced."""
        before = self.key
        if table is not None:
            self.offer(table)
            self.evaluated -= len(table)        # priced again here, not anew
        if self.key != before:
            self.found_at = found_at
        self.evaluated += evaluated

    def offer(self, table: MappingTable, costs: Costs | None = None, mask=None) -> Costs:
        """Price `table` (unless `costs` is given), count it, and keep its best valid row."""
        if costs is None:
            costs = evaluate_many(self.space.arch, self.space.workload, table)
        self.evaluated += len(table)
        row = best_row(self.objective, costs, table, mask)
        if row is not None:
            key = key_of(self.objective, costs, table, row)
            if self.key is None or key < self.key:
                self.key, self.table = key, table.take(np.array([row]))
                self.found_at = time.perf_counter() - self.started
                if self.shared is not None:
                    self.shared.lower_to(key)
        return costs

    def result(self, strategy: str, funnel: Funnel, optimal: bool, complete: bool,
               lower_bound: float | None = None, notes=None) -> SearchResult:
        if self.table is None:
            from ..errors import InfeasibleError
            raise InfeasibleError(f"{strategy} search found no valid mapping of {self.space.workload.name} "
                                  f"on {self.space.arch.name} within its budget "
                                  f"({self.evaluated:,} mappings priced)")
        mapping = from_table(self.table, 0)
        ev = evaluate(self.space.arch, self.space.workload, mapping)
        # under an evaluation budget, report what it counts: every row the cost model priced
        # (partial mappings bounded in a tree, proposals, warm starts), not only those offered
        evaluated = stops.priced() if stops.max_evaluations is not None else self.evaluated
        return SearchResult(strategy=strategy, objective=self.objective, mapping=mapping, evaluation=ev,
                            score=self.score, evaluated=evaluated,
                            seconds=time.perf_counter() - self.started, optimal=optimal,
                            complete=complete, funnel=funnel, lower_bound=lower_bound,
                            seconds_to_best=self.found_at, notes=list(notes or []))


class Budget:
    """A limit on one search step, in seconds; `None` means none. Every budget is also spent
    once the command's stop arrives (`stops`: its whole time limit, an evaluation budget, or
    Ctrl-C), so each strategy winds down at its next check and returns its best so far."""

    def __init__(self, seconds: float | None, until=None):
        self.deadline = None if seconds is None else stops.clock() + seconds
        self.until = until          # also spent once this answers True

    def spent(self) -> bool:
        return (stops.stopped() or (self.deadline is not None and stops.clock() > self.deadline)
                or (self.until is not None and self.until()))


FINISH_RESERVE_S, FINISH_RESERVE_FRACTION = 0.5, 0.08
STEP_WINDOW = 8     # stretches between budget checks that predict the next one's length


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


class _Stops:
    """Process-wide: what ends every search of the running command.

    - `deadline`: the wall-clock end of the command's `--time-limit`, set before the specs are
      read, so building the mapspace counts against it;
    - `per_evaluation`: with `--max-evaluations N`, budgets are measured on a clock that
      advances by this many seconds per mapping the cost model prices, not by the wall clock,
      so every decision a strategy takes on its budget (and so its result) is independent of
      machine load; the time limit then means N mappings;
    - `interrupted`: set by Ctrl-C (the CLI's SIGINT handler).

    Against the deadline, a check also looks ahead: the steps between two checks (a slice of
    the tree priced and bounded, a local-search move) cannot be cut, and on a large space or a
    loaded machine one takes a second or more. So a check says stop when the next step, as long
    as the second longest of the last `STEP_WINDOW` stretches between checks, would end past the
    deadline, and keeps saying so. Evaluation budgets and Ctrl-C are exact and do not look ahead.
    """

    def __init__(self):
        self.reset()

    def reset(self, seconds: float | None = None, max_evaluations: int | None = None,
              since: float = 0.0) -> None:
        """`since`: seconds of the limit already used (the interpreter's start-up, for the CLI).
        The searches stop a little before the limit (FINISH_RESERVE), keeping time to price the
        best mapping, print it and exit within it."""
        from ..cost import vectorised
        self.deadline = None
        self.startup = since        # a measure of how fast this process runs now (load)
        if seconds is not None and not max_evaluations:
            reserve = min(FINISH_RESERVE_S, FINISH_RESERVE_FRACTION * seconds)
            self.deadline = time.perf_counter() + seconds - since - reserve
        self.per_evaluation = None
        self.max_evaluations = max_evaluations
        self.priced_at_start = vectorised.PRICED.count
        if max_evaluations:
            self.per_evaluation = (seconds or 60.0) / max_evaluations
        self.interrupted = False
        self.expired = False                # the deadline (or its look-ahead) was reached
        self.last_check: float | None = None
        self.steps: list[float] = []        # the last STEP_WINDOW stretches between checks

    def priced(self) -> int:
        from ..cost import vectorised
        return vectorised.PRICED.count - self.priced_at_start

    def clock(self) -> float:
        if self.per_evaluation is None:
            return time.perf_counter()
        return self.priced() * self.per_evaluation

    def seconds_left(self) -> float:
        """Wall seconds to the deadline; infinite without one (an evaluation budget, a library
        call), so that decisions taken on it never depend on the machine's load there."""
        if self.deadline is None or self.per_evaluation is not None:
            return float("inf")
        return self.deadline - time.perf_counter()

    def wall_stopped(self) -> bool:
        """`stopped()` by the wall-clock deadline or Ctrl-C, never by an evaluation budget: for
        checks that only keep a step within the time limit (slicing a batch, skipping a
        wind-down), so that under `--max-evaluations` what is priced stays as it was."""
        return self.interrupted or (self.per_evaluation is None and self.stopped())

    def reason(self) -> str:
        """What ends the searches of this command, for notes: "the time limit", "the evaluation
        budget (N mappings)" or "Ctrl-C"."""
        if self.interrupted:
            return "Ctrl-C"
        if self.max_evaluations is not None:
            return f"the evaluation budget ({self.max_evaluations:,} mappings)"
        return "the time limit"

    def stopped(self) -> bool:
        if self.interrupted:
            return True
        if self.max_evaluations is not None:
            return self.priced() >= self.max_evaluations
        if self.deadline is None:
            return False
        if not self.expired:
            now = time.perf_counter()
            if self.last_check is not None:
                self.steps = (self.steps + [now - self.last_check])[-STEP_WINDOW:]
            self.last_check = now
            # the second longest: one long stretch is a step that bounds itself (CP-SAT takes
            # at most half of what is left) and would end the search a second early
            ahead = sorted(self.steps)[-2] if len(self.steps) > 1 else 0.0
            self.expired = now + ahead > self.deadline
        return self.expired


stops = _Stops()
