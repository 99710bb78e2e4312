"""The outcome of a search and the incumbent every strategy keeps while it runs."""
from __future__ import annotations

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

    @property
    def score(self) -> float:
        return float("inf") if self.key is None else self.key[0]

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
        return SearchResult(strategy=strategy, objective=self.objective, mapping=mapping, evaluation=ev,
                            score=self.score, evaluated=self.evaluated,
                            seconds=time.perf_counter() - self.started, optimal=optimal,
                            complete=complete, funnel=funnel, lower_bound=lower_bound,
                            seconds_to_best=self.found_at, notes=list(notes or []))


class Budget:
    """A wall-clock limit; `None` means none."""

    def __init__(self, seconds: float | None):
        self.deadline = None if seconds is None else time.perf_counter() + seconds

    def spent(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline
