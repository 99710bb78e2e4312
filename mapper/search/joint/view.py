"""What the cuts read of the walk while it expands a set of nodes (`WalkView`): the objective,
the part walked (its space, tree and link bounds), the incumbent it prunes against, the
search's context and its chunk sizes. Handed to the cuts instead of the walk itself, so that
they can neither reach into its state nor depend on its module."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...mapspace import Mapspace
from ..bounds import LinkBounds
from ..context import SearchContext
from ..objective import Objective
from ..result import Incumbent
from ..tree import LevelTree


@dataclass(frozen=True)
class WalkView:
    objective: Objective
    space: Mapspace
    tree: LevelTree
    links: LinkBounds
    incumbent: Incumbent        # the walk's, which it may improve meanwhile (read its bar each time)
    context: SearchContext
    chunk_rows: Callable[[int], int]    # rows of children of a depth priced together, at most
