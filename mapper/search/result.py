"""The outcome of a search and the incumbent every strategy keeps while it runs."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from ..cost import Costs, Evaluation, evaluate
from ..errors import BudgetExhausted, InfeasibleError
from ..mapping import Mapping, MappingTable, from_table
from ..mapspace import Funnel, Mapspace
from .context import SearchContext
from .events import Event
from .objective import Objective, best_row, key_of, table_of_key


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
    events: tuple[Event, ...] = ()
    settings: dict = field(default_factory=dict)     # the strategy's own, as it ran
    # "clock": the wall-clock deadline stopped it (on a counting clock the one way the machine's
    # load shapes a result: two runs may then differ); None: its counts decided everything
    stopped_by: str | None = None

    @property
    def notes(self) -> list[str]:
        """The events as the lines a person reads."""
        return [event.text() for event in self.events]

    @property
    def gap(self) -> float | None:
        if self.lower_bound is None or self.score == 0:
            return None
        return max(0.0, (self.score - self.lower_bound) / self.score)


class Incumbent:
    """The best mapping seen so far, compared by the objective then the fixed tie-break."""

    def __init__(self, space: Mapspace, objective: Objective, context: SearchContext):
        self.space, self.objective, self.context = space, objective, context
        self.key: tuple | None = None
        self.table: MappingTable | None = None
        self.evaluated = 0
        self.started = time.perf_counter()
        self.found_at = 0.0
        self.shared = None          # the best key of the walk's other workers (`joint/parallel.py`)

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

    def peek(self) -> tuple | None:
        """`bar` as known now, without taking part in an exchange of the workers' keys
        (`joint/synced.py`): for reports, which come at moments the wall clock decides."""
        other = None if self.shared is None else self.shared.peek()
        if other is None or (self.key is not None and self.key <= other):
            return self.key
        return other

    def outdone(self) -> bool:
        """Another worker of the walk holds a better mapping than this one."""
        return self.bar != self.key

    def adopt(self) -> None:
        """Take the best mapping another worker of the walk holds, where it beats this one."""
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
            costs = self.context.price(self.space.arch, self.space.workload, table)
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

    def share(self, shared) -> None:
        """Prune against `shared` too (`joint.parallel.SharedKey`: the best key of the other
        workers of a walk on several cores), or no longer (None)."""
        self.shared = shared

    def restart_count(self) -> None:
        """Count from zero (a forked worker reports only what it adds)."""
        self.evaluated = 0

    def result(self, strategy: str, funnel: Funnel, optimal: bool, complete: bool,
               lower_bound: float | None = None, events=(), settings=None) -> SearchResult:
        """The search's result; `BudgetExhausted` when it was stopped before any valid mapping,
        `InfeasibleError` when it finished without one."""
        if self.table is None:
            error = InfeasibleError if complete else BudgetExhausted
            raise error(f"{strategy} search found no valid mapping of {self.space.workload.name} "
                        f"on {self.space.arch.name} within its budget "
                        f"({self.evaluated:,} mappings priced)")
        mapping = from_table(self.table, 0)
        ev = evaluate(self.space.arch, self.space.workload, mapping)
        # under an evaluation budget, report what it counts: every row the cost model priced
        # (partial mappings bounded in a tree, proposals, warm starts), not only those offered
        context = self.context
        evaluated = context.priced if context.max_evaluations is not None else self.evaluated
        return SearchResult(strategy=strategy, objective=self.objective, mapping=mapping, evaluation=ev,
                            score=self.score, evaluated=evaluated,
                            seconds=time.perf_counter() - self.started, optimal=optimal,
                            complete=complete, funnel=funnel, lower_bound=lower_bound,
                            seconds_to_best=self.found_at, events=tuple(events), settings=dict(settings or {}),
                            stopped_by="clock" if context.stopped_by_clock else None)


def settings_of(strategy) -> dict:
    """A strategy's configuration as plain data, as a result records it (`--json`: `settings`):
    its fields, a nested settings dataclass as a dict, mappings given from outside as their
    count."""
    out = {}
    for f in dataclasses.fields(strategy):
        value = getattr(strategy, f.name)
        if dataclasses.is_dataclass(value):
            value = dataclasses.asdict(value)
        elif isinstance(value, tuple):
            value = len(value)
        out[f.name] = value
    return out
