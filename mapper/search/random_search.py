"""Random search: mappings drawn choice by choice from the space (no rejection loops)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..mapspace import Mapspace
from .objective import Objective
from .result import Budget, Incumbent, SearchResult


@dataclass(frozen=True)
class RandomSearch:
    samples: int = 200_000           # draws in all (deterministic under the seed)
    seed: int = 0
    time_limit: float | None = None  # a cap; with it the draws made depend on the machine's speed
    batch: int = 50_000
    name: str = "random"

    def run(self, space: Mapspace, objective: Objective, progress=None) -> SearchResult:
        funnel = space.funnel(seed=self.seed)
        space.require_nonempty(funnel)
        rng = np.random.default_rng(self.seed)
        incumbent, budget = Incumbent(space, objective), Budget(self.time_limit)
        drawn, complete = 0, True
        while drawn < self.samples:
            count = min(self.batch, self.samples - drawn)
            table = space.sample(count, rng)
            drawn += count
            if len(table):
                incumbent.offer(table)
            if progress:
                progress(drawn)
            if budget.spent():
                complete = drawn >= self.samples
                break
        return incumbent.result(self.name, funnel, optimal=False, complete=complete,
                                notes=[f"{drawn:,} draws, {incumbent.evaluated:,} valid"])
