"""Exhaustive search: every mapping of the pruned space, priced in vectorised batches."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import MapperError
from ..mapspace import Mapspace
from .objective import Objective
from .result import Budget, Incumbent, SearchResult


class SpaceTooLargeError(MapperError):
    """The space is larger than the strategy is allowed to enumerate."""


@dataclass(frozen=True)
class Exhaustive:
    limit: int = 20_000_000          # refuse spaces with more mappings than this
    time_limit: float | None = None
    batch: int = 100_000
    name: str = "exhaustive"

    def run(self, space: Mapspace, objective: Objective, progress=None) -> SearchResult:
        funnel = space.funnel()
        space.require_nonempty(funnel)
        size = funnel.after["divisibility"]
        if size > self.limit:
            raise SpaceTooLargeError(
                f"exhaustive search refuses {size:,} mappings (limit {self.limit:,}): use --strategy "
                "joint, random or greedy, a tighter --mapspace, or raise the limit")
        incumbent, budget, complete = Incumbent(space, objective), Budget(self.time_limit), True
        for table in space.tables(self.batch):
            incumbent.offer(table)
            if progress:
                progress(incumbent.evaluated)
            if budget.spent():
                complete = False
                break
        notes = [] if complete else ["stopped by the time limit before covering the space"]
        return incumbent.result(self.name, funnel, optimal=complete, complete=complete, notes=notes)
