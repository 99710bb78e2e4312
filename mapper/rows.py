"""Rows of small non-negative integers handled as one int64 key each (the columns as
mixed-radix digits): the distinct rows of a table and the lookup of rows in another.

Why: numpy's `unique(axis=0)` sorts rows as opaque byte strings, seconds on a million rows,
where the bounds and the cost model meet tables of tiles, splits and keepers at every node;
a 1-D sort of one key per row takes milliseconds. Where the digits would overflow a key the
row-wise numpy call is taken instead (same answer, slower).
"""
from __future__ import annotations

import math

import numpy as np

_MOST = 2 ** 62     # keys stay below this (signed int64, with room)


def _radix(rows: np.ndarray) -> list[int] | None:
    """Per column of (M, K) `rows`, one past its largest value; None where the key overflows."""
    highs = [int(c.max(initial=0)) + 1 for c in rows.T]
    return highs if math.prod(highs) < _MOST else None


def _keys(rows: np.ndarray, highs: list[int]) -> np.ndarray:
    key = np.zeros(len(rows), np.int64)
    for column, high in zip(rows.T, highs):
        key = key * high + column
    return key


def unique_rows(rows: np.ndarray, return_inverse: bool = False):
    """`np.unique(rows, axis=0[, return_inverse=True])` of a (M, K) array of non-negative ints:
    the same rows in the same (lexicographic) order, and where asked the (M,) index of each
    row among them."""
    rows = np.asarray(rows, np.int64)
    highs = _radix(rows)
    if highs is None:
        out = np.unique(rows, axis=0, return_inverse=return_inverse)
        return (out[0], out[1].reshape(-1)) if return_inverse else out
    _, first, inverse = np.unique(_keys(rows, highs), return_index=True, return_inverse=True)
    return (rows[first], inverse.reshape(-1)) if return_inverse else rows[first]


class RowIndex:
    """Where each row of a query sits in a fixed table of distinct rows of non-negative ints
    (`find`): built once, looked up many times."""

    def __init__(self, table: np.ndarray):
        table = np.asarray(table, np.int64)
        self.highs = _radix(table)
        if self.highs is None:          # too wide for one key: a dict of the rows
            self.by_row = {tuple(row): i for i, row in enumerate(table.tolist())}
            return
        keys = _keys(table, self.highs)
        self.order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.order]

    def find(self, rows: np.ndarray) -> np.ndarray:
        """(N,) the table's index of each row of (N, K) `rows`, -1 where it has none."""
        rows = np.asarray(rows, np.int64)
        if self.highs is None:
            if not len(rows):
                return np.zeros(0, np.int64)
            unique, inverse = unique_rows(rows, return_inverse=True)
            found = np.array([self.by_row.get(tuple(row), -1) for row in unique.tolist()], np.int64)
            return found[inverse]
        if not len(self.sorted_keys):
            return np.full(len(rows), -1, np.int64)
        inside = (rows >= 0).all(axis=1) & (rows < np.array(self.highs)).all(axis=1)
        keys = _keys(np.where(inside[:, None], rows, 0), self.highs)
        at = np.minimum(np.searchsorted(self.sorted_keys, keys), len(self.sorted_keys) - 1)
        return np.where(inside & (self.sorted_keys[at] == keys), self.order[at], -1)
