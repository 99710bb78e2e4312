"""Exhaustive search: every mapping of the pruned space, priced in vectorised batches."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MapperError
from ..mapspace import Mapspace
from .objective import Objective
from .result import Budget, Incumbent, SearchResult, stops


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
        for table in space.tables(max(1_000, self.batch // space.expansion_bound()), stop=budget.spent):
            incumbent.offer(table)
            if progress:
                progress(incumbent.evaluated)
        complete = not budget.spent()
        notes = [] if complete else [f"stopped by {stops.reason()} before covering the space"]
        if incumbent.table is None and not complete:      # return something: random draws
            rng = np.random.default_rng(0)
            for _ in range(10):
                incumbent.offer(space.sample(20_000, rng))
                if incumbent.table is not None:
                    notes.append(f"{stops.reason()} ended the search before any batch held a valid mapping; "
                                 "the result is the best of random draws")
                    break
        return incumbent.result(self.name, funnel, optimal=complete, complete=complete, notes=notes)
