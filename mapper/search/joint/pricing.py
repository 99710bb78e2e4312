"""What a walk makes of a slice of children: complete mappings are offered to the incumbent
(`offer_complete`); partial ones are checked for capacity and fanout (no pricing needed, and it
rules out most), then priced and bounded (`price_partial`, `search/bounds/`). The cost model's
intermediates grow with the slots of a mapping: wide tables are priced a part at a time
(`rows_per_pricing`), so that memory stays bounded (docs/RESULTS.md)."""
from __future__ import annotations

import math

import numpy as np

from ...mapping import MappingTable
from ...mapspace import Mapspace, pruning
from ..bounds import LinkBounds, NodeBounds, lower_bounds
from ..context import SearchContext
from ..objective import Objective
from ..result import Incumbent
from ..tree import feasible


def rows_per_pricing(table: MappingTable, priced_cells: int) -> int:
    """Rows of `table` priced together: `priced_cells` cells of its factors, at least one row."""
    return max(1, priced_cells // math.prod(table.factors.shape[:-1]))


def offer_complete(space: Mapspace, incumbent: Incumbent, table: MappingTable, step: int) -> None:
    """Offer the valid complete mappings of `table` to `incumbent`, `step` rows at a time."""
    rows = np.flatnonzero(pruning.valid_mask(space, table))
    for start in range(0, len(rows), step):
        incumbent.offer(table.take(rows[start:start + step]))


def price_partial(space: Mapspace, objective: Objective, context: SearchContext, links: LinkBounds,
                  incumbent: Incumbent, depth: int, table: MappingTable, step: int):
    """The nodes of `table` (decided down to `depth`) that fit, priced `step` rows at a time
    and bounded (refined as far as `incumbent` asks): (their rows, their `NodeBounds`, their
    decided factors as content keys), or None when none fits."""
    rows = np.flatnonzero(feasible(space, depth, table))
    if not len(rows):
        return None
    parts = []
    for start in range(0, len(rows), step):
        part = table.take(rows[start:start + step])
        costs = context.price(space.arch, space.workload, part)
        bounds = lower_bounds(space, objective, depth, part, costs, links, refine_below=incumbent.bar)
        # the content keys begin with the factors of the decided levels (`ranking_keys`)
        parts.append((bounds, part.factors[:depth].reshape(-1, len(part))))
    incumbent.evaluated += len(rows)
    bounds = NodeBounds(*(np.concatenate([b[i] for b, _ in parts]) for i in range(3)))
    return rows, bounds, np.concatenate([prefix for _, prefix in parts], axis=1)
