"""How many rows a walk generates and prices together (`Pacing`): `chunk` rows, but against a
wall-clock deadline no more than a share of the seconds left at the rate last measured, so that
a chunk (which cannot be cut) never carries the walk far past it; and how many factor choices
make a slice, from the rows each choice kept expanded to last time."""
from __future__ import annotations

import time

import numpy as np

from ..context import Budget, SearchContext
from ..tree import Nodes
from .settings import JointTuning


class Pacing:
    def __init__(self, chunk: int, tuning: JointTuning, context: SearchContext, budget: Budget):
        self.chunk, self.tuning, self.context, self.budget = chunk, tuning, context, budget
        self.polish_seconds = 0.0   # wall seconds spent polishing, left out of the chunks' timing
        self.row_seconds: dict[int, float] = {}       # depth -> wall seconds per child row, last chunk
        self.rows_per_choice: dict[int, float] = {}   # depth -> child rows per factor choice kept, last chunk

    def chunk_rows(self, depth: int) -> int:
        """Child rows generated and priced together at `depth`: `chunk`, but against a wall-clock
        deadline no more than what takes `chunk_share` of the seconds left, or `chunk_seconds`
        when that is more, at the last rate measured there (or the slowest measured anywhere;
        before any, `first_chunk`, or `chunk_share` of the seconds left at `assumed_row_seconds`,
        a slow row's rate): a chunk cannot be cut, and a full one can take seconds at the top
        of a large space, more under load (docs/RESULTS.md). Far from the deadline chunks stay
        large: best bound first is ordered within a chunk, and small ones slow the walk. Under
        an evaluation budget it stays `chunk`, so the walk's order never depends on the
        machine's load."""
        chunk, tuning, context = self.chunk, self.tuning, self.context
        if context.per_evaluation is not None:
            return chunk
        left = min(context.seconds_left(), float("inf") if self.budget.deadline is None
                   else self.budget.deadline - time.perf_counter())
        if left == float("inf"):
            return chunk
        rate = self.row_seconds.get(depth, max(self.row_seconds.values(), default=None))
        if rate is None:
            return int(min(chunk, tuning.first_chunk, max(1, tuning.chunk_share * left / tuning.assumed_row_seconds)))
        seconds = max(tuning.chunk_seconds, tuning.chunk_share * left)
        return int(min(chunk, max(1, seconds / max(rate, 1e-9))))

    def choices_per_slice(self, depth: int, most: int):
        """How many factor choices of a depth-`depth` node one slice generates (a function,
        asked anew before each step as the deadline nears): `chunk_rows` over the rows one
        choice kept by the cut expands to, as the last slice measured them (the orders, stages
        and keeps that fit it; before any, `most`, the most it can expand to). Sized by the
        most, a convolution's slices held a few dozen rows where a choice could take 720 orders
        but took about ten, and most choices were cut: the pricing of each slice was then
        mostly its set-up (eyeriss, ResNet-50 conv3: 66 rows per pricing). A slice whose choices
        expand to more than `chunk_rows` comes in pieces (`fitting_children`'s `most_rows`)."""
        def chunk() -> int:
            per_choice = min(most, max(1.0, self.rows_per_choice.get(depth + 1, most)))
            return max(1, int(self.chunk_rows(depth + 1) / per_choice))
        return chunk

    def timed(self, children: Nodes, started: float, polished: float, generated: float) -> None:
        """Record the wall seconds per child row generated (`generated`: more than `children`
        where a cut dropped some before pricing), generated and priced since `started` (less
        the polishing done meanwhile, which had `polish_seconds` at `polished`)."""
        if len(children):
            seconds = time.perf_counter() - started - (self.polish_seconds - polished)
            self.row_seconds[children.depth] = seconds / generated

    def expanded(self, children: Nodes) -> None:
        """Record the rows per factor choice `children` (one slice's, priced) came to."""
        self.rows_per_choice[children.depth] = len(children) / factor_choices(children)


def factor_choices(children: Nodes) -> int:
    """How many factor choices (with their parents) `children` came from: each one's children
    are consecutive (`LevelTree.children_at`)."""
    n = len(children)
    if not n:
        return 1
    identity = np.vstack([children.groups.T, children.orders[:-1].reshape(-1, n),
                          children.stages[:-1], children.keeps[:-1]])
    return 1 + int(np.any(identity[:, 1:] != identity[:, :-1], axis=0).sum())
