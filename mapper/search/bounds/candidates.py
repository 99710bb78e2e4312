"""The innermost level's choices, each a merged-loop order, a keep set and a cell (tile and
split), priced by what their tensors cost there (`cells.CellTerms`): with each word coming down
once (`base_totals`; the least of them `smallest_total`, all of them sorted `sorted_candidates`),
and with each word coming down as often as a node's own loops bring it (`least_with_repeats`,
priced in the sorted order only as far as a cap asks).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import tiles
from ...spec import Arch, Workload
from .cells import CellTerms, InnermostCells

MAX_CANDIDATES = 2_000_000  # (order, keep set, cell) triples kept sorted per set of parents


class Candidates(NamedTuple):
    """The innermost level's choices by their total with each word coming down once."""
    base: np.ndarray        # (C,) ascending
    cell: np.ndarray        # (C,) tile and split
    order: np.ndarray       # (C,) of the merged loops above
    keep: np.ndarray        # (C,) keep set
    beyond: float           # the least base among the candidates left out (inf: none)


def base_totals(arch: Arch, workload: Workload, keeps, stages, cells: InnermostCells, terms: CellTerms,
                among: np.ndarray | None = None, fills: list | None = None, memo: dict | None = None):
    """(keep set, order, cells that fit, their totals with each word coming down once), for
    every keep set of `keeps` (the level's choices, held at its fewest `stages`) and order;
    among the cells `among` only, with their `fills` (per tensor, (orders, len(among))),
    where given. `memo` keeps which of all the cells each keep set fits (the parts of a space
    ask for the same few keep sets: 64 parts, 8 keep sets on pe-array)."""
    level, own = arch.levels[cells.level], fills is not None    # own: indexed by position in `among`
    fills = fills if own else terms.fills
    memo = {} if memo is None else memo
    for k, keep in enumerate(keeps):
        if among is None:
            key = ("fitting cells", keep, min(stages))      # kept as a mask: a byte a cell
            if key not in memo:
                memo[key] = _fitting(level, workload, cells.words, keep, min(stages))
            at = fits = np.flatnonzero(memo[key])
        else:
            at = np.flatnonzero(_fitting(level, workload, [w[among] for w in cells.words], keep, min(stages)))
            fits = among[at]
        for o in range(len(cells.orders)):
            total = np.zeros(len(fits))
            for t in range(len(workload.tensors)):
                if terms.kept[k, t]:
                    filled = fills[t][o, at] if own else fills[t][o, fits]
                    # an output's read-backs (not under a node's own split: `first` misses its copies)
                    first = (np.inf if own else terms.first[t][fits]) if workload.tensors[t].is_output else 0.0
                    written = np.maximum(filled - first, 0.0)
                    total += written * terms.write[t] + filled * terms.fill_word[t][fits] + terms.kept_mac[t][fits]
                else:
                    total += terms.bypass[t][fits]
            yield k, o, fits, total


def _fitting(level, workload: Workload, words: list, keep, stages: int) -> np.ndarray:
    """Per cell (per tensor, their tile's `words`), whether its footprint with `keep` held
    `stages` deep fits `level`."""
    footprint = tiles.option_bytes(level, workload, words, [keep], len(words[0]))[0]
    return tiles.fits_level(level, footprint * stages)


def smallest_total(totals) -> float:
    """The least total `base_totals` yields (0, the weakest bound, where no keep set fits)."""
    least = min((float(total.min()) for _, _, _, total in totals if len(total)), default=np.inf)
    return least if np.isfinite(least) else 0.0


def sorted_candidates(totals) -> Candidates:
    """Every (order, keep set, cell) `base_totals` yields, by its total, ascending; the smallest
    MAX_CANDIDATES only, the rest bounded below by the first of them left out."""
    base, cells, orders, keeps = [], [], [], []
    for k, o, fits, total in totals:
        base.append(total)
        cells.append(fits)
        orders.append(np.full(len(fits), o, np.int32))
        keeps.append(np.full(len(fits), k, np.int16))
    base = np.concatenate(base) if base else np.zeros(0)
    beyond = np.inf
    if len(base) > MAX_CANDIDATES:
        chosen = np.argpartition(base, MAX_CANDIDATES)[:MAX_CANDIDATES + 1]
        chosen = chosen[np.argsort(base[chosen], kind="stable")]
        beyond, chosen = float(base[chosen[-1]]), chosen[:-1]
    else:
        chosen = np.argsort(base, kind="stable")
    return Candidates(base[chosen], np.concatenate(cells)[chosen].astype(np.int32),
                      np.concatenate(orders)[chosen], np.concatenate(keeps)[chosen], beyond)


def least_with_repeats(candidates: Candidates, terms: CellTerms, least: list, served: list,
                       cap: float) -> tuple[float, bool]:
    """The least total over `candidates` with tensor t's fills at least `least[t]` words and
    what its parents serve at least `served[t]`, and whether it is exact: each candidate costs
    at least its base (sorted), so they are priced in that order until the next one's base is
    above the best total so far (exact, the candidates left out included), or one's total is
    at or below `cap` (then not exact: the least of that total and the next base, a bound)."""
    c = candidates
    best, start, step = np.inf, 0, 1_024
    while start < len(c.base) and c.base[start] < best:
        if best <= cap:             # the node is not pruned here: no need to be exact
            return min(best, float(c.base[start])), False
        rows = slice(start, start + step)
        cell, order, keep = c.cell[rows], c.order[rows], c.keep[rows]
        total = np.zeros(len(cell))
        for t in range(len(least)):
            fills = terms.fills[t][order, cell]
            written = np.maximum(np.maximum(fills, least[t]) - terms.first[t][cell], 0.0)
            kept = (written * terms.write[t]
                    + np.maximum(fills * terms.fill_word[t][cell], served[t]) + terms.kept_mac[t][cell])
            total += np.where(terms.kept[keep, t], kept, np.maximum(terms.bypass[t][cell], served[t]))
        best = min(best, float(total.min()))
        start, step = start + step, step * 2
    return min(best, c.beyond), True      # the candidates not kept cost at least `beyond`
