"""Exhaustive search: every mapping of the pruned space, priced in vectorised batches."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MapperError
from ..mapspace import Mapspace, counting, infeasible, sampling
from .context import SearchContext
from .events import NotCovered, RandomFallback
from .objective import Objective
from .result import Incumbent, SearchResult, settings_of


class SpaceTooLargeError(MapperError):
    """The space is larger than the strategy is allowed to enumerate."""


@dataclass(frozen=True)
class Exhaustive:
    limit: int = 20_000_000          # refuse spaces with more mappings than this
    batch: int = 100_000
    name: str = "exhaustive"

    def run(self, space: Mapspace, objective: Objective, context: SearchContext | None = None,
            progress=None) -> SearchResult:
        context = context or SearchContext()
        context.require_setup(space)
        funnel = counting.funnel(space, stop=context.stopped)     # out of time: estimated
        infeasible.require_nonempty(space, funnel)
        size = funnel.after["divisibility"]
        if size > self.limit:
            raise SpaceTooLargeError(
                f"exhaustive search refuses {size:,} mappings (limit {self.limit:,}): use --strategy "
                "joint, random or greedy, a tighter --mapspace, or raise the limit")
        incumbent, budget = Incumbent(space, objective, context), context.budget(context.time_limit)
        batch = max(1_000, self.batch // sampling.expansion_bound(space))
        for table in sampling.all_tables(space, batch, stop=budget.spent):
            incumbent.offer(table)
            if progress:
                progress(incumbent.evaluated)
        complete = not budget.spent()
        events = [] if complete else [NotCovered(context.stop_reason())]
        if incumbent.table is None and not complete:      # return something: random draws
            rng = np.random.default_rng(0)
            for _ in range(10):
                incumbent.offer(sampling.sample(space, 20_000, rng))
                if incumbent.table is not None:
                    events.append(RandomFallback(context.stop_reason(), "batch"))
                    break
        return incumbent.result(self.name, funnel, optimal=complete, complete=complete, events=events,
                                settings=settings_of(self))
