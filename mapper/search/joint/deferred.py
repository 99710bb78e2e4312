"""What a walk runs between its slices besides walking (`Deferred`): CP-SAT's proposals, offered
once ready (or once the budget clock reaches a set reading), and jobs given to run once the
walk has gone on for a while (the searches for incumbents, CP-SAT's start)."""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Callable

from ..context import SearchContext


class Deferred:
    def __init__(self, context: SearchContext, default_after: float):
        self.context, self.default_after = context, default_after
        # (CP-SAT solving meanwhile, what to do with its answer, the clock reading to take it
        # at: None, as soon as it is ready)
        self._proposals = None
        # (seconds into the walk on the budget clock, job): each run once, when the walk has
        # gone on for that long; `_due` the same with the clock readings, once it started
        self._later: list[tuple[float, Callable[[], None]]] = []
        self._due: list[tuple[float, Callable[[], None]]] = []

    def offer_when_ready(self, proposals, offer: Callable, after: float | None = None) -> None:
        """Between slices, once `proposals` (`cpsat.Proposals`) are ready: `offer(proposals)`;
        with `after`, once the budget clock has gone on that long instead, waiting for them
        then if need be (on a counting clock: the walk goes on while CP-SAT solves, and what it
        prunes never depends on when the solve ended)."""
        self._proposals = (proposals, offer, None if after is None else self.context.clock() + after)

    def run_later(self, job: Callable[[], None], after: float | None = None) -> None:
        """Run `job` once, between slices, once the walk has gone on for `after` seconds of the
        budget clock (`default_after`: `walk_polish_after`). Jobs due at once run in the order
        they were given."""
        self._later.append((self.default_after if after is None else after, job))

    def start(self) -> None:
        """The walk starts now: the jobs given fall due from this clock reading."""
        clock = self.context.clock()
        self._due = [(clock + after, job) for after, job in self._later]
        self._later = []

    def end(self) -> bool:
        """Forget what was to run later; True when CP-SAT's proposals were still awaited (they
        are cancelled: no longer wanted)."""
        self._later, self._due = [], []
        if self._proposals is None:
            return False
        self._proposals[0].cancel()
        self._proposals = None
        return True

    def run_due(self, keeping: Callable[[], AbstractContextManager]) -> None:
        """Offer CP-SAT's proposals once they are ready, and run each job whose time has come,
        inside `keeping()` (which leaves the walk's own state as it was)."""
        if self._proposals is not None:
            proposals, offer, at = self._proposals
            if proposals.ready() if at is None else self.context.clock() >= at:
                self._proposals = None
                offer(proposals)
        while self._due:
            now = self.context.clock()
            due = next((i for i, (at, _) in enumerate(self._due) if now >= at), None)
            if due is None:
                break
            _, job = self._due.pop(due)
            with keeping():
                job()
