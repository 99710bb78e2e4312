"""Local search around the incumbent, to give the branch and bound a strong bound early.

Moves, each priced in one vectorised batch:
- *choices*: the incumbent's factors with every keep set, stage count and loop order;
- *one dim*: every factorisation of one dim, the rest of the mapping kept;
- *two dims*: every pair of factorisations of two dims (sampled when the pair is large),
  the rest kept, which trades tile extent between dims (the square-root law's move);
- each of those factor moves again with every keep set and stage count (sampled to a bounded
  number of rows), since keeping one more tensor at a level needs a smaller tile there.
Loop orders are carried over by what the cost model sees of them (`orders.signature`), so every
neighbour is a member of the space and ranks against exhaustive search's choice exactly.
The walk repeats until a round finds nothing better or the budget ends. It proves nothing.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...mapping import MappingTable, along_last
from ...mapspace import Mapspace, pruning, sampling
from ..context import Budget
from ..result import Incumbent
from ..warm import carried_orders, factor_rows

PAIR_LIMIT = 100_000        # factor combinations priced per pair of dims
EXPAND_LIMIT = 2_000_000    # rows when one dim's factorisations are crossed with every choice
CHOICE_LIMIT = 100_000      # rows when a factor move is crossed with every keep set and stage count
EXPAND_CHOICES = 256        # keep-and-stage combinations a few factor rows are expanded to at most
                            # (`every_choice`): each is built in Python, and a Timeloop design
                            # searching bypass at five levels has 32,768 (19 s for one row)
BATCH_ROWS = 50_000         # rows priced between two looks at the budget
SLICE_ROWS = 10_000         # rows of a move priced between two looks at the budget (a row
                            # costs most on a large array; docs/RESULTS.md)


def improve(space: Mapspace, incumbent: Incumbent, budget: Budget, seed: int = 0, stop=None) -> int:
    """Improve `incumbent` in place; returns the number of rounds that found a better mapping.
    `stop()`, when given, ends it early too (the caller's own budget)."""
    rng = np.random.default_rng(seed)
    improved = 0
    spent = budget.spent if stop is None else (lambda: budget.spent() or stop())
    while incumbent.table is not None and not spent():
        before = incumbent.key
        _offer(space, incumbent, every_choice(space, incumbent.table.factors, rng))
        for dims in [(d,) for d in range(space.n_dims)] + list(itertools.combinations(range(space.n_dims), 2)):
            if spent():
                break
            rows = factor_rows(space, incumbent.table)
            if rows is None:
                return improved
            varied = _vary(space, incumbent.table, rows, dims, rng)
            offer_sliced(space, incumbent, varied, spent)
            if not spent():        # each batch takes a while: the budget is asked between them
                offer_sliced(space, incumbent, _with_every_choice(space, varied, rng), spent)
            if len(dims) == 1 and varied.factors.shape[-1] * sampling.expansion_bound(space) <= EXPAND_LIMIT:
                _offer_expanded(space, incumbent, varied.factors, spent)
        if incumbent.key == before:
            break
        improved += 1
    return improved


def every_choice(space: Mapspace, factors: np.ndarray, rng: np.random.Generator) -> MappingTable:
    """Every keep/stage/order choice of a few factor rows (`sampling.expand`), where that is
    bounded (EXPAND_CHOICES keep-and-stage combinations, EXPAND_LIMIT rows); else CHOICE_LIMIT
    random draws of them in all: one step between two looks at the budget stays short."""
    if (math.prod(len(c.keeps) * len(c.stages) for c in space.choices) <= EXPAND_CHOICES
            and sampling.expanded_rows(space, factors) <= EXPAND_LIMIT):
        return sampling.expand(space, factors)
    return sampling.draw_choices(space, factors, max(1, CHOICE_LIMIT // max(1, factors.shape[-1])), rng)


def _vary(space: Mapspace, table: MappingTable, rows: list[int], dims: tuple[int, ...],
          rng: np.random.Generator) -> MappingTable:
    """The one-row `table` with the factors of `dims` over all (or sampled) combinations of rows."""
    options = [np.arange(len(space.dim_tables[d])) for d in dims]
    total = int(np.prod([len(o) for o in options]))
    if total > PAIR_LIMIT:
        picks = [rng.integers(0, len(o), PAIR_LIMIT) for o in options]
    else:
        picks = [g.ravel() for g in np.meshgrid(*options, indexing="ij")]
    n = len(picks[0])
    per_dim = [np.repeat(space.dim_tables[d][[r]], n, axis=0) for d, r in enumerate(rows)]
    for d, pick in zip(dims, picks):
        per_dim[d] = space.dim_tables[d][pick]
    factors = sampling.assemble(space, per_dim)
    factors = along_last(factors, pruning.coupled_mask(space, factors))
    n = factors.shape[-1]
    keep = np.repeat(table.keep, n, axis=-1)
    stages = np.repeat(table.stages, n, axis=-1)
    order, ok = carried_orders(space, table.order[..., 0], factors)
    return MappingTable(factors, order, keep, stages).take(np.flatnonzero(ok))


def _with_every_choice(space: Mapspace, table: MappingTable, rng: np.random.Generator) -> MappingTable:
    """The rows of `table` with every keep set and stage count at every level (loop orders as
    they are), rows sampled so that at most EXPAND_LIMIT come out: keeping more at a level
    needs a smaller tile there, so the two must move together."""
    combos = list(itertools.product(*[itertools.product(range(len(c.keeps)), c.stages) for c in space.choices]))
    if len(combos) == 1 or not len(table):
        return table.take(np.zeros(0, np.int64))
    n = min(len(table), max(1, CHOICE_LIMIT // len(combos)))
    base = table.take(np.sort(rng.choice(len(table), n, replace=False)) if n < len(table) else np.arange(n))
    keep = np.zeros((space.n_levels, len(space.workload.tensors), len(combos)), bool)
    stages = np.ones((space.n_levels, len(combos)), np.int64)
    for i, combo in enumerate(combos):
        for lv, (k, stage) in enumerate(combo):
            keep[lv, list(space.choices[lv].keeps[k]), i] = True
            stages[lv, i] = stage
    rows, choice = np.repeat(np.arange(n), len(combos)), np.tile(np.arange(len(combos)), n)
    return MappingTable(along_last(base.factors, rows), along_last(base.order, rows),
                        along_last(keep, choice), along_last(stages, choice))


def _offer_expanded(space: Mapspace, incumbent: Incumbent, factors: np.ndarray, spent) -> None:
    """Every mapping of the given factor rows (all orders, keeps and stages), priced in slices
    of about BATCH_ROWS with the budget asked between them."""
    step = max(1, BATCH_ROWS // sampling.expansion_bound(space))
    for start in range(0, factors.shape[-1], step):
        if spent():
            return
        _offer(space, incumbent, sampling.expand(space, factors[..., start:start + step]))


def offer_sliced(space: Mapspace, incumbent: Incumbent, table: MappingTable, spent) -> None:
    """`table` priced in slices of SLICE_ROWS with the budget asked between them: a pair move
    holds up to PAIR_LIMIT rows, long to price on a large space (longer under load).
    The incumbent is the same as from one batch: it keeps the first of equal keys either way."""
    for start in range(0, len(table), SLICE_ROWS):
        if start and spent():
            return
        _offer(space, incumbent, table.take(np.arange(start, min(len(table), start + SLICE_ROWS))))


def _offer(space: Mapspace, incumbent: Incumbent, table: MappingTable) -> None:
    if len(table):
        incumbent.offer(table, mask=pruning.valid_mask(space, table))
