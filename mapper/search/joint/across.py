"""The order a walk takes through several parts (`AcrossParts`): their depth-1 nodes best first
across all of them. A heap holds each part's root bound until its turn comes; the walk then
expands the part's roots and hands back its depth-1 nodes (`expanded`), and from then on the
heap holds the bound of the next of them, taken in runs up to the next bound in the heap (at
least `min_run`: each run is one `Walk.search`, with its own set-up). A part's root bound, over
every tile, is loose: walked part by part in that order, the walk went deep into parts whose
nodes' bounds were all above the optimum's own, while the optimum's nodes, bounded tightly,
waited in a later part (docs/RESULTS.md).

On several cores the units there are the parts' roots and their children's first dim
(`cut.Share`): those a worker claims while it expands a part's roots are held (`holding`), and
done once the part's depth-1 nodes are all walked or pruned.
"""
from __future__ import annotations

import heapq

import numpy as np

from ..bounds import NodeBounds
from ..objective import Objective, bound_order
from ..tree import Nodes
from .parts import Part


class AcrossParts:
    def __init__(self, objective: Objective, parts: list[Part], min_run: int):
        self.objective, self.min_run = objective, min_run
        self.key = (lambda bound: tuple(bound.tolist())) if objective.lexicographic else float
        # (bound, part, the first of its depth-1 nodes left: -1 before its roots are expanded)
        self.heap = [(self.key(part.first), i, -1) for i, part in enumerate(parts)]
        heapq.heapify(self.heap)
        self.lists: dict[int, tuple[Nodes, NodeBounds]] = {}   # part -> its depth-1 nodes, sorted
        self.held: dict[int, list] = {}     # part -> the units (`Share`) claimed there, not done

    def least(self) -> np.ndarray | None:
        """The least bound of what is left (None: nothing)."""
        return np.array(self.heap[0][0]) if self.heap else None

    def pop(self) -> tuple[int, int]:
        """The part whose turn it is, and the first of its depth-1 nodes left (-1: its roots)."""
        _, i, at = heapq.heappop(self.heap)
        return i, at

    def holding(self, i: int) -> list:
        """The list that takes the units a worker claims while it expands part i's roots."""
        self.held[i] = []
        return self.held[i]

    def expanded(self, i: int, found: list) -> None:
        """Part i's roots are expanded into `found` (the lists `Walk.search` handed to
        `deeper`: (nodes, bounds, known)); with none, its units are done."""
        if found:
            self.lists[i] = _sorted_nodes(self.objective, found)
            heapq.heappush(self.heap, (self.key(self.lists[i][1].objective[0]), i, 0))
        else:
            _finish(self.held.pop(i))

    def run(self, i: int, at: int) -> tuple[Nodes, NodeBounds, int]:
        """Part i's depth-1 nodes from `at` up to the next bound in the heap, at least
        `min_run` of them: the nodes, their bounds, and where the run ends."""
        nodes, bounds = self.lists[i]
        end = at + 1
        while end < len(nodes) and (end - at < self.min_run or not self.heap
                                    or self.key(bounds.objective[end]) <= self.heap[0][0]):
            end += 1
        rows = np.arange(at, end)
        return nodes.take(rows), NodeBounds(*(b[rows] for b in bounds)), end

    def walked(self, i: int, end: int) -> None:
        """Part i's depth-1 nodes before `end` are walked: the rest go back into the heap; with
        none left, the part's units are done."""
        nodes, bounds = self.lists[i]
        if end < len(nodes):
            heapq.heappush(self.heap, (self.key(bounds.objective[end]), i, end))
        else:
            del self.lists[i]
            _finish(self.held.pop(i, []))

    def finish(self) -> None:
        """Mark done the units still held: everything left is walked or provably no better."""
        _finish(*self.held.values())


def _finish(*held: list) -> None:
    """Mark done the units of each list of `Share`s (their nodes are walked or pruned)."""
    for shares in held:
        for share in shares:
            share.done_before(np.inf)


def _sorted_nodes(objective: Objective, found: list) -> tuple[Nodes, NodeBounds]:
    """The nodes `search` handed to `deeper` (a list of (nodes, bounds, known)), concatenated
    and sorted by their bounds."""
    nodes = Nodes.concat([f[0] for f in found])
    bounds = NodeBounds(*(np.concatenate([f[2][b] for f in found]) for b in range(3)))
    order = bound_order(objective, bounds.objective)
    return nodes.take(order), NodeBounds(*(b[order] for b in bounds))
