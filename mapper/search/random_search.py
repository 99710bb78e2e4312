"""Random search: mappings drawn choice by choice from the space (no rejection loops)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..mapspace import Mapspace, counting, infeasible, sampling
from .context import SearchContext
from .events import Draws
from .objective import Objective
from .result import Incumbent, SearchResult, settings_of


@dataclass(frozen=True)
class RandomSearch:
    samples: int = 200_000           # draws in all (deterministic under the seed)
    seed: int = 0
    batch: int = 50_000
    name: str = "random"

    def run(self, space: Mapspace, objective: Objective, context: SearchContext | None = None,
            progress=None) -> SearchResult:
        """Draws until `samples` are made or the context's time limit (with which the draws
        made depend on the machine's speed) or evaluation budget ends."""
        context = context or SearchContext()
        context.require_setup(space)
        funnel = counting.funnel(space, seed=self.seed, stop=context.stopped)
        infeasible.require_nonempty(space, funnel)
        rng = np.random.default_rng(self.seed)
        incumbent, budget = Incumbent(space, objective, context), context.budget(context.time_limit)
        drawn, complete = 0, True
        while drawn < self.samples:
            count = min(self.batch, self.samples - drawn)
            table = sampling.sample(space, count, rng)
            drawn += count
            if len(table):
                incumbent.offer(table)
            if progress:
                progress(drawn)
            if budget.spent():
                complete = drawn >= self.samples
                break
        return incumbent.result(self.name, funnel, optimal=False, complete=complete,
                                events=[Draws(drawn, incumbent.evaluated)], settings=settings_of(self))
