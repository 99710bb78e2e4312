"""When a walk polishes a new incumbent it found (`Polisher`): a short local search around it
(at most one second), at most every `polish_every` seconds of the budget clock and not before
the walk has gone on for `walk_polish_after`. Its neighbours often beat it, and the bound it
sets prunes the rest of the walk; but a polish can take longer than a whole quick walk
(docs/RESULTS.md). The wall seconds it takes are left out of the slices' timing (`Pacing`)."""
from __future__ import annotations

import time

import numpy as np

from ...mapspace import Mapspace
from ..context import Budget, SearchContext
from ..result import Incumbent
from .neighbourhood import improve
from .pacing import Pacing
from .settings import JointTuning


class Polisher:
    def __init__(self, space: Mapspace, tuning: JointTuning, context: SearchContext, budget: Budget,
                 pacing: Pacing, seed: int = 0):
        """`space`: the whole space (the polish moves across parts); `budget`: the search's."""
        self.space, self.tuning, self.context, self.budget = space, tuning, context, budget
        self.pacing, self.seed = pacing, seed
        self._polished_at = -np.inf       # the budget clock at the last polish

    def start(self) -> None:
        """The walk starts now: the first polish waits `walk_polish_after` seconds."""
        self._polished_at = self.context.clock() - self.tuning.polish_every + self.tuning.walk_polish_after

    def __call__(self, incumbent: Incumbent, force: bool = False) -> None:
        """Polish `incumbent`, unless the last polish was less than `polish_every` ago (`force`:
        whatever the time)."""
        now = self.context.clock()      # the budget clock: evaluations under an evaluation budget
        if now - self._polished_at < self.tuning.polish_every and not force:
            return
        started, start = time.perf_counter(), incumbent.score
        # outdone by another worker before it improved on its start: polishing this one cannot
        # help the walk (as in `incumbents.local_search`)
        improve(self.space, incumbent, self.context.budget(1.0), seed=self.seed,
                stop=lambda: self.budget.spent() or (incumbent.outdone() and incumbent.score >= start))
        self._polished_at = self.context.clock()
        self.pacing.polish_seconds += time.perf_counter() - started
